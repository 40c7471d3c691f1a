// SPDX-License-Identifier: MIT
// Restarts with real workers (issue 4): the backoff doubles up to restart_max_delay; the start
// limit makes a crash loop that recovers by itself (issue 25), or with start_limit_action = "fail"
// puts the cell in `failed`, where it stays until `restart`; exec failures count as failed starts
// and show the errno text; a backoff longer than queue_timeout refuses requests with retry-after.
// Outcomes and counts only: when each start comes, to the millisecond (and the reset after
// restart_reset_after, and that `failed` arms nothing), is WorkerRunnerTest's, in simulated time.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <charconv>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/lifecycle/lifecycle_fixture.h"

namespace bulkhead::lifecycle_test {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// The delays of "...; restarting in N ms" log lines of `cell`, in order.
std::vector<int64_t> LoggedDelays(const Harness& h, const std::string& cell) {
  std::vector<int64_t> delays;
  for (const LogEvent& event : CellLogEvents(h.Log(), cell, "restarting in ")) {
    std::string_view text = event.message;
    text.remove_prefix(text.find("restarting in ") + 14);
    int64_t ms = -1;
    std::from_chars(text.data(), text.data() + text.size(), ms);
    delays.push_back(ms);
  }
  return delays;
}

// A backoff step of `step` ms becomes a delay in (0.8 * step, step] (RestartPolicy jitter).
void ExpectDelayOfStep(int64_t delay, int64_t step, size_t index) {
  EXPECT_GE(delay, step - step / 5) << "delay #" << index << " for a step of " << step << " ms";
  EXPECT_LE(delay, step) << "delay #" << index << " for a step of " << step << " ms";
}

TEST(Backoff, GrowsToTheCapAndAWorkerThatStaysServes) {
  e2e::TempDir flags;
  const std::string flag = flags.Join("serve");
  Harness h(TestOptions({CellSpec{.name = "flappy",
                                  .command = WorkerWhenFlagExists(flag),
                                  .restart_delay = "100ms",
                                  .extra_toml = "restart_max_delay = \"800ms\"\n"
                                                "start_limit_interval = \"0s\"\n",
                                  .wait_running = false}}));
  ASSERT_STARTED(h);
  Tally tally;

  // Exits at once, six times: steps of 100, 200, 400, 800 (the cap), 800, 800 ms.
  ASSERT_TRUE(h.WaitForCell(
      "flappy", [](const nlohmann::json& c) { return c["starts"] >= 7; }, std::chrono::seconds(20)))
      << h.Status().dump() << "\n"
      << h.Log();
  const std::vector<int64_t> delays = LoggedDelays(h, "flappy");
  ASSERT_GE(delays.size(), 6u) << h.Log();
  const int64_t steps[] = {100, 200, 400, 800, 800, 800};
  for (size_t i = 0; i < 6; ++i) ExpectDelayOfStep(delays[i], steps[i], i);
  for (size_t i = 0; i + 1 < 4; ++i) EXPECT_LT(delays[i], delays[i + 1]) << "growth " << i;

  // A worker that stays serves; its crash is answered and restarted with a delay of the policy.
  CreateFlag(flag);
  ASSERT_TRUE(WaitForWorkerThatSawTheFlag(h, "flappy")) << h.Status().dump() << "\n" << h.Log();
  EXPECT_TRUE(Served(h, "flappy", "echo up", "up", tally));
  const size_t delays_before = LoggedDelays(h, "flappy").size();
  RemoveFlag(flag);
  Result<ipc::Client::Reply> died = h.Call("flappy", "exit 3");
  tally.Count(died);
  EXPECT_TRUE(IsReply(died, ReplyStatus::kFailed, Reason::kWorkerDied)) << Describe(died);
  EXPECT_EQ(died.ok() ? died->payload : "", "exit 3");
  ASSERT_TRUE(e2e::WaitFor([&] { return LoggedDelays(h, "flappy").size() > delays_before; },
                           std::chrono::seconds(10)))
      << h.Log();
  EXPECT_THAT(h.Log(), HasSubstr("worker exited: exit 3; restarting in"));

  ExpectCountersMatch(h, "flappy", tally);
  EXPECT_EQ(h.Cell("flappy")["failed_by_reason"]["worker_died"], 1);
}

TEST(StartLimit, GivesUpThenRestartRecovers) {
  e2e::TempDir flags;
  const std::string flag = flags.Join("serve");
  Harness h(TestOptions({CellSpec{.name = "doomed",
                                  .command = WorkerWhenFlagExists(flag),
                                  .restart_delay = "50ms",
                                  .extra_toml = "start_limit_burst = 3\n"
                                                "start_limit_interval = \"60s\"\n"
                                                "start_limit_action = \"fail\"\n",
                                  .wait_running = false}}));
  ASSERT_STARTED(h);
  Tally tally;

  ASSERT_TRUE(CellShows(h, "doomed", "state", "failed"));
  nlohmann::json c = h.Cell("doomed");
  EXPECT_EQ(c["reason"], "gave up: 3 starts in 60s, last exit 1") << c.dump();
  EXPECT_EQ(c["last_exit"], "exit 1") << c.dump();
  EXPECT_EQ(c["starts"], 3) << c.dump();
  EXPECT_TRUE(c["pid"].is_null()) << c.dump();
  EXPECT_EQ(c["next_start_in_ms"], 0) << c.dump();
  EXPECT_THAT(h.Log(), HasSubstr("gave up: 3 starts in 60s, last exit 1"));

  // Requests are refused at once as unavailable (not full), with no retry-after: nothing is due.
  for (int i = 0; i < 3; ++i) {
    Result<ipc::Client::Reply> refused = h.Call("doomed", "echo nobody");
    tally.Count(refused);
    ASSERT_TRUE(IsReply(refused, ReplyStatus::kRejected, Reason::kUnavailable))
        << Describe(refused);
    std::optional<ipc::RejectDetail> detail = ipc::DecodeRejectDetail(refused->payload);
    ASSERT_TRUE(detail.has_value());
    EXPECT_EQ(detail->cell, "doomed");
    EXPECT_EQ(detail->retry_after_ms, 0u);
  }
  c = h.Cell("doomed");
  EXPECT_EQ(c["rejected_by_reason"]["unavailable"], 3) << c.dump();
  EXPECT_EQ(c["rejected_by_reason"]["full"], 0) << c.dump();

  // Manual recovery: `restart` starts at once with the counters reset.
  CreateFlag(flag);
  nlohmann::json answer = Control(h, "restart", "doomed");
  EXPECT_EQ(answer["ok"], true) << answer.dump();
  EXPECT_EQ(answer["result"], "ok") << answer.dump();
  ASSERT_TRUE(h.WaitForCell("doomed",
                            [](const nlohmann::json& c) {
                              return c["state"] == "running" && c["pid"].is_number_integer();
                            }))
      << h.Status().dump() << "\n"
      << h.Log();
  EXPECT_TRUE(Served(h, "doomed", "echo back", "back", tally));
  c = h.Cell("doomed");
  EXPECT_EQ(c["starts"], 4) << c.dump();
  EXPECT_TRUE(c["reason"].is_null()) << c.dump();

  // The start limit counts again from zero: a crash now is restarted, not given up on.
  RemoveFlag(flag);
  Result<ipc::Client::Reply> died = h.Call("doomed", "exit 1");
  tally.Count(died);
  EXPECT_TRUE(IsReply(died, ReplyStatus::kFailed, Reason::kWorkerDied)) << Describe(died);
  ASSERT_TRUE(h.WaitForCell("doomed", [](const nlohmann::json& c) { return c["starts"] >= 5; }))
      << h.Status().dump();

  ExpectCountersMatch(h, "doomed", tally);
}

// Issue 25 section 1: with the default start_limit_action ("backoff"), a worker that crashes
// several times and then recovers by itself (a dependency that was down at its first starts) is
// serving again; the start limit used to leave the cell failed for good. The backoffs are
// configured short, so the loop passes quickly; no duration is asserted.
TEST(CrashLoop, AWorkerThatCrashesThenRecoversByItselfServesAgain) {
  e2e::TempDir dir;
  const std::string starts_file = dir.Join("starts");
  constexpr int kCrashes = 6;
  Harness h(TestOptions({CellSpec{.name = "loopy",
                                  .command = WorkerAfterStarts(starts_file, kCrashes),
                                  .restart_delay = "10ms",
                                  .extra_toml = "restart_max_delay = \"200ms\"\n"
                                                "restart_reset_after = \"300ms\"\n"
                                                "start_limit_burst = 2\n"
                                                // Wide: the crashes must fall in one window
                                                // however slow the machine is.
                                                "start_limit_interval = \"60s\"\n",
                                  .wait_running = false}}));
  ASSERT_STARTED(h);
  Tally tally;

  // ready = "exec": each of the crashing workers is `running` for a moment too; the one that
  // serves is the start after the last crash.
  ASSERT_TRUE(h.WaitForCell(
      "loopy",
      [](const nlohmann::json& c) {
        return c["starts"] == kCrashes + 1 && c["state"] == "running";
      },
      std::chrono::seconds(20)))
      << h.Status().dump() << "\n"
      << h.Log();
  nlohmann::json c = h.Cell("loopy");
  EXPECT_EQ(c["starts"], kCrashes + 1) << c.dump();
  EXPECT_EQ(c["restarts"], kCrashes) << c.dump();
  EXPECT_EQ(c["restarts_by_reason"]["crash"], kCrashes) << c.dump();
  EXPECT_EQ(c["last_exit"], "exit 1") << c.dump();
  EXPECT_EQ(c["policy"]["start_limit_action"], "backoff") << c.dump();
  // It was crash-looping (logged once at error, when the loop began), and the worker that runs
  // now ends the loop once it has run restart_reset_after.
  ASSERT_FALSE(CellLogEvents(h.Log(), "loopy", "crash-looping: ").empty()) << h.Log();
  size_t errors = 0;
  std::string line;
  for (std::istringstream lines(h.Log()); std::getline(lines, line);) {
    if (line.find("crash-looping: ") != std::string::npos &&
        line.find("level=error") != std::string::npos) {
      ++errors;
    }
  }
  EXPECT_GE(errors, 1u) << h.Log();
  ASSERT_TRUE(h.WaitForCell("loopy", [](const nlohmann::json& c) {
    return c["state"] == "running" && c["crash_looping"] == false;
  })) << h.Cell("loopy").dump();

  Result<ipc::Client::Reply> served = h.Call("loopy", "echo back");
  tally.Count(served);
  EXPECT_OK_REPLY(served, "back");
  c = h.Cell("loopy");
  EXPECT_EQ(c["starts"], kCrashes + 1) << c.dump();
  ExpectCountersMatch(h, "loopy", tally);
}

TEST(ExecFailure, CountsAsAFailedStartWithTheErrnoText) {
  e2e::TempDir dir;
  const std::string missing = dir.Join("no-such-worker");
  const std::string not_executable = dir.Join("not-executable");
  std::ofstream(not_executable) << "#!/bin/sh\nexit 0\n";
  ASSERT_EQ(::chmod(not_executable.c_str(), 0644), 0);
  const std::string limit =
      "start_limit_burst = 2\nstart_limit_interval = \"60s\"\nstart_limit_action = \"fail\"\n";
  Harness h(TestOptions({CellSpec{.name = "missing",
                                  .command = {missing},
                                  .restart_delay = "100ms",
                                  .extra_toml = limit,
                                  .wait_running = false},
                         CellSpec{.name = "noexec",
                                  .command = {not_executable},
                                  .restart_delay = "100ms",
                                  .extra_toml = limit,
                                  .wait_running = false}}));
  ASSERT_STARTED(h);

  struct Expected {
    std::string cell;
    std::string path;
    std::string errno_text;
  };
  for (const Expected& e : {Expected{"missing", missing, "No such file or directory"},
                            Expected{"noexec", not_executable, "Permission denied"}}) {
    SCOPED_TRACE(e.cell);
    Tally tally;
    // Two failed starts reach start_limit_burst = 2: failed, the exec error in the reason.
    ASSERT_TRUE(CellShows(h, e.cell, "state", "failed"));
    nlohmann::json c = h.Cell(e.cell);
    EXPECT_EQ(c["starts"], 2) << c.dump();
    EXPECT_TRUE(c["pid"].is_null()) << c.dump();
    ASSERT_TRUE(c["last_exit"].is_string()) << c.dump();
    EXPECT_THAT(c["last_exit"].get<std::string>(), StartsWith("start failed: "));
    EXPECT_THAT(c["last_exit"].get<std::string>(), HasSubstr(e.path));
    EXPECT_THAT(c["last_exit"].get<std::string>(), HasSubstr(e.errno_text));
    ASSERT_TRUE(c["reason"].is_string()) << c.dump();
    EXPECT_THAT(c["reason"].get<std::string>(),
                StartsWith("gave up: 2 starts in 60s, last start failed: "));
    EXPECT_THAT(c["reason"].get<std::string>(), HasSubstr(e.errno_text));
    // The log names the cell and the errno text, once per failed start.
    EXPECT_FALSE(CellLogEvents(h.Log(), e.cell, e.errno_text).empty()) << h.Log();
    EXPECT_EQ(CellLogEvents(h.Log(), e.cell, "cannot start worker").size(), 2u) << h.Log();

    Result<ipc::Client::Reply> refused = h.Call(e.cell, "echo x");
    tally.Count(refused);
    EXPECT_TRUE(IsReply(refused, ReplyStatus::kRejected, Reason::kUnavailable))
        << Describe(refused);
    ExpectCountersMatch(h, e.cell, tally);
  }
}

// A running cell whose command a reload breaks: the failed start is logged once, at error, and
// names no pid (it named the previous worker, long gone).
TEST(ExecFailure, AfterAWorkerRanTheFailedStartNamesNoPid) {
  // Stop, then start: with the overlap a reload's next worker that cannot start leaves the
  // previous one serving (RestartOverlap.*), and this test needs the cell's own start to fail.
  CellSpec cell{.name = "flip",
                .restart_delay = "100ms",
                .extra_toml =
                    "start_limit_burst = 1\nstart_limit_action = \"fail\"\n"
                    "restart_overlap = false\n"};
  Harness h(TestOptions({cell}));
  ASSERT_STARTED(h);
  cell.command = {"/nonexistent/bulkhead-worker"};
  h.RewriteConfig({cell});
  Result<e2e::ProcessResult> reload = h.Ctl({"reload"});
  ASSERT_TRUE(reload.ok()) << reload.status().message();
  ASSERT_TRUE(CellShows(h, "flip", "state", "failed"));
  const std::vector<LogEvent> failed = CellLogEvents(h.Log(), "flip", "cannot start worker");
  ASSERT_EQ(failed.size(), 1u) << h.Log();
  std::string line;
  for (std::istringstream lines(h.Log()); std::getline(lines, line);) {
    if (line.find("cannot start worker") == std::string::npos) continue;
    EXPECT_THAT(line, HasSubstr("level=error")) << line;
    EXPECT_THAT(line, ::testing::Not(HasSubstr("pid="))) << line;
  }
}

TEST(Backoff, LongerThanQueueTimeoutRefusesAtOnceWithRetryAfter) {
  e2e::TempDir flags;
  const std::string flag = flags.Join("serve");
  Harness h(TestOptions({CellSpec{.name = "slow",
                                  .command = WorkerWhenFlagExists(flag),
                                  .max_queue = 4,
                                  .queue_timeout = "1s",
                                  .restart_delay = "5s",
                                  .extra_toml = "start_limit_interval = \"0s\"\n",
                                  .wait_running = false}}));
  ASSERT_STARTED(h);
  Tally tally;

  ASSERT_TRUE(h.WaitForCell("slow",
                            [](const nlohmann::json& c) {
                              return c["state"] == "backoff" && c["next_start_in_ms"] > 2000;
                            }))
      << h.Status().dump() << "\n"
      << h.Log();
  for (int i = 0; i < 3; ++i) {
    Result<ipc::Client::Reply> refused = h.Call("slow", "echo later");
    tally.Count(refused);
    // Refused as unavailable, not queued: a queued request would have waited out queue_timeout
    // and been REJECTED queue_timeout (rejected_by_reason below).
    ASSERT_TRUE(IsReply(refused, ReplyStatus::kRejected, Reason::kUnavailable))
        << Describe(refused);
    std::optional<ipc::RejectDetail> detail = ipc::DecodeRejectDetail(refused->payload);
    ASSERT_TRUE(detail.has_value());
    EXPECT_EQ(detail->cell, "slow");
    EXPECT_GT(detail->retry_after_ms, 1000u);  // more than queue_timeout is left
    EXPECT_LE(detail->retry_after_ms, 5000u);
    EXPECT_EQ(detail->queued, 0u);
  }
  nlohmann::json c = h.Cell("slow");
  EXPECT_EQ(c["rejected_by_reason"]["unavailable"], 3) << c.dump();
  EXPECT_EQ(c["rejected_by_reason"]["full"], 0) << c.dump();
  EXPECT_EQ(c["rejected_by_reason"]["queue_timeout"], 0) << c.dump();
  ExpectCountersMatch(h, "slow", tally);
}

}  // namespace
}  // namespace bulkhead::lifecycle_test
