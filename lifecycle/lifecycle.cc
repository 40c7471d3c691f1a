// SPDX-License-Identifier: MIT
// Lifecycle: kTable holds one handler per (state, event); every handler appends the actions of its
// entry. Handle() reads the clock once, checks the spawn invariant and dispatches. Loop thread
// only. Longer than ~600 lines on purpose: the table and the handlers it names are read together,
// entry by entry (as s6-supervise keeps its actions[state][event] and their functions in one
// file); cutting them apart would make a transition harder to follow, not easier.
#include "lifecycle/lifecycle.h"

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <utility>

#include "base/check.h"

namespace bulkhead::lifecycle {
namespace {

using State = Lifecycle::State;
using EventType = Lifecycle::Event::Type;
using ActionType = Lifecycle::Action::Type;

size_t Index(State state) { return static_cast<size_t>(state); }
size_t Index(EventType type) { return static_cast<size_t>(type); }

// systemd's clean exit (systemd.service(5), Restart= and SuccessExitStatus=): status 0, or death by
// SIGHUP, SIGINT, SIGTERM or SIGPIPE, the signals a service is asked to end by. restart =
// "on-failure" does not restart it, and "never" leaves the cell stopped, not failed.
bool IsCleanExit(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status) == 0;
  if (!WIFSIGNALED(wait_status)) return false;
  const int signal = WTERMSIG(wait_status);
  return signal == SIGHUP || signal == SIGINT || signal == SIGTERM || signal == SIGPIPE;
}

std::string Ms(uint64_t ms) { return std::to_string(ms) + " ms"; }

// For status: "0.2 s", "2.1 s" below 10 s, then whole seconds: "37 s".
std::string Seconds(uint64_t ms) {
  char text[32];
  if (ms < 10'000) {
    std::snprintf(text, sizeof text, "%.1f s", static_cast<double>(ms) / 1000.0);
  } else {
    std::snprintf(text, sizeof text, "%llu s", static_cast<unsigned long long>(ms / 1000));
  }
  return text;
}

// What is left of a wait, as Seconds but rounded up: a wait not over never reads "0.0 s".
std::string SecondsLeft(uint64_t ms) {
  return Seconds(ms < 10'000 ? (ms + 99) / 100 * 100 : (ms + 999) / 1000 * 1000);
}

// "SIGTERM" for the signals a config may name, else "signal N".
std::string SignalText(int signal) {
  switch (signal) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGHUP:
      return "SIGHUP";
    case SIGQUIT:
      return "SIGQUIT";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGUSR2:
      return "SIGUSR2";
    case SIGKILL:
      return "SIGKILL";
  }
  return "signal " + std::to_string(signal);
}

}  // namespace

