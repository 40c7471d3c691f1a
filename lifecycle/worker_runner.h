// SPDX-License-Identifier: MIT
// WorkerRunner: one cell's worker over time, one generation at a time (s6-supervise's job for one
// service), two while a worker swap overlaps them. Drives the lifecycle table (lifecycle.h) and
// carries out its actions: spawn into a generation leaf of the cell's cgroup (cells/NAME/gen-N,
// docs/config.md "Where the processes live") with the worker socket as fd 3, the notify socket and
// watchdog (sd_notify(3)), output capture, teardown (stop_signal, kill_mode, cgroup.kill), the
// cgroup's limits, OOM kills (memory.events), an adaptive cell's PSI triggers (PressureWatch)
// and the reads of the supervisor's cgroup poll (PollCgroup), restart reasons. It never touches a
// request: what the table asks of the data path goes through DataPathControl. REQUIRES: loop thread
// only.
#pragma once

#include <sys/types.h>
#include <uv.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "admission/adaptive_limit.h"
#include "base/status.h"
#include "base/unique_fd.h"
#include "cell/cgroup.h"
#include "config/config.h"
#include "ipc/frame.h"
#include "ipc/listen_socket.h"
#include "lifecycle/compartment.h"
#include "lifecycle/health_probe.h"
#include "lifecycle/lifecycle.h"
#include "lifecycle/notify_socket.h"
#include "lifecycle/oom_watch.h"
#include "lifecycle/pressure_watch.h"
#include "lifecycle/restart_reason.h"
#include "lifecycle/teardown_watcher.h"
#include "lifecycle/worker_launcher.h"
#include "lifecycle/worker_output.h"
#include "lifecycle/worker_swap.h"
#include "loop/after_poll.h"
#include "loop/handle_group.h"
#include "loop/time_source.h"

namespace bulkhead::lifecycle {

// What the lifecycle's actions ask of the cell's data path (its owner forwards to it). Called on
// the loop thread, from inside WorkerRunner's event handling: an implementation must not feed the
// runner an event synchronously except through the runner's public calls, which queue it.
class DataPathControl {
 public:
  virtual ~DataPathControl() = default;
  // The lifecycle's Availability changed (or may have): what admission does with new requests
  // and what a REJECTED unavailable says of the next start. Pushed before the actions of the
  // transition that changed it run (so kRejectQueued's rejections carry the new one).
  virtual void SetAvailability(const admission::Availability& availability) = 0;
  // Action kOpenAdmission: admit requests and start the queued ones on the worker.
  virtual void OpenAdmission() = 0;
  // Action kCloseAdmission: new requests are queued (or rejected when the queue is full).
  virtual void CloseAdmission() = 0;
  // Action kRejectQueued: every queued request gets REJECTED unavailable.
  virtual void RejectQueued() = 0;
  // Action kFailInFlight: every running request gets FAILED `reason` with `message`, and every
  // connection to the worker generation that ended is closed.
  virtual void FailInFlight(ipc::Reason reason, const std::string& message) = 0;
  // Connections to the worker open now, idle or carrying a request.
  virtual size_t worker_connections() const = 0;
  // A new worker generation is about to be spawned.
  virtual void WorkerStarting() = 0;
  // A worker swap handed over: the worker socket's path reaches the next worker now; links to
  // the previous one take nothing new and close once done (proxy::CellDataPath::RetireWorkerLinks).
  // Returns false when none carries a request; else the runner hears RetiredLinksDrained later.
  virtual bool RetireWorkerLinks() = 0;
  // A worker swap's previous worker was reaped (`message`: its wait status, "signal 9"): the
  // requests still on its retired connections, or orphaned when one of them broke, get FAILED
  // worker_died with it, as a crash's in-flight requests do; those connections close.
  virtual void PreviousWorkerExited(const std::string& message) = 0;
  // The kernel signals of an adaptive cell with a cgroup (docs/adaptive-concurrency.md, "Who owns
  // what"), which the data path feeds to its admission::AdaptiveLimit: a PSI trigger fired
  // (`signal`: kCpuPressure or kMemoryPressure); one poll of the cgroup's usage (PollCgroup, every
  // 250 ms while a worker runs); the kernel signals live now changed (admission::SignalBit of each;
  // 0 for a fixed cell or one without a cgroup), for status.
  virtual void PressureFired(admission::Signal signal) = 0;
  virtual void CgroupUsagePolled(const cell::CgroupUsage& usage) = 0;
  virtual void AdaptiveSignals(uint8_t live) = 0;
};

// Where a worker swap binds its next worker's socket until the handover renames it onto
// `worker_socket`. getsockname(2) of that socket keeps this path after the rename.
std::string NextSocketPath(const std::string& worker_socket);

class WorkerRunner : private TeardownWatcher::Generation {
 public:
  // Reads time and arms its timers (backoff, stop, watchdog, start; the probe's, the teardown's,
  // the output's and the OOM watch's) through `time`, and starts and signals workers through
  // `launcher` (SystemWorkerLauncher(), or a test's fake). `after_poll` (owned by the caller,
  // shared with the data path) runs OnAfterPoll when requested. `time`, `after_poll`,
  // `data_path` and `launcher` outlive the runner.
  WorkerRunner(uv_loop_t* loop, loop::TimeSource* time, config::CellConfig config,
               CellCompartment compartment, uint32_t max_payload, loop::AfterPoll* after_poll,
               DataPathControl* data_path, WorkerLauncher* launcher);
  ~WorkerRunner() override;
  WorkerRunner(const WorkerRunner&) = delete;
  WorkerRunner& operator=(const WorkerRunner&) = delete;

