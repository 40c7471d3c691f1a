// SPDX-License-Identifier: MIT
// CellDataPath: one cell's data path, Envoy's router and connection pool for one upstream. Owns the
// front socket and its client connections, the Bulkhead that admits their requests as Exchanges
// (proxy/exchange.h), up to max_concurrent Links to the worker socket, the orphan list, the
// per-request timers (queue_timeout, request_timeout), stall detection, the outcome counters and
// latency windows. It speaks Exchange and Outcome only: what the cell's wire format is (frames or
// HTTP/1.1) is the front ends' and the links' business, chosen once through proxy/wire.h.
// Every request admitted here is answered exactly once: OK, REJECTED (full, queue_timeout,
// unavailable) or FAILED (worker_error, worker_died, oom_killed, stalled, timeout), unless its
// client went away first. It knows nothing of processes or cgroups: it asks its Upstream whether
// a worker takes requests, and is told when admission opens or closes and when the worker is gone.
// REQUIRES: loop thread only.
#pragma once

#include <sys/types.h>
#include <uv.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "admission/adaptive_limit.h"
#include "admission/availability.h"
#include "admission/bulkhead.h"
#include "admission/cell_counters.h"
#include "admission/latency_histogram.h"
#include "admission/request_deadlines.h"
#include "base/log_rate_limiter.h"
#include "base/status.h"
#include "config/config.h"
#include "ipc/frame.h"
#include "ipc/listen_socket.h"
#include "loop/after_poll.h"
#include "loop/time_source.h"
#include "loop/write_batch.h"
#include "proxy/access_log.h"
#include "proxy/client.h"
#include "proxy/exchange.h"
#include "proxy/front_listener.h"
#include "proxy/link.h"
#include "proxy/slow_clients.h"
#include "proxy/wire.h"

namespace bulkhead::proxy {

// What the data path asks of, and tells, the side that runs the cell's worker (implemented by the
// cell's owner). Calls come from inside request handling on the loop thread.
class Upstream {
 public:
  virtual ~Upstream() = default;
  // The worker's pid while one runs, 0 when none: only to tell whether one runs and to name it in
  // log lines.
  virtual pid_t worker_pid() const = 0;
  // A connection waits unaccepted in the worker socket's backlog now.
  virtual bool HasUnacceptedConnection() const = 0;
  // Requests ran with no reply for stall_timeout: `why` names the silence.
  virtual void Stalled(std::string why) = 0;
  // No request runs any more (running fell to 0).
  virtual void Drained() = 0;
  // The last retired link (RetireWorkerLinks) has nothing in flight any more and was closed.
  virtual void RetiredLinksDrained() = 0;
};

// With protocol = "http" the clients are HttpFrontConnections and the links HttpWorkerLinks
// (docs/http.md); admission, timeouts, counters and the outcome taxonomy are the same.
class CellDataPath : private ClientOwner, private LinkOwner {
 public:
  // `time` (every timer and timestamp of the data path and its clients), `pool`, `write_batch`
  // (the clients' answers are sent through it; nullptr: written one by one), `after_poll`
  // (shared with the worker's side, see OnAfterPoll) and `upstream` outlive the data path.
  CellDataPath(uv_loop_t* loop, loop::TimeSource* time, config::CellConfig config,
               uint32_t max_payload, ExchangePool* pool, loop::WriteBatch* write_batch,
               loop::AfterPoll* after_poll, Upstream* upstream);
  ~CellDataPath() override;
  CellDataPath(const CellDataPath&) = delete;
  CellDataPath& operator=(const CellDataPath&) = delete;

