// SPDX-License-Identifier: MIT
// Lifecycle: the life of one cell's worker as one explicit state machine, a table of handlers
// indexed by (state, event) like s6-supervise's actions[state][event]. The Cell feeds it events
// (operator commands, news about the worker process, timer expiries) and executes the actions each
// Transition lists, in order. The Lifecycle does no I/O, arms no timer and sends no signal itself;
// it reads time from an injected Clock and consults a cell::RestartPolicy for what follows an exit.
// REQUIRES: loop thread only (one owner, not thread-safe).
#pragma once

#include <signal.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "admission/availability.h"
#include "base/clock.h"
#include "base/log.h"
#include "cell/restart_policy.h"
#include "config/config.h"
#include "ipc/frame.h"

namespace bulkhead::lifecycle {

// States, events and actions
// --------------------------
// stopped   No worker; new requests are refused (REJECTED unavailable). Initial state.
// starting  A spawn is pending, or the worker runs but has not sent READY=1 yet (ready = "notify"),
//           or its HTTP probe has not answered 2xx yet (ready = "http:/PATH").
//           Admission is closed: new requests queue (Bulkhead semantics) until the worker is ready.
//           A worker not ready within start_timeout is stopped as on a restart (stop_signal, then
//           SIGKILL after stop_timeout) and its start counts as failed: the restart policy decides
//           (systemd.service(5) TimeoutStartSec=). With ready = "exec" the exec is the readiness.
// running   The worker is ready; admission is open.
// stopping  The worker is being stopped: for `stop` (new requests refused), for `restart` (new
//           requests queue for the next worker), because it stalled (killed, then the restart
//           policy decides) or because it missed start_timeout (as a restart, then the policy).
//           Phases: draining (waiting for in-flight requests), signalled (stop_signal sent),
//           killed (SIGKILL sent). stop_timeout bounds draining and signalled together: SIGKILL
//           follows stop_timeout after the stop began, whatever the phase.
// backoff   The worker ended and the next start waits for the backoff timer. New requests queue,
//           unless the wait is longer than queue_timeout: then they are refused with retry-after,
//           the time to the next start. Crash-looping (the start limit was hit and
//           start_limit_action is "backoff", cell::RestartPolicy) is a backoff too, with longer
//           waits (at least start_limit_interval / start_limit_burst, doubling up to
//           restart_max_delay): CrashLooping() and StateDetail() say so.
// failed    The start limit was reached with start_limit_action = "fail" ("gave up: ..."), or a
//           failure was not restarted (restart = "never"); no worker, no timer, no CPU spent, new
//           requests refused. Only `start` or `restart` leaves it.
//
// Commands: `start` and `restart` reset the RestartPolicy (start counts and backoff step) and
// start at once from stopped, backoff or failed. `restart` of a live worker stops it gracefully
// (as `stop`, but the queue is kept) and spawns the next one only after the exit was reaped; while
// that runs, a further start/restart is answered kRestartInProgress. A start/restart during a
// `stop` turns it into a restart; a stop during a restart cancels the new start.
//
// Invariants the tests check for every (state, event): the Spawn action is always the last of a
// list (the WorkerRunner may handle Spawned / SpawnFailed from inside it); CancelTimers never
// follows an Arm* action in one list; entering stopped always lists RejectQueued and NotifyStopped,
// entering failed lists RejectQueued.
class Lifecycle {
 public:
  enum class State : uint8_t { kStopped, kStarting, kRunning, kStopping, kBackoff, kFailed };
  static constexpr size_t kStateCount = 6;
  // "stopped", "starting", "running", "stopping", "backoff", "failed": as `bulkheadctl status`.
  static const char* StateName(State state);