  // Creates the cell's cgroup (when limits are enforced), starts watching its memory.events and
  // writes its limits; notes a cgroup still holding an earlier run's processes (Start kills them,
  // then removes their generation leaves), or removes the empty leaves an earlier run left.
  Status CreateCgroup();
  // Claims and binds the worker socket (listening, blocking, handed to each worker as fd 3) and
  // the notify socket.
  Status BindSockets();

  // Operator commands and boot: feed the lifecycle and return its answer ("ok", "already
  // started", ...). `in_flight`: the requests running now (the data path's count).
  std::string Start();
  // `overlap`: with restart_overlap, a running worker is replaced by a worker swap (CanOverlap);
  // false stops it first, then starts the next (a reload's restart, for now).
  std::string Restart(uint32_t in_flight, bool overlap = true);
  // `on_stopped` (may be null) runs once there is no worker and the cell is stopped.
  std::string Stop(uint32_t in_flight, std::function<void()> on_stopped);
  // The data path has no running request left: ends a stop's drain.
  void Drained();
  // The retired links of a worker swap carry nothing any more: the previous worker is stopped.
  void RetiredLinksDrained();
  // `pid` is one of this cell's workers: the live one, or the next or previous one of a swap.
  bool IsWorker(pid_t pid) const;
  // The supervisor reaped `pid` (IsWorker): the live worker (OnWorkerExit), or a swap's other one.
  void OnProcessExit(pid_t pid, int wait_status);
  // The data path saw no progress for stall_timeout: `why` names the silence.
  void Stalled(std::string why);
  // The supervisor reaped the worker: `wait_status` as from waitpid.
  void OnWorkerExit(int wait_status);
  // Called from the shared AfterPoll: a watchdog miss is decided after the poll that could have
  // read a WATCHDOG=1 (loop/after_poll.h).
  void OnAfterPoll();

  // Reload: the lifecycle, output and worker socket backlog take `next` (from the next event);
  // `cgroup_limits`, when set, are written now. Returns the cgroup write's error, if any.
  Status Reconfigure(const config::CellConfig& next,
                     const std::optional<cell::CgroupLimits>& cgroup_limits);
  // Closes every handle, removes the cgroup and the worker socket file; `on_closed` runs when the
  // last close callback has run. REQUIRES: no worker.
  void Close(std::function<void()> on_closed);

  // `observer` runs whenever the lifecycle moved to another state, once the actions of the event
  // that moved it ran.
  void SetStateObserver(std::function<void()> observer) { state_observer_ = std::move(observer); }
  // `observer` (may be null) runs whenever ReexecBlocker() may have changed: after every event
  // the lifecycle handled (a move to the same state included), and when a worker generation's
  // teardown ended. A re-exec's settling waits on it instead of polling (docs/reexec.md). It must
  // feed no cell an event (it runs inside this runner's handling).
  void SetSettleObserver(std::function<void()> observer) { settle_observer_ = std::move(observer); }

