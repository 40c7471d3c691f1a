// SPDX-License-Identifier: MIT
// Host tests of cell/oom_kill_tracker.h: counting OOM kills from memory.events look by look and
// telling a worker's OOM kill from its other deaths, without processes; and ProcessIsDying on
// /proc texts as a 6.1 kernel writes them and on a real child. The kernel's side (a helper killed,
// the worker spared) is proved in the VM (tests/vm/supervisor_compartments.cc, oom.*).
#include "cell/oom_kill_tracker.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/helpers/test_support.h"

namespace bulkhead::cell {
namespace {

using ::testing::HasSubstr;

// Wait statuses as waitpid(2) returns them.
constexpr int kKilled = SIGKILL;    // WIFSIGNALED, WTERMSIG 9
constexpr int kSegfault = SIGSEGV;  // WIFSIGNALED, WTERMSIG 11
constexpr int kExit0 = 0;           // WIFEXITED, status 0
constexpr int kExit137 = 137 << 8;  // WIFEXITED, status 137 (a shell's "killed")

MemoryEvents Events(uint64_t oom_kill, uint64_t oom_group_kill, bool has_group = true) {
  MemoryEvents events;
  events.oom = oom_kill;
  events.oom_kill = oom_kill;
  events.oom_group_kill = oom_group_kill;
  events.has_oom_group_kill = has_group;
  return events;
}

TEST(CountOomKills, GroupKillCountsDecisionsNotKillActions) {
  // 6.1, memory.oom.group 1: one process killed gives oom_kill +2 (victim, then member) and
  // oom_group_kill +1; worker plus grandchild gives +3.
  EXPECT_EQ(CountOomKills(Events(0, 0), Events(2, 1), /*group_kill=*/true), 1u);
  EXPECT_EQ(CountOomKills(Events(0, 0), Events(3, 1), true), 1u);
  EXPECT_EQ(CountOomKills(Events(2, 1), Events(6, 3), true), 2u);
  // Seen half way (the victim counted, the group kill not yet): the next look counts it.
  EXPECT_EQ(CountOomKills(Events(0, 0), Events(1, 0), true), 0u);
  EXPECT_EQ(CountOomKills(Events(1, 0), Events(2, 1), true), 1u);
}

TEST(CountOomKills, ContinueCountsEachVictim) {
  EXPECT_EQ(CountOomKills(Events(0, 0), Events(1, 0), /*group_kill=*/false), 1u);
  EXPECT_EQ(CountOomKills(Events(1, 0), Events(3, 0), false), 2u);
  EXPECT_EQ(CountOomKills(Events(3, 0), Events(3, 0), false), 0u);
}

TEST(CountOomKills, KernelWithoutOomGroupKillCountsARiseAsOne) {
  EXPECT_EQ(CountOomKills(Events(0, 0, false), Events(2, 0, false), true), 1u);
  EXPECT_EQ(CountOomKills(Events(2, 0, false), Events(2, 0, false), true), 0u);
}

TEST(CountOomKills, CountersThatWentDownCountNothing) {
  EXPECT_EQ(CountOomKills(Events(5, 2), Events(0, 0), true), 0u);
  EXPECT_EQ(CountOomKills(Events(5, 2), Events(0, 0), false), 0u);
}

// The misattribution of issue 12: a helper OOM-killed while the worker (oom_score_adj -1000)
// survives, then the worker's plain SIGSEGV with memory.events unchanged, then a manual kill -9.
TEST(OomKillTracker, HelperKilledWorkerSurvivesThenCrashesIsACrash) {
  OomKillTracker tracker(Events(0, 0));
  OomKillTracker::Look look = tracker.Observe(Events(2, 1), /*group_kill=*/true,
                                              /*worker_running=*/true);
  EXPECT_TRUE(look.rose);
  EXPECT_EQ(look.kills, 1u);
  EXPECT_EQ(tracker.kills(), 1u);
  EXPECT_TRUE(tracker.pending());
  tracker.WorkerSurvived();  // checked a while later: neither dead nor dying
  EXPECT_FALSE(tracker.pending());

  OomKillTracker::Look at_reap = tracker.Observe(Events(2, 1), true, true);
  EXPECT_FALSE(at_reap.rose);
  EXPECT_FALSE(tracker.WorkerDied(kSegfault, at_reap));
  EXPECT_EQ(tracker.kills(), 1u);
}

TEST(OomKillTracker, ManualKillAfterASurvivedOomKillIsNotAnOomKill) {
  OomKillTracker tracker(Events(0, 0));
  tracker.Observe(Events(1, 0), /*group_kill=*/false, /*worker_running=*/true);
  tracker.WorkerSurvived();
  OomKillTracker::Look at_reap = tracker.Observe(Events(1, 0), false, true);
  EXPECT_FALSE(tracker.WorkerDied(kKilled, at_reap));
}

// The usual order: the kernel notifies memory.events before the dying worker can be reaped, so
// the watch sees the rise first and the look at the reap sees nothing new.
TEST(OomKillTracker, RiseSeenBeforeTheReapMakesTheSigkillAnOomKill) {
  OomKillTracker tracker(Events(0, 0));
  tracker.Observe(Events(2, 1), /*group_kill=*/true, /*worker_running=*/true);
  ASSERT_TRUE(tracker.pending());
  OomKillTracker::Look at_reap = tracker.Observe(Events(2, 1), true, true);
  EXPECT_FALSE(at_reap.rose);
  EXPECT_TRUE(tracker.WorkerDied(kKilled, at_reap));
  EXPECT_FALSE(tracker.pending());
  EXPECT_EQ(tracker.kills(), 1u);
}

TEST(OomKillTracker, RiseSeenOnlyAtTheReap) {
  OomKillTracker tracker(Events(4, 2));  // kills of an earlier run are not counted
  OomKillTracker::Look at_reap = tracker.Observe(Events(6, 3), true, true);
  EXPECT_TRUE(at_reap.rose);
  EXPECT_TRUE(tracker.WorkerDied(kKilled, at_reap));
  EXPECT_EQ(tracker.kills(), 1u);
}

TEST(OomKillTracker, OnlyASigkillIsAnOomKill) {
  for (int wait_status : {kSegfault, kExit0, kExit137}) {
    OomKillTracker tracker(Events(0, 0));
    OomKillTracker::Look at_reap = tracker.Observe(Events(2, 1), true, true);
    EXPECT_FALSE(tracker.WorkerDied(wait_status, at_reap)) << wait_status;
    EXPECT_FALSE(tracker.pending());
  }
}

TEST(OomKillTracker, SigkillWithoutAnOomKillIsNotAnOomKill) {
  OomKillTracker tracker(Events(2, 1));
  OomKillTracker::Look at_reap = tracker.Observe(Events(2, 1), true, true);
  EXPECT_FALSE(tracker.WorkerDied(kKilled, at_reap));
}

TEST(OomKillTracker, KillsWithoutAWorkerAreCountedButLeaveNothingPending) {
  OomKillTracker tracker(Events(0, 0));
  tracker.Observe(Events(1, 0), /*group_kill=*/false, /*worker_running=*/false);
  EXPECT_EQ(tracker.kills(), 1u);
  EXPECT_FALSE(tracker.pending());
  tracker.WorkerStarted();
  OomKillTracker::Look at_reap = tracker.Observe(Events(1, 0), false, true);
  EXPECT_FALSE(tracker.WorkerDied(kKilled, at_reap));
}

TEST(OomKillTracker, ANewWorkerStartsWithNothingPending) {
  OomKillTracker tracker(Events(0, 0));
  tracker.Observe(Events(1, 0), false, true);
  ASSERT_TRUE(tracker.pending());
  tracker.WorkerStarted();
  EXPECT_FALSE(tracker.pending());
}

// --- /proc. ---

// /proc/<pid>/status lines that matter, with the rest of a 6.1 status file around them.
std::string StatusText(const char* sigpnd, const char* shdpnd) {
  return std::string("Name:\tbulkhead-test-w\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t42\n") +
         "SigQ:\t0/3841\nSigPnd:\t" + sigpnd + "\nShdPnd:\t" + shdpnd +
         "\nSigBlk:\t0000000000000000\nSigIgn:\t0000000000001000\n";
}
constexpr char kNoSignal[] = "0000000000000000";

// ParseProcessDying that must succeed.
bool Dying(std::string_view stat, const std::string& status) {
  Result<bool> dying = ParseProcessDying(stat, status);
  EXPECT_TRUE(dying.ok()) << dying.status().message();
  return dying.ok() && *dying;
}
constexpr char kSigkill[] = "0000000000000100";  // bit 8: signal 9

TEST(ParseProcessDying, RunningProcess) {
  Result<bool> dying = ParseProcessDying(
      "42 (bulkhead-test-w) S 1 42 42 0 -1 4194560 170 0 0 0 1 0 0 0 20 0 2 0 123 0 0\n",
      StatusText(kNoSignal, kNoSignal));
  ASSERT_TRUE(dying.ok()) << dying.status().message();
  EXPECT_FALSE(*dying);
}

TEST(ParseProcessDying, ZombieOrExitingOrSigkillPending) {
  const std::string quiet = StatusText(kNoSignal, kNoSignal);
  EXPECT_TRUE(Dying("42 (w) Z 1 42 42 0 -1 4227084 0 0\n", quiet));
  // PF_EXITING (0x4) in flags: 4194564 = 0x400104.
  EXPECT_TRUE(Dying("42 (w) R 1 42 42 0 -1 4194564 0 0\n", quiet));
  const char* stat = "42 (w) D 1 42 42 0 -1 4194560 0 0\n";
  EXPECT_TRUE(Dying(stat, StatusText(kSigkill, kNoSignal)));
  EXPECT_TRUE(Dying(stat, StatusText(kNoSignal, kSigkill)));
  // SIGTERM (bit 14) pending is not dying.
  EXPECT_FALSE(Dying(stat, StatusText("0000000000004000", kNoSignal)));
}

TEST(ParseProcessDying, CommandNameWithSpacesAndParentheses) {
  Result<bool> dying = ParseProcessDying("42 (a ) Z (b) R 1 42 42 0 -1 4194564 0 0\n",
                                         StatusText(kNoSignal, kNoSignal));
  ASSERT_TRUE(dying.ok());
  EXPECT_TRUE(*dying);  // flags has PF_EXITING; the "Z" inside the name is not the state
  dying = ParseProcessDying("42 (a ) Z (b) S 1 42 42 0 -1 4194560 0 0\n",
                            StatusText(kNoSignal, kNoSignal));
  ASSERT_TRUE(dying.ok());
  EXPECT_FALSE(*dying);
}

TEST(ParseProcessDying, MalformedText) {
  EXPECT_THAT(ParseProcessDying("42 w S 1", "").status().message(), HasSubstr("/proc stat"));
  EXPECT_THAT(ParseProcessDying("42 (w) S 1 2\n", "").status().message(),
              HasSubstr("too few fields"));
  EXPECT_THAT(ParseProcessDying("42 (w) S 1 42 42 0 -1 x 0\n", "").status().message(),
              HasSubstr("malformed flags"));
  EXPECT_THAT(
      ParseProcessDying("42 (w) S 1 42 42 0 -1 4194560 0\n", "SigPnd:\tzz\n").status().message(),
      HasSubstr("malformed SigPnd"));
}

TEST(ProcessIsDying, LiveChildThenZombie) {
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    while (true) ::pause();
  }
  testing::ChildGuard child(pid);
  Result<bool> dying = ProcessIsDying(pid);
  ASSERT_TRUE(dying.ok()) << dying.status().message();
  EXPECT_FALSE(*dying);
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  // Killed and not reaped: a zombie, whose /proc files stay until the reap.
  EXPECT_TRUE(testing::WaitFor([&] {
    Result<bool> now = ProcessIsDying(pid);
    std::optional<testing::ProcStat> stat = testing::ReadProcStat(pid);
    return now.ok() && *now && stat && stat->state == 'Z';
  }));
  std::optional<int> status = child.WaitExit();
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFSIGNALED(*status) && WTERMSIG(*status) == SIGKILL);
}

}  // namespace
}  // namespace bulkhead::cell