  struct Options {
    cell::RestartPolicy::Options restart;
    config::ReadyMode ready = config::ReadyMode::kExec;
    // With ready = kHttp: the probe's path ("/healthz"), for log lines and StateDetail.
    std::string ready_http_path;
    // Longest gap between two WATCHDOG=1 (sd_notify(3)), from the spawn on; 0: no watchdog.
    uint64_t watchdog_ms = 0;
    // Sent to stop the worker (systemd.kill(5) KillSignal=); who gets it is the cell's kill_mode.
    int stop_signal = SIGTERM;
    // Bound of a whole stop, in ms (systemd's TimeoutStopSec=): in-flight requests drain, then
    // stop_signal is sent with what is left; SIGKILL at stop_timeout_ms after the stop began,
    // also when the drain used all of it (then stop_signal is never sent).
    uint64_t stop_timeout_ms = 5000;
    // The cell's queue_timeout: a backoff longer than this refuses new requests at once.
    uint64_t queue_timeout_ms = 1000;
    // The cell's max_queue: with 0, no request waits for a worker (StateDetail says so).
    uint32_t max_queue = 0;
    // Longest wait for READY=1 (ready = "notify") or a 2xx probe (ready = "http:/PATH") after the
    // spawn; 0: wait forever.
    uint64_t start_timeout_ms = 90'000;
  };

  struct Event {
    enum class Type : uint8_t {
      kStartRequested,    // boot, or `bulkheadctl start`
      kRestartRequested,  // `bulkheadctl restart`
      kStopRequested,     // `bulkheadctl stop`, or supervisor shutdown
      kSpawned,           // answer to Spawn: the worker exec'd
      kSpawnFailed,       // answer to Spawn: fork or exec failed; `text` = the error
      kReady,             // READY=1 from the worker, or its HTTP probe answered 2xx; `text` = which
      kWatchdogPing,      // WATCHDOG=1 from the worker
      kDrained,           // the cell's last in-flight request finished (running fell to 0)
      kExited,            // the worker was reaped
      kStopTimeout,       // the ArmStopTimer timer fired
      kBackoffElapsed,    // the ArmBackoff timer fired
      kStalled,           // stall_timeout passed with requests in flight and no reply; `text` = why
      kWatchdogMissed,    // the ArmWatchdog timer fired
      kStartTimeout,      // the ArmStartTimer timer fired
    };
    static constexpr size_t kTypeCount = 14;

    Type type = Type::kStartRequested;
    // kStopRequested, kRestartRequested: requests in flight in the worker now (Bulkhead running()).
    uint32_t in_flight = 0;
    // kExited: the status from waitpid(2).
    int wait_status = 0;
    // kExited: the cgroup reports an OOM kill of this worker (memory.events oom_kill).
    bool oom_killed = false;
    // kReady: the HTTP readiness probe answered 2xx (else the worker sent READY=1).
    bool probe = false;
    // kSpawnFailed: the error ("exec /bin/x: No such file or directory"); kExited: the wait status
    // described ("exit 3", "signal 9", as cell::DescribeWaitStatus); kStalled: why, shown to
    // clients after "stalled: " ("no reply for 5000 ms").
    std::string text;

    static Event StartRequested() { return Of(Type::kStartRequested); }
    static Event RestartRequested(uint32_t in_flight) {
      Event e = Of(Type::kRestartRequested);
      e.in_flight = in_flight;
      return e;
    }
    static Event StopRequested(uint32_t in_flight) {
      Event e = Of(Type::kStopRequested);
      e.in_flight = in_flight;
      return e;
    }
    static Event Spawned() { return Of(Type::kSpawned); }
    static Event SpawnFailed(std::string error) {
      Event e = Of(Type::kSpawnFailed);
      e.text = std::move(error);
      return e;
    }
    // READY=1 from the worker (sd_notify(3)).
    static Event Ready() {
      Event e = Of(Type::kReady);
      e.text = "READY=1";
      return e;
    }
    // The readiness probe of ready = "http:/PATH" answered 2xx; `what` says so for the log line
    // ("GET /healthz answered 200").
    static Event ProbeReady(std::string what) {
      Event e = Of(Type::kReady);
      e.text = std::move(what);
      e.probe = true;
      return e;
    }
    static Event WatchdogPing() { return Of(Type::kWatchdogPing); }
    static Event Drained() { return Of(Type::kDrained); }
    static Event Exited(int wait_status, std::string description, bool oom_killed = false) {
      Event e = Of(Type::kExited);
      e.wait_status = wait_status;
      e.text = std::move(description);
      e.oom_killed = oom_killed;
      return e;
    }
    static Event StopTimeout() { return Of(Type::kStopTimeout); }
    static Event BackoffElapsed() { return Of(Type::kBackoffElapsed); }
    static Event Stalled(std::string why) {
      Event e = Of(Type::kStalled);
      e.text = std::move(why);
      return e;
    }
    static Event WatchdogMissed() { return Of(Type::kWatchdogMissed); }
    static Event StartTimeout() { return Of(Type::kStartTimeout); }
    static Event Of(Type type) {
      Event e;
      e.type = type;
      return e;
    }
  };
  static const char* EventName(Event::Type type);  // "StartRequested", ...