// Rows: states in State order. Columns: events in Event::Type order:
//   StartRequested, RestartRequested, StopRequested, Spawned, SpawnFailed, Ready, WatchdogPing,
//   Drained, Exited, StopTimeout, BackoffElapsed, Stalled, WatchdogMissed, StartTimeout.
const Lifecycle::Handler Lifecycle::kTable[kStateCount][Event::kTypeCount] = {
    // stopped
    {&Lifecycle::StartFresh, &Lifecycle::StartFresh, &Lifecycle::AlreadyStopped,
     &Lifecycle::IgnoreNoSpawn, &Lifecycle::IgnoreNoSpawn, &Lifecycle::IgnoreNoWorker,
     &Lifecycle::IgnoreNoWorker, &Lifecycle::IgnoreNotDraining, &Lifecycle::IgnoreNoWorker,
     &Lifecycle::IgnoreStaleTimer, &Lifecycle::IgnoreStaleTimer, &Lifecycle::IgnoreNoWorker,
     &Lifecycle::IgnoreNoWorker, &Lifecycle::IgnoreStaleTimer},
    // starting
    {&Lifecycle::AlreadyStarted, &Lifecycle::RestartWorker, &Lifecycle::StopWorker,
     &Lifecycle::OnSpawned, &Lifecycle::OnSpawnFailed, &Lifecycle::OnReady,
     &Lifecycle::OnWatchdogPing, &Lifecycle::IgnoreNotDraining, &Lifecycle::OnWorkerExit,
     &Lifecycle::IgnoreStaleTimer, &Lifecycle::IgnoreStaleTimer, &Lifecycle::KillStalled,
     &Lifecycle::KillStalled, &Lifecycle::StopUnready},
    // running
    {&Lifecycle::AlreadyStarted, &Lifecycle::RestartWorker, &Lifecycle::StopWorker,
     &Lifecycle::IgnoreNoSpawn, &Lifecycle::IgnoreNoSpawn, &Lifecycle::IgnoreAlreadyReady,
     &Lifecycle::OnWatchdogPing, &Lifecycle::IgnoreNotDraining, &Lifecycle::OnWorkerExit,
     &Lifecycle::IgnoreStaleTimer, &Lifecycle::IgnoreStaleTimer, &Lifecycle::KillStalled,
     &Lifecycle::KillStalled, &Lifecycle::IgnoreStaleTimer},
    // stopping
    {&Lifecycle::StartAfterStop, &Lifecycle::StartAfterStop, &Lifecycle::StopAfterStop,
     &Lifecycle::IgnoreNoSpawn, &Lifecycle::IgnoreNoSpawn, &Lifecycle::IgnoreWhileStopping,
     &Lifecycle::IgnoreWhileStopping, &Lifecycle::OnDrained, &Lifecycle::OnStoppedExit,
     &Lifecycle::OnStopTimeout, &Lifecycle::IgnoreStaleTimer, &Lifecycle::KillStalledWhileStopping,
     &Lifecycle::IgnoreWhileStopping, &Lifecycle::IgnoreStaleTimer},
    // backoff
    {&Lifecycle::StartNow, &Lifecycle::StartNow, &Lifecycle::StopFromBackoff,
     &Lifecycle::IgnoreNoSpawn, &Lifecycle::IgnoreNoSpawn, &Lifecycle::IgnoreNoWorker,
     &Lifecycle::IgnoreNoWorker, &Lifecycle::IgnoreNotDraining, &Lifecycle::IgnoreNoWorker,
     &Lifecycle::IgnoreStaleTimer, &Lifecycle::OnBackoffElapsed, &Lifecycle::IgnoreNoWorker,
     &Lifecycle::IgnoreNoWorker, &Lifecycle::IgnoreStaleTimer},
    // failed
    {&Lifecycle::StartFresh, &Lifecycle::StartFresh, &Lifecycle::StopFromFailed,
     &Lifecycle::IgnoreNoSpawn, &Lifecycle::IgnoreNoSpawn, &Lifecycle::IgnoreNoWorker,
     &Lifecycle::IgnoreNoWorker, &Lifecycle::IgnoreNotDraining, &Lifecycle::IgnoreNoWorker,
     &Lifecycle::IgnoreStaleTimer, &Lifecycle::IgnoreStaleTimer, &Lifecycle::IgnoreNoWorker,
     &Lifecycle::IgnoreNoWorker, &Lifecycle::IgnoreStaleTimer},
};

const char* Lifecycle::StateName(State state) {
  switch (state) {
    case State::kStopped:
      return "stopped";
    case State::kStarting:
      return "starting";
    case State::kRunning:
      return "running";
    case State::kStopping:
      return "stopping";
    case State::kBackoff:
      return "backoff";
    case State::kFailed:
      return "failed";
  }
  return "unknown";
}

const char* Lifecycle::EventName(Event::Type type) {
  switch (type) {
    case EventType::kStartRequested:
      return "StartRequested";
    case EventType::kRestartRequested:
      return "RestartRequested";
    case EventType::kStopRequested:
      return "StopRequested";
    case EventType::kSpawned:
      return "Spawned";
    case EventType::kSpawnFailed:
      return "SpawnFailed";
    case EventType::kReady:
      return "Ready";
    case EventType::kWatchdogPing:
      return "WatchdogPing";
    case EventType::kDrained:
      return "Drained";
    case EventType::kExited:
      return "Exited";
    case EventType::kStopTimeout:
      return "StopTimeout";
    case EventType::kBackoffElapsed:
      return "BackoffElapsed";
    case EventType::kStalled:
      return "Stalled";
    case EventType::kWatchdogMissed:
      return "WatchdogMissed";
    case EventType::kStartTimeout:
      return "StartTimeout";
  }
  return "unknown";
}

const char* Lifecycle::ActionName(Action::Type type) {
  switch (type) {
    case ActionType::kSpawn:
      return "Spawn";
    case ActionType::kOpenAdmission:
      return "OpenAdmission";
    case ActionType::kCloseAdmission:
      return "CloseAdmission";
    case ActionType::kRejectQueued:
      return "RejectQueued";
    case ActionType::kFailInFlight:
      return "FailInFlight";
    case ActionType::kSignalStop:
      return "SignalStop";
    case ActionType::kKillAll:
      return "KillAll";
    case ActionType::kArmBackoff:
      return "ArmBackoff";
    case ActionType::kArmStopTimer:
      return "ArmStopTimer";
    case ActionType::kArmWatchdog:
      return "ArmWatchdog";
    case ActionType::kArmStartTimer:
      return "ArmStartTimer";
    case ActionType::kCancelTimers:
      return "CancelTimers";
    case ActionType::kNotifyStopped:
      return "NotifyStopped";
  }
  return "unknown";
}