  // The config in force (the last Reconfigure's).
  const config::CellConfig& config() const { return config_; }
  // The live worker's pid, 0 when none (or when it was reaped and its cgroup is being emptied).
  pid_t pid() const { return pid_; }
  const Lifecycle& lifecycle() const { return lifecycle_; }
  // A connection waits unaccepted in the worker socket's backlog now.
  bool HasUnacceptedConnection() const;
  // The worker's last STATUS= (sd_notify), cleared at each spawn.
  const std::string& status_text() const { return status_text_; }
  const RestartCounts& restarts_by_reason() const { return restarts_by_reason_; }
  // The worker swap of an overlapping restart (restart_overlap): its phase and what status says
  // of it, and the pid of the swap's other worker (next or previous), 0 when none.
  const WorkerSwap& swap() const { return swap_; }
  pid_t swap_pid() const { return next_pid_ != 0 ? next_pid_ : prev_pid_; }

  // --- Re-exec (docs/reexec.md). ---
  // Why the cell cannot be carried across a re-exec now, "" when it can: it runs a ready worker
  // and no worker swap or teardown is under way, or it is stopped, in backoff or failed with no
  // worker and nothing left to tear down. (A cell starting or stopping is not carried: the
  // spawn's and the stop's timers and pending events are not; a re-exec waits for it to settle.)
  std::string ReexecBlocker() const;
  // The descriptors the state names (owned here; -1 for a pipe not captured).
  struct ReexecFds {
    int worker_listen = -1;
    int notify = -1;
    int stdout_read = -1;
    int stderr_read = -1;
  };
  ReexecFds reexec_fds() const;
  // The live worker's generation cgroup directory, "" without cgroups.
  std::string generation_path() const { return generation_ ? generation_->path() : ""; }
  // One read of the cell's cgroup while a worker runs in it: the supervisor's poll, every 250 ms
  // (supervisor/cgroup_poll.h). An adaptive cell's whole usage (CellCgroup::ReadUsage, cpu.pressure
  // included) goes to the data path (DataPathControl::CgroupUsagePolled; a failed read is logged
  // once per streak); any other cell's cpu.pressure alone is read. Returns cpu.pressure's "some"
  // total (μs, cumulative: psi.rst); nullopt without a cgroup, without a worker, or when it could
  // not be read.
  std::optional<uint64_t> PollCgroup();
  // The cell's processes live in a cgroup of their own (limits enforced).
  bool has_cgroup() const { return cgroup_.has_value(); }
  // For an adaptive cell, why each kernel signal (indexed by admission::Signal) is off now, "" for
  // one that is live (and for kServiceTime, never off): no cgroup for the cell (limits not
  // enforced, with the supervisor's reason: no cgroup v2, cgroup = "off"; or its cgroup could not
  // be made), its controller not enabled for the cells, its limit unset (cpu_max, memory_max),
  // cpu_max below one CPU (no cpu trigger: admission::RegistersCpuTrigger), or its trigger's
  // failure (PressureWatch::failure: no PSI, refused, not watchable). All "" for a fixed cell.
  std::array<std::string, admission::kSignalCount> KernelSignalsOff() const;
  // In the new image, instead of BindSockets: the worker and notify sockets taken back.
  // Errors: the notify socket's (NotifySocket::Adopt).
  Status AdoptSockets(UniqueFd worker_listen, UniqueFd notify);
  // In the new image, instead of Start: the ready worker the previous image ran is this cell's
  // worker again, running (Lifecycle::Adopt), its output read from `stdout_read` and
  // `stderr_read`, its generation leaf the cgroup at `cgroup_path` (a "gen-N" of this cell's
  // cgroup; "" without cgroups). Errors (nothing adopted): a cgroup path that is not a generation
  // of this cell. REQUIRES: AdoptSockets ran, CreateCgroup ran, nothing started.
  struct AdoptedWorker {
    pid_t pid = 0;
    pid_t pgid = 0;
    std::string cgroup_path;
    UniqueFd stdout_read;
    UniqueFd stderr_read;
    uint64_t starts = 0;
    uint64_t restarts = 0;
    std::string last_exit;
    uint64_t uptime_ms = 0;
    RestartCounts restarts_by_reason{};
    // The start limit's window and crash loop (Lifecycle::RestoreCrashLoop).
    Lifecycle::CarriedCrashLoop crash_loop;
  };
  Status AdoptWorker(AdoptedWorker worker);
  // In the new image, for a cell the previous one had stopped: its counts continue.
  void AdoptStopped(uint64_t starts, uint64_t restarts, std::string last_exit,
                    const RestartCounts& restarts_by_reason);
  // In the new image, for a cell the previous one had in backoff (AdoptStopped first): its next
  // start `next_start_in_ms` from now, its failures in a row and its start limit's window and
  // crash loop carried (Lifecycle::RestoreCrashLoop, Lifecycle::AdoptBackoff).
  void AdoptBackoff(uint32_t consecutive_failures, uint64_t next_start_in_ms,
                    const Lifecycle::CarriedCrashLoop& crash_loop);
  // In the new image, once the cell is adopted in its state: it entered it `in_state_ms` ago
  // (Lifecycle::RestoreInStateFor).
  void AdoptInStateFor(uint64_t in_state_ms) { lifecycle_.RestoreInStateFor(in_state_ms); }
  // In the new image, for a cell the previous one had failed (AdoptStopped first): failed still,
  // for `reason` (Lifecycle::AdoptFailed).
  void AdoptFailed(std::string reason, bool gave_up);

