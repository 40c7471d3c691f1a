// SPDX-License-Identifier: MIT
// Cell: one compartment. Owns the cell's front socket (clients), the worker-facing listening socket
// (passed to the worker as fd 3), the worker process, up to max_concurrent WorkerLinks, the
// Bulkhead that admits requests, and the counters. Every request admitted here is answered exactly
// once: OK, REJECTED (full, queue_timeout, unavailable) or FAILED (worker_error, worker_died),
// unless its client went away first. REQUIRES: loop thread only.
#pragma once

#include <sys/types.h>
#include <uv.h>

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "admission/bulkhead.h"
#include "admission/latency_histogram.h"
#include "admission/request_deadlines.h"
#include "base/status.h"
#include "base/unique_fd.h"
#include "cell/cgroup.h"
#include "cell/oom_kill_tracker.h"
#include "config/config.h"
#include "control/cell_snapshot.h"
#include "ipc/frame.h"
#include "ipc/listen_socket.h"
#include "lifecycle/lifecycle.h"
#include "lifecycle/notify_socket.h"
#include "lifecycle/restart_reason.h"
#include "lifecycle/worker_output.h"
#include "loop/after_poll.h"
#include "proxy/request.h"

namespace bulkhead::supervisor {

class FrontConnection;
class WorkerLink;

class Cell {
 public:
  Cell(uv_loop_t* loop, config::CellConfig config, lifecycle::CellCompartment compartment,
       uint32_t max_payload, proxy::RequestPool* pool);
  ~Cell();
  Cell(const Cell&) = delete;
  Cell& operator=(const Cell&) = delete;

  const std::string& name() const { return config_.name; }
  // The live worker's pid, 0 when none (or when it was reaped and its cgroup is being emptied).
  pid_t pid() const { return pid_; }
  lifecycle::Lifecycle::State state() const { return lifecycle_.state(); }
  // `observer` (may be null) runs whenever the cell has moved to another state, once the actions
  // of the event that moved it ran. It may read any cell's state() but must feed no cell an event.
  void SetStateObserver(std::function<void()> observer) { state_observer_ = std::move(observer); }
  // Client connections open on the front socket now.
  size_t clients() const { return clients_.size(); }
  // Connections to the worker open now, idle or carrying a request.
  size_t worker_connections() const { return idle_links_.size() + busy_links_.size(); }

  // Creates the cell's cgroup and writes its limits (when enforced), claims and binds the front,
  // worker and notify sockets (stale files from a killed run are reclaimed; a front socket another
  // live process serves is refused) and starts accepting clients. Nothing is started when it fails.
  Status Bind();

  // Operator commands and boot: feed the lifecycle (lifecycle/lifecycle.h) and return its answer
  // ("ok", "already started", "restart in progress", ...).
  std::string Start();
  std::string Restart();
  // `on_stopped` (may be null) runs once the cell has no worker and is stopped; at once if it is.
  std::string Stop(std::function<void()> on_stopped);

  // Reload (control/reload_plan.h): `next` becomes the cell's config, without touching the
  // worker. Admission limits apply at once (Bulkhead::SetLimits: queued requests are kept above a
  // lowered max_queue, running ones above a lowered max_concurrent finish; a raised max_concurrent
  // opens more worker links and starts queued requests now); lifecycle options apply from the next
  // event (Lifecycle::SetOptions); request_timeout and stall_timeout re-arm their timers, a changed
  // one counting from now for the requests running now (systemd#9467);
  // `cgroup_limits`, when set, are written to the cell's cgroup now (when limits are enforced) and
  // shown by status. Keys that need a new worker (command, environment, ...) take effect at the
  // next spawn: the caller restarts the cell. Returns the cgroup write's error, if any; the rest
  // is applied regardless. REQUIRES: same name, socket, worker_socket and notify_socket.
  Status Reconfigure(const config::CellConfig& next,
                     const std::optional<cell::CgroupLimits>& cgroup_limits);

  // Closes every handle; `on_closed` runs when the last close callback has run.
  // REQUIRES: stopped (no worker), no clients left.
  void CloseHandles(std::function<void()> on_closed);
  // Closes every client connection (queued requests cancelled).
  void DisconnectClients();