const char* Lifecycle::ReplyText(Reply reply) {
  switch (reply) {
    case Reply::kAccepted:
      return "ok";
    case Reply::kAlreadyStarted:
      return "already started";
    case Reply::kAlreadyStopped:
      return "already stopped";
    case Reply::kStopInProgress:
      return "stop in progress";
    case Reply::kRestartInProgress:
      return "restart in progress";
  }
  return "unknown";
}

Lifecycle::Lifecycle(Options options, const Clock* clock, cell::RestartPolicy::Jitter jitter)
    : options_(std::move(options)), clock_(clock), policy_(options_.restart, std::move(jitter)) {
  BH_CHECK(clock_ != nullptr);
  now_ms_ = clock_->NowMs();
  since_ms_ = now_ms_;
}

Lifecycle::Transition Lifecycle::Handle(const Event& event) {
  // Spawn is synchronous: its answer comes before anything else can happen.
  BH_CHECK(!spawn_pending_ || event.type == EventType::kSpawned ||
           event.type == EventType::kSpawnFailed);
  BH_CHECK(Index(event.type) < Event::kTypeCount);
  now_ms_ = clock_->NowMs();
  Transition t;
  t.from = state_;
  (this->*kTable[Index(state_)][Index(event.type)])(event, t);
  t.to = state_;
  return t;
}

bool Lifecycle::has_worker() const {
  switch (state_) {
    case State::kStarting:
      return !spawn_pending_;
    case State::kRunning:
    case State::kStopping:
      return true;
    case State::kStopped:
    case State::kBackoff:
    case State::kFailed:
      return false;
  }
  return false;
}

admission::Availability Lifecycle::Availability() const {
  using NextStart = admission::Availability::NextStart;
  admission::Availability availability;
  switch (state_) {
    case State::kStopped:
    case State::kFailed:
      return admission::Availability::NoneDue();
    case State::kStopping:
      if (after_stop_ == AfterStop::kStay) return admission::Availability::NoneDue();
      break;
    case State::kBackoff:
      availability.next_start = NextStart::kAt;
      availability.next_start_at_ms = next_start_at_ms_;
      // Refused while the start is more than queue_timeout away; a request then waits for it.
      availability.refuse_until_ms =
          next_start_at_ms_ - std::min(next_start_at_ms_, options_.queue_timeout_ms);
      break;
    case State::kStarting:
    case State::kRunning:
      break;
  }
  return availability;
}

std::string Lifecycle::StateDetail() const {
  const uint64_t now = clock_->NowMs();
  const std::string in_state = Seconds(now - std::min(now, since_ms_));
  // What becomes of a request while no worker takes it: it waits in the queue, unless there is
  // none.
  const std::string waiting = options_.max_queue > 0
                                  ? "requests queue"
                                  : "requests are refused (max_queue 0: none can wait)";
  switch (state_) {
    case State::kStopped:
      if (reason_.empty()) return "stopped; requests are refused until bulkheadctl start";
      return "stopped after " + last_exit_ + " (" + reason_ +
             "); requests are refused until bulkheadctl start";
    case State::kStarting: {
      if (spawn_pending_) return "starting; " + waiting;
      std::string detail = "starting for " + in_state + ", waiting for " + ReadyWhat() + " (";
      detail += options_.start_timeout_ms > 0
                    ? "start_timeout " + Seconds(options_.start_timeout_ms)
                    : std::string("no start_timeout");
      return detail + "); " + waiting;
    }
    case State::kRunning:
      return "";
    case State::kStopping: {
      std::string detail = after_stop_ == AfterStop::kStart ? "restarting for " : "stopping for ";
      detail += in_state;
      if (!kill_reason_.empty()) detail += " after " + kill_reason_;
      detail += phase_ == StopPhase::kDraining ? ", draining requests in flight"
                : phase_ == StopPhase::kSignalled
                    ? ", " + SignalText(options_.stop_signal) + " sent"
                    : ", SIGKILL sent";
      if (after_stop_ == AfterStop::kStay) return detail + "; requests are refused";
      return detail + "; " + waiting + (options_.max_queue > 0 ? " for the next worker" : "");
    }
    case State::kBackoff: {
      const uint64_t left = next_start_at_ms_ > now ? next_start_at_ms_ - now : 0;
      const std::string next = "next start in " + SecondsLeft(left) +
                               (RefusesRequests() ? "; requests are refused (longer than "
                                                    "queue_timeout " +
                                                        Seconds(options_.queue_timeout_ms) + ")"
                                                  : "; " + waiting);
      if (!crash_loop_.empty()) return crash_loop_ + ", last " + last_exit_ + "; " + next;
      return "backoff after " + last_exit_ + ", " + next;
    }
    case State::kFailed:
      if (!gave_up_) {
        return "failed after " + last_exit_ + " (" + reason_ +
               "); requests are refused until bulkheadctl start";
      }
      return "failed: crash-looping and start_limit_action = \"fail\" (" + reason_ +
             "); no start is due: requests are refused until bulkheadctl start or restart";
  }
  return "";
}