  // The compartment as the kernel holds it now, for status and metrics (control/cell_snapshot.h).
  struct CompartmentStatus {
    bool limits_enforced = false;
    std::string limits_note;
    std::array<LimitState, cell::kLimitCount> limit_states{};
    std::string cgroup_path;
    cell::CgroupLimits cgroup_limits;
    std::optional<cell::CgroupStats> cgroup;
    uint64_t oom_kills = 0;
  };
  CompartmentStatus ReadCompartment() const;

 private:
  const std::string& name() const { return config_.name; }

  // Handle() feeds an event and executes the actions of its transition. Events raised while
  // actions execute are queued and handled after, in order (the answer to Spawn is the exception:
  // it is handled at once, as the lifecycle requires).
  Lifecycle::Transition Handle(const Lifecycle::Event& event);
  void Execute(const Lifecycle::Transition& transition);
  // Pushes the lifecycle's Availability to the data path if it changed since the last push.
  void PushAvailability();
  // Pushes the Availability; runs the state observer if the state changed since it last ran.
  void NoteState();
  void DoSpawn();
  // Spawns the worker and feeds the lifecycle Spawned or SpawnFailed.
  void SpawnWorker();
  // Accepts and closes every connection waiting in the worker socket's backlog: connections to a
  // worker generation that ended before accepting them. REQUIRES: no worker, no connection to it
  // open (SpawnWorker drains only then).
  void DrainStaleWorkerConnections();

  // Kills whatever is left of the worker generation (its cgroup, or its process group without
  // one) and runs `then` once nothing of it is left, its generation leaf removed: the lifecycle
  // never sees two generations side by side (a swap's other one is the swap's).
  void Teardown(std::function<void()> then);
  // The live generation's cgroup: its leaf (generation_), or the whole cell's while it has none
  // (what an earlier run left). REQUIRES: cgroup_.
  cell::CellCgroup& LiveCgroup() { return generation_ ? *generation_ : *cgroup_; }
  const cell::CellCgroup& LiveCgroup() const { return generation_ ? *generation_ : *cgroup_; }
  // Creates the leaf of the next worker generation (cells/NAME/gen-N) into `*into` and writes
  // its memory.oom.group (a failure there is logged, not returned). REQUIRES: cgroup_.
  Status MakeGeneration(std::optional<cell::CellCgroup>* into);
  // The swap's other generation (next or previous) has no worker left: killed whole, watched
  // until empty, then its leaf removed (swap_teardown_). No-op without one.
  void RetireSwapGeneration();
  // SIGKILL to whatever is left of the generation: cgroup.kill, or without a cgroup the worker's
  // process group (TeardownWatcher::Generation).
  void KillAll() override;
  // TeardownWatcher::Generation, for LiveCgroup(): no process left in it.
  Result<bool> IsEmpty() override;
  std::string Describe() const override;
  // Sends stop_signal to the worker: to every process of its generation's cgroup (kill_mode =
  // "control-group"), to the worker alone ("mixed"); without a cgroup, to its process group.
  void SignalStop(int signal);
  // The same for any generation: `generation` its cgroup (null without one), `pid` and `pgid`
  // its worker and process group.
  void SignalGeneration(int signal, cell::CellCgroup* generation, pid_t pid, pid_t pgid);
  // Writes the limits into the cell's cgroup, keeps the outcome for status and logs every limit
  // that is not in force. Returns Ok or the failures. REQUIRES: cgroup_.
  Status WriteCellLimits();
  // The limits the cell's cgroup holds: the configured ones, with memory.high at
  // admission::AdaptiveMemoryHigh(memory.max) for an adaptive cell with memory_max and no
  // memory_high (docs/adaptive-concurrency.md, "memory.high").
  cell::CgroupLimits EffectiveLimits() const;
  // The PSI triggers and the live signals follow the config and the cgroup (an adaptive cell with
  // a cgroup only). Called after every event and reload, beside UpdateProbe.
  void UpdatePressureWatch();
  // `controller` ("memory", "cpu") is enabled for the cells (not among the tree's missing ones).
  bool ControllerEnabled(std::string_view controller) const;