  // The supervisor reaped the worker: `wait_status` as from waitpid.
  void OnWorkerExit(int wait_status);

  control::CellSnapshot Snapshot() const;

  // Lowers the cell's limit on client connections below max_connections: its share of the
  // supervisor's descriptor budget (supervisor/connection_budget.h). Set before clients connect.
  void SetConnectionShare(uint32_t share) { connection_share_ = share; }

  // Called by FrontConnection.
  void OnClientConnected(proxy::FrontConnection* conn);
  void OnClientDisconnected(proxy::FrontConnection* conn);
  void OnRequest(proxy::FrontConnection* conn, const ipc::FrameView& frame);
  void OnClientGone(proxy::Request* request);
  void OnBadRequest(const std::string& why);
  // `conn` holds unsent reply bytes: watched for client_write_timeout, and the cell's clients are
  // kept within max_unsent_bytes (the slowest closed first; `conn` may be one of them).
  void OnRepliesWaiting(proxy::FrontConnection* conn);
  // A reply was written whole to its client: `outcome` (a counter of counters_) counts it.
  void CountDelivered(uint64_t* outcome);
  // `replies` answered requests whose client closed before their reply was written whole.
  void CountUndelivered(uint64_t replies);

  // Called by WorkerLink. `request` has been taken off the link.
  void OnWorkerReply(proxy::WorkerLink* link, proxy::Request* request, const ipc::FrameView& frame);
  // `worker_at_fault`: the worker broke the protocol; its request fails at once with that reason.
  void OnLinkBroken(proxy::WorkerLink* link, const std::string& why, bool worker_at_fault);

 private:
  // The lifecycle reads loop time.
  class LoopClock : public Clock {
   public:
    explicit LoopClock(uv_loop_t* loop) : loop_(loop) {}
    uint64_t NowMs() const override { return uv_now(loop_); }

   private:
    uv_loop_t* loop_;
  };

  static void OnConnection(uv_stream_t* server, int status);
  // Why a new connection is refused now ("max_connections of 1024 reached"), or "" to keep it.
  std::string ConnectionRefusal() const;
  static void OnHandleClosed(uv_handle_t* handle);

  uint64_t Now() const { return uv_now(loop_); }

  // Lifecycle plumbing: Handle() feeds an event and executes the actions of its transition. Events
  // raised while actions execute are queued and handled after, in order (the answer to Spawn is
  // the exception: it is handled at once, as the lifecycle requires).
  lifecycle::Lifecycle::Transition Handle(const lifecycle::Lifecycle::Event& event);
  void Execute(const lifecycle::Lifecycle::Transition& transition);
  void DoSpawn();
  // Accepts and closes every connection waiting in the worker socket's backlog: connections to a
  // worker generation that ended before accepting them. REQUIRES: no worker, no link open (DoSpawn
  // drains only then).
  void DrainStaleWorkerConnections();
  void FailInFlight(ipc::Reason reason, const std::string& message);
  void RejectQueued();
  void MaybeDrained();
  // Runs the state observer if the state changed since it last ran.
  void NoteState();

  // Request path.
  void Dispatch(proxy::Request* request, std::string_view payload);
  // An idle link, or a new connection when `fresh` or none is idle; nullptr when connect(2)
  // failed, `request` then failed (worker_error).
  proxy::WorkerLink* TakeLink(proxy::Request* request, bool fresh);
  // Sends a running `request` that the worker cannot have read again, once, on a new connection.
  void Resend(proxy::Request* request, std::string_view payload);
  void StartQueued();
  void Complete(proxy::Request* request, uint64_t* outcome, const ipc::FrameHeader& header,
                std::string_view payload);
  void Fail(proxy::Request* request, ipc::Reason reason, std::string_view message);
  void Reject(proxy::Request* request, ipc::Reason reason);
  // Marks `request` answered and writes the reply to its client (if still there). `outcome`, a
  // counter of counters_, counts it once the reply is written whole (at once without a client).
  void Answer(proxy::Request* request, uint64_t* outcome, const ipc::FrameHeader& header,
              std::string_view payload);
  void FinishRunning(proxy::Request* request);
  void ArmQueueTimer();
  void RemoveBusy(proxy::WorkerLink* link);
  void DropLink(proxy::WorkerLink* link);