  // Claims and binds the front sockets (FrontListener::Bind: the Unix socket with `access`, each
  // TCP address of `listen`) and starts accepting clients.
  Status Bind(const ipc::SocketAccess& access) { return front_.Bind(access); }
  // The front sockets and their clients at a re-exec (docs/reexec.md; FrontListener's methods of
  // the same names): accept paused and resumed, the listening fds and the connections held.
  FrontListener& front() { return front_; }
  const FrontListener& front() const { return front_; }
  // At a re-exec, in the new image before any request: the counters and the cumulative
  // histograms continue from the previous image's.
  void RestoreCounters(const admission::CellCounters& counters,
                       const admission::LatencyHistogram::Counts& queue_wait,
                       const admission::LatencyHistogram::Counts& request_duration) {
    counters_ = counters;
    queue_wait_.RestoreTotal(queue_wait);
    request_duration_.RestoreTotal(request_duration);
  }
  // At a re-exec, in the new image before any request: an adaptive cell's controller goes on
  // from the previous image's (AdaptiveLimit::Restore), and the Bulkhead holds its limit. Nothing
  // for a fixed cell.
  void RestoreAdaptive(const admission::AdaptiveLimit::Carried& carried) {
    if (adaptive_ == nullptr) return;
    adaptive_->Restore(carried);
    bulkhead_.SetMaxConcurrent(adaptive_->limit());
  }
  // Reload: admission limits apply at once (Bulkhead::SetLimits: queued requests are kept above a
  // lowered max_queue, running ones above a lowered max_concurrent finish; a raised
  // max_concurrent starts queued requests now); a changed request_timeout or stall_timeout counts
  // from now for the requests running now (systemd#9467). concurrency: fixed -> adaptive makes the
  // AdaptiveLimit (at the floor), adaptive -> fixed drops it (the limit is max_concurrent again),
  // adaptive -> adaptive rebounds it (SetBounds, SetTolerance; its base and phase stay)
  // (docs/adaptive-concurrency.md, "Reload"). REQUIRES: same socket, listen and worker_socket.
  void Reconfigure(const config::CellConfig& next);
  // Closes every client connection (queued requests cancelled).
  void DisconnectClients() { front_.DisconnectAll(); }
  // Closes every handle and removes the front socket file if still ours; `on_closed` runs when
  // the last close callback has run. REQUIRES: no request running on a worker link.
  void Close(std::function<void()> on_closed);
  // Every request answered from now on gets a line in `log` (docs/access-log.md); nullptr: none.
  // `log` outlives the data path, or is unset first. Set before clients connect (their peers are
  // read as they connect).
  void SetAccessLog(AccessLog* log) { access_log_ = log; }
  // Lowers the limit on client connections below max_connections (the cell's share of the
  // supervisor's descriptor budget). Set before clients connect.
  void SetConnectionShare(uint32_t share) { front_.SetConnectionShare(share); }
  // `observer` (may be null) runs whenever a request leaves in_flight() and none is left (its
  // answer written or undeliverable, a queued one cancelled, a client gone), so that a re-exec's
  // drain learns its end without polling (docs/reexec.md, kDraining). It may run more often than
  // that (a client gone with nothing in flight); it must not call back into the data path.
  void SetQuietObserver(std::function<void()> observer) { quiet_observer_ = std::move(observer); }
  // Called from the shared AfterPoll: stall and request_timeout verdicts are taken after the poll
  // that could have read the replies ending the silence (loop/after_poll.h).
  void OnAfterPoll();

  // The worker's side tells whether new requests may wait for a worker and when the next one
  // starts (pushed on every change; admission/availability.h). Until the first push: NoneDue.
  void SetAvailability(const admission::Availability& availability) {
    availability_ = availability;
  }
  // The worker's side tells (lifecycle actions): admit and start the queued requests; queue new
  // ones; reject every queued one (unavailable); fail every running one with `reason` and close
  // every link to the worker generation that ended; a new worker is about to start.
  void OpenAdmission();
  void CloseAdmission();
  void RejectQueued();
  void FailInFlight(ipc::Reason reason, const std::string& message);
  // A new worker starts with the cell's worker_connections as of now (a reload restarts the cell
  // to change it).
  void WorkerStarting();
  // A worker swap's handover (lifecycle/worker_swap.h): the worker socket's path now reaches the
  // next worker. Idle links to the previous one are closed; busy ones are retired: they carry what
  // they have to its end and close, the Upstream hears RetiredLinksDrained after the last. New
  // requests take new links. Returns false when no link was busy (nothing to wait for).
  bool RetireWorkerLinks();
  // The swap's previous worker was reaped (`message`: its wait status): what its retired links
  // still carry, and what was orphaned when one of them broke, gets FAILED worker_died with it;
  // those links close. Requests on the serving worker's links are untouched.
  void PreviousWorkerExited(const std::string& message);
  // Retired links still carrying a request.
  size_t retiring_links() const { return retiring_links_; }