bool Lifecycle::CrashLooping() const {
  switch (state_) {
    case State::kStopped:
      return false;
    case State::kFailed:
      return gave_up_;
    case State::kStarting:
    case State::kRunning:
    case State::kStopping:
    case State::kBackoff:
      break;
  }
  if (!policy_.crash_looping()) return false;
  const uint64_t now = clock_->NowMs();
  return !(has_worker() && now >= worker_started_at_ms_ &&
           now - worker_started_at_ms_ >= options_.restart.reset_after_ms);
}

uint32_t Lifecycle::RetryAfterMs() const { return Availability().RetryAfterMs(clock_->NowMs()); }

// --- helpers ---

void Lifecycle::Enter(State state) {
  if (state != State::kBackoff) crash_loop_.clear();
  if (state_ == state) return;
  state_ = state;
  since_ms_ = now_ms_;
}

void Lifecycle::Add(Transition& t, Action::Type type) {
  Action action;
  action.type = type;
  t.actions.push_back(std::move(action));
}

void Lifecycle::AddWatchdogArm(std::vector<Action>& actions) const {
  if (options_.watchdog_ms == 0) return;
  Action arm;
  arm.type = ActionType::kArmWatchdog;
  arm.ms = options_.watchdog_ms;
  actions.push_back(arm);
}

void Lifecycle::Log(Transition& t, LogLevel level, std::string line) {
  t.log_level = level;
  t.log = std::move(line);
}

std::vector<Lifecycle::Action> Lifecycle::WorkerReplaced() {
  BH_CHECK(state_ == State::kRunning);
  now_ms_ = clock_->NowMs();
  policy_.Reset();
  policy_.RecordStart(now_ms_);
  reason_.clear();
  ++starts_;
  ++restarts_;
  worker_started_at_ms_ = now_ms_;
  std::vector<Action> actions;
  AddWatchdogArm(actions);
  return actions;
}

void Lifecycle::RestoreCounts(uint64_t starts, uint64_t restarts, std::string last_exit) {
  BH_CHECK(state_ == State::kStopped && starts_ == 0 && !spawn_pending_);
  starts_ = starts;
  restarts_ = restarts;
  last_exit_ = std::move(last_exit);
}

std::vector<Lifecycle::Action> Lifecycle::Adopt(uint64_t worker_uptime_ms) {
  BH_CHECK(state_ == State::kStopped && !spawn_pending_);
  now_ms_ = clock_->NowMs();
  Enter(State::kRunning);
  worker_started_at_ms_ = now_ms_ - std::min(now_ms_, worker_uptime_ms);
  std::vector<Action> actions;
  Action open;
  open.type = ActionType::kOpenAdmission;
  actions.push_back(open);
  AddWatchdogArm(actions);
  return actions;
}

std::vector<Lifecycle::Action> Lifecycle::AdoptBackoff(uint32_t consecutive_failures,
                                                       uint64_t next_start_in_ms) {
  BH_CHECK(state_ == State::kStopped && !spawn_pending_);
  now_ms_ = clock_->NowMs();
  policy_.RestoreSteps(consecutive_failures);
  Enter(State::kBackoff);
  next_start_at_ms_ = now_ms_ + next_start_in_ms;
  std::vector<Action> actions;
  Action open;
  open.type = ActionType::kOpenAdmission;
  actions.push_back(open);
  Action arm;
  arm.type = ActionType::kArmBackoff;
  arm.ms = next_start_in_ms;
  actions.push_back(arm);
  return actions;
}

void Lifecycle::RestoreInStateFor(uint64_t in_state_ms) {
  const uint64_t now = clock_->NowMs();
  since_ms_ = now - std::min(now, in_state_ms);
}

Lifecycle::CarriedCrashLoop Lifecycle::CarryCrashLoop() const {
  return {.window = policy_.CarryWindow(clock_->NowMs()), .words = crash_loop_};
}

void Lifecycle::RestoreCrashLoop(const CarriedCrashLoop& carried) {
  BH_CHECK(state_ == State::kStopped && !spawn_pending_);
  policy_.RestoreWindow(carried.window, clock_->NowMs());
  // Kept by AdoptBackoff's Enter(kBackoff); any other state clears it.
  crash_loop_ = carried.words;
}

