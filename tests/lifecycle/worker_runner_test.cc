// SPDX-License-Identifier: MIT
// WorkerRunner's timers in simulated time, with a fake launcher: no process is started, the test
// plays the worker (its sd_notify datagrams come from the test's own pid, which the fake gives as
// the worker's; it answers the health probe on the worker socket; it is reaped when the test says)
// and every signal is recorded instead of sent. The backoff, the start limit, stop_timeout and the
// SIGKILL escalation, the watchdog, start_timeout, the probe's readiness and stalls as the runner
// sees them, each to the millisecond, without a sleep.
#include "lifecycle/worker_runner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <uv.h>

#include <array>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/unique_fd.h"
#include "tests/helpers/captured_log.h"
#include "tests/helpers/simulated_time_source.h"
#include "tests/helpers/test_support.h"
#include "tests/lifecycle/fake_cgroup_tree.h"
#include "tests/lifecycle/probe_peer.h"

namespace bulkhead::lifecycle {
namespace {

using bulkhead::testing::CapturedLog;
using bulkhead::testing::SimulatedTimeSource;
using bulkhead::testing::TempDir;
using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;
using ::testing::StartsWith;
using State = Lifecycle::State;

// waitpid(2) statuses.
int ExitedWith(int code) { return code << 8; }
int KilledBy(int signal) { return signal; }

// Records what the runner asks; the worker it "starts" is the test process itself.
class FakeLauncher : public WorkerLauncher {
 public:
  explicit FakeLauncher(const loop::TimeSource* time) : time_(time) {}
  Result<pid_t> Spawn(const cell::SpawnOptions& options) override {
    spawn_times.push_back(time_->NowMs());
    listen_fd = options.listen_fd;
    std::error_code ignored;
    cgroup_dirs.push_back(options.cgroup_fd < 0
                              ? std::string()
                              : std::filesystem::read_symlink(
                                    "/proc/self/fd/" + std::to_string(options.cgroup_fd), ignored)
                                    .string());
    if (!fail_with.empty()) {
      return fail_errno != 0 ? Status::FromErrno(fail_with, fail_errno) : Status::Error(fail_with);
    }
    if (!pids.empty()) {
      pid_t pid = pids.front();
      pids.erase(pids.begin());
      return pid;
    }
    return ::getpid();
  }
  void Kill(pid_t pid, int signal) override { kills.emplace_back(pid, signal); }
  // The signals sent so far, to the worker or its process group, and forgets them.
  std::vector<std::pair<pid_t, int>> TakeKills() { return std::exchange(kills, {}); }

  std::vector<uint64_t> spawn_times;
  std::vector<std::pair<pid_t, int>> kills;
  int listen_fd = -1;
  // The directory of the cgroup each spawn was born in (CLONE_INTO_CGROUP); "" for none.
  std::vector<std::string> cgroup_dirs;
  std::string fail_with;    // non-empty: every spawn fails with it
  int fail_errno = 0;       // and with this errno (0: none)
  std::vector<pid_t> pids;  // the pids the next spawns return, in order; then the test's own

 private:
  const loop::TimeSource* time_;
};

class FakeDataPath : public DataPathControl {
 public:
  void SetAvailability(const admission::Availability& pushed) override {
    availability = pushed;
    ++availability_pushes;
  }
  void OpenAdmission() override { ++opened; }
  void CloseAdmission() override { ++closed; }
  void RejectQueued() override {
    ++rejected;
    availability_at_reject = availability;
  }
  void FailInFlight(ipc::Reason reason, const std::string& message) override {
    failed.emplace_back(reason, message);
  }
  size_t worker_connections() const override { return 0; }
  void WorkerStarting() override { ++starting; }
  bool RetireWorkerLinks() override {
    ++retired;
    return retire_busy;
  }
  void PreviousWorkerExited(const std::string& message) override {
    previous_exited.push_back(message);
  }
  void PressureFired(admission::Signal signal) override { fired.push_back(signal); }
  void CgroupUsagePolled(const cell::CgroupUsage& usage) override { usages.push_back(usage); }
  void AdaptiveSignals(uint8_t live) override { signals = live; }
  std::vector<admission::Signal> fired;
  std::vector<cell::CgroupUsage> usages;
  uint8_t signals = 0;

  int retired = 0;
  std::vector<std::string> previous_exited;
  bool retire_busy = false;  // what RetireWorkerLinks answers: links to the previous one are busy

  // The last Availability pushed (the data path begins with NoneDue), and the one in force
  // when RejectQueued last ran: what its rejections said.
  admission::Availability availability = admission::Availability::NoneDue();
  admission::Availability availability_at_reject;
  int availability_pushes = 0;

  int opened = 0;
  int closed = 0;
  int rejected = 0;
  int starting = 0;
  std::vector<std::pair<ipc::Reason, std::string>> failed;
};

class WorkerRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(uv_loop_init(&loop_), 0);
    after_poll_.emplace(&loop_, [this] {
      if (runner_) runner_->OnAfterPoll();
    });
  }
  void TearDown() override {
    if (runner_) {
      if (runner_->pid() != 0) {
        runner_->Stop(0, nullptr);
        Reap(KilledBy(SIGKILL));
      } else {
        runner_->Stop(0, nullptr);
      }
      EXPECT_EQ(runner_->lifecycle().state(), State::kStopped);
      bool closed = false;
      runner_->Close([&] { closed = true; });
      uv_run(&loop_, UV_RUN_DEFAULT);
      EXPECT_TRUE(closed);
      runner_.reset();
    }
    after_poll_->Close(nullptr);
    uv_run(&loop_, UV_RUN_DEFAULT);
    EXPECT_EQ(uv_loop_close(&loop_), 0) << "a handle was left open";
  }

  config::CellConfig Config() const {
    config::CellConfig config;
    config.name = "pay";
    config.command = {"/nonexistent/never-started"};
    config.worker_socket = dir_.path() + "/pay.worker.sock";
    config.notify_socket = dir_.path() + "/pay.notify";
    config.max_concurrent = 1;
    config.output = config::OutputMode::kInherit;
    // The restart tests below are of a restart that stops first; the overlapping one (the
    // default) has its own, WorkerSwap*.
    config.restart_overlap = false;
    return config;
  }
  // A runner for `config`, its sockets bound, started.
  void Start(const config::CellConfig& config) {
    runner_.emplace(&loop_, &time_, config, CellCompartment{}, ipc::kDefaultMaxPayload,
                    &*after_poll_, &data_path_, &launcher_);
    Status bound = runner_->BindSockets();
    ASSERT_TRUE(bound.ok()) << bound.message();
    EXPECT_EQ(runner_->Start(), "ok");
  }
  // The supervisor reaped the worker with `wait_status` (no cgroup: the lifecycle hears at once).
  void Reap(int wait_status) { runner_->OnWorkerExit(wait_status); }
  // The worker (this process) sends `text` to the cell's NOTIFY_SOCKET; the loop reads it only
  // when it next runs.
  void Notify(std::string_view text) {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, runner_->config().notify_socket.c_str(),
                 sizeof address.sun_path - 1);
    UniqueFd fd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    ASSERT_EQ(::sendto(fd.get(), text.data(), text.size(), 0,
                       reinterpret_cast<const sockaddr*>(&address), sizeof address),
              static_cast<ssize_t>(text.size()))
        << std::strerror(errno);
  }
  // One loop iteration: reads what waits in the sockets, then the check phase (AfterPoll).
  void RunOnce() { uv_run(&loop_, UV_RUN_NOWAIT); }
  State state() const { return runner_->lifecycle().state(); }
  // ms until the backoff's next start.
  uint64_t BackoffLeft() const { return runner_->lifecycle().next_start_at_ms() - time_.NowMs(); }

  uv_loop_t loop_{};
  SimulatedTimeSource time_;
  TempDir dir_;
  FakeLauncher launcher_{&time_};
  FakeDataPath data_path_;
  std::optional<loop::AfterPoll> after_poll_;
  std::optional<WorkerRunner> runner_;
};