  // What the WorkerRunner does, per type (the data path's part through DataPathControl). "The
  // worker" is the current one, or the one just reaped.
  struct Action {
    enum class Type : uint8_t {
      // Spawn a worker (cell::Spawn), then Handle(Spawned()) or Handle(SpawnFailed(message)) and
      // execute that transition too. Always the last action of its list.
      kSpawn,
      // Bulkhead::SetOpen(true), then start what waits in the queue.
      kOpenAdmission,
      // Bulkhead::SetOpen(false): nothing more is dispatched; admitted requests queue.
      kCloseAdmission,
      // Reject every queued request with `reason` (unavailable) and retry-after RetryAfterMs().
      kRejectQueued,
      // Answer every request in flight to the worker (and any whose connection broke and waits
      // for the exit) FAILED with `reason` and `message` as payload; their slots are freed.
      kFailInFlight,
      // kill(2) `signal` to the worker: with a cgroup, to every process of it (kill_mode =
      // "control-group") or the worker alone ("mixed"); without one, to its process group.
      kSignalStop,
      // SIGKILL to the whole cell (cgroup.kill, or the worker's process group), also after the
      // worker itself was reaped, so that
      // nothing it left behind runs beside the next worker.
      kKillAll,
      // (Re)start the backoff timer: `ms`, then Handle(BackoffElapsed()).
      kArmBackoff,
      // (Re)start the stop timer: `ms`, then Handle(StopTimeout()).
      kArmStopTimer,
      // (Re)start the watchdog timer: `ms`, then Handle(WatchdogMissed()).
      kArmWatchdog,
      // Start the start timer: `ms`, then Handle(StartTimeout()). Left running after READY=1 (it
      // then fires as a stale timer); every way out of running cancels it.
      kArmStartTimer,
      // Stop the backoff, stop, watchdog and start timers.
      kCancelTimers,
      // The cell has no worker and is stopped: run whatever waits for the stop to finish.
      kNotifyStopped,
    };

    Type type = Type::kSpawn;
    uint64_t ms = 0;                          // kArm*
    int signal = 0;                           // kSignalStop
    ipc::Reason reason = ipc::Reason::kNone;  // kRejectQueued, kFailInFlight
    std::string message;                      // kFailInFlight

    bool operator==(const Action&) const = default;
  };
  static const char* ActionName(Action::Type type);  // "Spawn", ...

  // The answer to a command (StartRequested, RestartRequested, StopRequested), for the control
  // socket. Other events always get kAccepted.
  enum class Reply : uint8_t {
    kAccepted,
    kAlreadyStarted,     // start while starting or running
    kAlreadyStopped,     // stop while stopped
    kStopInProgress,     // stop while a stop is under way
    kRestartInProgress,  // start or restart while a restart is under way
  };
  // "ok", "already started", "already stopped", "stop in progress", "restart in progress".
  static const char* ReplyText(Reply reply);

  struct Transition {
    State from = State::kStopped;
    State to = State::kStopped;
    std::vector<Action> actions;
    Reply reply = Reply::kAccepted;
    // Non-empty when the event was ignored in this state: why ("no worker", "stale timer", ...).
    // Nothing changed and `actions` is empty (except for NotifyStopped on a stop while stopped).
    std::string_view ignored;
    // One line for the cell's log (the WorkerRunner adds the cell name and pid), or empty.
    LogLevel log_level = LogLevel::kInfo;
    std::string log;
  };

  // `clock` must outlive the Lifecycle. `jitter` as cell::RestartPolicy.
  Lifecycle(Options options, const Clock* clock, cell::RestartPolicy::Jitter jitter);
  Lifecycle(const Lifecycle&) = delete;
  Lifecycle& operator=(const Lifecycle&) = delete;