void Lifecycle::AdoptFailed(std::string reason, bool gave_up) {
  BH_CHECK(state_ == State::kStopped && !spawn_pending_);
  now_ms_ = clock_->NowMs();
  Enter(State::kFailed);
  next_start_at_ms_ = 0;
  reason_ = std::move(reason);
  gave_up_ = gave_up;
}

void Lifecycle::BeginStart(Transition& t) {
  Enter(State::kStarting);
  reason_.clear();
  next_start_at_ms_ = 0;
  kill_reason_.clear();
  policy_.RecordStart(now_ms_);
  ++starts_;
  spawn_pending_ = true;
  Add(t, ActionType::kSpawn);
}

void Lifecycle::BeginStop(uint32_t in_flight, bool refuse, Transition& t) {
  const bool drain = state_ == State::kRunning && in_flight > 0;
  Enter(State::kStopping);
  kill_reason_.clear();
  Add(t, ActionType::kCancelTimers);
  Add(t, ActionType::kCloseAdmission);
  if (refuse) {
    Add(t, ActionType::kRejectQueued);
    t.actions.back().reason = ipc::Reason::kUnavailable;
  }
  const std::string what = refuse ? "stopping" : "restarting";
  // stop_timeout bounds the whole stop, drain included (systemd's TimeoutStopSec=, Kubernetes'
  // terminationGracePeriodSeconds): SIGKILL comes at this deadline whatever phase it finds.
  stop_started_ms_ = now_ms_;
  stop_deadline_ms_ = now_ms_ + options_.stop_timeout_ms;
  if (drain) {
    phase_ = StopPhase::kDraining;
    Add(t, ActionType::kArmStopTimer);
    t.actions.back().ms = options_.stop_timeout_ms;
    Log(t, LogLevel::kInfo,
        what + ": waiting up to " + Ms(options_.stop_timeout_ms) + " for " +
            std::to_string(in_flight) + " request" + (in_flight == 1 ? "" : "s") + " in flight");
  } else {
    SendStopSignal(t);
    Log(t, LogLevel::kInfo, what + " worker (" + SignalText(options_.stop_signal) + ")");
  }
}

void Lifecycle::SendStopSignal(Transition& t) {
  phase_ = StopPhase::kSignalled;
  Add(t, ActionType::kSignalStop);
  t.actions.back().signal = options_.stop_signal;
  // What the drain left of stop_timeout.
  Add(t, ActionType::kArmStopTimer);
  t.actions.back().ms = stop_deadline_ms_ > now_ms_ ? stop_deadline_ms_ - now_ms_ : 0;
}

void Lifecycle::EnterFailed(Transition& t) {
  Enter(State::kFailed);
  next_start_at_ms_ = 0;
  gave_up_ = false;
  Add(t, ActionType::kRejectQueued);
  t.actions.back().reason = ipc::Reason::kUnavailable;
}

void Lifecycle::EnterStopped(Transition& t) {
  Enter(State::kStopped);
  next_start_at_ms_ = 0;
  Add(t, ActionType::kRejectQueued);
  t.actions.back().reason = ipc::Reason::kUnavailable;
  Add(t, ActionType::kNotifyStopped);
}

void Lifecycle::RecordExit(const Event& e) {
  last_exit_ = e.text.empty() ? "exited" : e.text;
  // The kernel's OOM killer (memory.events), not a signal someone sent: said apart from "signal 9".
  if (e.oom_killed) last_exit_ = "oom-kill";
  if (!kill_reason_.empty()) last_exit_ = kill_reason_ + " (" + last_exit_ + ")";
}

void Lifecycle::ApplyPolicy(bool clean, const std::string& log_prefix, Transition& t) {
  cell::RestartPolicy::Decision decision = policy_.OnExit(now_ms_, clean, last_exit_);
  switch (decision.verdict) {
    case cell::RestartPolicy::Verdict::kRestart:
      Enter(State::kBackoff);
      next_start_at_ms_ = now_ms_ + decision.delay_ms;
      Add(t, ActionType::kArmBackoff);
      t.actions.back().ms = decision.delay_ms;
      if (decision.crash_looping) {
        crash_loop_ = std::move(decision.reason);
        // An error once, when the loop begins; a warning at each turn of it.
        Log(t, decision.crash_loop_began ? LogLevel::kError : LogLevel::kWarning,
            log_prefix + "; " + crash_loop_ + "; restarting in " + Ms(decision.delay_ms));
        break;
      }
      Log(t, LogLevel::kWarning, log_prefix + "; restarting in " + Ms(decision.delay_ms));
      break;
    case cell::RestartPolicy::Verdict::kStay:
      reason_ = std::move(decision.reason);
      if (!clean) {
        // A failure that is not restarted leaves the cell failed, as systemd leaves a
        // Restart=no unit that crashed "failed" and Kubernetes a restartPolicy: Never pod
        // "Failed"; only a clean exit leaves it stopped.
        EnterFailed(t);
        Log(t, LogLevel::kError, log_prefix + "; not restarting: " + reason_);
        break;
      }
      EnterStopped(t);
      Log(t, LogLevel::kInfo, log_prefix + "; not restarting: " + reason_);
      break;
    case cell::RestartPolicy::Verdict::kGiveUp:
      reason_ = std::move(decision.reason);
      EnterFailed(t);
      gave_up_ = true;
      Log(t, LogLevel::kError, log_prefix + "; " + reason_);
      break;
  }
}

