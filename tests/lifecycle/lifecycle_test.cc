// SPDX-License-Identifier: MIT
// Lifecycle: every (state, event) entry of the table, then the stories of issue 4 told as event
// sequences on a FakeClock: backoff growth, cap and reset, start limit and manual recovery, restart
// modes, exec failure, stop during backoff, stop escalation, a second restart while stopping,
// stalls and the watchdog. Every transition is also checked against the invariants lifecycle.h
// promises.
#include "lifecycle/lifecycle.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace bulkhead::lifecycle {
namespace {

using Action = Lifecycle::Action;
using ActionType = Lifecycle::Action::Type;
using Event = Lifecycle::Event;
using EventType = Lifecycle::Event::Type;
using Reply = Lifecycle::Reply;
using State = Lifecycle::State;
using Transition = Lifecycle::Transition;
using Actions = std::vector<std::string>;

constexpr uint64_t kStartMs = 1'000'000;

// waitpid(2) statuses, as the kernel encodes them.
int ExitStatus(int code) { return code << 8; }
int SignalStatus(int signal) { return signal; }

// "Spawn", "ArmBackoff(100)", "SignalStop(15)", "FailInFlight(worker_died, exit 3)".
std::string Describe(const Action& action) {
  std::string out = Lifecycle::ActionName(action.type);
  switch (action.type) {
    case ActionType::kArmBackoff:
    case ActionType::kArmStopTimer:
    case ActionType::kArmWatchdog:
    case ActionType::kArmStartTimer:
      out += "(" + std::to_string(action.ms) + ")";
      break;
    case ActionType::kSignalStop:
      out += "(" + std::to_string(action.signal) + ")";
      break;
    case ActionType::kRejectQueued:
      out += std::string("(") + ipc::ReasonName(action.reason) + ")";
      break;
    case ActionType::kFailInFlight:
      out += std::string("(") + ipc::ReasonName(action.reason) + ", " + action.message + ")";
      break;
    default:
      break;
  }
  return out;
}

Actions Describe(const Transition& t) {
  Actions out;
  for (const Action& action : t.actions) out.push_back(Describe(action));
  return out;
}

bool Has(const Transition& t, ActionType type) {
  for (const Action& action : t.actions) {
    if (action.type == type) return true;
  }
  return false;
}

// The promises of lifecycle.h, checked on every transition a test makes.
void CheckInvariants(const Transition& t) {
  bool armed = false;
  for (size_t i = 0; i < t.actions.size(); ++i) {
    const ActionType type = t.actions[i].type;
    if (type == ActionType::kSpawn) {
      EXPECT_EQ(i + 1, t.actions.size()) << "Spawn must be the last action";
      EXPECT_EQ(t.to, State::kStarting);
    }
    if (type == ActionType::kArmBackoff || type == ActionType::kArmStopTimer ||
        type == ActionType::kArmWatchdog || type == ActionType::kArmStartTimer) {
      armed = true;
    }
    if (type == ActionType::kArmStartTimer) {
      EXPECT_EQ(t.to, State::kStarting);
    }
    if (type == ActionType::kCancelTimers) {
      EXPECT_FALSE(armed) << "CancelTimers after an Arm";
    }
    if (type == ActionType::kOpenAdmission) {
      EXPECT_EQ(t.to, State::kRunning);
    }
    if (type == ActionType::kArmBackoff) {
      EXPECT_EQ(t.to, State::kBackoff);
    }
  }
  if (t.to == State::kStopped && t.from != State::kStopped) {
    EXPECT_TRUE(Has(t, ActionType::kRejectQueued));
    EXPECT_TRUE(Has(t, ActionType::kNotifyStopped));
  }
  if (t.to == State::kFailed && t.from != State::kFailed) {
    EXPECT_TRUE(Has(t, ActionType::kRejectQueued));
  }
  if (!t.ignored.empty()) {
    EXPECT_EQ(t.from, t.to);
    EXPECT_TRUE(t.actions.empty() || Describe(t) == Actions{"NotifyStopped"}) << t.ignored;
    EXPECT_TRUE(t.log.empty());
  }
  if (t.reply != Reply::kAccepted) {
    EXPECT_FALSE(t.ignored.empty());
  }
}

class LifecycleTest : public ::testing::Test {
 protected:
  LifecycleTest() {
    options_.restart.delay_ms = 100;
    options_.restart.max_delay_ms = 1000;
    options_.restart.reset_after_ms = 10'000;
    options_.restart.start_limit_burst = 5;
    options_.restart.start_limit_interval_ms = 60'000;
    options_.stop_timeout_ms = 5000;
    options_.stop_signal = SIGTERM;
    options_.queue_timeout_ms = 1000;
    options_.start_timeout_ms = 4000;
  }

  Lifecycle& Make() {
    lifecycle_ = std::make_unique<Lifecycle>(options_, &clock_, cell::RestartPolicy::NoJitter());
    return *lifecycle_;
  }
  Lifecycle& lc() { return *lifecycle_; }

  Transition Do(const Event& event) {
    Transition t = lifecycle_->Handle(event);
    CheckInvariants(t);
    EXPECT_EQ(t.to, lifecycle_->state());
    return t;
  }

  // Start, spawn succeeds: running (exec) or starting (notify).
  void Boot() {
    Make();
    ASSERT_EQ(Describe(Do(Event::StartRequested())), Actions{"Spawn"});
    Do(Event::Spawned());
  }
  void BootRunning() {
    Boot();
    if (options_.ready == config::ReadyMode::kNotify) Do(Event::Ready());
    ASSERT_EQ(lc().state(), State::kRunning);
  }
  // running, then the worker crashes: backoff.
  void ToBackoff() {
    BootRunning();
    Do(Event::Exited(ExitStatus(1), "exit 1"));
    ASSERT_EQ(lc().state(), State::kBackoff);
  }
  // From backoff: the timer fires and the new worker starts.
  void RestartFromBackoff() {
    ASSERT_EQ(lc().state(), State::kBackoff);
    clock_.SetMs(lc().next_start_at_ms());
    ASSERT_EQ(Describe(Do(Event::BackoffElapsed())), Actions{"Spawn"});
    Do(Event::Spawned());
    ASSERT_EQ(lc().state(), State::kRunning);
  }