  // Kills whatever is left of the worker generation (its cgroup, or its process group without
  // one) and runs `then` once nothing of it is left: never two generations side by side.
  void Teardown(std::function<void()> then);
  void KillAll();

  // OOM kills (memory.events, watched with inotify through uv_fs_event, or polled when that
  // fails). StartOomWatch: REQUIRES cgroup_. LookForOomKills reads memory.events, counts and logs
  // what rose since the previous look, and arms the survival check of the worker when one runs.
  void StartOomWatch();
  cell::OomKillTracker::Look LookForOomKills();
  static void OnMemoryEvents(uv_fs_event_t* handle, const char* filename, int events, int status);
  static void OnOomTimer(uv_timer_t* timer);
  // Sends stop_signal to the worker: to every process of the cell's cgroup (kill_mode =
  // "control-group"), to the worker alone ("mixed"); without a cgroup, to its process group.
  void SignalStop(int signal);
  // Writes the limits into the cell's cgroup, keeps the outcome for status and logs every limit
  // that is not in force. Returns Ok or the failures. REQUIRES: cgroup_.
  Status WriteCellLimits();
  // Spawns the worker and feeds the lifecycle Spawned or SpawnFailed.
  void SpawnWorker();
  void OnNotify(pid_t sender, const cell::NotifyMessage& message);
  bool SpeaksForCell(pid_t sender) const;

  static void OnQueueTimer(uv_timer_t* timer);
  static void OnOrphanTimer(uv_timer_t* timer);
  static void OnTeardownTimer(uv_timer_t* timer);
  // Timeouts judge silence only once the loop has read what waits in the sockets: a timer whose
  // deadline passed asks after_poll_ for a verdict rather than acting (loop/after_poll.h),
  // and OnAfterPoll decides with what that poll brought (a reply, a WATCHDOG=1).
  static void OnStallTimer(uv_timer_t* timer);
  static void OnRequestTimer(uv_timer_t* timer);
  static void OnWatchdogTimer(uv_timer_t* timer);
  void OnAfterPoll();
  // Stall verdict: re-arms the stall timer if the silence is shorter than stall_timeout; if not,
  // asks for a verdict after the next poll, or (`after_poll`) declares the worker stalled.
  void CheckStall(bool after_poll);
  // Answers FAILED/timeout every running request whose deadline passed, then re-arms.
  void ExpireRequests();
  // Arms the request timer for the earliest deadline of a running request not yet answered, or
  // stops it when there is none. Called after every change to deadlines_.
  void ArmRequestTimer();
  // Warns once per worker when a connection the supervisor opened waits unaccepted.
  static void OnAcceptTimer(uv_timer_t* timer);
  // Every tick while replies wait: closes clients past client_write_timeout.
  static void OnWriteTimer(uv_timer_t* timer);
  uint64_t UnsentBytes() const;

  uv_loop_t* loop_;
  config::CellConfig config_;
  lifecycle::CellCompartment compartment_;
  std::optional<cell::CellCgroup> cgroup_;
  // With cgroup_: OOM kills seen in memory.events, and whether the worker survived them.
  std::optional<cell::OomKillTracker> oom_;
  uv_fs_event_t memory_events_watch_{};
  // The worker's survival check after an OOM kill (one-shot), or the poll of memory.events when
  // it cannot be watched (repeating).
  uv_timer_t oom_timer_{};
  bool oom_polling_ = false;
  uint64_t oom_seen_ms_ = 0;            // when the last OOM kill was seen with the worker running
  cell::LimitsWritten limits_written_;  // the last WriteCellLimits
  uint32_t max_payload_;
  proxy::RequestPool* pool_;
  admission::Bulkhead bulkhead_;
  LoopClock clock_;
  lifecycle::Lifecycle lifecycle_;
  lifecycle::NotifySocket notify_;
  // The worker's stdout and stderr (docs/logging.md).
  lifecycle::WorkerOutput output_;

