// SPDX-License-Identifier: MIT
// Cell: one compartment. Owns the cell's front socket (clients), the worker-facing listening socket
// (passed to the worker as fd 3), the worker process, up to max_concurrent WorkerLinks, the
// Bulkhead that admits requests, and the counters. Every request admitted here is answered exactly
// once: OK, REJECTED (full, queue_timeout, unavailable) or FAILED (worker_error, worker_died),
// unless its client went away first. REQUIRES: loop thread only.
#pragma once

#include <sys/types.h>
#include <uv.h>

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
#include "cell/cgroup.h"
#include "config/config.h"
#include "control/cell_snapshot.h"
#include "ipc/frame.h"
#include "ipc/listen_socket.h"
#include "lifecycle/lifecycle.h"
#include "lifecycle/worker_runner.h"
#include "loop/after_poll.h"
#include "proxy/request.h"

namespace bulkhead::supervisor {

class FrontConnection;
class WorkerLink;

class Cell : private lifecycle::DataPathControl {
 public:
  Cell(uv_loop_t* loop, config::CellConfig config, lifecycle::CellCompartment compartment,
       uint32_t max_payload, proxy::RequestPool* pool);
  ~Cell() override;
  Cell(const Cell&) = delete;
  Cell& operator=(const Cell&) = delete;

  const std::string& name() const { return config_.name; }
  // The live worker's pid, 0 when none (or when it was reaped and its cgroup is being emptied).
  pid_t pid() const { return runner_.pid(); }
  lifecycle::Lifecycle::State state() const { return runner_.lifecycle().state(); }
  // `observer` (may be null) runs whenever the cell has moved to another state, once the actions
  // of the event that moved it ran. It may read any cell's state() but must feed no cell an event.
  void SetStateObserver(std::function<void()> observer) {
    runner_.SetStateObserver(std::move(observer));
  }
  // Client connections open on the front socket now.
  size_t clients() const { return clients_.size(); }
  // Connections to the worker open now, idle or carrying a request.
  size_t worker_connections() const override { return idle_links_.size() + busy_links_.size(); }

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
  void OnWorkerExit(int wait_status) { runner_.OnWorkerExit(wait_status); }

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
  static void OnConnection(uv_stream_t* server, int status);
  // Why a new connection is refused now ("max_connections of 1024 reached"), or "" to keep it.
  std::string ConnectionRefusal() const;
  static void OnHandleClosed(uv_handle_t* handle);

  uint64_t Now() const { return uv_now(loop_); }

  // lifecycle::DataPathControl: what the lifecycle's actions ask of the data path.
  void OpenAdmission() override;
  void CloseAdmission() override;
  void RejectQueued() override;
  void FailInFlight(ipc::Reason reason, const std::string& message) override;
  void WorkerStarting() override;
  // Tells the runner when no request runs any more (a stop's drain ends).
  void MaybeDrained();

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

  static void OnQueueTimer(uv_timer_t* timer);
  static void OnOrphanTimer(uv_timer_t* timer);
  // Timeouts judge silence only once the loop has read what waits in the sockets: a timer whose
  // deadline passed asks after_poll_ for a verdict rather than acting (loop/after_poll.h),
  // and OnAfterPoll decides with what that poll brought (a reply, a WATCHDOG=1).
  static void OnStallTimer(uv_timer_t* timer);
  static void OnRequestTimer(uv_timer_t* timer);
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
  uint32_t max_payload_;
  proxy::RequestPool* pool_;
  admission::Bulkhead bulkhead_;

  uv_pipe_t front_{};
  ipc::SocketFile
      front_file_;  // the front socket file this cell bound (removed on close if still ours)
  uv_timer_t queue_timer_{};
  uv_timer_t orphan_timer_{};
  uv_timer_t stall_timer_{};
  uv_timer_t request_timer_{};
  uv_timer_t accept_timer_{};
  uv_timer_t write_timer_{};
  int open_handles_ = 0;
  std::function<void()> on_closed_;
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
  };
  PendingVerdicts verdicts_;
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
  std::string scratch_;  // reused for reply payloads built here
  // Shared by the runner (watchdog) and the data path (stall, request_timeout): the watchdog's
  // verdict is taken first, as before the split.
  loop::AfterPoll after_poll_;
  lifecycle::WorkerRunner runner_;
};

}  // namespace bulkhead::supervisor