  // The kernel signals of an adaptive cell (docs/adaptive-concurrency.md, "Who feeds it"), from
  // the worker's side; a fixed cell ignores them. Each can only lower the limit or hold its growth
  // (running requests finish, queued ones keep their place). A PSI trigger fired: `signal`
  // kCpuPressure or kMemoryPressure (AdaptiveLimit::OnPressure).
  // `neighbours`: for kCpuPressure, whether another cell waited for a CPU (the supervisor's
  // judgment; AdaptiveLimit::OnPressure).
  void PressureFired(admission::Signal signal,
                     admission::CpuNeighbours neighbours = admission::CpuNeighbours::kUnknown);
  // One poll of the cell's cgroup: cpu.stat's cumulative counters (AdaptiveLimit::OnCpuStat, while
  // kCpuThrottling is live) and the working set against memory.max (OnMemoryUsage, while
  // kMemoryUsage is live), bytes; memory_max 0: "max".
  struct CgroupSample {
    uint64_t nr_periods = 0;
    uint64_t nr_throttled = 0;
    uint64_t working_set = 0;
    uint64_t memory_max = 0;
  };
  void CgroupUsagePolled(const CgroupSample& sample);
  // The kernel signals live now (admission::SignalBit of each), for status; kept for a controller
  // a reload makes later.
  void SetKernelSignals(uint8_t live);

  // Figures for status and metrics.
  const admission::Bulkhead& bulkhead() const { return bulkhead_; }
  // The cell's adaptive limit (concurrency = "adaptive"), nullptr for a fixed cell. Its limit() is
  // bulkhead().limits().max_concurrent.
  const admission::AdaptiveLimit* adaptive() const { return adaptive_.get(); }
  size_t clients() const { return front_.clients(); }
  // min(max_connections, the connection share).
  uint32_t connection_limit() const { return front_.connection_limit(); }
  // The TCP addresses bound (FrontListener::tcp_addresses: ports as the kernel picked them).
  const std::vector<std::string>& tcp_addresses() const { return front_.tcp_addresses(); }
  // Connections to the worker open now, idle or carrying a request.
  size_t worker_connections() const { return idle_links_.size() + busy_links_.size(); }
  const admission::CellCounters& counters() const { return counters_; }
  // Admitted requests without an outcome yet (control/cell_snapshot.h, in_flight).
  uint32_t in_flight() const;
  uint64_t unsent_bytes() const { return slow_clients_.UnsentBytes(); }
  const admission::WindowedLatency& queue_wait() const { return queue_wait_; }
  const admission::WindowedLatency& request_duration() const { return request_duration_; }

 private:
  uint64_t Now() const { return time_->NowMs(); }
  // Runs quiet_observer_ when nothing is in flight (SetQuietObserver).
  void NotifyIfQuiet() {
    if (quiet_observer_ && in_flight() == 0) quiet_observer_();
  }
  const std::string& name() const override { return config_.name; }
  loop::TimeSource* time() override { return time_; }
  loop::WriteBatch* write_batch() override { return write_batch_; }
  static void OnHandleClosed(uv_handle_t* handle);