std::string Lifecycle::ReadyWhat() const {
  if (options_.ready == config::ReadyMode::kHttp) return "2xx to GET " + options_.ready_http_path;
  return "READY=1";
}

std::string Lifecycle::StalledText(const Event& e) const {
  if (e.type == EventType::kWatchdogMissed) {
    return "watchdog timeout: no WATCHDOG=1 within " + Ms(options_.watchdog_ms);
  }
  return "stalled: " + (e.text.empty() ? std::string("no reply") : e.text);
}

// --- commands ---

void Lifecycle::StartFresh(const Event& e, Transition& t) {
  policy_.Reset();
  BeginStart(t);
}

void Lifecycle::StartNow(const Event& e, Transition& t) {
  Add(t, ActionType::kCancelTimers);
  StartFresh(e, t);
}

void Lifecycle::AlreadyStarted(const Event& e, Transition& t) {
  t.reply = Reply::kAlreadyStarted;
  t.ignored = "already started";
}

void Lifecycle::AlreadyStopped(const Event& e, Transition& t) {
  t.reply = Reply::kAlreadyStopped;
  t.ignored = "already stopped";
  // Whoever waits for the stop (supervisor shutdown) can go on.
  Add(t, ActionType::kNotifyStopped);
}

void Lifecycle::RestartWorker(const Event& e, Transition& t) {
  policy_.Reset();
  reason_.clear();
  after_stop_ = AfterStop::kStart;
  BeginStop(e.in_flight, /*refuse=*/false, t);
}

void Lifecycle::StopWorker(const Event& e, Transition& t) {
  after_stop_ = AfterStop::kStay;
  BeginStop(e.in_flight, /*refuse=*/true, t);
}

void Lifecycle::StartAfterStop(const Event& e, Transition& t) {
  if (after_stop_ != AfterStop::kStay) {
    t.reply = Reply::kRestartInProgress;
    t.ignored = "restart in progress";
    return;
  }
  policy_.Reset();
  reason_.clear();
  after_stop_ = AfterStop::kStart;
  Log(t, LogLevel::kInfo, "will start again once the worker has stopped");
}

void Lifecycle::StopAfterStop(const Event& e, Transition& t) {
  if (after_stop_ == AfterStop::kStay) {
    t.reply = Reply::kStopInProgress;
    t.ignored = "stop in progress";
    return;
  }
  after_stop_ = AfterStop::kStay;
  Add(t, ActionType::kRejectQueued);
  t.actions.back().reason = ipc::Reason::kUnavailable;
  Log(t, LogLevel::kInfo, "stop requested: the worker will not be started again");
}

void Lifecycle::StopFromBackoff(const Event& e, Transition& t) {
  Add(t, ActionType::kCancelTimers);
  EnterStopped(t);
  Log(t, LogLevel::kInfo, "stopped while waiting to restart");
}

void Lifecycle::StopFromFailed(const Event& e, Transition& t) { EnterStopped(t); }

// --- the worker process ---

void Lifecycle::OnSpawned(const Event& e, Transition& t) {
  if (!spawn_pending_) {
    IgnoreNoSpawn(e, t);
    return;
  }
  spawn_pending_ = false;
  worker_started_at_ms_ = now_ms_;
  AddWatchdogArm(t.actions);
  if (options_.ready == config::ReadyMode::kExec) {
    Enter(State::kRunning);
    Add(t, ActionType::kOpenAdmission);
    Log(t, LogLevel::kInfo, "worker started");
  } else if (options_.start_timeout_ms > 0) {
    Add(t, ActionType::kArmStartTimer);
    t.actions.back().ms = options_.start_timeout_ms;
    Log(t, LogLevel::kInfo,
        "worker started; waiting up to " + Ms(options_.start_timeout_ms) + " for " + ReadyWhat());
  } else {
    Log(t, LogLevel::kInfo, "worker started; waiting for " + ReadyWhat());
  }
}