// A backoff step of `step` ms becomes a delay in (0.8 * step, step] (RestartPolicy's jitter).
::testing::AssertionResult DelayOfStep(uint64_t delay, uint64_t step) {
  if (delay > step - step / 5 && delay <= step) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "delay " << delay << " ms for a step of " << step;
}

TEST_F(WorkerRunnerTest, ACrashLoopBacksOffDoublingToTheCapAndStartsExactlyWhenDue) {
  config::CellConfig config = Config();
  config.restart_delay = std::chrono::milliseconds(100);
  config.restart_max_delay = std::chrono::milliseconds(800);
  config.start_limit_interval = std::chrono::milliseconds(0);
  Start(config);
  ASSERT_EQ(launcher_.spawn_times.size(), 1u);
  for (uint64_t step : {100, 200, 400, 800, 800, 800}) {
    Reap(ExitedWith(1));
    ASSERT_EQ(state(), State::kBackoff);
    const uint64_t delay = BackoffLeft();
    EXPECT_TRUE(DelayOfStep(delay, step));
    const size_t spawns = launcher_.spawn_times.size();
    time_.Advance(delay - 1);
    EXPECT_EQ(launcher_.spawn_times.size(), spawns) << "started before the backoff ended";
    time_.Advance(1);
    ASSERT_EQ(launcher_.spawn_times.size(), spawns + 1);
    EXPECT_EQ(state(), State::kRunning);
  }
  EXPECT_EQ(runner_->lifecycle().restarts(), 6u);
  EXPECT_EQ(runner_->restarts_by_reason()[static_cast<size_t>(RestartReason::kCrash)], 6u);
}

TEST_F(WorkerRunnerTest, AWorkerThatRanLongerThanRestartResetAfterStartsTheBackoffOver) {
  config::CellConfig config = Config();
  config.restart_delay = std::chrono::milliseconds(100);
  config.restart_reset_after = std::chrono::milliseconds(1000);
  config.start_limit_interval = std::chrono::milliseconds(0);
  Start(config);
  for (uint64_t step : {100, 200, 400}) {
    Reap(ExitedWith(1));
    EXPECT_TRUE(DelayOfStep(BackoffLeft(), step));
    time_.Advance(BackoffLeft());
  }
  // Up for 999 ms: the next step is 800.
  time_.Advance(999);
  Reap(ExitedWith(1));
  EXPECT_TRUE(DelayOfStep(BackoffLeft(), 800));
  time_.Advance(BackoffLeft());
  // Up for restart_reset_after: back to 100.
  time_.Advance(1000);
  Reap(ExitedWith(3));
  EXPECT_TRUE(DelayOfStep(BackoffLeft(), 100));
  EXPECT_EQ(runner_->lifecycle().last_exit(), "exit 3");
}