  uv_pipe_t front_{};
  ipc::SocketFile
      front_file_;  // the front socket file this cell bound (removed on close if still ours)
  ipc::SocketFile worker_file_;  // the same for the worker socket
  UniqueFd worker_listen_fd_;
  uv_timer_t backoff_timer_{};
  uv_timer_t stop_timer_{};
  uv_timer_t watchdog_timer_{};
  uv_timer_t queue_timer_{};
  uv_timer_t orphan_timer_{};
  uv_timer_t teardown_timer_{};
  uv_timer_t stall_timer_{};
  uv_timer_t request_timer_{};
  uv_timer_t start_timer_{};
  uv_timer_t accept_timer_{};
  uv_timer_t write_timer_{};
  int open_handles_ = 0;
  std::function<void()> on_closed_;
  std::function<void()> state_observer_;
  lifecycle::Lifecycle::State observed_state_ = lifecycle::Lifecycle::State::kStopped;

  // The live worker (0: none). pgid_ stays set after the reap so KillAll reaches what it left.
  pid_t pid_ = 0;
  pid_t pgid_ = 0;
  bool executing_ = false;
  std::vector<lifecycle::Lifecycle::Event> pending_events_;
  std::vector<std::function<void()>> on_stopped_;
  std::function<void()> after_teardown_;
  uint64_t teardown_started_ms_ = 0;
  // Teardown sends no SIGKILL before this (loop ms): the rest of the cell had stop_signal and
  // may exit by itself until stop_timeout (kill_mode = "control-group").
  uint64_t teardown_kill_from_ms_ = 0;
  bool teardown_warned_ = false;
  std::string status_text_;
  // The cell's cgroup held processes when this run found it: Start() empties it first.
  bool stale_generation_ = false;

  std::vector<proxy::WorkerLink*> idle_links_;
  std::vector<proxy::WorkerLink*> busy_links_;
  // When the newest worker connection was opened (OnAcceptTimer).
  uint64_t last_link_opened_ms_ = 0;
  bool accept_warned_ = false;  // this worker was warned about a connection it never accepted
  // Requests whose link broke while the worker still ran: failed with the exit reason when the
  // worker exits, or as worker_error once the grace period passes.
  std::vector<proxy::Request*> orphans_;
  // request_timeout of the running requests: the request timer is armed for NextDeadline().
  admission::RequestDeadlines deadlines_;
  // Last time the worker showed progress (a reply, or work given to an idle worker): stall_timeout.
  uint64_t last_progress_ms_ = 0;
  // When stall_timeout last changed (reload): the silence counts from there at the earliest.
  uint64_t stall_counted_from_ms_ = 0;
  // Verdicts waiting for the next poll (OnAfterPoll).
  struct PendingVerdicts {
    bool stall = false;
    bool request_timeout = false;
    bool watchdog = false;
    uint64_t watchdog_arms = 0;  // watchdog_arms_ when the watchdog timer fired
  };
  loop::AfterPoll after_poll_;
  PendingVerdicts verdicts_;
  // Counts ArmWatchdog and CancelTimers actions: a WATCHDOG=1 (or a new worker, or a stop) since
  // the watchdog timer fired changes it, and the miss is void.
  uint64_t watchdog_arms_ = 0;
  std::unordered_set<proxy::FrontConnection*> clients_;
  // Clients with reply bytes unsent (or that had at the last look).
  std::unordered_set<proxy::FrontConnection*> waiting_clients_;
  // Replies handed to a client and not yet written whole: in flight until then.
  uint32_t replies_unwritten_ = 0;
  uint32_t connection_share_ = UINT32_MAX;
  // When a refusal was last logged (one warning per second at most, under a flood).
  uint64_t refusal_logged_ms_ = 0;
  uint64_t refusals_unlogged_ = 0;

  admission::CellCounters counters_;
  admission::WindowedLatency queue_wait_;
  admission::WindowedLatency request_duration_;
  lifecycle::RestartCounts restarts_by_reason_{};
  uint64_t restarts_attributed_ = 0;  // lifecycle_.restarts() already in restarts_by_reason_
  bool operator_restart_ = false;     // the next restart is the operator's (Restart())
  std::string scratch_;               // reused for reply payloads built here
};

}  // namespace bulkhead::supervisor