  FakeClock clock_{kStartMs};
  Lifecycle::Options options_;
  std::unique_ptr<Lifecycle> lifecycle_;
};

// ---------------------------------------------------------------------------------------------
// The table, entry by entry.

enum class From {
  kStopped,
  kStartingSpawnPending,  // StartRequested answered with Spawn, no answer yet
  kStarting,              // ready = "notify", spawned, no READY=1 yet
  kRunning,
  kStopping,  // stop requested with 1 request in flight: draining
  kBackoff,
  kFailed,
};

struct Entry {
  From setup;
  Event event;
  State to;
  Actions actions;
  Reply reply = Reply::kAccepted;
  std::string ignored = "";
};

class LifecycleTableTest : public LifecycleTest {
 protected:
  void Arrange(From setup) {
    options_.ready = config::ReadyMode::kNotify;
    options_.watchdog_ms = 3000;
    switch (setup) {
      case From::kStopped:
        Make();
        break;
      case From::kStartingSpawnPending:
        Make();
        Do(Event::StartRequested());
        break;
      case From::kStarting:
        Boot();
        break;
      case From::kRunning:
        BootRunning();
        break;
      case From::kStopping:
        BootRunning();
        Do(Event::StopRequested(1));
        break;
      case From::kBackoff:
        ToBackoff();
        break;
      case From::kFailed:
        options_.restart.start_limit_burst = 1;
        options_.restart.start_limit_action = cell::StartLimitAction::kFail;
        BootRunning();
        Do(Event::Exited(ExitStatus(1), "exit 1"));
        break;
    }
  }
};

const Event kStart = Event::StartRequested();
const Event kRestart = Event::RestartRequested(1);
const Event kStop = Event::StopRequested(1);
const Event kSpawned = Event::Spawned();
const Event kSpawnFailed = Event::SpawnFailed("exec /bin/x: No such file or directory");
const Event kReady = Event::Ready();
const Event kPing = Event::WatchdogPing();
const Event kDrained = Event::Drained();
const Event kExited = Event::Exited(3 << 8, "exit 3");
const Event kStopTimeout = Event::StopTimeout();
const Event kBackoffElapsed = Event::BackoffElapsed();
const Event kStalled = Event::Stalled("no reply for 2000 ms");
const Event kWatchdogMissed = Event::WatchdogMissed();
const Event kStartTimeout = Event::StartTimeout();

const Actions kExitToBackoff = {"CloseAdmission", "CancelTimers", "KillAll",
                                "FailInFlight(worker_died, exit 3)", "ArmBackoff(100)"};
const Actions kKillStalled = {"CancelTimers", "CloseAdmission", "KillAll",
                              "FailInFlight(stalled, stalled: no reply for 2000 ms)"};
const Actions kKillWatchdog = {
    "CancelTimers", "CloseAdmission", "KillAll",
    "FailInFlight(stalled, watchdog timeout: no WATCHDOG=1 within 3000 ms)"};

// clang-format off
const std::vector<Entry> kTable = {
    // stopped
    {From::kStopped, kStart, State::kStarting, {"Spawn"}},
    {From::kStopped, kRestart, State::kStarting, {"Spawn"}},
    {From::kStopped, kStop, State::kStopped, {"NotifyStopped"}, Reply::kAlreadyStopped, "already stopped"},
    {From::kStopped, kSpawned, State::kStopped, {}, Reply::kAccepted, "no spawn pending"},
    {From::kStopped, kSpawnFailed, State::kStopped, {}, Reply::kAccepted, "no spawn pending"},
    {From::kStopped, kReady, State::kStopped, {}, Reply::kAccepted, "no worker"},
    {From::kStopped, kPing, State::kStopped, {}, Reply::kAccepted, "no worker"},
    {From::kStopped, kDrained, State::kStopped, {}, Reply::kAccepted, "not draining"},
    {From::kStopped, kExited, State::kStopped, {}, Reply::kAccepted, "no worker"},
    {From::kStopped, kStopTimeout, State::kStopped, {}, Reply::kAccepted, "stale timer"},
    {From::kStopped, kBackoffElapsed, State::kStopped, {}, Reply::kAccepted, "stale timer"},
    {From::kStopped, kStalled, State::kStopped, {}, Reply::kAccepted, "no worker"},
    {From::kStopped, kWatchdogMissed, State::kStopped, {}, Reply::kAccepted, "no worker"},
    {From::kStopped, kStartTimeout, State::kStopped, {}, Reply::kAccepted, "stale timer"},
    // starting, spawn pending: only the answer to Spawn may come
    {From::kStartingSpawnPending, kSpawned, State::kStarting, {"ArmWatchdog(3000)", "ArmStartTimer(4000)"}},
    {From::kStartingSpawnPending, kSpawnFailed, State::kBackoff, {"ArmBackoff(100)"}},
    // starting: spawned, waiting for READY=1
    {From::kStarting, kStart, State::kStarting, {}, Reply::kAlreadyStarted, "already started"},
    {From::kStarting, kRestart, State::kStopping, {"CancelTimers", "CloseAdmission", "SignalStop(15)", "ArmStopTimer(5000)"}},
    {From::kStarting, kStop, State::kStopping, {"CancelTimers", "CloseAdmission", "RejectQueued(unavailable)", "SignalStop(15)", "ArmStopTimer(5000)"}},
    {From::kStarting, kSpawned, State::kStarting, {}, Reply::kAccepted, "no spawn pending"},
    {From::kStarting, kSpawnFailed, State::kStarting, {}, Reply::kAccepted, "no spawn pending"},
    {From::kStarting, kReady, State::kRunning, {"OpenAdmission"}},
    {From::kStarting, kPing, State::kStarting, {"ArmWatchdog(3000)"}},
    {From::kStarting, kDrained, State::kStarting, {}, Reply::kAccepted, "not draining"},
    {From::kStarting, kExited, State::kBackoff, kExitToBackoff},
    {From::kStarting, kStopTimeout, State::kStarting, {}, Reply::kAccepted, "stale timer"},
    {From::kStarting, kBackoffElapsed, State::kStarting, {}, Reply::kAccepted, "stale timer"},
    {From::kStarting, kStalled, State::kStopping, kKillStalled},
    {From::kStarting, kWatchdogMissed, State::kStopping, kKillWatchdog},
    {From::kStarting, kStartTimeout, State::kStopping, {"CancelTimers", "CloseAdmission", "SignalStop(15)", "ArmStopTimer(5000)"}},
    // running
    {From::kRunning, kStart, State::kRunning, {}, Reply::kAlreadyStarted, "already started"},
    {From::kRunning, kRestart, State::kStopping, {"CancelTimers", "CloseAdmission", "ArmStopTimer(5000)"}},
    {From::kRunning, kStop, State::kStopping, {"CancelTimers", "CloseAdmission", "RejectQueued(unavailable)", "ArmStopTimer(5000)"}},
    {From::kRunning, kSpawned, State::kRunning, {}, Reply::kAccepted, "no spawn pending"},
    {From::kRunning, kSpawnFailed, State::kRunning, {}, Reply::kAccepted, "no spawn pending"},
    {From::kRunning, kReady, State::kRunning, {}, Reply::kAccepted, "already ready"},
    {From::kRunning, kPing, State::kRunning, {"ArmWatchdog(3000)"}},
    {From::kRunning, kDrained, State::kRunning, {}, Reply::kAccepted, "not draining"},
    {From::kRunning, kExited, State::kBackoff, kExitToBackoff},
    {From::kRunning, kStopTimeout, State::kRunning, {}, Reply::kAccepted, "stale timer"},
    {From::kRunning, kBackoffElapsed, State::kRunning, {}, Reply::kAccepted, "stale timer"},
    {From::kRunning, kStalled, State::kStopping, kKillStalled},
    {From::kRunning, kWatchdogMissed, State::kStopping, kKillWatchdog},
    {From::kRunning, kStartTimeout, State::kRunning, {}, Reply::kAccepted, "stale timer"},
    // stopping (for a stop, draining one request)
    {From::kStopping, kStart, State::kStopping, {}},
    {From::kStopping, kRestart, State::kStopping, {}},
    {From::kStopping, kStop, State::kStopping, {}, Reply::kStopInProgress, "stop in progress"},
    {From::kStopping, kSpawned, State::kStopping, {}, Reply::kAccepted, "no spawn pending"},
    {From::kStopping, kSpawnFailed, State::kStopping, {}, Reply::kAccepted, "no spawn pending"},
    {From::kStopping, kReady, State::kStopping, {}, Reply::kAccepted, "worker is stopping"},
    {From::kStopping, kPing, State::kStopping, {}, Reply::kAccepted, "worker is stopping"},
    {From::kStopping, kDrained, State::kStopping, {"SignalStop(15)", "ArmStopTimer(5000)"}},
    {From::kStopping, kExited, State::kStopped, {"CancelTimers", "KillAll", "FailInFlight(worker_died, exit 3)", "RejectQueued(unavailable)", "NotifyStopped"}},
    {From::kStopping, kStopTimeout, State::kStopping, {"KillAll"}},
    {From::kStopping, kBackoffElapsed, State::kStopping, {}, Reply::kAccepted, "stale timer"},
    {From::kStopping, kStalled, State::kStopping, {"KillAll", "FailInFlight(stalled, stalled: no reply for 2000 ms)"}},
    {From::kStopping, kWatchdogMissed, State::kStopping, {}, Reply::kAccepted, "worker is stopping"},
    {From::kStopping, kStartTimeout, State::kStopping, {}, Reply::kAccepted, "stale timer"},
    // backoff
    {From::kBackoff, kStart, State::kStarting, {"CancelTimers", "Spawn"}},
    {From::kBackoff, kRestart, State::kStarting, {"CancelTimers", "Spawn"}},
    {From::kBackoff, kStop, State::kStopped, {"CancelTimers", "RejectQueued(unavailable)", "NotifyStopped"}},
    {From::kBackoff, kSpawned, State::kBackoff, {}, Reply::kAccepted, "no spawn pending"},
    {From::kBackoff, kSpawnFailed, State::kBackoff, {}, Reply::kAccepted, "no spawn pending"},
    {From::kBackoff, kReady, State::kBackoff, {}, Reply::kAccepted, "no worker"},
    {From::kBackoff, kPing, State::kBackoff, {}, Reply::kAccepted, "no worker"},
    {From::kBackoff, kDrained, State::kBackoff, {}, Reply::kAccepted, "not draining"},
    {From::kBackoff, kExited, State::kBackoff, {}, Reply::kAccepted, "no worker"},
    {From::kBackoff, kStopTimeout, State::kBackoff, {}, Reply::kAccepted, "stale timer"},
    {From::kBackoff, kBackoffElapsed, State::kStarting, {"Spawn"}},
    {From::kBackoff, kStalled, State::kBackoff, {}, Reply::kAccepted, "no worker"},
    {From::kBackoff, kWatchdogMissed, State::kBackoff, {}, Reply::kAccepted, "no worker"},
    {From::kBackoff, kStartTimeout, State::kBackoff, {}, Reply::kAccepted, "stale timer"},
    // failed
    {From::kFailed, kStart, State::kStarting, {"Spawn"}},
    {From::kFailed, kRestart, State::kStarting, {"Spawn"}},
    {From::kFailed, kStop, State::kStopped, {"RejectQueued(unavailable)", "NotifyStopped"}},
    {From::kFailed, kSpawned, State::kFailed, {}, Reply::kAccepted, "no spawn pending"},
    {From::kFailed, kSpawnFailed, State::kFailed, {}, Reply::kAccepted, "no spawn pending"},
    {From::kFailed, kReady, State::kFailed, {}, Reply::kAccepted, "no worker"},
    {From::kFailed, kPing, State::kFailed, {}, Reply::kAccepted, "no worker"},
    {From::kFailed, kDrained, State::kFailed, {}, Reply::kAccepted, "not draining"},
    {From::kFailed, kExited, State::kFailed, {}, Reply::kAccepted, "no worker"},
    {From::kFailed, kStopTimeout, State::kFailed, {}, Reply::kAccepted, "stale timer"},
    {From::kFailed, kBackoffElapsed, State::kFailed, {}, Reply::kAccepted, "stale timer"},
    {From::kFailed, kStalled, State::kFailed, {}, Reply::kAccepted, "no worker"},
    {From::kFailed, kWatchdogMissed, State::kFailed, {}, Reply::kAccepted, "no worker"},
    {From::kFailed, kStartTimeout, State::kFailed, {}, Reply::kAccepted, "stale timer"},
};
// clang-format on

TEST_F(LifecycleTableTest, EveryEntry) {
  // Each (row, event) pair of the table is listed: 6 states x 14 events, with the two answers to
  // Spawn listed for the spawn-pending part of starting and as ignored once spawned.
  ASSERT_EQ(kTable.size(), Lifecycle::kStateCount * Event::kTypeCount + 2);
  for (const Entry& entry : kTable) {
    SCOPED_TRACE(std::string("setup ") + std::to_string(static_cast<int>(entry.setup)) +
                 ", event " + Lifecycle::EventName(entry.event.type));
    Arrange(entry.setup);
    const State from = lc().state();
    const Transition t = Do(entry.event);
    EXPECT_EQ(t.from, from);
    EXPECT_EQ(t.to, entry.to) << Lifecycle::StateName(t.to);
    EXPECT_EQ(Describe(t), entry.actions);
    EXPECT_EQ(t.reply, entry.reply) << Lifecycle::ReplyText(t.reply);
    EXPECT_EQ(t.ignored, entry.ignored);
  }
}

TEST_F(LifecycleTableTest, ExecReadinessGoesStraightToRunning) {
  options_.ready = config::ReadyMode::kExec;
  options_.watchdog_ms = 0;
  Make();
  Do(Event::StartRequested());
  const Transition t = Do(Event::Spawned());
  EXPECT_EQ(t.to, State::kRunning);
  EXPECT_EQ(Describe(t), Actions{"OpenAdmission"});
  EXPECT_EQ(t.log, "worker started");
}

// The entries whose handler asks the restart policy, when the end hits the start limit
// (start_limit_burst 1: the first end does): with start_limit_action "backoff" (the default) the
// cell stays in backoff, crash-looping, its next start one crash loop step away (60s / 1, capped
// by max_delay_ms: 1000); with "fail" it is failed (issue 25 section 1).
enum class PolicyFrom {
  kStartingSpawnPending,  // the spawn fails
  kStarting,              // the worker ends before READY=1
  kRunning,               // the worker ends
  kStoppingStalled,       // the worker killed as stalled ends
};

struct PolicyEntry {
  PolicyFrom setup;
  Event event;
  Actions before_policy;  // the actions before the policy's
  std::string last_exit;
};

TEST_F(LifecycleTableTest, EntriesThatAskThePolicyCrashLoopOrGiveUpAtTheStartLimit) {
  const std::vector<PolicyEntry> entries = {
      {PolicyFrom::kStartingSpawnPending,
       kSpawnFailed,
       {},
       "start failed: exec /bin/x: No such file or directory"},
      {PolicyFrom::kStarting,
       kExited,
       {"CloseAdmission", "CancelTimers", "KillAll", "FailInFlight(worker_died, exit 3)"},
       "exit 3"},
      {PolicyFrom::kRunning,
       kExited,
       {"CloseAdmission", "CancelTimers", "KillAll", "FailInFlight(worker_died, exit 3)"},
       "exit 3"},
      {PolicyFrom::kStoppingStalled,
       kExited,
       {"CancelTimers", "KillAll",
        "FailInFlight(worker_died, stalled: no reply for 2000 ms (exit 3))"},
       "stalled: no reply for 2000 ms (exit 3)"},
  };
  for (cell::StartLimitAction action :
       {cell::StartLimitAction::kBackoff, cell::StartLimitAction::kFail}) {
    for (const PolicyEntry& entry : entries) {
      SCOPED_TRACE(std::string(cell::StartLimitActionName(action)) + ", setup " +
                   std::to_string(static_cast<int>(entry.setup)));
      options_.restart.start_limit_burst = 1;
      options_.restart.start_limit_action = action;
      switch (entry.setup) {
        case PolicyFrom::kStartingSpawnPending:
          Arrange(From::kStartingSpawnPending);
          break;
        case PolicyFrom::kStarting:
          Arrange(From::kStarting);
          break;
        case PolicyFrom::kRunning:
          Arrange(From::kRunning);
          break;
        case PolicyFrom::kStoppingStalled:
          Arrange(From::kRunning);
          Do(kStalled);
          break;
      }
      const Transition t = Do(entry.event);
      Actions expected = entry.before_policy;
      if (action == cell::StartLimitAction::kBackoff) {
        expected.push_back("ArmBackoff(1000)");
        EXPECT_EQ(t.to, State::kBackoff);
        EXPECT_EQ(lc().next_start_at_ms(), clock_.NowMs() + 1000);
        EXPECT_EQ(lc().StateDetail(), "crash-looping: 1 start in 60s, last " + entry.last_exit +
                                          "; next start in 1.0 s; requests are refused (max_queue "
                                          "0: none can wait)");
        EXPECT_EQ(lc().RetryAfterMs(), 1000u);
        EXPECT_EQ(t.log_level, LogLevel::kError);
      } else {
        expected.push_back("RejectQueued(unavailable)");
        EXPECT_EQ(t.to, State::kFailed);
        EXPECT_EQ(lc().reason(), "gave up: 1 start in 60s, last " + entry.last_exit);
        EXPECT_EQ(lc().RetryAfterMs(), 0u);
        EXPECT_TRUE(lc().RefusesRequests());
      }
      EXPECT_EQ(Describe(t), expected);
      EXPECT_TRUE(lc().CrashLooping());
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Stories.

// Issue 25 section 1: with the defaults, ~2.5 s of crashing used to leave the cell failed for
// good. It now keeps starting, slower and slower, says so, and recovers by itself.
TEST_F(LifecycleTest, ACrashLoopKeepsStartingSaysWhenAndEndsOnceAWorkerRunsWell) {
  options_.restart = cell::RestartPolicy::Options{};  // the defaults: 100ms .. 5min, 5 in 60s
  BootRunning();
  for (int i = 0; i < 4; ++i) {
    clock_.AdvanceMs(10);
    const Transition t = Do(Event::Exited(ExitStatus(1), "exit 1"));
    ASSERT_EQ(t.to, State::kBackoff);
    EXPECT_FALSE(lc().CrashLooping());
    EXPECT_EQ(t.log_level, LogLevel::kWarning);
    RestartFromBackoff();
  }
  clock_.AdvanceMs(10);
  const Transition looping = Do(Event::Exited(ExitStatus(1), "exit 1"));
  EXPECT_EQ(looping.to, State::kBackoff);
  EXPECT_EQ(Describe(looping).back(), "ArmBackoff(12000)");
  EXPECT_EQ(looping.log_level, LogLevel::kError);
  EXPECT_EQ(looping.log,
            "worker exited: exit 1; crash-looping: 5 starts in 60s; restarting in 12000 ms");
  EXPECT_TRUE(lc().CrashLooping());
  EXPECT_TRUE(lc().reason().empty());  // not failed, not stopped
  // 12 s is longer than queue_timeout: requests are refused, told when to come back.
  EXPECT_TRUE(lc().RefusesRequests());
  EXPECT_EQ(lc().RetryAfterMs(), 12'000u);
  clock_.AdvanceMs(2000);
  EXPECT_EQ(lc().RetryAfterMs(), 10'000u);
  EXPECT_EQ(lc().StateDetail(),
            "crash-looping: 5 starts in 60s, last exit 1; next start in 10 s; requests are "
            "refused (longer than queue_timeout 1.0 s)");

  // The next end, at once: a warning now, the step 12 s again (the backoff's 3.2 s is shorter).
  RestartFromBackoff();
  EXPECT_TRUE(lc().CrashLooping());  // a worker that has not run restart_reset_after yet
  clock_.AdvanceMs(10);
  const Transition again = Do(Event::Exited(ExitStatus(1), "exit 1"));
  EXPECT_EQ(again.log_level, LogLevel::kWarning);
  EXPECT_EQ(Describe(again).back(), "ArmBackoff(12000)");

  // The cause is gone: this worker runs, and after restart_reset_after it is not a loop any more.
  RestartFromBackoff();
  clock_.AdvanceMs(9'999);
  EXPECT_TRUE(lc().CrashLooping());
  clock_.AdvanceMs(1);
  EXPECT_FALSE(lc().CrashLooping());
  EXPECT_EQ(lc().StateDetail(), "");
  // When it ends, much later, it is a new failure: restarted after restart_delay.
  clock_.AdvanceMs(3'600'000);
  const Transition later = Do(Event::Exited(ExitStatus(1), "exit 1"));
  EXPECT_EQ(Describe(later).back(), "ArmBackoff(100)");
  EXPECT_FALSE(lc().CrashLooping());
  EXPECT_EQ(lc().StateDetail(),
            "backoff after exit 1, next start in 0.1 s; requests are refused "
            "(max_queue 0: none can wait)");
  // What is left is rounded up: 1 ms is "0.1 s", never "0.0 s".
  clock_.AdvanceMs(99);
  EXPECT_EQ(lc().StateDetail(),
            "backoff after exit 1, next start in 0.1 s; requests are refused "
            "(max_queue 0: none can wait)");
}

// An operator's stop ends what status calls a crash loop; a start begins afresh.
TEST_F(LifecycleTest, AStopOrAStartEndsACrashLoop) {
  options_.restart.start_limit_burst = 1;
  ToBackoff();
  ASSERT_TRUE(lc().CrashLooping());
  Do(Event::StopRequested(0));
  EXPECT_EQ(lc().state(), State::kStopped);
  EXPECT_FALSE(lc().CrashLooping());
  EXPECT_EQ(lc().StateDetail(), "stopped; requests are refused until bulkheadctl start");
  Do(Event::StartRequested());
  EXPECT_FALSE(lc().CrashLooping());
  Do(Event::Spawned());
  clock_.AdvanceMs(10);
  EXPECT_EQ(Describe(Do(Event::Exited(ExitStatus(1), "exit 1"))).back(), "ArmBackoff(1000)");
  EXPECT_TRUE(lc().CrashLooping());
}

TEST_F(LifecycleTest, StartsStoppedAndRefusesRequests) {
  Make();
  EXPECT_EQ(lc().state(), State::kStopped);
  EXPECT_EQ(lc().since_ms(), kStartMs);
  EXPECT_FALSE(lc().has_worker());
  EXPECT_TRUE(lc().RefusesRequests());
  EXPECT_EQ(lc().RetryAfterMs(), 0u);
  EXPECT_EQ(lc().starts(), 0u);
}

// A re-exec (docs/reexec.md): the new image takes the previous one's ready worker over, outside
// the table, with its counts; its exit is then a crash like any other.
TEST_F(LifecycleTest, AdoptRunsTheWorkerOfTheImageBeforeWithItsCounts) {
  options_.watchdog_ms = 3000;
  Make();
  lc().RestoreCounts(7, 6, "signal 9");
  const std::vector<Action> actions = lc().Adopt(/*worker_uptime_ms=*/2500);
  ASSERT_EQ(actions.size(), 2u);
  EXPECT_EQ(actions[0].type, Action::Type::kOpenAdmission);
  EXPECT_EQ(actions[1].type, Action::Type::kArmWatchdog);
  EXPECT_EQ(actions[1].ms, 3000u);
  EXPECT_EQ(lc().state(), State::kRunning);
  EXPECT_TRUE(lc().has_worker());
  EXPECT_FALSE(lc().RefusesRequests());
  EXPECT_EQ(lc().starts(), 7u);
  EXPECT_EQ(lc().restarts(), 6u);
  EXPECT_EQ(lc().last_exit(), "signal 9");
  EXPECT_EQ(lc().worker_started_at_ms(), kStartMs - 2500);
  Do(Event::Exited(ExitStatus(1), "exit 1"));
  EXPECT_EQ(lc().state(), State::kBackoff);
  EXPECT_EQ(lc().last_exit(), "exit 1");
}

// A re-exec of a cell in backoff: the new image's backoff ends when the previous one's would have
// (the time left, on the new clock), its start is an ordinary restart, and the next backoff grows
// on from the failures carried.
TEST_F(LifecycleTest, AdoptBackoffKeepsTheTimeLeftAndTheFailuresInARow) {
  options_.restart.start_limit_burst = 100;
  Make();
  lc().RestoreCounts(3, 2, "exit 1");
  const std::vector<Action> actions =
      lc().AdoptBackoff(/*consecutive_failures=*/2, /*next_start_in_ms=*/350);
  ASSERT_EQ(actions.size(), 2u);
  EXPECT_EQ(actions[0].type, Action::Type::kOpenAdmission);
  EXPECT_EQ(actions[1].type, Action::Type::kArmBackoff);
  EXPECT_EQ(actions[1].ms, 350u);
  EXPECT_EQ(lc().state(), State::kBackoff);
  EXPECT_EQ(lc().next_start_at_ms(), kStartMs + 350);
  EXPECT_EQ(lc().policy().steps(), 2u);
  EXPECT_FALSE(lc().has_worker());
  clock_.AdvanceMs(100);
  EXPECT_EQ(lc().RetryAfterMs(), 250u);
  EXPECT_EQ(lc().last_exit(), "exit 1");
  RestartFromBackoff();
  EXPECT_EQ(lc().starts(), 4u);
  EXPECT_EQ(lc().restarts(), 3u);
  // Two failures carried: the next delay is the third step (100, 200, 400).
  clock_.AdvanceMs(10);
  const Transition t = Do(Event::Exited(ExitStatus(1), "exit 1"));
  ASSERT_EQ(t.to, State::kBackoff);
  EXPECT_EQ(t.actions.back().ms, 400u);
}

// A re-exec of a crash-looping cell in backoff: the window and the loop are carried, so its state
// detail still says it is crash-looping, and its next end is a turn of the loop (its start limit
// counts the previous image's starts), not a first failure.
TEST_F(LifecycleTest, AdoptBackoffWithItsCrashLoopGoesOnCrashLooping) {
  options_.restart.start_limit_burst = 2;
  options_.restart.start_limit_interval_ms = 60'000;
  Make();
  lc().RestoreCounts(2, 1, "exit 1");
  lc().RestoreCrashLoop({.window = {.start_ages_ms = {20'000, 8'000},
                                    .crash_looping = true,
                                    .short_runs = 2},
                         .words = "crash-looping: 2 starts in 60s"});
  lc().AdoptBackoff(/*consecutive_failures=*/2, /*next_start_in_ms=*/4'000);
  EXPECT_TRUE(lc().CrashLooping());
  EXPECT_EQ(lc().StateDetail().rfind("crash-looping: 2 starts in 60s, last exit 1", 0), 0u)
      << lc().StateDetail();
  clock_.AdvanceMs(4'000);
  RestartFromBackoff();
  clock_.AdvanceMs(10);
  const Transition t = Do(Event::Exited(ExitStatus(1), "exit 1"));
  ASSERT_EQ(t.to, State::kBackoff);
  EXPECT_EQ(t.log_level, LogLevel::kWarning) << t.log;  // a turn of the loop, not its beginning
  EXPECT_NE(t.log.find("crash-looping: 3 starts in 60s"), std::string::npos) << t.log;
}

// A re-exec: the time in state goes on from the previous image's (a duration on the new clock),
// not from the adoption; never before the clock's zero.
TEST_F(LifecycleTest, RestoreInStateForCountsFromWhenThePreviousImageEnteredTheState) {
  Make();
  lc().Adopt(/*worker_uptime_ms=*/90'000);
  EXPECT_EQ(lc().since_ms(), kStartMs);
  lc().RestoreInStateFor(60'000);
  EXPECT_EQ(lc().since_ms(), kStartMs - 60'000);
  lc().RestoreInStateFor(kStartMs + 5);
  EXPECT_EQ(lc().since_ms(), 0u);
}

// A re-exec of a failed cell: it stays failed with its reason, refuses requests with no start
// due, and starts again on an operator's start.
TEST_F(LifecycleTest, AdoptFailedKeepsTheReasonUntilAnOperatorStartsIt) {
  Make();
  lc().RestoreCounts(5, 4, "exit 1");
  lc().AdoptFailed("gave up: 5 starts in 60s, last exit 1", /*gave_up=*/true);
  EXPECT_EQ(lc().state(), State::kFailed);
  EXPECT_EQ(lc().reason(), "gave up: 5 starts in 60s, last exit 1");
  EXPECT_TRUE(lc().gave_up());
  EXPECT_TRUE(lc().RefusesRequests());
  EXPECT_EQ(lc().RetryAfterMs(), 0u);
  EXPECT_EQ(lc().next_start_at_ms(), 0u);
  EXPECT_EQ(Describe(Do(Event::StartRequested())), Actions{"Spawn"});
  EXPECT_EQ(lc().starts(), 6u);
}

TEST_F(LifecycleTest, BackoffDoublesUpToTheCap) {
  options_.restart.start_limit_burst = 100;
  BootRunning();
  std::vector<uint64_t> delays;
  for (int i = 0; i < 6; ++i) {
    clock_.AdvanceMs(10);
    const Transition t = Do(Event::Exited(ExitStatus(1), "exit 1"));
    ASSERT_EQ(t.to, State::kBackoff);
    delays.push_back(t.actions.back().ms);
    EXPECT_EQ(lc().next_start_at_ms(), clock_.NowMs() + t.actions.back().ms);
    EXPECT_EQ(lc().since_ms(), clock_.NowMs());
    EXPECT_EQ(t.log, "worker exited: exit 1; restarting in " + std::to_string(t.actions.back().ms) +
                         " ms");
    RestartFromBackoff();
  }
  EXPECT_EQ(delays, (std::vector<uint64_t>{100, 200, 400, 800, 1000, 1000}));
  EXPECT_EQ(lc().starts(), 7u);
  EXPECT_EQ(lc().restarts(), 6u);
}

TEST_F(LifecycleTest, UptimeOfResetAfterResetsTheBackoff) {
  BootRunning();
  Do(Event::Exited(ExitStatus(1), "exit 1"));  // 100
  RestartFromBackoff();
  Do(Event::Exited(ExitStatus(1), "exit 1"));  // 200
  RestartFromBackoff();
  clock_.AdvanceMs(9'999);
  EXPECT_EQ(Do(Event::Exited(ExitStatus(1), "exit 1")).actions.back().ms, 400u);
  RestartFromBackoff();
  EXPECT_EQ(lc().worker_started_at_ms(), clock_.NowMs());
  clock_.AdvanceMs(10'000);
  EXPECT_EQ(Do(Event::Exited(ExitStatus(1), "exit 1")).actions.back().ms, 100u);
}

TEST_F(LifecycleTest, StartLimitFailsTheCellAndAManualRestartRecovers) {
  options_.restart.start_limit_action = cell::StartLimitAction::kFail;
  BootRunning();
  for (int i = 0; i < 4; ++i) {
    clock_.AdvanceMs(10);
    ASSERT_EQ(Do(Event::Exited(ExitStatus(1), "exit 1")).to, State::kBackoff);
    RestartFromBackoff();
  }
  clock_.AdvanceMs(10);
  const Transition gave_up = Do(Event::Exited(ExitStatus(1), "exit 1"));
  EXPECT_EQ(gave_up.to, State::kFailed);
  EXPECT_EQ(Describe(gave_up),
            (Actions{"CloseAdmission", "CancelTimers", "KillAll",
                     "FailInFlight(worker_died, exit 1)", "RejectQueued(unavailable)"}));
  EXPECT_EQ(gave_up.log_level, LogLevel::kError);
  EXPECT_EQ(gave_up.log, "worker exited: exit 1; gave up: 5 starts in 60s, last exit 1");
  EXPECT_EQ(lc().reason(), "gave up: 5 starts in 60s, last exit 1");
  EXPECT_EQ(lc().last_exit(), "exit 1");
  EXPECT_EQ(lc().starts(), 5u);
  EXPECT_TRUE(lc().RefusesRequests());
  EXPECT_EQ(lc().RetryAfterMs(), 0u);
  EXPECT_EQ(lc().next_start_at_ms(), 0u);
  EXPECT_TRUE(lc().CrashLooping());

  // Nothing happens by itself, however long it waits.
  clock_.AdvanceMs(3'600'000);
  EXPECT_EQ(Do(Event::BackoffElapsed()).ignored, "stale timer");
  EXPECT_EQ(lc().state(), State::kFailed);

  // bulkheadctl restart: starts at once with fresh counters.
  const Transition restart = Do(Event::RestartRequested(0));
  EXPECT_EQ(restart.reply, Reply::kAccepted);
  EXPECT_EQ(Describe(restart), Actions{"Spawn"});
  EXPECT_TRUE(lc().reason().empty());
  EXPECT_FALSE(lc().CrashLooping());
  Do(Event::Spawned());
  EXPECT_EQ(lc().state(), State::kRunning);
  EXPECT_EQ(lc().policy().StartsWithin(clock_.NowMs()), 1u);
  EXPECT_EQ(Do(Event::Exited(ExitStatus(1), "exit 1")).actions.back().ms, 100u);
}

TEST_F(LifecycleTest, OnFailureStaysStoppedAfterExitZero) {
  options_.restart.mode = cell::RestartMode::kOnFailure;
  BootRunning();
  const Transition t = Do(Event::Exited(ExitStatus(0), "exit 0"));
  EXPECT_EQ(t.to, State::kStopped);
  EXPECT_EQ(Describe(t), (Actions{"CloseAdmission", "CancelTimers", "KillAll",
                                  "FailInFlight(worker_died, exit 0)", "RejectQueued(unavailable)",
                                  "NotifyStopped"}));
  EXPECT_EQ(lc().reason(), "exited cleanly and restart = \"on-failure\"");
  EXPECT_TRUE(lc().RefusesRequests());

  // A failure is restarted.
  Do(Event::StartRequested());
  Do(Event::Spawned());
  EXPECT_EQ(Do(Event::Exited(ExitStatus(2), "exit 2")).to, State::kBackoff);
  RestartFromBackoff();
  EXPECT_EQ(Do(Event::Exited(SignalStatus(SIGSEGV), "signal 11")).to, State::kBackoff);
}

TEST_F(LifecycleTest, AlwaysRestartsAfterExitZero) {
  BootRunning();
  EXPECT_EQ(Do(Event::Exited(ExitStatus(0), "exit 0")).to, State::kBackoff);
}

// restart = "never": a crash leaves the cell failed (systemd's Restart=no unit that crashed is
// "failed"), queued requests rejected; only a clean exit leaves it stopped.
TEST_F(LifecycleTest, NeverLeavesTheCellFailedAfterACrash) {
  options_.restart.mode = cell::RestartMode::kNever;
  BootRunning();
  const Transition t = Do(Event::Exited(SignalStatus(SIGSEGV), "signal 11"));
  EXPECT_EQ(t.to, State::kFailed);
  EXPECT_TRUE(Has(t, ActionType::kRejectQueued));
  EXPECT_EQ(lc().reason(), "restart = \"never\"");
  EXPECT_EQ(lc().last_exit(), "signal 11");
  EXPECT_EQ(t.log, "worker exited: signal 11; not restarting: restart = \"never\"");
  EXPECT_EQ(lc().StateDetail(),
            "failed after signal 11 (restart = \"never\"); requests are refused until "
            "bulkheadctl start");
}

TEST_F(LifecycleTest, NeverStaysStoppedAfterACleanExit) {
  options_.restart.mode = cell::RestartMode::kNever;
  BootRunning();
  const Transition t = Do(Event::Exited(ExitStatus(0), "exit 0"));
  EXPECT_EQ(t.to, State::kStopped);
  EXPECT_EQ(lc().reason(), "restart = \"never\"");
}

TEST_F(LifecycleTest, ExecFailuresCountAsFailedStartsAndShowTheErrno) {
  options_.restart.start_limit_action = cell::StartLimitAction::kFail;  // the limit shows as failed
  Make();
  const std::string error = "exec /usr/bin/nope: No such file or directory";
  Do(Event::StartRequested());
  for (int i = 0; i < 4; ++i) {
    const Transition t = Do(Event::SpawnFailed(error));
    ASSERT_EQ(t.to, State::kBackoff);
    EXPECT_EQ(t.log, "cannot start worker: " + error + "; restarting in " +
                         std::to_string(t.actions.back().ms) + " ms");
    EXPECT_EQ(t.log_level, LogLevel::kError);
    EXPECT_EQ(lc().last_exit(), "start failed: " + error);
    EXPECT_FALSE(lc().has_worker());
    clock_.SetMs(lc().next_start_at_ms());
    ASSERT_EQ(Describe(Do(Event::BackoffElapsed())), Actions{"Spawn"});
  }
  const Transition t = Do(Event::SpawnFailed(error));
  EXPECT_EQ(t.to, State::kFailed);
  EXPECT_EQ(Describe(t), Actions{"RejectQueued(unavailable)"});
  EXPECT_EQ(lc().reason(), "gave up: 5 starts in 60s, last start failed: " + error);
  EXPECT_EQ(lc().starts(), 5u);
}

TEST_F(LifecycleTest, StopDuringBackoffStopsAndTheLateTimerIsStale) {
  ToBackoff();
  const Transition stop = Do(Event::StopRequested(0));
  EXPECT_EQ(stop.to, State::kStopped);
  EXPECT_EQ(Describe(stop),
            (Actions{"CancelTimers", "RejectQueued(unavailable)", "NotifyStopped"}));
  EXPECT_EQ(lc().next_start_at_ms(), 0u);
  EXPECT_EQ(Do(Event::BackoffElapsed()).ignored, "stale timer");
  EXPECT_EQ(lc().state(), State::kStopped);
}

TEST_F(LifecycleTest, StopTimeoutBoundsDrainAndSignalTogether) {
  BootRunning();
  const Transition stop = Do(Event::StopRequested(2));
  EXPECT_EQ(stop.to, State::kStopping);
  EXPECT_EQ(Describe(stop), (Actions{"CancelTimers", "CloseAdmission", "RejectQueued(unavailable)",
                                     "ArmStopTimer(5000)"}));
  EXPECT_EQ(stop.log, "stopping: waiting up to 5000 ms for 2 requests in flight");
  EXPECT_TRUE(lc().RefusesRequests());
  EXPECT_TRUE(lc().has_worker());

  // The drain took 3 s of the 5: stop_signal gets the 2 s left, not a fresh stop_timeout.
  clock_.AdvanceMs(3000);
  const Transition term = Do(Event::Drained());
  EXPECT_EQ(Describe(term), (Actions{"SignalStop(15)", "ArmStopTimer(2000)"}));

  clock_.AdvanceMs(2000);
  const Transition kill = Do(Event::StopTimeout());
  EXPECT_EQ(Describe(kill), Actions{"KillAll"});
  EXPECT_EQ(kill.log_level, LogLevel::kWarning);
  EXPECT_EQ(kill.log,
            "worker still running at stop_timeout (5000 ms, SIGTERM sent): sending SIGKILL");
  EXPECT_EQ(Do(Event::StopTimeout()).ignored, "already killed");

  const Transition exited = Do(Event::Exited(SignalStatus(SIGKILL), "signal 9"));
  EXPECT_EQ(exited.to, State::kStopped);
  EXPECT_EQ(Describe(exited),
            (Actions{"CancelTimers", "KillAll", "FailInFlight(worker_died, signal 9)",
                     "RejectQueued(unavailable)", "NotifyStopped"}));
  EXPECT_EQ(lc().last_exit(), "signal 9");
  // SIGKILL came stop_timeout after the stop, not 2 x stop_timeout.
  EXPECT_EQ(lc().since_ms(), kStartMs + 5000);
}

TEST_F(LifecycleTest, StopTimeoutSpentDrainingKillsAtTheDeadline) {
  BootRunning();
  Do(Event::StopRequested(1));
  clock_.AdvanceMs(5000);
  const Transition kill = Do(Event::StopTimeout());
  EXPECT_EQ(Describe(kill), Actions{"KillAll"});
  EXPECT_EQ(kill.log_level, LogLevel::kWarning);
  EXPECT_EQ(kill.log, "requests still in flight at stop_timeout (5000 ms): sending SIGKILL");
  EXPECT_EQ(Do(Event::Drained()).ignored, "not draining");
  EXPECT_EQ(Do(Event::StopTimeout()).ignored, "already killed");
  EXPECT_EQ(Do(Event::Exited(SignalStatus(SIGKILL), "signal 9")).to, State::kStopped);
  EXPECT_EQ(lc().since_ms(), kStartMs + 5000);
}

TEST_F(LifecycleTest, StopTimeoutChangedMidStopKeepsTheDeadline) {
  BootRunning();
  Do(Event::StopRequested(1));
  clock_.AdvanceMs(1000);
  Lifecycle::Options longer = options_;
  longer.stop_timeout_ms = 60'000;
  lc().SetOptions(longer);
  EXPECT_EQ(Describe(Do(Event::Drained())), (Actions{"SignalStop(15)", "ArmStopTimer(4000)"}));
}

TEST_F(LifecycleTest, StopWithNothingInFlightSignalsAtOnce) {
  options_.stop_signal = SIGINT;
  BootRunning();
  const Transition stop = Do(Event::StopRequested(0));
  EXPECT_EQ(Describe(stop), (Actions{"CancelTimers", "CloseAdmission", "RejectQueued(unavailable)",
                                     "SignalStop(2)", "ArmStopTimer(5000)"}));
  EXPECT_EQ(stop.log, "stopping worker (SIGINT)");
  EXPECT_EQ(Do(Event::Drained()).ignored, "not draining");
}

TEST_F(LifecycleTest, DrainedRequestsLetTheStopSignalGoEarly) {
  BootRunning();
  Do(Event::StopRequested(1));
  clock_.AdvanceMs(30);
  const Transition drained = Do(Event::Drained());
  EXPECT_EQ(Describe(drained), (Actions{"SignalStop(15)", "ArmStopTimer(4970)"}));
  EXPECT_EQ(Do(Event::Exited(ExitStatus(0), "exit 0")).to, State::kStopped);
  EXPECT_TRUE(lc().reason().empty());
}

TEST_F(LifecycleTest, SecondRestartWhileStoppingIsRestartInProgress) {
  BootRunning();
  const Transition first = Do(Event::RestartRequested(1));
  EXPECT_EQ(first.reply, Reply::kAccepted);
  EXPECT_EQ(first.to, State::kStopping);
  EXPECT_EQ(first.log, "restarting: waiting up to 5000 ms for 1 request in flight");
  // Requests wait in the queue for the next worker.
  EXPECT_FALSE(lc().RefusesRequests());

  const Transition second = Do(Event::RestartRequested(1));
  EXPECT_EQ(second.reply, Reply::kRestartInProgress);
  EXPECT_STREQ(Lifecycle::ReplyText(second.reply), "restart in progress");
  EXPECT_TRUE(second.actions.empty());
  EXPECT_EQ(Do(Event::StartRequested()).reply, Reply::kRestartInProgress);

  // One worker at a time: the next one is spawned only once the first is reaped.
  Do(Event::Drained());
  const Transition exited = Do(Event::Exited(SignalStatus(SIGTERM), "signal 15"));
  EXPECT_EQ(Describe(exited),
            (Actions{"CancelTimers", "KillAll", "FailInFlight(worker_died, signal 15)", "Spawn"}));
  EXPECT_EQ(exited.to, State::kStarting);
  EXPECT_EQ(exited.log, "worker exited: signal 15; starting again");
  Do(Event::Spawned());
  EXPECT_EQ(lc().state(), State::kRunning);
  EXPECT_EQ(lc().starts(), 2u);
  EXPECT_EQ(lc().restarts(), 1u);
}

TEST_F(LifecycleTest, RestartDuringAStopStartsAgainAfterTheExit) {
  BootRunning();
  Do(Event::StopRequested(0));
  EXPECT_TRUE(lc().RefusesRequests());
  const Transition restart = Do(Event::RestartRequested(0));
  EXPECT_EQ(restart.reply, Reply::kAccepted);
  EXPECT_TRUE(restart.actions.empty());
  EXPECT_EQ(restart.log, "will start again once the worker has stopped");
  EXPECT_FALSE(lc().RefusesRequests());
  EXPECT_EQ(Do(Event::RestartRequested(0)).reply, Reply::kRestartInProgress);
  EXPECT_EQ(Describe(Do(Event::Exited(SignalStatus(SIGTERM), "signal 15"))).back(), "Spawn");
}

TEST_F(LifecycleTest, StopDuringARestartCancelsTheStart) {
  BootRunning();
  Do(Event::RestartRequested(0));
  const Transition stop = Do(Event::StopRequested(0));
  EXPECT_EQ(stop.reply, Reply::kAccepted);
  EXPECT_EQ(Describe(stop), Actions{"RejectQueued(unavailable)"});
  EXPECT_TRUE(lc().RefusesRequests());
  EXPECT_EQ(Do(Event::StopRequested(0)).reply, Reply::kStopInProgress);
  EXPECT_EQ(Do(Event::Exited(SignalStatus(SIGTERM), "signal 15")).to, State::kStopped);
}

TEST_F(LifecycleTest, StalledWorkerIsKilledItsRequestsFailedAndItIsRestarted) {
  BootRunning();
  clock_.AdvanceMs(50);
  const Transition stalled = Do(Event::Stalled("no reply for 2000 ms"));
  EXPECT_EQ(stalled.to, State::kStopping);
  EXPECT_EQ(Describe(stalled), (Actions{"CancelTimers", "CloseAdmission", "KillAll",
                                        "FailInFlight(stalled, stalled: no reply for 2000 ms)"}));
  EXPECT_EQ(stalled.log_level, LogLevel::kWarning);
  EXPECT_EQ(stalled.log, "stalled: no reply for 2000 ms; killing worker");
  // Queued requests stay for the next worker.
  EXPECT_FALSE(lc().RefusesRequests());
  // Already killed: timers and further stalls change nothing.
  EXPECT_EQ(Do(Event::Stalled("again")).ignored, "already killed");
  EXPECT_EQ(Do(Event::StopTimeout()).ignored, "already killed");

  const Transition exited = Do(Event::Exited(SignalStatus(SIGKILL), "signal 9"));
  EXPECT_EQ(exited.to, State::kBackoff);
  EXPECT_EQ(Describe(exited),
            (Actions{"CancelTimers", "KillAll",
                     "FailInFlight(worker_died, stalled: no reply for 2000 ms (signal 9))",
                     "ArmBackoff(100)"}));
  EXPECT_EQ(lc().last_exit(), "stalled: no reply for 2000 ms (signal 9)");
  RestartFromBackoff();
  // The next worker's end is its own.
  EXPECT_EQ(Do(Event::Exited(ExitStatus(4), "exit 4")).log,
            "worker exited: exit 4; restarting in 200 ms");
  EXPECT_EQ(lc().last_exit(), "exit 4");
}

TEST_F(LifecycleTest, StallsCountTowardsTheStartLimitEvenInOnFailureMode) {
  options_.restart.mode = cell::RestartMode::kOnFailure;
  options_.restart.start_limit_burst = 1;
  options_.restart.start_limit_action = cell::StartLimitAction::kFail;  // the limit shows as failed
  BootRunning();
  Do(Event::Stalled("no reply for 2000 ms"));
  // A worker killed as stalled never exits cleanly, whatever its status says.
  const Transition exited = Do(Event::Exited(ExitStatus(0), "exit 0"));
  EXPECT_EQ(exited.to, State::kFailed);
  EXPECT_EQ(lc().reason(), "gave up: 1 start in 60s, last stalled: no reply for 2000 ms (exit 0)");
}

TEST_F(LifecycleTest, StallWhileDrainingKillsAtOnce) {
  BootRunning();
  Do(Event::StopRequested(1));
  const Transition stalled = Do(Event::Stalled("no reply for 2000 ms"));
  EXPECT_EQ(Describe(stalled),
            (Actions{"KillAll", "FailInFlight(stalled, stalled: no reply for 2000 ms)"}));
  EXPECT_EQ(Do(Event::StopTimeout()).ignored, "already killed");
  EXPECT_EQ(Do(Event::Exited(SignalStatus(SIGKILL), "signal 9")).to, State::kStopped);
}

TEST_F(LifecycleTest, WatchdogIsArmedAtSpawnAndRearmedByEachPing) {
  options_.watchdog_ms = 3000;
  options_.ready = config::ReadyMode::kNotify;
  Make();
  Do(Event::StartRequested());
  const Transition spawned = Do(Event::Spawned());
  EXPECT_EQ(spawned.to, State::kStarting);
  EXPECT_EQ(Describe(spawned), (Actions{"ArmWatchdog(3000)", "ArmStartTimer(4000)"}));
  EXPECT_EQ(spawned.log, "worker started; waiting up to 4000 ms for READY=1");
  EXPECT_FALSE(lc().RefusesRequests());  // requests queue until READY=1
  EXPECT_TRUE(lc().has_worker());
  EXPECT_EQ(Describe(Do(Event::WatchdogPing())), Actions{"ArmWatchdog(3000)"});
  const Transition ready = Do(Event::Ready());
  EXPECT_EQ(Describe(ready), Actions{"OpenAdmission"});
  EXPECT_EQ(ready.log, "worker ready (READY=1)");
  EXPECT_EQ(Describe(Do(Event::WatchdogPing())), Actions{"ArmWatchdog(3000)"});

  clock_.AdvanceMs(3000);
  const Transition missed = Do(Event::WatchdogMissed());
  EXPECT_EQ(missed.to, State::kStopping);
  EXPECT_EQ(missed.log, "watchdog timeout: no WATCHDOG=1 within 3000 ms; killing worker");
  EXPECT_EQ(Do(Event::Exited(SignalStatus(SIGKILL), "signal 9")).to, State::kBackoff);
  EXPECT_EQ(lc().last_exit(), "watchdog timeout: no WATCHDOG=1 within 3000 ms (signal 9)");
}

// Issue 11 item 7: a ready = "notify" worker that never sends READY=1 no longer holds its cell in
// `starting` forever (systemd.service(5) TimeoutStartSec=).
TEST_F(LifecycleTest, StartTimeoutStopsAnUnreadyWorkerAndCountsAsAFailedStart) {
  options_.ready = config::ReadyMode::kNotify;
  options_.restart.mode = cell::RestartMode::kOnFailure;
  Boot();
  EXPECT_EQ(lc().state(), State::kStarting);
  clock_.AdvanceMs(4000);
  const Transition timeout = Do(Event::StartTimeout());
  EXPECT_EQ(timeout.to, State::kStopping);
  EXPECT_EQ(Describe(timeout),
            (Actions{"CancelTimers", "CloseAdmission", "SignalStop(15)", "ArmStopTimer(5000)"}));
  EXPECT_EQ(timeout.log_level, LogLevel::kWarning);
  EXPECT_EQ(timeout.log,
            "start timeout: no READY=1 within 4000 ms of the start; stopping worker (SIGTERM)");
  // Queued requests stay for the next worker; a READY=1 now comes too late.
  EXPECT_FALSE(lc().RefusesRequests());
  EXPECT_EQ(Do(Event::Ready()).ignored, "worker is stopping");
  EXPECT_EQ(Do(Event::StartRequested()).reply, Reply::kRestartInProgress);
  // A worker that ignores stop_signal is killed after stop_timeout, as on any stop.
  clock_.AdvanceMs(5000);
  EXPECT_EQ(Describe(Do(Event::StopTimeout())), Actions{"KillAll"});
  // Even a clean exit is a failed start: restart = "on-failure" restarts it, with backoff.
  const Transition exited = Do(Event::Exited(ExitStatus(0), "exit 0"));
  EXPECT_EQ(exited.to, State::kBackoff);
  EXPECT_EQ(Describe(exited).back(), "ArmBackoff(100)");
  EXPECT_EQ(lc().last_exit(), "start timeout: no READY=1 within 4000 ms of the start (exit 0)");
  EXPECT_EQ(exited.log,
            "worker exited: start timeout: no READY=1 within 4000 ms of the start (exit 0); "
            "restarting in 100 ms");
}

// ready = "http:/healthz" waits as "notify" does, for the WorkerRunner's probe to answer 2xx, and
// says what it waits for.
TEST_F(LifecycleTest, HttpReadinessWaitsForA2xxProbeWithinStartTimeout) {
  options_.ready = config::ReadyMode::kHttp;
  options_.ready_http_path = "/healthz";
  Make();
  Do(Event::StartRequested());
  const Transition spawned = Do(Event::Spawned());
  EXPECT_EQ(spawned.to, State::kStarting);
  EXPECT_EQ(Describe(spawned), Actions{"ArmStartTimer(4000)"});
  EXPECT_EQ(spawned.log, "worker started; waiting up to 4000 ms for 2xx to GET /healthz");
  EXPECT_NE(lc().StateDetail().find("waiting for 2xx to GET /healthz (start_timeout"),
            std::string::npos)
      << lc().StateDetail();
  // A READY=1 the worker sends as well (gunicorn's arbiter does, before its workers serve) is not
  // what makes it ready: the probe is. It was taken, and logged "worker ready (READY=1)".
  const Transition notified = Do(Event::Ready());
  EXPECT_EQ(notified.to, State::kStarting);
  EXPECT_TRUE(notified.actions.empty());
  EXPECT_EQ(notified.log, "");
  EXPECT_FALSE(notified.ignored.empty());
  EXPECT_EQ(lc().state(), State::kStarting);
  const Transition ready = Do(Event::ProbeReady("GET /healthz answered 204"));
  EXPECT_EQ(Describe(ready), Actions{"OpenAdmission"});
  EXPECT_EQ(ready.log, "worker ready (GET /healthz answered 204)");

  // The next worker never answers 2xx: its start times out like a missing READY=1.
  Do(Event::RestartRequested(0));
  Do(Event::Exited(SignalStatus(SIGTERM), "signal 15"));
  Do(Event::Spawned());
  clock_.AdvanceMs(4000);
  const Transition timeout = Do(Event::StartTimeout());
  EXPECT_EQ(timeout.to, State::kStopping);
  EXPECT_EQ(timeout.log,
            "start timeout: no 2xx to GET /healthz within 4000 ms of the start; stopping worker "
            "(SIGTERM)");
}

TEST_F(LifecycleTest, StartTimeoutsCountTowardsTheStartLimit) {
  options_.ready = config::ReadyMode::kNotify;
  options_.restart.start_limit_burst = 2;
  options_.restart.start_limit_action = cell::StartLimitAction::kFail;  // the limit shows as failed
  Boot();
  for (int start = 1; start <= 2; ++start) {
    clock_.AdvanceMs(4000);
    ASSERT_EQ(Do(Event::StartTimeout()).to, State::kStopping);
    const Transition exited = Do(Event::Exited(SignalStatus(SIGTERM), "signal 15"));
    if (start == 1) {
      ASSERT_EQ(exited.to, State::kBackoff);
      clock_.SetMs(lc().next_start_at_ms());
      ASSERT_EQ(Describe(Do(Event::BackoffElapsed())), Actions{"Spawn"});
      ASSERT_EQ(Describe(Do(Event::Spawned())), Actions{"ArmStartTimer(4000)"});
    } else {
      EXPECT_EQ(exited.to, State::kFailed);
    }
  }
  EXPECT_EQ(lc().starts(), 2u);
  EXPECT_EQ(lc().reason(),
            "gave up: 2 starts in 60s, last start timeout: no READY=1 within 4000 ms of the start "
            "(signal 15)");
}

TEST_F(LifecycleTest, ReadyInTimeLeavesTheStartTimerStale) {
  options_.ready = config::ReadyMode::kNotify;
  Boot();
  clock_.AdvanceMs(3999);
  EXPECT_EQ(Do(Event::Ready()).to, State::kRunning);
  clock_.AdvanceMs(1);
  EXPECT_EQ(Do(Event::StartTimeout()).ignored, "stale timer");
  EXPECT_EQ(lc().state(), State::kRunning);
}

TEST_F(LifecycleTest, StartTimeoutZeroWaitsForReadyForever) {
  options_.ready = config::ReadyMode::kNotify;
  options_.start_timeout_ms = 0;
  options_.max_queue = 8;
  Make();
  Do(Event::StartRequested());
  const Transition spawned = Do(Event::Spawned());
  EXPECT_TRUE(spawned.actions.empty()) << Describe(spawned).size();
  EXPECT_EQ(spawned.log, "worker started; waiting for READY=1");
  clock_.AdvanceMs(3'600'000);
  EXPECT_EQ(lc().StateDetail(),
            "starting for 3600 s, waiting for READY=1 (no start_timeout); requests queue");
}

// What status shows as `state_detail`: why the cell does not serve, in each state.
TEST_F(LifecycleTest, StateDetailSaysWhyTheCellDoesNotServe) {
  options_.ready = config::ReadyMode::kNotify;
  options_.start_timeout_ms = 90'000;
  options_.restart.delay_ms = 2100;
  options_.restart.max_delay_ms = 4000;
  options_.restart.start_limit_burst = 2;
  options_.restart.start_limit_interval_ms = 600'000;
  options_.restart.start_limit_action = cell::StartLimitAction::kFail;
  options_.queue_timeout_ms = 5000;
  options_.max_queue = 8;
  Make();
  EXPECT_EQ(lc().StateDetail(), "stopped; requests are refused until bulkheadctl start");
  Do(Event::StartRequested());
  EXPECT_EQ(lc().StateDetail(), "starting; requests queue");
  Do(Event::Spawned());
  clock_.AdvanceMs(37'400);
  EXPECT_EQ(lc().StateDetail(),
            "starting for 37 s, waiting for READY=1 (start_timeout 90 s); requests queue");
  Do(Event::Ready());
  EXPECT_EQ(lc().StateDetail(), "");
  Do(Event::Exited(ExitStatus(1), "exit 1"));
  EXPECT_EQ(lc().StateDetail(), "backoff after exit 1, next start in 2.1 s; requests queue");
  clock_.SetMs(lc().next_start_at_ms());
  Do(Event::BackoffElapsed());
  Do(Event::Spawned());
  clock_.AdvanceMs(90'000);
  Do(Event::StartTimeout());
  clock_.AdvanceMs(1200);
  EXPECT_EQ(lc().StateDetail(),
            "stopping for 1.2 s after start timeout: no READY=1 within 90000 ms of the start, "
            "SIGTERM sent; requests queue for the next worker");
  Do(Event::Exited(SignalStatus(SIGTERM), "signal 15"));
  EXPECT_EQ(lc().StateDetail(),
            "failed: crash-looping and start_limit_action = \"fail\" (gave up: 2 starts in 600s, "
            "last start timeout: no READY=1 within 90000 ms of the start (signal 15)); no start "
            "is due: requests are refused until bulkheadctl start or restart");
  Do(Event::StartRequested());
  Do(Event::Spawned());
  Do(Event::Ready());
  Do(Event::StopRequested(1));
  EXPECT_EQ(lc().StateDetail(),
            "stopping for 0.0 s, draining requests in flight; requests are refused");
  Do(Event::Exited(ExitStatus(0), "exit 0"));
  EXPECT_EQ(lc().StateDetail(), "stopped; requests are refused until bulkheadctl start");

  // A backoff longer than queue_timeout refuses at once, and says so.
  options_.queue_timeout_ms = 1000;
  Make();
  Do(Event::StartRequested());
  Do(Event::Spawned());
  Do(Event::Ready());
  Do(Event::Exited(ExitStatus(3), "exit 3"));
  EXPECT_EQ(lc().StateDetail(),
            "backoff after exit 3, next start in 2.1 s; requests are refused (longer than "
            "queue_timeout 1.0 s)");
}

// A worker ended by SIGTERM (or SIGHUP, SIGINT, SIGPIPE) exited cleanly, as systemd counts it:
// restart = "on-failure" does not restart it and "never" leaves the cell stopped; a crash is a
// failure for both.
TEST_F(LifecycleTest, TheSignalsSystemdCountsAsCleanAreCleanExits) {
  for (int signal : {SIGTERM, SIGHUP, SIGINT, SIGPIPE}) {
    for (cell::RestartMode mode : {cell::RestartMode::kOnFailure, cell::RestartMode::kNever}) {
      options_.restart.mode = mode;
      BootRunning();
      EXPECT_EQ(Do(Event::Exited(SignalStatus(signal), "signal")).to, State::kStopped)
          << "signal " << signal;
    }
  }
  options_.restart.mode = cell::RestartMode::kOnFailure;
  BootRunning();
  EXPECT_EQ(Do(Event::Exited(SignalStatus(SIGABRT), "signal 6")).to, State::kBackoff);
  options_.restart.mode = cell::RestartMode::kAlways;
  BootRunning();
  EXPECT_EQ(Do(Event::Exited(SignalStatus(SIGTERM), "signal 15")).to, State::kBackoff);
}

// With max_queue 0 no request waits for a worker: the detail says they are refused, not that they
// queue (they were answered REJECTED unavailable while it said "requests queue").
TEST_F(LifecycleTest, StateDetailWithoutAQueueSaysRequestsAreRefused) {
  options_.ready = config::ReadyMode::kNotify;
  options_.max_queue = 0;
  options_.restart.delay_ms = 2100;
  options_.restart.max_delay_ms = 4000;
  options_.queue_timeout_ms = 5000;
  Make();
  Do(Event::StartRequested());
  EXPECT_EQ(lc().StateDetail(), "starting; requests are refused (max_queue 0: none can wait)");
  Do(Event::Spawned());
  Do(Event::Ready());
  Do(Event::Exited(ExitStatus(1), "exit 1"));
  EXPECT_EQ(lc().StateDetail(),
            "backoff after exit 1, next start in 2.1 s; requests are refused (max_queue 0: none "
            "can wait)");
}

TEST_F(LifecycleTest, PingsWithoutAWatchdogAreIgnored) {
  BootRunning();
  EXPECT_EQ(Do(Event::WatchdogPing()).ignored, "no watchdog configured");
}

TEST_F(LifecycleTest, OomKillFailsRequestsAsOomKilled) {
  BootRunning();
  const Transition t = Do(Event::Exited(SignalStatus(SIGKILL), "signal 9", /*oom_killed=*/true));
  EXPECT_EQ(Describe(t)[3], "FailInFlight(oom_killed, oom-kill)");
  EXPECT_EQ(lc().last_exit(), "oom-kill");
}

TEST_F(LifecycleTest, BackoffLongerThanTheQueueTimeoutRefusesWithRetryAfter) {
  options_.restart.delay_ms = 800;
  options_.restart.max_delay_ms = 4000;
  options_.queue_timeout_ms = 1000;
  ToBackoff();
  // 800 ms: requests may wait in the queue for the next worker.
  EXPECT_FALSE(lc().RefusesRequests());
  EXPECT_EQ(lc().RetryAfterMs(), 800u);
  RestartFromBackoff();
  Do(Event::Exited(ExitStatus(1), "exit 1"));
  // 1600 ms: longer than a request may wait.
  EXPECT_TRUE(lc().RefusesRequests());
  EXPECT_EQ(lc().RetryAfterMs(), 1600u);
  clock_.AdvanceMs(600);
  EXPECT_FALSE(lc().RefusesRequests());  // 1000 ms left: a request queued now may still be served
  EXPECT_EQ(lc().RetryAfterMs(), 1000u);
  clock_.AdvanceMs(1000);
  EXPECT_EQ(lc().RetryAfterMs(), 1u);  // due: the timer is about to fire
}

TEST_F(LifecycleTest, StateNames) {
  EXPECT_STREQ(Lifecycle::StateName(State::kStopped), "stopped");
  EXPECT_STREQ(Lifecycle::StateName(State::kStarting), "starting");
  EXPECT_STREQ(Lifecycle::StateName(State::kRunning), "running");
  EXPECT_STREQ(Lifecycle::StateName(State::kStopping), "stopping");
  EXPECT_STREQ(Lifecycle::StateName(State::kBackoff), "backoff");
  EXPECT_STREQ(Lifecycle::StateName(State::kFailed), "failed");
  EXPECT_STREQ(Lifecycle::ReplyText(Reply::kAccepted), "ok");
  EXPECT_STREQ(Lifecycle::ReplyText(Reply::kAlreadyStarted), "already started");
  EXPECT_STREQ(Lifecycle::ReplyText(Reply::kAlreadyStopped), "already stopped");
  EXPECT_STREQ(Lifecycle::ReplyText(Reply::kStopInProgress), "stop in progress");
}

TEST(LifecycleOptionsFromConfig, CopiesEveryLifecycleKey) {
  config::CellConfig cell_config;
  cell_config.restart = config::RestartMode::kOnFailure;
  cell_config.restart_delay = std::chrono::milliseconds(250);
  cell_config.restart_max_delay = std::chrono::milliseconds(9000);
  cell_config.restart_reset_after = std::chrono::milliseconds(20'000);
  cell_config.start_limit_burst = 7;
  cell_config.start_limit_interval = std::chrono::milliseconds(30'000);
  cell_config.start_limit_action = config::StartLimitAction::kFail;
  cell_config.ready = config::ReadyMode::kNotify;
  cell_config.watchdog = std::chrono::milliseconds(4000);
  cell_config.stop_signal = SIGQUIT;
  cell_config.stop_timeout = std::chrono::milliseconds(1500);
  cell_config.queue_timeout = std::chrono::milliseconds(700);
  cell_config.start_timeout = std::chrono::milliseconds(2500);
  const Lifecycle::Options options = LifecycleOptionsFromConfig(cell_config);
  EXPECT_EQ(options.restart.mode, cell::RestartMode::kOnFailure);
  EXPECT_EQ(options.restart.delay_ms, 250u);
  EXPECT_EQ(options.restart.max_delay_ms, 9000u);
  EXPECT_EQ(options.restart.reset_after_ms, 20'000u);
  EXPECT_EQ(options.restart.start_limit_burst, 7u);
  EXPECT_EQ(options.restart.start_limit_interval_ms, 30'000u);
  EXPECT_EQ(options.restart.start_limit_action, cell::StartLimitAction::kFail);
  EXPECT_EQ(options.ready, config::ReadyMode::kNotify);
  EXPECT_EQ(options.watchdog_ms, 4000u);
  EXPECT_EQ(options.stop_signal, SIGQUIT);
  EXPECT_EQ(options.stop_timeout_ms, 1500u);
  EXPECT_EQ(options.queue_timeout_ms, 700u);
  EXPECT_EQ(options.start_timeout_ms, 2500u);

  cell_config.restart = config::RestartMode::kNever;
  EXPECT_EQ(LifecycleOptionsFromConfig(cell_config).restart.mode, cell::RestartMode::kNever);
  cell_config.restart = config::RestartMode::kAlways;
  EXPECT_EQ(LifecycleOptionsFromConfig(cell_config).restart.mode, cell::RestartMode::kAlways);
  cell_config.start_limit_action = config::StartLimitAction::kBackoff;
  EXPECT_EQ(LifecycleOptionsFromConfig(cell_config).restart.start_limit_action,
            cell::StartLimitAction::kBackoff);
}

}  // namespace
}  // namespace bulkhead::lifecycle