// The defaults (start_limit_burst 5 in 60s, "backoff", restart_reset_after 10s): a worker that
// exits 1 at its first 5 starts (crash-looping at boot), then serves past restart_reset_after and
// is killed, restarts after restart_delay, not crash-looping; the boot's starts are not held
// against it (they were: "crash-looping: 5 starts in 60s; restarting in 10282 ms").
TEST_F(WorkerRunnerTest, OneCrashAfterARecoveryRestartsAfterRestartDelayNotCrashLooping) {
  CapturedLog log(LogLevel::kInfo);
  Start(Config());
  for (int start = 1; start <= 5; ++start) {
    Reap(ExitedWith(1));
    ASSERT_EQ(state(), State::kBackoff);
    time_.Advance(BackoffLeft());
  }
  ASSERT_EQ(launcher_.spawn_times.size(), 6u);
  EXPECT_TRUE(runner_->lifecycle().CrashLooping());
  time_.Advance(10'000);  // restart_reset_after: the loop is over
  EXPECT_FALSE(runner_->lifecycle().CrashLooping());
  time_.Advance(5'000);
  Reap(KilledBy(SIGKILL));
  ASSERT_EQ(state(), State::kBackoff);
  EXPECT_TRUE(DelayOfStep(BackoffLeft(), 100));
  EXPECT_FALSE(runner_->lifecycle().CrashLooping());
  EXPECT_EQ(log.Count("crash-looping: 5 starts in 60s"), 1u) << "only at boot:\n" << log.Text();
  EXPECT_EQ(log.Count("crash-looping: 6 starts in 60s"), 0u) << log.Text();
}

TEST_F(WorkerRunnerTest, TheStartLimitGivesUpAndSpendsNothingUntilARestart) {
  CapturedLog log(LogLevel::kInfo);
  config::CellConfig config = Config();
  config.restart_delay = std::chrono::milliseconds(50);
  config.start_limit_burst = 3;
  config.start_limit_interval = std::chrono::milliseconds(60'000);
  config.start_limit_action = config::StartLimitAction::kFail;  // the default keeps starting
  Start(config);
  for (int start = 1; start < 3; ++start) {
    Reap(ExitedWith(1));
    time_.Advance(BackoffLeft());
  }
  Reap(ExitedWith(1));
  EXPECT_EQ(state(), State::kFailed);
  EXPECT_EQ(runner_->lifecycle().reason(), "gave up: 3 starts in 60s, last exit 1");
  EXPECT_TRUE(data_path_.availability.Refuses(time_.NowMs()));
  EXPECT_EQ(data_path_.availability, admission::Availability::NoneDue()) << "no start is due";
  EXPECT_EQ(time_.armed_timers(), 0u) << "failed arms nothing";
  time_.Advance(120'000);
  EXPECT_EQ(launcher_.spawn_times.size(), 3u);
  EXPECT_EQ(log.Count("gave up: 3 starts in 60s, last exit 1"), 1u) << log.Text();

  EXPECT_EQ(runner_->Restart(0), "ok");
  EXPECT_EQ(launcher_.spawn_times.size(), 4u) << "a restart from failed starts at once";
  EXPECT_EQ(state(), State::kRunning);
  EXPECT_EQ(runner_->lifecycle().starts(), 4u);
  EXPECT_TRUE(runner_->lifecycle().reason().empty());
}

TEST_F(WorkerRunnerTest, AnExecFailureIsAFailedStartNamingItsError) {
  CapturedLog log(LogLevel::kInfo);
  launcher_.fail_with = "exec /nonexistent/never-started: No such file or directory";
  config::CellConfig config = Config();
  config.start_limit_burst = 2;
  config.start_limit_action = config::StartLimitAction::kFail;
  Start(config);
  EXPECT_EQ(state(), State::kBackoff);
  EXPECT_EQ(runner_->pid(), 0);
  EXPECT_EQ(runner_->lifecycle().last_exit(),
            "start failed: exec /nonexistent/never-started: No such file or directory");
  time_.Advance(BackoffLeft());
  EXPECT_EQ(state(), State::kFailed);
  EXPECT_EQ(launcher_.spawn_times.size(), 2u);
  ASSERT_EQ(log.Count("cannot start worker"), 2u) << log.Text();
  EXPECT_EQ(log.Find("cannot start worker")->level, LogLevel::kError);
  EXPECT_EQ(log.Find("cannot start worker")->pid, 0);
}

TEST_F(WorkerRunnerTest, ABackoffLongerThanQueueTimeoutRefusesWithRetryAfter) {
  config::CellConfig config = Config();
  config.restart_delay = std::chrono::milliseconds(5000);
  config.queue_timeout = std::chrono::milliseconds(1000);
  Start(config);
  Reap(ExitedWith(1));
  ASSERT_EQ(state(), State::kBackoff);
  const admission::Availability& pushed = data_path_.availability;
  EXPECT_TRUE(pushed.Refuses(time_.NowMs()));
  EXPECT_EQ(pushed.next_start, admission::Availability::NextStart::kAt);
  EXPECT_EQ(pushed.RetryAfterMs(time_.NowMs()), BackoffLeft());
  EXPECT_GT(pushed.RetryAfterMs(time_.NowMs()), 4000u);
  // Once the next start is within queue_timeout, requests queue for it: the same push says so.
  const int pushes = data_path_.availability_pushes;
  time_.Advance(BackoffLeft() - 1000);
  EXPECT_EQ(data_path_.availability_pushes, pushes);
  EXPECT_FALSE(pushed.Refuses(time_.NowMs()));
  EXPECT_EQ(pushed.RetryAfterMs(time_.NowMs()), 1000u);
  // A reload that shortens queue_timeout refuses again at once (the window is pushed anew).
  config.queue_timeout = std::chrono::milliseconds(500);
  ASSERT_TRUE(runner_->Reconfigure(config, std::nullopt).ok());
  EXPECT_TRUE(data_path_.availability.Refuses(time_.NowMs()));
}

// The transition into failed (the start limit) or into a stop rejects the queued requests; the
// availability that says no start is due must be pushed before that transition's actions run, or
// those rejections carry the backoff's or the running cell's (a Retry-After inviting retries).
TEST_F(WorkerRunnerTest, TheAvailabilityIsPushedBeforeTheQueuedRequestsAreRejected) {
  config::CellConfig config = Config();
  config.restart_delay = std::chrono::milliseconds(50);
  config.start_limit_burst = 2;
  config.start_limit_action = config::StartLimitAction::kFail;
  Start(config);
  EXPECT_FALSE(data_path_.availability.Refuses(time_.NowMs())) << "running admits";
  Reap(ExitedWith(1));
  ASSERT_EQ(state(), State::kBackoff);
  EXPECT_EQ(data_path_.availability.next_start, admission::Availability::NextStart::kAt);
  time_.Advance(BackoffLeft());
  Reap(ExitedWith(1));
  ASSERT_EQ(state(), State::kFailed);
  ASSERT_GE(data_path_.rejected, 1);
  EXPECT_EQ(data_path_.availability_at_reject, admission::Availability::NoneDue());

  const int rejected = data_path_.rejected;
  EXPECT_EQ(runner_->Restart(0), "ok");
  ASSERT_EQ(state(), State::kRunning);
  EXPECT_FALSE(data_path_.availability.Refuses(time_.NowMs()));
  runner_->Stop(0, nullptr);
  ASSERT_GT(data_path_.rejected, rejected);
  EXPECT_EQ(data_path_.availability_at_reject, admission::Availability::NoneDue());
}

TEST_F(WorkerRunnerTest, StopSendsTheStopSignalThenSigkillExactlyAtStopTimeout) {
  CapturedLog log(LogLevel::kInfo);
  config::CellConfig config = Config();
  config.stop_timeout = std::chrono::milliseconds(300);
  Start(config);
  const pid_t pid = runner_->pid();
  bool stopped = false;
  EXPECT_EQ(runner_->Stop(0, [&] { stopped = true; }), "ok");
  // Without a cgroup: the worker's process group, and the worker in case it left it.
  EXPECT_THAT(launcher_.TakeKills(), ElementsAre(Pair(-pid, SIGTERM), Pair(pid, SIGTERM)));
  EXPECT_EQ(data_path_.rejected, 1) << "what waits is refused";
  EXPECT_EQ(runner_->Stop(0, nullptr), "stop in progress");
  time_.Advance(299);
  EXPECT_THAT(launcher_.TakeKills(), IsEmpty());
  time_.Advance(1);
  EXPECT_THAT(launcher_.TakeKills(), ElementsAre(Pair(-pid, SIGKILL), Pair(pid, SIGKILL)));
  EXPECT_EQ(
      log.Count("worker still running at stop_timeout (300 ms, SIGTERM sent): sending SIGKILL"), 1u)
      << log.Text();
  EXPECT_FALSE(stopped);
  Reap(KilledBy(SIGKILL));
  EXPECT_TRUE(stopped);
  EXPECT_EQ(state(), State::kStopped);
  EXPECT_EQ(runner_->lifecycle().last_exit(), "signal 9");
  EXPECT_EQ(runner_->Stop(0, nullptr), "already stopped");
}

TEST_F(WorkerRunnerTest, AStopDrainsWhatRunsWithinTheSameStopTimeout) {
  config::CellConfig config = Config();
  config.stop_timeout = std::chrono::milliseconds(300);
  Start(config);
  const pid_t pid = runner_->pid();
  EXPECT_EQ(runner_->Stop(/*in_flight=*/1, nullptr), "ok");
  time_.Advance(150);
  EXPECT_THAT(launcher_.TakeKills(), IsEmpty()) << "requests in flight may finish";
  runner_->Drained();
  EXPECT_THAT(launcher_.TakeKills(), ElementsAre(Pair(-pid, SIGTERM), Pair(pid, SIGTERM)));
  // stop_timeout counts from the stop, the drain included.
  time_.Advance(149);
  EXPECT_THAT(launcher_.TakeKills(), IsEmpty());
  time_.Advance(1);
  EXPECT_THAT(launcher_.TakeKills(), ElementsAre(Pair(-pid, SIGKILL), Pair(pid, SIGKILL)));
}

TEST_F(WorkerRunnerTest, AWorkerThatEndsOnItsStopSignalIsNeverKilled) {
  config::CellConfig config = Config();
  config.stop_signal = SIGINT;
  config.stop_timeout = std::chrono::milliseconds(5000);
  Start(config);
  const pid_t pid = runner_->pid();
  EXPECT_EQ(runner_->Stop(0, nullptr), "ok");
  EXPECT_THAT(launcher_.TakeKills(), ElementsAre(Pair(-pid, SIGINT), Pair(pid, SIGINT)));
  time_.Advance(10);
  Reap(KilledBy(SIGINT));
  EXPECT_EQ(state(), State::kStopped);
  // Only the kill of what the worker may have left in its process group, once it is reaped;
  // nothing at stop_timeout.
  EXPECT_THAT(launcher_.TakeKills(), Each(Pair(-pid, SIGKILL)));
  time_.Advance(10'000);
  EXPECT_THAT(launcher_.TakeKills(), IsEmpty());
  EXPECT_EQ(runner_->lifecycle().last_exit(), "signal 2");
}

TEST_F(WorkerRunnerTest, ARestartStartsTheNextWorkerOnlyOnceTheOldOneIsReaped) {
  config::CellConfig config = Config();
  config.stop_timeout = std::chrono::milliseconds(300);
  Start(config);
  EXPECT_EQ(runner_->Restart(0), "ok");
  EXPECT_EQ(runner_->Restart(0), "restart in progress");
  EXPECT_EQ(runner_->Start(), "restart in progress");
  time_.Advance(10'000);  // SIGKILL at 300 ms; the worker is not reaped yet
  EXPECT_EQ(launcher_.spawn_times.size(), 1u) << "never two workers side by side";
  Reap(KilledBy(SIGKILL));
  EXPECT_EQ(launcher_.spawn_times.size(), 2u);
  EXPECT_EQ(state(), State::kRunning);
  EXPECT_EQ(runner_->restarts_by_reason()[static_cast<size_t>(RestartReason::kOperator)], 1u);
}

TEST_F(WorkerRunnerTest, AStopDuringARestartCancelsTheNewStart) {
  config::CellConfig config = Config();
  config.stop_timeout = std::chrono::milliseconds(300);
  Start(config);
  EXPECT_EQ(runner_->Restart(0), "ok");
  EXPECT_EQ(runner_->Stop(0, nullptr), "ok");
  time_.Advance(300);
  Reap(KilledBy(SIGKILL));
  EXPECT_EQ(state(), State::kStopped);
  EXPECT_EQ(time_.armed_timers(), 0u);
  time_.Advance(60'000);
  EXPECT_EQ(launcher_.spawn_times.size(), 1u);
  EXPECT_EQ(runner_->lifecycle().starts(), 1u);
}

TEST_F(WorkerRunnerTest, AWatchdogPingKeepsTheWorkerAndSilenceKillsItAsStalled) {
  config::CellConfig config = Config();
  config.watchdog = std::chrono::milliseconds(1000);
  config.restart_delay = std::chrono::milliseconds(100);
  Start(config);
  const pid_t pid = runner_->pid();
  // WATCHDOG=1 every half period, ten periods long.
  for (int ping = 0; ping < 20; ++ping) {
    time_.Advance(500);
    Notify("WATCHDOG=1");
    RunOnce();
  }
  EXPECT_THAT(launcher_.TakeKills(), IsEmpty());
  // Silence: the miss is decided after the poll that follows the period's end.
  time_.Advance(999);
  RunOnce();
  EXPECT_THAT(launcher_.TakeKills(), IsEmpty());
  time_.Advance(1);
  EXPECT_THAT(launcher_.TakeKills(), IsEmpty()) << "not from the timer itself";
  RunOnce();
  EXPECT_THAT(launcher_.TakeKills(), ElementsAre(Pair(-pid, SIGKILL), Pair(pid, SIGKILL)));
  ASSERT_EQ(data_path_.failed.size(), 1u);
  EXPECT_EQ(data_path_.failed[0].first, ipc::Reason::kStalled);
  EXPECT_EQ(data_path_.failed[0].second, "watchdog timeout: no WATCHDOG=1 within 1000 ms");
  Reap(KilledBy(SIGKILL));
  EXPECT_EQ(runner_->lifecycle().last_exit(),
            "watchdog timeout: no WATCHDOG=1 within 1000 ms (signal 9)");
  EXPECT_EQ(state(), State::kBackoff);
  time_.Advance(BackoffLeft());
  EXPECT_EQ(launcher_.spawn_times.size(), 2u);
  EXPECT_EQ(runner_->restarts_by_reason()[static_cast<size_t>(RestartReason::kWatchdog)], 1u);
}

// A pause of bulkheadd itself (SIGSTOP, a frozen host): the watchdog timer is overdue when the
// loop runs again, with the worker's WATCHDOG=1 still waiting in the socket. The poll reads it
// before the verdict, and the worker stays.
TEST_F(WorkerRunnerTest, APingThatWaitedInTheSocketWhenTheWatchdogFiredVoidsTheMiss) {
  config::CellConfig config = Config();
  config.watchdog = std::chrono::milliseconds(1000);
  Start(config);
  time_.Advance(500);
  Notify("WATCHDOG=1");  // sent at 500 ms; the loop sleeps through the rest of the period
  time_.Advance(2500);
  RunOnce();
  EXPECT_THAT(launcher_.TakeKills(), IsEmpty());
  EXPECT_EQ(state(), State::kRunning);
  // The ping re-armed the watchdog from when it was read.
  time_.Advance(999);
  RunOnce();
  EXPECT_THAT(launcher_.TakeKills(), IsEmpty());
  time_.Advance(1);
  RunOnce();
  EXPECT_EQ(launcher_.TakeKills().size(), 2u);
}

TEST_F(WorkerRunnerTest, ReadyOpensAdmissionAndTheLatestStatusTextIsKept) {
  config::CellConfig config = Config();
  config.ready = config::ReadyMode::kNotify;
  Start(config);
  EXPECT_EQ(state(), State::kStarting);
  EXPECT_EQ(data_path_.opened, 0);
  Notify("STATUS=warming up");
  RunOnce();
  EXPECT_EQ(runner_->status_text(), "warming up");
  EXPECT_EQ(state(), State::kStarting);
  Notify("READY=1\nSTATUS=serving");
  RunOnce();
  EXPECT_EQ(state(), State::kRunning);
  EXPECT_EQ(data_path_.opened, 1);
  EXPECT_EQ(runner_->status_text(), "serving");
}

TEST_F(WorkerRunnerTest, AWorkerNotReadyWithinStartTimeoutIsStoppedAsAFailedStart) {
  CapturedLog log(LogLevel::kInfo);
  config::CellConfig config = Config();
  config.ready = config::ReadyMode::kNotify;
  config.start_timeout = std::chrono::milliseconds(500);
  config.stop_timeout = std::chrono::milliseconds(300);
  Start(config);
  const pid_t pid = runner_->pid();
  time_.Advance(499);
  EXPECT_THAT(launcher_.TakeKills(), IsEmpty());
  time_.Advance(1);
  EXPECT_THAT(launcher_.TakeKills(), ElementsAre(Pair(-pid, SIGTERM), Pair(pid, SIGTERM)));
  EXPECT_EQ(log.Count("start timeout: no READY=1 within 500 ms of the start; stopping worker"), 1u)
      << log.Text();
  time_.Advance(300);
  EXPECT_THAT(launcher_.TakeKills(), ElementsAre(Pair(-pid, SIGKILL), Pair(pid, SIGKILL)));
  Reap(KilledBy(SIGKILL));
  EXPECT_EQ(state(), State::kBackoff) << "a failed start goes through the restart policy";
  EXPECT_EQ(runner_->lifecycle().last_exit(),
            "start timeout: no READY=1 within 500 ms of the start (signal 9)");
}

TEST_F(WorkerRunnerTest, AStallSaidByTheDataPathKillsTheWorkerAndThePolicyRestartsIt) {
  config::CellConfig config = Config();
  config.restart_delay = std::chrono::milliseconds(100);
  Start(config);
  const pid_t pid = runner_->pid();
  runner_->Stalled("no reply for 500 ms");
  EXPECT_THAT(launcher_.TakeKills(), ElementsAre(Pair(-pid, SIGKILL), Pair(pid, SIGKILL)));
  ASSERT_EQ(data_path_.failed.size(), 1u);
  EXPECT_EQ(data_path_.failed[0],
            std::make_pair(ipc::Reason::kStalled, std::string("stalled: no reply for 500 ms")));
  Reap(KilledBy(SIGKILL));
  EXPECT_EQ(runner_->lifecycle().last_exit(), "stalled: no reply for 500 ms (signal 9)");
  time_.Advance(BackoffLeft());
  EXPECT_EQ(launcher_.spawn_times.size(), 2u);
  EXPECT_EQ(state(), State::kRunning);
}

// ready = "http:/PATH" as the runner sees it: the probe's 2xx makes the worker ready, and with
// stall_timeout no 2xx for that long is a stall (HealthProbeTest has the probe's own timing).
TEST_F(WorkerRunnerTest, AnHttpWorkerIsReadyOnItsProbes2xxAndStalledWithoutOne) {
  config::CellConfig config = Config();
  config.ready = config::ReadyMode::kHttp;
  config.ready_http_path = "/healthz";
  config.stall_timeout = std::chrono::milliseconds(2000);
  Start(config);
  ASSERT_GE(launcher_.listen_fd, 0);
  const pid_t pid = runner_->pid();
  // The worker's side of fd 3: accept a probe, read its request, answer `answer`.
  auto serve = [&](std::string_view answer) {
    std::string head;
    UniqueFd conn = testing::AcceptProbe(
        launcher_.listen_fd, [this] { RunOnce(); }, &head);
    EXPECT_THAT(head, StartsWith("GET /healthz HTTP/1.1\r\n"));
    testing::AnswerProbe(conn, answer);
    RunOnce();  // the answer is in the socket: one poll reads it
  };
  time_.RunDue();
  serve("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(state(), State::kRunning);
  EXPECT_EQ(data_path_.opened, 1);
  // Liveness: every 500 ms; 503s for stall_timeout.
  for (int tick = 0; tick < 4; ++tick) {
    time_.Advance(500);
    if (tick < 3) serve("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n");
  }
  RunOnce();
  EXPECT_THAT(launcher_.TakeKills(), ElementsAre(Pair(-pid, SIGKILL), Pair(pid, SIGKILL)));
  ASSERT_EQ(data_path_.failed.size(), 1u);
  EXPECT_EQ(data_path_.failed[0].first, ipc::Reason::kStalled);
  EXPECT_THAT(data_path_.failed[0].second,
              StartsWith("stalled: health probe GET /healthz: no 2xx for 2000 ms ("));
  EXPECT_THAT(data_path_.failed[0].second, HasSubstr("last answer: 503)"));
}

// --- The worker swap: `restart` with restart_overlap (lifecycle/worker_swap.h). ---

// Fake pids for the serving and the next worker: the launcher only records what it would send.
constexpr pid_t kServing = 999001;
constexpr pid_t kNext = 999002;

class WorkerSwapTest : public WorkerRunnerTest {
 protected:
  config::CellConfig SwapConfig() const {
    config::CellConfig config = Config();
    config.restart_overlap = true;
    config.stop_timeout = std::chrono::milliseconds(5000);
    config.start_timeout = std::chrono::milliseconds(1000);
    return config;
  }
  // Started and serving (ready = "exec") as kServing; the next spawn is kNext.
  void StartServing(const config::CellConfig& config) {
    launcher_.pids = {kServing, kNext};
    Start(config);
    ASSERT_EQ(state(), State::kRunning);
    ASSERT_EQ(runner_->pid(), kServing);
  }
  // The next worker accepts its first connection (the runner's own, its readiness with
  // ready = "exec"), and the runner looks at the next poll.
  void NextAccepts() {
    ASSERT_GE(launcher_.listen_fd, 0);
    UniqueFd conn(::accept4(launcher_.listen_fd, nullptr, nullptr, SOCK_CLOEXEC));
    ASSERT_TRUE(conn.valid()) << std::strerror(errno);
    time_.Advance(5);
  }
  WorkerSwap::Phase phase() const { return runner_->swap().phase(); }
};

TEST_F(WorkerSwapTest, TheNextWorkerTakesOverAtItsFirstAcceptAndThePreviousStopsAfterItsDrain) {
  StartServing(SwapConfig());
  data_path_.retire_busy = true;
  EXPECT_EQ(runner_->Restart(3), "ok");
  ASSERT_EQ(launcher_.spawn_times.size(), 2u) << "the next worker starts at once, beside";
  EXPECT_EQ(runner_->pid(), kServing) << "the serving worker takes requests until the handover";
  EXPECT_EQ(runner_->swap_pid(), kNext);
  EXPECT_EQ(phase(), WorkerSwap::Phase::kStarting);
  EXPECT_TRUE(runner_->IsWorker(kServing));
  EXPECT_TRUE(runner_->IsWorker(kNext));
  time_.Advance(500);
  EXPECT_EQ(runner_->pid(), kServing) << "not ready before its first accept";
  EXPECT_THAT(launcher_.TakeKills(), IsEmpty());
  EXPECT_EQ(data_path_.retired, 0);

  NextAccepts();
  EXPECT_EQ(runner_->pid(), kNext);
  EXPECT_EQ(runner_->swap_pid(), kServing);
  EXPECT_EQ(data_path_.retired, 1);
  EXPECT_EQ(phase(), WorkerSwap::Phase::kDraining);
  EXPECT_EQ(state(), State::kRunning);
  EXPECT_EQ(data_path_.closed, 0) << "admission never closed";
  EXPECT_THAT(launcher_.TakeKills(), IsEmpty()) << "the previous one finishes what it has first";

  runner_->RetiredLinksDrained();
  EXPECT_EQ(phase(), WorkerSwap::Phase::kSignalled);
  EXPECT_THAT(launcher_.TakeKills(),
              ElementsAre(Pair(-kServing, SIGTERM), Pair(kServing, SIGTERM)));
  runner_->OnProcessExit(kServing, KilledBy(SIGTERM));
  EXPECT_EQ(phase(), WorkerSwap::Phase::kIdle);
  EXPECT_FALSE(runner_->IsWorker(kServing));
  EXPECT_TRUE(runner_->swap().failure().empty());
  EXPECT_EQ(runner_->lifecycle().restarts(), 1u);
  EXPECT_EQ(runner_->restarts_by_reason()[static_cast<size_t>(RestartReason::kOperator)], 1u);
  EXPECT_EQ(time_.armed_timers(), 0u) << "no swap timer left";
}

TEST_F(WorkerSwapTest, APreviousWorkerWithNothingInFlightIsSignalledAtTheHandover) {
  StartServing(SwapConfig());
  data_path_.retire_busy = false;
  runner_->Restart(0);
  NextAccepts();
  EXPECT_EQ(phase(), WorkerSwap::Phase::kSignalled);
  EXPECT_THAT(launcher_.TakeKills(),
              ElementsAre(Pair(-kServing, SIGTERM), Pair(kServing, SIGTERM)));
}

TEST_F(WorkerSwapTest, ThePreviousWorkerIsKilledStopTimeoutAfterTheHandover) {
  StartServing(SwapConfig());
  data_path_.retire_busy = true;
  runner_->Restart(1);
  time_.Advance(100);
  NextAccepts();
  ASSERT_EQ(phase(), WorkerSwap::Phase::kDraining);
  time_.Advance(4999);
  EXPECT_THAT(launcher_.TakeKills(), IsEmpty());
  time_.Advance(1);
  EXPECT_EQ(phase(), WorkerSwap::Phase::kKilled);
  EXPECT_THAT(launcher_.TakeKills(),
              ElementsAre(Pair(-kServing, SIGKILL), Pair(kServing, SIGKILL)));
  EXPECT_THAT(data_path_.previous_exited, IsEmpty());
  runner_->OnProcessExit(kServing, KilledBy(SIGKILL));
  EXPECT_EQ(phase(), WorkerSwap::Phase::kIdle);
  EXPECT_EQ(runner_->pid(), kNext);
  // What it still carried fails as worker_died with its exit, as a crash's requests do.
  EXPECT_THAT(data_path_.previous_exited, ElementsAre("signal 9"));
  EXPECT_THAT(data_path_.failed, IsEmpty()) << "the serving worker's requests are untouched";
}

TEST_F(WorkerSwapTest, ANextWorkerThatExitsBeforeItIsReadyLeavesThePreviousServing) {
  StartServing(SwapConfig());
  runner_->Restart(0);
  runner_->OnProcessExit(kNext, ExitedWith(1));
  EXPECT_EQ(phase(), WorkerSwap::Phase::kIdle);
  EXPECT_EQ(runner_->pid(), kServing);
  EXPECT_EQ(state(), State::kRunning);
  EXPECT_THAT(runner_->swap().failure(),
              HasSubstr("the next worker exited before it was ready (exit 1)"));
  for (const auto& [pid, signal] : launcher_.TakeKills()) EXPECT_NE(pid, kServing);
  EXPECT_EQ(data_path_.retired, 0);
  EXPECT_EQ(time_.armed_timers(), 0u);
  // A later restart tries again.
  launcher_.pids = {kNext + 1};
  EXPECT_EQ(runner_->Restart(0), "ok");
  EXPECT_EQ(runner_->swap_pid(), kNext + 1);
  EXPECT_TRUE(runner_->swap().failure().empty());
}

TEST_F(WorkerSwapTest, ANextWorkerNotReadyWithinStartTimeoutIsKilledAndThePreviousServesOn) {
  StartServing(SwapConfig());
  runner_->Restart(0);
  time_.Advance(999);
  EXPECT_THAT(launcher_.TakeKills(), IsEmpty());
  time_.Advance(1);
  EXPECT_EQ(phase(), WorkerSwap::Phase::kAbandoning);
  EXPECT_THAT(launcher_.TakeKills(), ElementsAre(Pair(-kNext, SIGKILL), Pair(kNext, SIGKILL)));
  EXPECT_THAT(runner_->swap().failure(), HasSubstr("not ready within start_timeout (1000 ms)"));
  EXPECT_EQ(runner_->Restart(0), "restart in progress") << "until the next one is reaped";
  runner_->OnProcessExit(kNext, KilledBy(SIGKILL));
  EXPECT_EQ(phase(), WorkerSwap::Phase::kIdle);
  EXPECT_EQ(runner_->pid(), kServing);
  EXPECT_EQ(state(), State::kRunning);
  EXPECT_THAT(runner_->swap().failure(), HasSubstr("start_timeout"));
}

TEST_F(WorkerSwapTest, ACrashOfTheServingWorkerBeforeTheHandoverEndsTheSwap) {
  StartServing(SwapConfig());
  runner_->Restart(0);
  Reap(ExitedWith(2));  // the serving worker
  EXPECT_EQ(state(), State::kBackoff);
  EXPECT_EQ(phase(), WorkerSwap::Phase::kAbandoning);
  EXPECT_THAT(launcher_.TakeKills(), ::testing::Contains(Pair(kNext, SIGKILL)));
  runner_->OnProcessExit(kNext, KilledBy(SIGKILL));
  EXPECT_EQ(phase(), WorkerSwap::Phase::kIdle);
}

TEST_F(WorkerSwapTest, ARestartWithoutOverlapDuringASwapCancelsItWithoutAFailure) {
  // A reload whose change needs a new worker, while an overlapping restart waits for its next
  // worker (Cell::RestartForReload): the next worker has the config of before and goes.
  StartServing(SwapConfig());
  launcher_.pids = {kNext, kNext + 1};
  EXPECT_EQ(runner_->Restart(0), "ok");
  ASSERT_EQ(phase(), WorkerSwap::Phase::kStarting);
  EXPECT_EQ(runner_->Restart(0, /*overlap=*/false), "ok");
  EXPECT_THAT(launcher_.TakeKills(), ::testing::Contains(Pair(kNext, SIGKILL)));
  EXPECT_TRUE(runner_->swap().failure().empty()) << runner_->swap().failure();
  runner_->OnProcessExit(kNext, KilledBy(SIGKILL));
  EXPECT_EQ(phase(), WorkerSwap::Phase::kIdle);
  EXPECT_TRUE(runner_->swap().failure().empty());
}

TEST_F(WorkerSwapTest, AWorkerTheLifecycleStartsClearsAnEarlierSwapsFailure) {
  StartServing(SwapConfig());
  launcher_.pids = {kNext, kNext + 1};
  runner_->Restart(0);
  time_.Advance(1000);  // start_timeout: the swap fails
  runner_->OnProcessExit(kNext, KilledBy(SIGKILL));
  ASSERT_THAT(runner_->swap().failure(), HasSubstr("start_timeout"));
  // The restart again, without overlap: stop, reap, start; the cell was restarted after all.
  EXPECT_EQ(runner_->Restart(0, /*overlap=*/false), "ok");
  EXPECT_THAT(runner_->swap().failure(), HasSubstr("start_timeout")) << "still the old worker";
  runner_->OnProcessExit(kServing, KilledBy(SIGTERM));
  ASSERT_EQ(state(), State::kRunning);
  EXPECT_EQ(runner_->pid(), kNext + 1);
  EXPECT_TRUE(runner_->swap().failure().empty()) << runner_->swap().failure();
}

TEST_F(WorkerSwapTest, WithRestartOverlapFalseARestartStopsTheWorkerFirst) {
  config::CellConfig config = SwapConfig();
  config.restart_overlap = false;
  StartServing(config);
  runner_->Restart(0);
  EXPECT_EQ(launcher_.spawn_times.size(), 1u);
  EXPECT_EQ(state(), State::kStopping);
  EXPECT_EQ(phase(), WorkerSwap::Phase::kIdle);
}

// --- An adaptive cell's cgroup signals (PressureWatch), on a cgroup tree of plain files. ---

using admission::Signal;
using admission::SignalBit;
using bulkhead::testing::FakeCgroupTree;

class WorkerRunnerCgroupTest : public WorkerRunnerTest {
 protected:
  void SetUp() override {
    WorkerRunnerTest::SetUp();
    ASSERT_NE(tree_.tree(), nullptr);
    cell_dir_ = tree_.MakeCell("pay");
  }
  void TearDown() override {
    if (runner_ && runner_->pid() != 0) StopWorker();
    WorkerRunnerTest::TearDown();
  }
  // A cell of 1 GiB memory_max and 20% of a CPU, `concurrency`.
  config::CellConfig CgroupConfig(config::ConcurrencyMode concurrency) const {
    config::CellConfig config = Config();
    config.concurrency = concurrency;
    config.max_concurrent = 8;
    config.memory_max = uint64_t{1} << 30;
    config.cpu_max_quota_us = 20'000;
    return config;
  }
  cell::CgroupLimits LimitsOf(const config::CellConfig& config) const {
    cell::CgroupLimits limits;
    limits.memory_max = config.memory_max;
    limits.memory_high = config.memory_high;
    limits.cpu_quota_us = config.cpu_max_quota_us;
    return limits;
  }
  // A runner for `config` with its cgroup made, its sockets bound, started.
  void StartInCgroup(const config::CellConfig& config) {
    CellCompartment compartment;
    compartment.tree = tree_.tree();
    compartment.limits = LimitsOf(config);
    runner_.emplace(&loop_, &time_, config, std::move(compartment), ipc::kDefaultMaxPayload,
                    &*after_poll_, &data_path_, &launcher_);
    Status made = runner_->CreateCgroup();
    ASSERT_TRUE(made.ok()) << made.message();
    if (before_start_) before_start_();
    Status bound = runner_->BindSockets();
    ASSERT_TRUE(bound.ok()) << bound.message();
    EXPECT_EQ(runner_->Start(), "ok");
    EXPECT_NE(runner_->pid(), 0);
  }
  // Stops the worker: it is reaped, its (empty) cgroup looked at, the lifecycle told.
  void StopWorker() {
    runner_->Stop(0, nullptr);
    Reap(KilledBy(SIGKILL));
    time_.Advance(TeardownWatcher::kPollMs);
    EXPECT_EQ(state(), State::kStopped);
  }
  std::string File(const char* name) const { return FakeCgroupTree::Read(cell_dir_ + "/" + name); }

  FakeCgroupTree tree_;
  std::string cell_dir_;
  // Runs between the cgroup's creation and the first start.
  std::function<void()> before_start_;
};

// The supervisor's poll (supervisor/cgroup_poll.h) reads an adaptive cell's cgroup once per tick:
// the usage goes to the data path, the cpu.pressure total it carries comes back for the judge.
TEST_F(WorkerRunnerCgroupTest, AnAdaptiveCellsPollHandsItsUsageToTheDataPathWhileItsWorkerRuns) {
  FakeCgroupTree::Write(cell_dir_ + "/memory.current", "943718400\n");
  FakeCgroupTree::Write(cell_dir_ + "/memory.max", "1073741824\n");
  FakeCgroupTree::Write(cell_dir_ + "/cpu.stat",
                        "usage_usec 9\nuser_usec 9\nsystem_usec 0\nnr_periods 20\n"
                        "nr_throttled 19\nthrottled_usec 1\n");
  FakeCgroupTree::Write(cell_dir_ + "/cpu.pressure",
                        "some avg10=12.50 avg60=3.00 avg300=1.00 total=1234567\n"
                        "full avg10=0.00 avg60=0.00 avg300=0.00 total=89\n");
  StartInCgroup(CgroupConfig(config::ConcurrencyMode::kAdaptive));
  time_.Advance(1'000);
  EXPECT_TRUE(data_path_.usages.empty()) << "the runner polls on a timer of its own";
  EXPECT_EQ(runner_->PollCgroup(), std::optional<uint64_t>(1234567));
  ASSERT_EQ(data_path_.usages.size(), 1u);
  EXPECT_EQ(data_path_.usages[0].memory_current, 943718400u);
  EXPECT_EQ(data_path_.usages[0].cpu.nr_throttled, 19u);
  EXPECT_EQ(data_path_.usages[0].cpu_stall_us, std::optional<uint64_t>(1234567));
  // The quota is below one CPU: no cpu trigger (RegistersCpuTrigger); the memory trigger was
  // written, but a plain file cannot be polled, so its signal is off; the polls feed the rest.
  EXPECT_EQ(File("memory.pressure"), std::string("some 100000 1000000\0", 20));
  EXPECT_EQ(data_path_.signals,
            SignalBit(Signal::kCpuThrottling) | SignalBit(Signal::kMemoryUsage));
  // A cpu.pressure that cannot be read leaves the stall unjudged, not the controller unfed.
  FakeCgroupTree::Write(cell_dir_ + "/cpu.pressure", "garbage\n");
  EXPECT_EQ(runner_->PollCgroup(), std::nullopt);
  EXPECT_EQ(data_path_.usages.size(), 2u);
  // A usage that cannot be read feeds nothing, and is logged once per streak.
  FakeCgroupTree::Write(cell_dir_ + "/cpu.stat", "garbage\n");
  CapturedLog log;
  EXPECT_EQ(runner_->PollCgroup(), std::nullopt);
  EXPECT_EQ(runner_->PollCgroup(), std::nullopt);
  EXPECT_EQ(data_path_.usages.size(), 2u);
  EXPECT_EQ(log.Count("adaptive: "), 1u);
  StopWorker();
  EXPECT_EQ(runner_->PollCgroup(), std::nullopt) << "no worker any more";
  EXPECT_EQ(data_path_.usages.size(), 2u) << "polled with no worker";
}

// Whose CPU: a fixed cell's poll reads its cpu.pressure "some" total alone, while a worker runs.
TEST_F(WorkerRunnerCgroupTest, AFixedCellsPollReadsOnlyItsCpuStallTotalWhileAWorkerRuns) {
  FakeCgroupTree::Write(cell_dir_ + "/cpu.pressure",
                        "some avg10=12.50 avg60=3.00 avg300=1.00 total=1234567\n"
                        "full avg10=0.00 avg60=0.00 avg300=0.00 total=89\n");
  StartInCgroup(CgroupConfig(config::ConcurrencyMode::kFixed));
  EXPECT_TRUE(runner_->has_cgroup());
  EXPECT_EQ(runner_->PollCgroup(), std::optional<uint64_t>(1234567));
  EXPECT_TRUE(data_path_.usages.empty()) << "a fixed cell's usage went to the data path";
  FakeCgroupTree::Write(cell_dir_ + "/cpu.pressure", "garbage\n");
  EXPECT_EQ(runner_->PollCgroup(), std::nullopt) << "an unreadable file";
  StopWorker();
  EXPECT_EQ(runner_->PollCgroup(), std::nullopt) << "no worker any more";
}

// Status says why each kernel signal is off (docs/control.md, "signals_off").
TEST_F(WorkerRunnerCgroupTest, StatusSaysWhyEachKernelSignalOfAnAdaptiveCellIsOff) {
  config::CellConfig config = CgroupConfig(config::ConcurrencyMode::kAdaptive);
  config.memory_max.reset();
  StartInCgroup(config);
  auto off = [&](Signal signal) {
    return runner_->KernelSignalsOff()[static_cast<size_t>(signal)];
  };
  EXPECT_EQ(off(Signal::kServiceTime), "");
  EXPECT_THAT(off(Signal::kCpuPressure), HasSubstr("cpu_max is below one CPU"));
  // The kernel's trigger on a plain file: written, but epoll refuses to watch it.
  EXPECT_THAT(off(Signal::kMemoryPressure), StartsWith("cannot watch "));
  EXPECT_EQ(off(Signal::kCpuThrottling), "") << "live";
  EXPECT_EQ(off(Signal::kMemoryUsage), "no memory_max");

  config.cpu_max_quota_us.reset();
  ASSERT_TRUE(runner_->Reconfigure(config, LimitsOf(config)).ok());
  EXPECT_EQ(off(Signal::kCpuThrottling), "no cpu_max");
  EXPECT_THAT(off(Signal::kCpuPressure), StartsWith("cannot watch ")) << "no quota: registered";

  ASSERT_TRUE(
      runner_->Reconfigure(CgroupConfig(config::ConcurrencyMode::kFixed), std::nullopt).ok());
  for (const std::string& why : runner_->KernelSignalsOff()) EXPECT_EQ(why, "");
}

// Without cgroup v2 (this host) every kernel signal is off for the supervisor's reason.
TEST_F(WorkerRunnerTest, WithoutACgroupEveryKernelSignalIsOffForTheSupervisorsReason) {
  config::CellConfig config = Config();
  config.concurrency = config::ConcurrencyMode::kAdaptive;
  CellCompartment compartment;
  compartment.not_enforced_reason = "no cgroup v2 at /sys/fs/cgroup";
  runner_.emplace(&loop_, &time_, config, std::move(compartment), ipc::kDefaultMaxPayload,
                  &*after_poll_, &data_path_, &launcher_);
  const std::array<std::string, admission::kSignalCount> off = runner_->KernelSignalsOff();
  EXPECT_EQ(off[static_cast<size_t>(Signal::kServiceTime)], "");
  for (Signal signal : {Signal::kCpuPressure, Signal::kMemoryPressure, Signal::kCpuThrottling,
                        Signal::kMemoryUsage}) {
    EXPECT_EQ(off[static_cast<size_t>(signal)],
              "no cgroup for the cell: limits not enforced (no cgroup v2 at /sys/fs/cgroup)");
  }
}

TEST_F(WorkerRunnerCgroupTest, AnAdaptiveCellWithoutMemoryHighGetsItAt90PercentOfMemoryMax) {
  StartInCgroup(CgroupConfig(config::ConcurrencyMode::kAdaptive));
  EXPECT_EQ(File("memory.max"), "1073741824");
  EXPECT_EQ(File("memory.high"), std::to_string(admission::AdaptiveMemoryHigh(1073741824)));
  EXPECT_EQ(runner_->ReadCompartment().cgroup_limits.memory_high,
            std::optional<uint64_t>(admission::AdaptiveMemoryHigh(1073741824)));
}

TEST_F(WorkerRunnerCgroupTest, AnOperatorsMemoryHighWinsInTheAdaptiveMode) {
  config::CellConfig config = CgroupConfig(config::ConcurrencyMode::kAdaptive);
  config.memory_high = 500'000'000;
  StartInCgroup(config);
  EXPECT_EQ(File("memory.high"), "500000000");
}

TEST_F(WorkerRunnerCgroupTest, AFixedCellHasNoTriggerNoPollAndItsOwnMemoryHigh) {
  StartInCgroup(CgroupConfig(config::ConcurrencyMode::kFixed));
  time_.Advance(1'000);
  EXPECT_TRUE(data_path_.usages.empty());
  EXPECT_EQ(data_path_.signals, 0);
  EXPECT_EQ(File("memory.pressure"), "");
  EXPECT_EQ(File("memory.high"), "max");
}

// Reload switches the mode live: memory.high, the triggers and the poll follow it, with the
// worker running on.
TEST_F(WorkerRunnerCgroupTest, AReloadTogglesTheTriggersThePollAndMemoryHigh) {
  const config::CellConfig fixed = CgroupConfig(config::ConcurrencyMode::kFixed);
  StartInCgroup(fixed);
  const pid_t pid = runner_->pid();
  const config::CellConfig adaptive = CgroupConfig(config::ConcurrencyMode::kAdaptive);
  ASSERT_TRUE(runner_->Reconfigure(adaptive, std::nullopt).ok());
  EXPECT_EQ(File("memory.high"), std::to_string(admission::AdaptiveMemoryHigh(1073741824)));
  EXPECT_EQ(File("memory.pressure"), std::string("some 100000 1000000\0", 20));
  EXPECT_EQ(data_path_.signals,
            SignalBit(Signal::kCpuThrottling) | SignalBit(Signal::kMemoryUsage));
  runner_->PollCgroup();
  EXPECT_EQ(data_path_.usages.size(), 1u);

  ASSERT_TRUE(runner_->Reconfigure(fixed, std::nullopt).ok());
  EXPECT_EQ(File("memory.high"), "max");
  EXPECT_EQ(data_path_.signals, 0);
  runner_->PollCgroup();
  EXPECT_EQ(data_path_.usages.size(), 1u) << "a fixed cell's usage went to the data path";
  EXPECT_EQ(runner_->pid(), pid) << "the switch restarted the worker";

  // Back to adaptive: the trigger is registered anew (the file emptied shows the new write).
  FakeCgroupTree::Write(cell_dir_ + "/memory.pressure", "");
  ASSERT_TRUE(runner_->Reconfigure(adaptive, std::nullopt).ok());
  EXPECT_EQ(File("memory.pressure"), std::string("some 100000 1000000\0", 20));
  runner_->PollCgroup();
  EXPECT_EQ(data_path_.usages.size(), 2u);
}

// --- Worker generations in the cell's cgroup (docs/config.md, "Where the processes live"). ---

class WorkerGenerationTest : public WorkerRunnerCgroupTest {
 protected:
  // A fixed cell with overlap, serving as kServing in gen-1; gen-2 is ready for the next spawn,
  // both as the kernel makes them (with memory.oom.group).
  void StartServing(bool overlap) {
    before_start_ = [this] {
      gen1_ = tree_.MakeGeneration("pay", 1);
      gen2_ = tree_.MakeGeneration("pay", 2);
    };
    config::CellConfig config = CgroupConfig(config::ConcurrencyMode::kFixed);
    config.restart_overlap = overlap;
    config.stop_timeout = std::chrono::milliseconds(5000);
    launcher_.pids = {kServing, kNext};
    StartInCgroup(config);
  }
  // The next worker accepts its first connection (its readiness with ready = "exec").
  void NextAccepts() {
    UniqueFd conn(::accept4(launcher_.listen_fd, nullptr, nullptr, SOCK_CLOEXEC));
    ASSERT_TRUE(conn.valid()) << std::strerror(errno);
    time_.Advance(5);
  }
  static bool Exists(const std::string& path) { return std::filesystem::exists(path); }

  std::string gen1_;
  std::string gen2_;
};

TEST_F(WorkerGenerationTest, TheWorkerIsBornInALeafOfTheCellWhichKeepsTheLimits) {
  StartServing(/*overlap=*/true);
  EXPECT_THAT(launcher_.cgroup_dirs, ElementsAre(gen1_));
  EXPECT_EQ(File("cgroup.subtree_control"), "+memory");
  EXPECT_EQ(File("memory.max"), "1073741824");
  EXPECT_EQ(File("cpu.max"), "20000 100000");
  // An OOM kill takes one generation whole: the group is the leaf's, not the cell's.
  EXPECT_EQ(FakeCgroupTree::Read(gen1_ + "/memory.oom.group"), "1");
  EXPECT_EQ(File("memory.oom.group"), "0");
  EXPECT_EQ(runner_->ReadCompartment().cgroup_path, cell_dir_) << "stats stay the cell's";
}

TEST_F(WorkerGenerationTest, ARestartOverlapsInALeafOfItsOwnAndThePreviousLeafGoesAfterIt) {
  StartServing(/*overlap=*/true);
  EXPECT_EQ(runner_->Restart(0), "ok");
  ASSERT_EQ(runner_->swap_pid(), kNext) << "the next worker starts beside the serving one";
  EXPECT_THAT(launcher_.cgroup_dirs, ElementsAre(gen1_, gen2_));
  EXPECT_EQ(FakeCgroupTree::Read(gen2_ + "/memory.oom.group"), "1");
  NextAccepts();
  EXPECT_EQ(runner_->pid(), kNext);
  EXPECT_EQ(runner_->swap().phase(), WorkerSwap::Phase::kSignalled);
  runner_->OnProcessExit(kServing, KilledBy(SIGTERM));
  EXPECT_EQ(runner_->swap().phase(), WorkerSwap::Phase::kIdle);
  EXPECT_EQ(runner_->Restart(0), "restart in progress") << "until its leaf is removed";
  FakeCgroupTree::DropFiles(gen1_);
  time_.Advance(TeardownWatcher::kPollMs);
  EXPECT_FALSE(Exists(gen1_));
  EXPECT_TRUE(Exists(gen2_));
  EXPECT_EQ(File("memory.max"), "1073741824");
  // Reload rewrites the group of the generation that serves now.
  FakeCgroupTree::Write(gen2_ + "/memory.oom.group", "");
  ASSERT_TRUE(runner_->Reconfigure(runner_->config(), LimitsOf(runner_->config())).ok());
  EXPECT_EQ(FakeCgroupTree::Read(gen2_ + "/memory.oom.group"), "1");
}

TEST_F(WorkerGenerationTest, ANextWorkerThatExitsBeforeItIsReadyGoesWithItsLeaf) {
  StartServing(/*overlap=*/true);
  runner_->Restart(0);
  ASSERT_EQ(runner_->swap_pid(), kNext);
  runner_->OnProcessExit(kNext, ExitedWith(1));
  EXPECT_THAT(runner_->swap().failure(),
              HasSubstr("the next worker exited before it was ready (exit 1)"));
  FakeCgroupTree::DropFiles(gen2_);
  time_.Advance(TeardownWatcher::kPollMs);
  EXPECT_FALSE(Exists(gen2_));
  EXPECT_TRUE(Exists(gen1_));
  EXPECT_EQ(runner_->pid(), kServing);
  EXPECT_EQ(state(), State::kRunning);
}

// A cell at its pids.max (a fork bomb in the worker) has no room for a next worker beside the
// previous one: `restart` still restarts it, without overlap, tearing the bomb down first.
TEST_F(WorkerGenerationTest, ANextWorkerThatCannotFitRestartsWithoutOverlap) {
  StartServing(/*overlap=*/true);
  launcher_.fail_with = "clone3 into cgroup fd 9";
  launcher_.fail_errno = EAGAIN;
  EXPECT_EQ(runner_->Restart(0), "ok");
  EXPECT_EQ(runner_->swap_pid(), 0) << "no swap started";
  EXPECT_EQ(runner_->swap().phase(), WorkerSwap::Phase::kIdle);
  EXPECT_EQ(state(), State::kStopping) << "the previous generation goes first";
  launcher_.fail_with.clear();
  Reap(KilledBy(SIGTERM));
  FakeCgroupTree::DropFiles(gen1_);
  time_.Advance(TeardownWatcher::kPollMs);
  EXPECT_FALSE(Exists(gen1_));
  EXPECT_EQ(runner_->pid(), kNext);
  EXPECT_EQ(state(), State::kRunning);
  EXPECT_EQ(runner_->swap().failure(), "");
}

TEST_F(WorkerGenerationTest, WithoutOverlapTheNextWorkerStartsInANewLeafOnceTheOldOneIsRemoved) {
  StartServing(/*overlap=*/false);
  runner_->Restart(0);
  EXPECT_EQ(state(), State::kStopping);
  Reap(KilledBy(SIGTERM));
  FakeCgroupTree::DropFiles(gen1_);
  time_.Advance(TeardownWatcher::kPollMs);
  EXPECT_FALSE(Exists(gen1_));
  EXPECT_EQ(runner_->pid(), kNext);
  EXPECT_THAT(launcher_.cgroup_dirs, ElementsAre(gen1_, gen2_));
}

}  // namespace
}  // namespace bulkhead::lifecycle