  // Notify socket (sd_notify(3)).
  void OnNotify(pid_t sender, const cell::NotifyMessage& message);
  bool SpeaksForCell(pid_t sender) const;
  // Timeouts judge silence only once the loop has read what waits in the sockets: the watchdog
  // timer asks after_poll_ for a verdict rather than acting.
  void OnWatchdogTimer();
  // The start timer: a worker not ready within start_timeout.
  void OnStartTimer();

  // Worker swap (restart_overlap). A restart overlaps when the cell runs a ready worker and no
  // swap runs; with a cgroup the next worker is born in a generation leaf of its own.
  bool CanOverlap() const;
  // Binds the next worker's socket beside the worker socket, spawns the next worker on it and
  // starts watching its readiness. The answer to the restart command (`in_flight` for a restart
  // without overlap when the socket cannot be bound).
  std::string BeginSwap(uint32_t in_flight);
  // BeginSwap could not start the next worker beside the serving one (`why`: its socket cannot be
  // bound, clone3 EAGAIN at pids.max): what it made is released, and the restart goes as without
  // overlap (stop, then start). The answer to the restart command.
  std::string RestartWithoutOverlap(uint32_t in_flight, const std::string& why);
  void ExecuteSwap(const std::vector<WorkerSwap::Action>& actions);
  // The next worker is ready: its socket takes the worker socket's path, then the handover.
  void OnNextReady(const std::string& what);
  void Handover();
  // SIGKILL to the swap's other generation (next or previous): its cgroup leaf
  // (swap_generation_), or without one its process group `pgid` and its leader `pid`.
  void KillGeneration(pid_t pid, pid_t pgid);
  // `sender` is `leader` or a process of its generation (the swap's other one).
  bool InSwapGeneration(pid_t sender, pid_t leader) const;
  // The next worker's socket and readiness watch are released (after a handover, or a failure).
  void ReleaseNext();
  // exec_watch_ (POLLIN or POLLHUP on next_exec_'s fd): the exec's outcome, or nothing yet.
  static void OnNextExec(uv_poll_t* handle, int status, int events);
  // Stops and closes exec_watch_ and drops next_exec_ (its fd after the watch's stop).
  void CloseExecWatch();
  // The swap timer follows swap_.Deadline(); the accept poll runs while an exec-ready next
  // worker has not accepted its first connection.
  void ArmSwapTimer();
  void OnAcceptPoll();
  // swap_timer_ and accept_poll_timer_, made at their first use (most cells never swap).
  loop::Timer& SwapTimer();
  loop::Timer& AcceptPollTimer();

  // The HTTP probe (ready = "http:/PATH", docs/config.md): readiness while the worker starts,
  // liveness while it runs with stall_timeout, off otherwise. Called after every event and
  // reload.
  void UpdateProbe();

  WorkerLauncher* launcher_;
  config::CellConfig config_;
  CellCompartment compartment_;
  uint32_t max_payload_;
  loop::AfterPoll* after_poll_;
  DataPathControl* data_path_;
  std::optional<cell::CellCgroup> cgroup_;
  cell::LimitsWritten limits_written_;  // the last WriteCellLimits
  Lifecycle lifecycle_;
  NotifySocket notify_;
  // The workers' stdout and stderr (docs/logging.md): the live worker's, and the swap's other
  // worker's (next, then previous after the handover swaps them).
  WorkerOutput output_a_;
  WorkerOutput output_b_;
  WorkerOutput* output_ = &output_a_;
  WorkerOutput* swap_output_ = &output_b_;
  // OOM kills in cgroup_ (started with it).
  OomWatch oom_watch_;
  // An adaptive cell's PSI triggers on cgroup_ (UpdatePressureWatch); made when first wanted (an
  // adaptive cell with a cgroup), so that the other cells do not carry it.
  std::unique_ptr<PressureWatch> pressure_;
  bool usage_read_failed_ = false;  // PollCgroup's last usage read failed (logged once per streak)