  // ClientOwner.
  void OnClientConnected(Client* conn) override;
  void OnClientDisconnected(Client* conn) override;
  void OnRequest(Client* conn, const RequestInfo& info, std::string_view payload) override;
  void OnClientGone(Exchange* exchange) override;
  void OnBadRequest(const std::string& why) override;
  void OnRepliesWaiting(Client* conn) override { slow_clients_.Waiting(conn); }
  void CountDelivered(uint64_t* outcome) override;
  void CountUndelivered(uint64_t replies) override;
  void CountIdleClosed() override { ++counters_.idle_closed; }
  // LinkOwner.
  void OnWorkerAnswer(Link* link, Exchange* exchange, const Outcome& outcome,
                      bool reusable) override;
  void OnWorkerProgress() override { last_progress_ms_ = Now(); }
  void OnLinkBroken(Link* link, const std::string& why, bool worker_at_fault) override;
  void OnExchangeAborted(Link* link, const std::string& why) override;

  void Dispatch(Exchange* exchange, std::string_view payload);
  // Puts `link` on the busy list unless it already is (a multiplexed link carrying others), then
  // sends; a multiplexed link writes at the next OnFlushPrepare.
  void SendOn(Link* link, Exchange* exchange, std::string_view payload);
  // One-per-request: an idle link, or a new connection when `fresh` (it then closes the longest
  // idle link, so that at most max_concurrent stay open) or none is idle. Multiplexed (frame cells
  // only): the one multiplexed link, connected when there is none. nullptr when connect(2) failed,
  // `exchange` then failed (worker_error).
  Link* TakeLink(Exchange* exchange, bool fresh);
  // Sends a running `exchange` that the worker cannot have read again, once, on a new connection.
  void Resend(Exchange* exchange, std::string_view payload);
  void StartQueued();
  // Answers `exchange` (unless answered already) and recycles it.
  void Complete(Exchange* exchange, uint64_t* counter, const Outcome& outcome);
  void Fail(Exchange* exchange, ipc::Reason reason, std::string_view message);
  void Reject(Exchange* exchange, ipc::Reason reason);
  // Marks `exchange` answered and hands `outcome` to its client (if still there). `counter`, a
  // counter of counters_, counts it once the answer is written whole (at once without a client).
  // Nothing of `exchange` is touched after the client end has it (it may be recycled under it).
  void Answer(Exchange* exchange, uint64_t* counter, const Outcome& outcome);
  void FinishRunning(Exchange* exchange);
  // The access log's line for `exchange`, answered now with `outcome` (`outcome_name` overrides
  // its kind: "dropped" when its client left, "cancelled" when it left the queue).
  void LogAccess(const Exchange& exchange, const Outcome& outcome, std::string_view outcome_name);
  // An adaptive cell: `exchange`, answered by the worker now, is one sample of its service time
  // (dispatch to answer, less the time its worker end waited for a slow client); the Bulkhead
  // takes the limit that follows. Before FinishRunning (the running count includes it).
  void SampleServiceTime(const Exchange& exchange);
  // Makes, rebounds or drops adaptive_ for config_, and gives the Bulkhead its limit.
  void ApplyConcurrency();
  // The Bulkhead takes the controller's `limit` after a kernel signal (lowered or unchanged).
  void TakeAdaptiveLimit(uint32_t limit);
  // Tells the upstream when no request runs any more.
  void MaybeDrained();
  void ArmQueueTimer();
  void RemoveBusy(Link* link);
  void DropLink(Link* link);
  // A retired link left the busy list: tells the Upstream after the last one.
  void RetiredLinkDone();