void Lifecycle::OnSpawnFailed(const Event& e, Transition& t) {
  if (!spawn_pending_) {
    IgnoreNoSpawn(e, t);
    return;
  }
  spawn_pending_ = false;
  last_exit_ = "start failed: " + e.text;
  ApplyPolicy(/*clean=*/false, "cannot start worker: " + e.text, t);
  // A start that failed is an error whatever follows; this one line says it (with what follows).
  t.log_level = LogLevel::kError;
}

void Lifecycle::OnReady(const Event& e, Transition& t) {
  // ready = "http:/PATH" is ready when the probe answers 2xx, as a Kubernetes readinessProbe: a
  // READY=1 the worker sends besides (gunicorn's arbiter sends one once it has booted, before its
  // workers serve) neither opens admission nor is logged as what made the worker ready.
  if (options_.ready == config::ReadyMode::kHttp && !e.probe) {
    t.ignored = "READY=1 with ready = \"http:PATH\": readiness waits for the probe's 2xx";
    return;
  }
  Enter(State::kRunning);
  Add(t, ActionType::kOpenAdmission);
  Log(t, LogLevel::kInfo, "worker ready (" + e.text + ")");
}

void Lifecycle::OnWatchdogPing(const Event& e, Transition& t) {
  if (options_.watchdog_ms == 0) {
    t.ignored = "no watchdog configured";
    return;
  }
  Add(t, ActionType::kArmWatchdog);
  t.actions.back().ms = options_.watchdog_ms;
}

void Lifecycle::OnWorkerExit(const Event& e, Transition& t) {
  RecordExit(e);
  Add(t, ActionType::kCloseAdmission);
  Add(t, ActionType::kCancelTimers);
  Add(t, ActionType::kKillAll);
  Add(t, ActionType::kFailInFlight);
  t.actions.back().reason = e.oom_killed ? ipc::Reason::kOomKilled : ipc::Reason::kWorkerDied;
  t.actions.back().message = last_exit_;
  const bool clean = IsCleanExit(e.wait_status) && !e.oom_killed;
  ApplyPolicy(clean, "worker exited: " + last_exit_, t);
}

void Lifecycle::OnStoppedExit(const Event& e, Transition& t) {
  RecordExit(e);
  Add(t, ActionType::kCancelTimers);
  Add(t, ActionType::kKillAll);
  Add(t, ActionType::kFailInFlight);
  t.actions.back().reason = e.oom_killed ? ipc::Reason::kOomKilled : ipc::Reason::kWorkerDied;
  t.actions.back().message = last_exit_;
  switch (after_stop_) {
    case AfterStop::kStay:
      EnterStopped(t);
      Log(t, LogLevel::kInfo, "worker exited: " + last_exit_ + "; stopped");
      break;
    case AfterStop::kStart:
      Log(t, LogLevel::kInfo, "worker exited: " + last_exit_ + "; starting again");
      ++restarts_;
      BeginStart(t);
      break;
    case AfterStop::kPolicy:
      ApplyPolicy(/*clean=*/false, "worker exited: " + last_exit_, t);
      break;
  }
}

void Lifecycle::OnDrained(const Event& e, Transition& t) {
  if (phase_ != StopPhase::kDraining) {
    IgnoreNotDraining(e, t);
    return;
  }
  SendStopSignal(t);
  Log(t, LogLevel::kInfo,
      "requests drained; stopping worker (" + SignalText(options_.stop_signal) + ")");
}

void Lifecycle::OnStopTimeout(const Event& e, Transition& t) {
  switch (phase_) {
    case StopPhase::kDraining:
      // The whole stop_timeout went to the drain: nothing is left for stop_signal.
      phase_ = StopPhase::kKilled;
      Add(t, ActionType::kKillAll);
      Log(t, LogLevel::kWarning,
          "requests still in flight at stop_timeout (" + Ms(now_ms_ - stop_started_ms_) +
              "): sending SIGKILL");
      break;
    case StopPhase::kSignalled:
      phase_ = StopPhase::kKilled;
      Add(t, ActionType::kKillAll);
      Log(t, LogLevel::kWarning,
          "worker still running at stop_timeout (" + Ms(now_ms_ - stop_started_ms_) + ", " +
              SignalText(options_.stop_signal) + " sent): sending SIGKILL");
      break;
    case StopPhase::kKilled:
      t.ignored = "already killed";
      break;
  }
}

void Lifecycle::OnBackoffElapsed(const Event& e, Transition& t) {
  ++restarts_;
  BeginStart(t);
}