  ipc::SocketFile worker_file_;  // the worker socket file bound (removed on close if still ours)
  UniqueFd worker_listen_fd_;
  // output_, notify_ and oom_watch_ close as its parts.
  loop::HandleGroup handles_;
  // The lifecycle's timers (Lifecycle::Action kArmBackoff, kArmStopTimer, kArmWatchdog,
  // kArmStartTimer; kCancelTimers stops them all).
  std::unique_ptr<loop::Timer> backoff_timer_;
  std::unique_ptr<loop::Timer> stop_timer_;
  std::unique_ptr<loop::Timer> watchdog_timer_;
  std::unique_ptr<loop::Timer> start_timer_;
  std::function<void()> state_observer_;
  std::function<void()> settle_observer_;
  Lifecycle::State observed_state_ = Lifecycle::State::kStopped;
  // The last Availability pushed to the data path (PushAvailability pushes only a change).
  std::optional<admission::Availability> pushed_availability_;

  // The live worker (0: none). pgid_ stays set after the reap so KillAll reaches what it left.
  pid_t pid_ = 0;
  pid_t pgid_ = 0;
  bool executing_ = false;
  std::vector<Lifecycle::Event> pending_events_;
  std::vector<std::function<void()>> on_stopped_;
  // Waits for a generation's cgroup to be empty before the lifecycle hears of its end.
  TeardownWatcher teardown_;
  std::string status_text_;
  // The cell's cgroup held processes when this run found it: Start() empties it first.
  bool stale_generation_ = false;
  // The live worker's generation leaf (cells/NAME/gen-N), from before its spawn until its
  // teardown (kept for the next spawn after a failed one); the swap's other worker's, the next one
  // until the handover swaps them, then the previous one until it is torn down. Empty without a
  // cgroup.
  std::optional<cell::CellCgroup> generation_;
  std::optional<cell::CellCgroup> swap_generation_;
  uint64_t generations_made_ = 0;  // N of the last gen-N
  // The generations have a memory.oom.group of their own: the cell's is 0 (WriteCellLimits).
  bool generation_oom_group_ = false;
  // Tears the swap's other generation down once its worker is gone (RetireSwapGeneration).
  class SwapGeneration : public TeardownWatcher::Generation {
   public:
    explicit SwapGeneration(WorkerRunner* runner) : runner_(runner) {}
    Result<bool> IsEmpty() override;
    void KillAll() override;
    std::string Describe() const override;

   private:
    WorkerRunner* runner_;
  };
  SwapGeneration swap_generation_view_{this};
  TeardownWatcher swap_teardown_;

  // A watchdog miss waiting for the next poll (OnAfterPoll), and watchdog_arms_ when the watchdog
  // timer fired.
  bool watchdog_verdict_ = false;
  uint64_t watchdog_verdict_arms_ = 0;
  // Counts ArmWatchdog and CancelTimers actions: a WATCHDOG=1 (or a new worker, or a stop) since
  // the watchdog timer fired changes it, and the miss is void.
  uint64_t watchdog_arms_ = 0;

  HealthProbe probe_;

  // The overlapping restart (worker_swap.h) and what it runs: the next worker (until the
  // handover) on its own socket bound beside the worker socket, the previous one (after it).
  WorkerSwap swap_;
  std::unique_ptr<loop::Timer> swap_timer_;
  pid_t next_pid_ = 0;
  pid_t prev_pid_ = 0;  // the previous worker, 0 once reaped
  pid_t prev_pgid_ = 0;
  ipc::SocketFile next_file_;
  UniqueFd next_listen_fd_;
  // The next worker's exec, confirmed on the loop (exec_watch_ on its fd) rather than waited for
  // in BeginSwap: a spawn under load waits milliseconds for the child to reach execve, and the
  // loop serves the previous worker's requests meanwhile. A failed step ends the swap as the next
  // worker's exit does, with the step's words.
  cell::PendingExec next_exec_;
  uv_poll_t* exec_watch_ = nullptr;
  uv_loop_t* loop_ = nullptr;  // for exec_watch_
  // ready = "exec": a connection to the next worker's socket, accepted is its readiness.
  UniqueFd accept_probe_fd_;
  std::unique_ptr<loop::Timer> accept_poll_timer_;
  // ready = "http:/PATH": the next worker's readiness probe, on its own socket.
  HealthProbe next_probe_;
  loop::TimeSource* time_;

  RestartCounts restarts_by_reason_{};
  uint64_t restarts_attributed_ = 0;  // lifecycle_.restarts() already in restarts_by_reason_
  bool operator_restart_ = false;     // the next restart is the operator's (Restart())
};

}  // namespace bulkhead::lifecycle