  // Writes what the requests dispatched in this loop iteration appended to the multiplexed link:
  // runs before the loop polls, so they leave in one write and never wait for a poll.
  static void OnFlushPrepare(uv_prepare_t* prepare);
  void OnQueueTimer();
  void OnOrphanTimer();
  // Timeouts judge silence only once the loop has read what waits in the sockets: a timer whose
  // deadline passed asks after_poll_ for a verdict rather than acting (loop/after_poll.h),
  // and OnAfterPoll decides with what that poll brought (a reply).
  void OnRequestTimer();
  // Stall verdict: re-arms the stall timer if the silence is shorter than stall_timeout; if not,
  // asks for a verdict after the next poll, or (`after_poll`) declares the worker stalled.
  void CheckStall(bool after_poll);
  // Answers FAILED/timeout every running request whose deadline passed, then re-arms.
  void ExpireRequests();
  // Arms the request timer for the earliest deadline of a running request not yet answered, or
  // stops it when there is none. Called after every change to deadlines_.
  void ArmRequestTimer();
  // Warns once per worker when a connection the supervisor opened waits unaccepted.
  void OnAcceptTimer();

  uv_loop_t* loop_;
  loop::TimeSource* time_;
  config::CellConfig config_;
  const Wire* wire_;  // the cell's wire format (its protocol cannot change on reload)
  uint32_t max_payload_;
  ExchangePool* pool_;
  loop::WriteBatch* write_batch_;
  loop::AfterPoll* after_poll_;
  Upstream* upstream_;
  // The worker side's last SetAvailability; until the first, as its lifecycle begins: stopped.
  admission::Availability availability_ = admission::Availability::NoneDue();
  admission::Bulkhead bulkhead_;
  // concurrency = "adaptive": the limit the Bulkhead holds, fed by SampleServiceTime; its clock is
  // time_. Null in the fixed mode.
  std::unique_ptr<admission::AdaptiveLimit> adaptive_;
  // SetKernelSignals' last mask, given to each controller made.
  uint8_t kernel_signals_ = 0;

  std::unique_ptr<loop::Timer> queue_timer_;
  std::unique_ptr<loop::Timer> orphan_timer_;
  std::unique_ptr<loop::Timer> stall_timer_;
  std::unique_ptr<loop::Timer> request_timer_;
  std::unique_ptr<loop::Timer> accept_timer_;
  uv_prepare_t flush_prepare_{};
  FrontListener front_;
  SlowClients slow_clients_;
  int open_handles_ = 0;
  std::function<void()> on_closed_;

  std::vector<Link*> idle_links_;
  std::vector<Link*> busy_links_;
  // worker_connections = "multiplex" for the worker running now: all its requests go on one link,
  // mux_link_ (also on idle_links_ or busy_links_), while it is open.
  bool multiplex_ = false;
  Link* mux_link_ = nullptr;
  // Links on busy_links_ with `retiring` set.
  size_t retiring_links_ = 0;
  // When the newest worker connection was opened (OnAcceptTimer).
  uint64_t last_link_opened_ms_ = 0;
  bool accept_warned_ = false;  // this worker was warned about a connection it never accepted
  // Exchanges whose link broke while the worker still ran: failed with the exit reason when the
  // worker exits, or as worker_error once the grace period passes.
  std::vector<Exchange*> orphans_;
  // The same, from a retired link (a swap's previous worker): failed when that worker is reaped
  // (PreviousWorkerExited), or as worker_error with the others once the grace period passes.
  std::vector<Exchange*> retired_orphans_;
  // request_timeout of the running requests: the request timer is armed for NextDeadline().
  admission::RequestDeadlines deadlines_;
  // OnBadRequest's log lines: one per second at most (burst 1, 1000 ms), the rest counted.
  LogRateLimiter bad_request_log_{1, 1000};
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
  // Replies handed to a client and not yet written whole: in flight until then.
  uint32_t replies_unwritten_ = 0;

  AccessLog* access_log_ = nullptr;  // the supervisor's, or null: no access log
  std::function<void()> quiet_observer_;
  admission::CellCounters counters_;
  admission::WindowedLatency queue_wait_;
  admission::WindowedLatency request_duration_;
  std::string scratch_;  // reused for a queued payload while it is dispatched
};

}  // namespace bulkhead::proxy