  // Applies `event` at the clock's time. Never throws. REQUIRES: after a Spawn action, the next
  // event is Spawned or SpawnFailed (checked: Spawn is synchronous).
  Transition Handle(const Event& event);

  State state() const { return state_; }
  // When the current state was entered (Clock ms).
  uint64_t since_ms() const { return since_ms_; }
  // A worker process exists (spawned and not yet reaped).
  bool has_worker() const;
  // When the current worker was spawned (Clock ms). Meaningful while has_worker().
  uint64_t worker_started_at_ms() const { return worker_started_at_ms_; }
  // How the last worker ended: "exit 3", "signal 9", "oom-kill",
  // "start failed: exec /bin/x: No such file or directory",
  // "stalled: no reply for 5000 ms (signal 9)"; empty before the first end.
  const std::string& last_exit() const { return last_exit_; }
  // Why the cell is failed ("gave up: 5 starts in 60s, last exit 1", or `restart = "never"` after
  // a failure) or stopped by its restart mode after a clean exit (`restart = "never"`, "exited
  // cleanly and restart = \"on-failure\""); empty otherwise. Cleared by the next start.
  const std::string& reason() const { return reason_; }
  // The cell is crash-looping (Kubernetes' CrashLoopBackOff): the start limit was hit (in backoff
  // it keeps starting, slower; in failed it gave up), and no worker has run restart_reset_after
  // since, nor did an operator start or stop it. A worker running now for restart_reset_after
  // or longer has ended the loop.
  bool CrashLooping() const;
  // Spawn attempts, successful or not.
  uint64_t starts() const { return starts_; }
  // Spawn attempts that replaced an earlier worker: after a backoff, or to finish a restart.
  uint64_t restarts() const { return restarts_; }
  // In backoff: when the next start is due (Clock ms). 0 in every other state.
  uint64_t next_start_at_ms() const { return next_start_at_ms_; }
  // While a stop has sent stop_signal and SIGKILL is not sent yet: when it is due (Clock ms,
  // stop_timeout after the stop began). 0 otherwise.
  uint64_t signalled_stop_deadline_ms() const {
    return state_ == State::kStopping && phase_ == StopPhase::kSignalled ? stop_deadline_ms_ : 0;
  }

  // What admission may do with new requests (admission/availability.h), as the state says:
  // refused until changed with no start due when stopped, failed or stopping for a stop; in a
  // backoff, refused until queue_timeout_ms before its end, which it names; else admitted, with
  // the next start's time unknown (starting, running, stopping for a restart). The runner pushes
  // it to the data path whenever it changes (DataPathControl::SetAvailability).
  admission::Availability Availability() const;
  // New requests must be REJECTED unavailable at once rather than admitted: stopped, failed,
  // stopping for a stop, or in a backoff that ends more than queue_timeout_ms from now.
  bool RefusesRequests() const { return Availability().Refuses(clock_->NowMs()); }
  // The retry-after hint for REJECTED unavailable, in ms: the time to the next start while in
  // backoff (at least 1; crash-looping, up to restart_max_delay), else 0 (unknown: no start is
  // due).
  uint32_t RetryAfterMs() const;
  // Why the cell does not serve now, one line for status (docs/control.md, `state_detail`):
  // "starting for 37 s, waiting for READY=1 (start_timeout 90 s); requests queue",
  // "backoff after exit 1, next start in 2.1 s; requests queue", "crash-looping: 5 starts in
  // 60s, last exit 1; next start in 12 s; requests are refused (...)", "failed: crash-looping,
  // gave up (5 starts in 60s, last exit 1); no start is due; requests are refused until
  // bulkheadctl start or restart". Empty while running.
  std::string StateDetail() const;

  const Options& options() const { return options_; }
  const cell::RestartPolicy& policy() const { return policy_; }