void Lifecycle::KillStalled(const Event& e, Transition& t) {
  kill_reason_ = StalledText(e);
  Enter(State::kStopping);
  phase_ = StopPhase::kKilled;
  after_stop_ = AfterStop::kPolicy;
  Add(t, ActionType::kCancelTimers);
  Add(t, ActionType::kCloseAdmission);
  Add(t, ActionType::kKillAll);
  Add(t, ActionType::kFailInFlight);
  t.actions.back().reason = ipc::Reason::kStalled;
  t.actions.back().message = kill_reason_;
  Log(t, LogLevel::kWarning, kill_reason_ + "; killing worker");
}

void Lifecycle::KillStalledWhileStopping(const Event& e, Transition& t) {
  if (phase_ == StopPhase::kKilled) {
    t.ignored = "already killed";
    return;
  }
  kill_reason_ = StalledText(e);
  phase_ = StopPhase::kKilled;
  Add(t, ActionType::kKillAll);
  Add(t, ActionType::kFailInFlight);
  t.actions.back().reason = ipc::Reason::kStalled;
  t.actions.back().message = kill_reason_;
  Log(t, LogLevel::kWarning, kill_reason_ + "; killing worker");
}

void Lifecycle::StopUnready(const Event& e, Transition& t) {
  // systemd.service(5) TimeoutStartSec=: the worker is stopped as on a restart, then its end goes
  // through the restart policy as a failed start (never clean, whatever its exit status).
  std::string why = "start timeout: no " + ReadyWhat() + " within " +
                    Ms(now_ms_ - worker_started_at_ms_) + " of the start";
  after_stop_ = AfterStop::kPolicy;
  policy_.MarkStartFailed();
  BeginStop(/*in_flight=*/0, /*refuse=*/false, t);
  Log(t, LogLevel::kWarning, why + "; stopping worker (" + SignalText(options_.stop_signal) + ")");
  kill_reason_ = std::move(why);
}

// --- ignored ---

void Lifecycle::IgnoreNoWorker(const Event& e, Transition& t) { t.ignored = "no worker"; }
void Lifecycle::IgnoreNoSpawn(const Event& e, Transition& t) { t.ignored = "no spawn pending"; }
void Lifecycle::IgnoreStaleTimer(const Event& e, Transition& t) { t.ignored = "stale timer"; }
void Lifecycle::IgnoreNotDraining(const Event& e, Transition& t) { t.ignored = "not draining"; }
void Lifecycle::IgnoreAlreadyReady(const Event& e, Transition& t) { t.ignored = "already ready"; }
void Lifecycle::IgnoreWhileStopping(const Event& e, Transition& t) {
  t.ignored = "worker is stopping";
}

void Lifecycle::SetOptions(const Options& options) {
  options_ = options;
  policy_.SetOptions(options.restart);
}

Lifecycle::Options LifecycleOptionsFromConfig(const config::CellConfig& cell_config) {
  Lifecycle::Options options;
  switch (cell_config.restart) {
    case config::RestartMode::kAlways:
      options.restart.mode = cell::RestartMode::kAlways;
      break;
    case config::RestartMode::kOnFailure:
      options.restart.mode = cell::RestartMode::kOnFailure;
      break;
    case config::RestartMode::kNever:
      options.restart.mode = cell::RestartMode::kNever;
      break;
  }
  options.restart.delay_ms = static_cast<uint64_t>(cell_config.restart_delay.count());
  options.restart.max_delay_ms = static_cast<uint64_t>(cell_config.restart_max_delay.count());
  options.restart.reset_after_ms = static_cast<uint64_t>(cell_config.restart_reset_after.count());
  options.restart.start_limit_burst = cell_config.start_limit_burst;
  options.restart.start_limit_interval_ms =
      static_cast<uint64_t>(cell_config.start_limit_interval.count());
  options.restart.start_limit_action =
      cell_config.start_limit_action == config::StartLimitAction::kFail
          ? cell::StartLimitAction::kFail
          : cell::StartLimitAction::kBackoff;
  options.ready = cell_config.ready;
  options.ready_http_path = cell_config.ready_http_path;
  options.watchdog_ms = static_cast<uint64_t>(cell_config.watchdog.count());
  options.stop_signal = cell_config.stop_signal;
  options.stop_timeout_ms = static_cast<uint64_t>(cell_config.stop_timeout.count());
  options.queue_timeout_ms = static_cast<uint64_t>(cell_config.queue_timeout.count());
  options.max_queue = cell_config.max_queue;
  options.start_timeout_ms = static_cast<uint64_t>(cell_config.start_timeout.count());
  return options;
}

}  // namespace bulkhead::lifecycle