  // A worker swap handed over (lifecycle/worker_swap.h): the running worker is now one the
  // WorkerRunner spawned beside the previous, outside the table (the state stays running). As an
  // operator's restart: the RestartPolicy is reset, a start and a restart are counted, and the
  // worker's run time counts from now. Returns the watchdog's arming (kArmWatchdog with the
  // watchdog's ms) when there is a watchdog, else nothing. REQUIRES: running.
  std::vector<Action> WorkerReplaced();

  // A re-exec (docs/reexec.md), in the new image before anything started: `starts`, `restarts`
  // and `last_exit` continue from the previous image. REQUIRES: stopped, no start yet.
  void RestoreCounts(uint64_t starts, uint64_t restarts, std::string last_exit);
  // A re-exec: the new image takes over a ready worker the previous image ran, outside the table,
  // from stopped to running (RestoreCounts first). The worker has run `worker_uptime_ms` (its run
  // time continues, as far as the clock allows); the RestartPolicy starts afresh. Returns the
  // actions to run: kOpenAdmission, and kArmWatchdog when there is a watchdog. REQUIRES: stopped,
  // no spawn pending.
  std::vector<Action> Adopt(uint64_t worker_uptime_ms);
  // A re-exec: the previous image's cell was in backoff, its next start `next_start_in_ms` away
  // (a duration: the clocks of the two images differ) after `consecutive_failures` failures in a
  // row (the RestartPolicy's steps, so that the next backoff grows on from there). From stopped to
  // backoff, outside the table (RestoreCounts first); the backoff's end is an ordinary
  // BackoffElapsed. The crash loop's start window comes from RestoreCrashLoop. Returns the
  // actions to run: kOpenAdmission (requests queue as in any backoff) and kArmBackoff with
  // `next_start_in_ms`. REQUIRES: stopped, no spawn pending.
  std::vector<Action> AdoptBackoff(uint32_t consecutive_failures, uint64_t next_start_in_ms);
  // A re-exec: the previous image's cell had failed for `reason` (reason()); `gave_up`: it had
  // hit its start limit (a crash loop given up). From stopped to failed, outside the table: no
  // start is due, requests are refused until an operator's start. REQUIRES: stopped, no spawn
  // pending.
  void AdoptFailed(std::string reason, bool gave_up);
  // Whether a failed cell gave up at its start limit (a crash loop), for a re-exec's state.
  bool gave_up() const { return gave_up_; }
  // A re-exec: the start limit's window and crash loop (cell::RestartPolicy::Window) and, in
  // backoff while crash-looping, StateDetail's words for it ("crash-looping: 5 starts in 60s";
  // "" otherwise), as the previous image had them.
  struct CarriedCrashLoop {
    cell::RestartPolicy::Window window;
    std::string words;
  };
  CarriedCrashLoop CarryCrashLoop() const;
  // A re-exec, in the new image once the cell is in the state the previous image had it in (Adopt,
  // AdoptBackoff, AdoptFailed, or stopped): it entered that state `in_state_ms` ago (a duration:
  // the clocks of the two images differ), as far as the clock allows, so that status's "in state
  // for" goes on (since_ms).
  void RestoreInStateFor(uint64_t in_state_ms);
  // A re-exec, in the new image before Adopt or AdoptBackoff: the start limit counts the starts
  // of the previous image, and a crash loop goes on as one (its backoff keeps its words).
  // REQUIRES: stopped, no start yet.
  void RestoreCrashLoop(const CarriedCrashLoop& carried);

  // Reload: new options apply from the next event on (a stop already under way keeps the
  // deadline it set; the next stop uses the new stop_timeout). The RestartPolicy keeps its recorded
  // starts and backoff step (cell::RestartPolicy::SetOptions). REQUIRES: options valid, as for the
  // constructor.
  void SetOptions(const Options& options);

 private:
  enum class StopPhase : uint8_t { kDraining, kSignalled, kKilled };
  // What follows the exit of a worker being stopped.
  enum class AfterStop : uint8_t {
    kStay,    // stop: stay stopped
    kStart,   // restart: start at once
    kPolicy,  // stalled and killed: the restart policy decides, as after a crash
  };
  using Handler = void (Lifecycle::*)(const Event&, Transition&);
  static const Handler kTable[kStateCount][Event::kTypeCount];

  // Table entries.
  void StartFresh(const Event& e, Transition& t);
  void StartNow(const Event& e, Transition& t);
  void AlreadyStarted(const Event& e, Transition& t);
  void AlreadyStopped(const Event& e, Transition& t);
  void RestartWorker(const Event& e, Transition& t);
  void StopWorker(const Event& e, Transition& t);
  void StartAfterStop(const Event& e, Transition& t);
  void StopAfterStop(const Event& e, Transition& t);
  void StopFromBackoff(const Event& e, Transition& t);
  void StopFromFailed(const Event& e, Transition& t);
  void OnSpawned(const Event& e, Transition& t);
  void OnSpawnFailed(const Event& e, Transition& t);
  void OnReady(const Event& e, Transition& t);
  void OnWatchdogPing(const Event& e, Transition& t);
  void OnDrained(const Event& e, Transition& t);
  void OnWorkerExit(const Event& e, Transition& t);
  void OnStoppedExit(const Event& e, Transition& t);
  void OnStopTimeout(const Event& e, Transition& t);
  void OnBackoffElapsed(const Event& e, Transition& t);
  void KillStalled(const Event& e, Transition& t);
  void KillStalledWhileStopping(const Event& e, Transition& t);
  void StopUnready(const Event& e, Transition& t);
  void IgnoreNoWorker(const Event& e, Transition& t);
  void IgnoreNoSpawn(const Event& e, Transition& t);
  void IgnoreStaleTimer(const Event& e, Transition& t);
  void IgnoreNotDraining(const Event& e, Transition& t);
  void IgnoreAlreadyReady(const Event& e, Transition& t);
  void IgnoreWhileStopping(const Event& e, Transition& t);

  // Helpers.
  void Enter(State state);
  void BeginStart(Transition& t);
  void BeginStop(uint32_t in_flight, bool refuse, Transition& t);
  void SendStopSignal(Transition& t);
  void EnterStopped(Transition& t);
  // kFailed: queued requests are rejected (unavailable); no start is due.
  void EnterFailed(Transition& t);
  void RecordExit(const Event& e);
  void ApplyPolicy(bool clean, const std::string& log_prefix, Transition& t);
  std::string StalledText(const Event& e) const;
  // What readiness waits for: "READY=1", or "2xx to GET /healthz".
  std::string ReadyWhat() const;
  static void Add(Transition& t, Action::Type type);
  // kArmWatchdog for watchdog_ms appended to `actions`, when a watchdog is configured.
  void AddWatchdogArm(std::vector<Action>& actions) const;
  static void Log(Transition& t, LogLevel level, std::string line);

  Options options_;
  const Clock* clock_;
  cell::RestartPolicy policy_;

  uint64_t now_ms_ = 0;  // the clock, read once per Handle
  State state_ = State::kStopped;
  uint64_t since_ms_ = 0;
  bool spawn_pending_ = false;
  StopPhase phase_ = StopPhase::kDraining;
  // When the stop under way began, and when it must be over: stop_timeout later (Clock ms).
  uint64_t stop_started_ms_ = 0;
  uint64_t stop_deadline_ms_ = 0;
  AfterStop after_stop_ = AfterStop::kStay;
  std::string kill_reason_;  // set when the supervisor killed the worker as stalled
  uint64_t worker_started_at_ms_ = 0;
  uint64_t next_start_at_ms_ = 0;
  std::string last_exit_;
  std::string reason_;
  // In backoff while crash-looping: the policy's words ("crash-looping: 5 starts in 60s");
  // empty otherwise.
  std::string crash_loop_;
  // In kFailed: the start limit was hit (true), or a failure was not restarted (false).
  bool gave_up_ = false;
  uint64_t starts_ = 0;
  uint64_t restarts_ = 0;
};

// The lifecycle options of `cell_config` (restart, restart_delay, restart_max_delay,
// restart_reset_after, start_limit_burst, start_limit_interval, start_limit_action, ready,
// watchdog, stop_signal, stop_timeout, queue_timeout, start_timeout). request_timeout and
// stall_timeout are the data path's (proxy::CellDataPath): they watch requests.
Lifecycle::Options LifecycleOptionsFromConfig(const config::CellConfig& cell_config);

}  // namespace bulkhead::lifecycle
