// SPDX-License-Identifier: MIT
#include "proxy/cell_data_path.h"

#include <algorithm>
#include <utility>

#include "base/check.h"
#include "base/log.h"
#include "http/forward.h"
#include "ipc/listen_socket.h"
#include "proxy/client.h"
#include "proxy/http_front_connection.h"
#include "proxy/http_worker_link.h"
#include "proxy/worker_link.h"

namespace bulkhead::proxy {

namespace {

// How long a request whose worker connection broke waits for the worker's exit (to report the exit
// reason) before it is failed as a worker error.
constexpr uint64_t kOrphanGraceMs = 1000;
// A connection to the worker still waiting in its listening socket's backlog this long, in ms,
// gets a warning: the worker does not serve its connections concurrently (docs/protocol.md).
constexpr uint64_t kAcceptWarnMs = 5000;

ipc::FrameHeader ReplyHeader(ipc::ReplyStatus status, ipc::Reason reason) {
  ipc::FrameHeader header;
  header.type = ipc::FrameType::kReply;
  header.status = status;
  header.reason = reason;
  return header;
}

admission::Bulkhead::Limits LimitsOf(const config::CellConfig& config) {
  return admission::Bulkhead::Limits{config.max_concurrent, config.max_queue,
                                     static_cast<uint64_t>(config.queue_timeout.count())};
}

}  // namespace

CellDataPath::CellDataPath(uv_loop_t* loop, config::CellConfig config, uint32_t max_payload,
                           RequestPool* pool, loop::WriteBatch* write_batch,
                           loop::AfterPoll* after_poll, Upstream* upstream)
    : loop_(loop),
      config_(std::move(config)),
      max_payload_(max_payload),
      pool_(pool),
      write_batch_(write_batch),
      after_poll_(after_poll),
      upstream_(upstream),
      bulkhead_(LimitsOf(config_)),
      front_(loop, &config_, max_payload, this, &bulkhead_, &counters_),
      slow_clients_(loop),
      deadlines_(static_cast<uint64_t>(config_.request_timeout.count())) {
  multiplex_ = config_.worker_connections == config::WorkerConnections::kMultiplex;
  for (uv_timer_t* timer :
       {&queue_timer_, &orphan_timer_, &stall_timer_, &request_timer_, &accept_timer_}) {
    uv_timer_init(loop_, timer);
    timer->data = this;
    ++open_handles_;
  }
  uv_prepare_init(loop_, &flush_prepare_);
  flush_prepare_.data = this;
  ++open_handles_;
  slow_clients_.SetLimits(config_.max_unsent_bytes,
                          static_cast<uint64_t>(config_.client_write_timeout.count()));
}

CellDataPath::~CellDataPath() { BH_CHECK(open_handles_ == 0); }

// --- What the worker's side tells the data path (lifecycle actions). ---

void CellDataPath::OpenAdmission() {
  bulkhead_.SetOpen(true);
  StartQueued();
}

void CellDataPath::CloseAdmission() { bulkhead_.SetOpen(false); }

void CellDataPath::WorkerStarting() {
  accept_warned_ = false;
  const bool multiplex = config_.worker_connections == config::WorkerConnections::kMultiplex;
  if (multiplex == multiplex_) return;
  // The previous worker's links were closed when it ended (FailInFlight); none of the other mode
  // may carry a request to the new one.
  BH_CHECK(busy_links_.empty());
  for (Link* link : idle_links_) link->Close();
  idle_links_.clear();
  mux_link_ = nullptr;
  multiplex_ = multiplex;
}

void CellDataPath::FailInFlight(ipc::Reason reason, const std::string& message) {
  mux_link_ = nullptr;
  std::vector<Link*> links;
  links.swap(busy_links_);
  std::vector<Request*> requests;
  for (Link* link : links) {
    requests.clear();
    while (Request* request = link->TakeInflight()) requests.push_back(request);
    link->Close();
    for (Request* request : requests) Fail(request, reason, message);
  }
  // Idle connections belong to the old worker generation too.
  for (Link* link : idle_links_) link->Close();
  idle_links_.clear();
  std::vector<Request*> orphans;
  orphans.swap(orphans_);
  uv_timer_stop(&orphan_timer_);
  for (Request* request : orphans) Fail(request, reason, message);
}

void CellDataPath::RejectQueued() {
  while (admission::AdmissionEntry* entry = bulkhead_.PopExpired(UINT64_MAX)) {
    Reject(static_cast<Request*>(entry), ipc::Reason::kUnavailable);
  }
  ArmQueueTimer();
}

void CellDataPath::MaybeDrained() {
  if (bulkhead_.running() == 0) upstream_->Drained();
}

// --- Shutdown. ---

void CellDataPath::Close(std::function<void()> on_closed) {
  on_closed_ = std::move(on_closed);
  for (Link* link : idle_links_) link->Close();
  idle_links_.clear();
  mux_link_ = nullptr;
  BH_CHECK(busy_links_.empty());
  for (uv_timer_t* timer :
       {&queue_timer_, &orphan_timer_, &stall_timer_, &request_timer_, &accept_timer_}) {
    uv_close(reinterpret_cast<uv_handle_t*>(timer), &CellDataPath::OnHandleClosed);
  }
  uv_close(reinterpret_cast<uv_handle_t*>(&flush_prepare_), &CellDataPath::OnHandleClosed);
  auto closed = [this] {
    BH_CHECK(open_handles_ > 0);
    if (--open_handles_ == 0 && on_closed_) std::exchange(on_closed_, nullptr)();
  };
  ++open_handles_;
  front_.Close(closed);
  ++open_handles_;
  slow_clients_.Close(closed);
}

void CellDataPath::OnHandleClosed(uv_handle_t* handle) {
  auto* self = static_cast<CellDataPath*>(handle->data);
  BH_CHECK(self->open_handles_ > 0);
  if (--self->open_handles_ == 0 && self->on_closed_) std::exchange(self->on_closed_, nullptr)();
}

// --- Reload. ---

void CellDataPath::Reconfigure(const config::CellConfig& next) {
  BH_CHECK(next.name == config_.name && next.socket == config_.socket &&
           next.listen == config_.listen && next.worker_socket == config_.worker_socket);
  // A stall_timeout set or changed now counts the silence from now (systemd#9467): a worker busy
  // for longer than the new timeout is not killed for the time before it existed.
  if (next.stall_timeout != config_.stall_timeout) stall_counted_from_ms_ = Now();
  config_ = next;
  bulkhead_.SetLimits(LimitsOf(config_));
  slow_clients_.SetLimits(config_.max_unsent_bytes,
                          static_cast<uint64_t>(config_.client_write_timeout.count()));
  // A changed request_timeout counts from now for the requests running now.
  deadlines_.SetTimeout(static_cast<uint64_t>(config_.request_timeout.count()), Now());
  ArmRequestTimer();
  if (config_.stall_timeout.count() == 0) {
    uv_timer_stop(&stall_timer_);
  } else if (!busy_links_.empty()) {
    // Checks at once against the new timeout and re-arms itself for what remains.
    uv_timer_start(&stall_timer_, &CellDataPath::OnStallTimer, 0, 0);
  }
  // A raised max_concurrent starts queued requests now; a changed queue_timeout re-arms the queue
  // timer for the head's new deadline.
  StartQueued();
}

// --- Client connections. ---

void CellDataPath::OnClientDisconnected(Client* conn) {
  front_.Closed(conn);
  slow_clients_.Forget(conn);
}

void CellDataPath::CountDelivered(uint64_t* outcome) {
  BH_CHECK(replies_unwritten_ > 0);
  --replies_unwritten_;
  ++*outcome;
}

void CellDataPath::CountUndelivered(uint64_t replies) {
  BH_CHECK(replies_unwritten_ >= replies);
  replies_unwritten_ -= replies;
  counters_.undelivered += replies;
}

void CellDataPath::OnBadRequest(const std::string& why) {
  ++counters_.bad_request;
  // Any client can send bad requests as fast as it likes: one line a second at most, the rest
  // counted (bad_request counts them all) and named by the next line logged.
  const LogRateLimiter::Decision decision = bad_request_log_.Admit(Now());
  if (!decision.log) return;
  std::string line = "bad request, closing client connection: " + why;
  if (decision.suppressed_before > 0) {
    line += " (and " + std::to_string(decision.suppressed_before) +
            " more since the last such line, not logged)";
  }
  Log(LogLevel::kWarning, name(), 0, line);
}

// --- Request path. ---

void CellDataPath::OnRequest(Client* conn, uint64_t request_id, std::string_view payload) {
  Request* request = pool_->Acquire();
  request->client_request_id = request_id;
  request->admitted_at_ms = Now();
  request->admitted_at_ns = uv_hrtime();
  request->dispatched_at_ns = 0;
  conn->LinkRequest(request);
  if (upstream_->RefusesRequests()) {
    ++counters_.rejected_at_admission;
    Reject(request, ipc::Reason::kUnavailable);
    return;
  }
  switch (bulkhead_.Admit(request, request->admitted_at_ms)) {
    case admission::Bulkhead::Decision::kRun:
      ++counters_.admitted;
      Dispatch(request, payload);
      break;
    case admission::Bulkhead::Decision::kQueued:
      ++counters_.admitted;
      request->payload.assign(payload);
      if (bulkhead_.queued() == 1) ArmQueueTimer();
      break;
    case admission::Bulkhead::Decision::kRejectedFull:
      ++counters_.rejected_at_admission;
      Reject(request, ipc::Reason::kFull);
      break;
    case admission::Bulkhead::Decision::kRejectedUnavailable:
      ++counters_.rejected_at_admission;
      Reject(request, ipc::Reason::kUnavailable);
      break;
  }
}

Link* CellDataPath::TakeLink(Request* request, bool fresh) {
  if (multiplex_) {
    // A broken multiplexed link is dropped at once, so mux_link_ is fresh for a resend too.
    if (mux_link_ != nullptr) {
      if (!mux_link_->busy()) std::erase(idle_links_, mux_link_);  // the only idle link
      return mux_link_;
    }
  } else if (!fresh && !idle_links_.empty()) {
    Link* link = idle_links_.back();
    idle_links_.pop_back();
    return link;
  }
  // A fresh connection replaces the longest idle one: the cell keeps at most max_concurrent.
  if (fresh && !idle_links_.empty()) {
    Link* oldest = idle_links_.front();
    idle_links_.erase(idle_links_.begin());
    oldest->Close();
  }
  Result<Link*> made = Status::Error("");
  if (config_.protocol == config::Protocol::kHttp) {
    Result<HttpWorkerLink*> http = HttpWorkerLink::Connect(this, loop_, config_.worker_socket);
    made = http.ok() ? Result<Link*>(*http) : Result<Link*>(http.status());
  } else {
    Result<WorkerLink*> frames =
        WorkerLink::Connect(this, loop_, config_.worker_socket, max_payload_, multiplex_);
    if (frames.ok() && multiplex_) mux_link_ = *frames;
    made = frames.ok() ? Result<Link*>(*frames) : Result<Link*>(frames.status());
  }
  if (!made.ok()) {
    Log(LogLevel::kError, name(), upstream_->worker_pid(),
        "cannot connect to worker: " + made.status().message());
    Fail(request, ipc::Reason::kWorkerError,
         "cannot connect to worker: " + made.status().message());
    return nullptr;
  }
  last_link_opened_ms_ = Now();
  if (!uv_is_active(reinterpret_cast<uv_handle_t*>(&accept_timer_))) {
    uv_timer_start(&accept_timer_, &CellDataPath::OnAcceptTimer, kAcceptWarnMs, 0);
  }
  return *made;
}

void CellDataPath::OnAcceptTimer(uv_timer_t* timer) {
  auto* self = static_cast<CellDataPath*>(timer->data);
  if (self->upstream_->worker_pid() == 0 || !self->upstream_->HasUnacceptedConnection()) return;
  // When the newest connection is kAcceptWarnMs old, the one waiting is at least as old.
  const uint64_t newest_age = self->Now() - self->last_link_opened_ms_;
  if (newest_age < kAcceptWarnMs) {
    uv_timer_start(timer, &CellDataPath::OnAcceptTimer, kAcceptWarnMs - newest_age, 0);
    return;
  }
  if (!self->accept_warned_) {
    self->accept_warned_ = true;
    Log(LogLevel::kWarning, self->name(), self->upstream_->worker_pid(),
        "worker has not accepted a connection the supervisor opened at least " +
            std::to_string(kAcceptWarnMs / 1000) +
            " s ago: a worker must accept every connection on its listening socket and serve its "
            "connections concurrently, each one persistent (docs/protocol.md); requests sent on "
            "this one wait");
  }
}

void CellDataPath::Dispatch(Request* request, std::string_view payload) {
  // An HTTP request whose body is streamed after its head goes out on a fresh connection: an idle
  // one may be closing under it, and it could not be resent then, part of its body being gone
  // (HttpWorkerLink::TakeInflight). Every other request, a POST too, takes an idle connection: one
  // the worker closes under it before reading it is resent.
  HttpFrontConnection* http_client =
      request->client != nullptr ? request->client->AsHttp() : nullptr;
  const bool fresh = config_.protocol == config::Protocol::kHttp && http_client != nullptr &&
                     http_client->body_streaming();
  Link* link = TakeLink(request, fresh);
  if (link == nullptr) return;
  uint64_t now = Now();
  // A worker that had nothing to do starts its stall clock now.
  if (busy_links_.empty()) last_progress_ms_ = now;

  request->dispatched_at_ns = uv_hrtime();
  queue_wait_.Record(request->dispatched_at_ns,
                     request->dispatched_at_ns - request->admitted_at_ns);
  deadlines_.Start(request, now);
  if (config_.stall_timeout.count() > 0 &&
      !uv_is_active(reinterpret_cast<uv_handle_t*>(&stall_timer_))) {
    uv_timer_start(&stall_timer_, &CellDataPath::OnStallTimer,
                   static_cast<uint64_t>(config_.stall_timeout.count()), 0);
  }
  ArmRequestTimer();
  SendOn(link, request, payload);
}

void CellDataPath::SendOn(Link* link, Request* request, std::string_view payload) {
  if (!link->busy()) {
    link->busy_index = busy_links_.size();
    busy_links_.push_back(link);
  }
  link->Send(request, payload);
  if (link == mux_link_) uv_prepare_start(&flush_prepare_, &CellDataPath::OnFlushPrepare);
}

void CellDataPath::OnFlushPrepare(uv_prepare_t* prepare) {
  auto* self = static_cast<CellDataPath*>(prepare->data);
  uv_prepare_stop(prepare);
  // A write that fails at once breaks the link; the requests on it that the worker cannot have
  // read go out again on a new link, written here too (a prepare started from its own callback
  // would only run after the next poll).
  WorkerLink* flushed = nullptr;
  while (self->mux_link_ != nullptr && self->mux_link_ != flushed) {
    flushed = self->mux_link_;
    flushed->Flush();
  }
}

void CellDataPath::Resend(Request* request, std::string_view payload) {
  request->resent = true;
  // Keeps its slot, its place on the running list and its dispatch time (request_timeout).
  Link* link = TakeLink(request, /*fresh=*/true);
  if (link == nullptr) return;
  SendOn(link, request, payload);
}

void CellDataPath::StartQueued() {
  while (admission::AdmissionEntry* entry = bulkhead_.StartNext()) {
    auto* request = static_cast<Request*>(entry);
    // The payload is moved out so the request keeps no copy while it runs.
    scratch_.swap(request->payload);
    Dispatch(request, scratch_);
    scratch_.clear();
  }
  ArmQueueTimer();
}

void CellDataPath::OnWorkerReply(WorkerLink* link, Request* request, const ipc::FrameView& frame) {
  if (!link->busy()) {
    RemoveBusy(link);
    idle_links_.push_back(link);
  }
  last_progress_ms_ = Now();

  // docs/protocol.md, "Supervisor -> worker": OK/none or FAILED/worker_error, nothing else.
  const ipc::FrameHeader& in = frame.header;
  if (!ipc::IsValidWorkerReply(in)) {
    Fail(request, ipc::Reason::kWorkerError,
         std::string("worker broke the protocol: it replied with status ") +
             ipc::StatusName(in.status) + " and reason " + ipc::ReasonName(in.reason));
  } else if (in.status == ipc::ReplyStatus::kOk) {
    FinishRunning(request);
    Complete(request, request->client == nullptr ? &counters_.dropped : &counters_.ok,
             ReplyHeader(ipc::ReplyStatus::kOk, ipc::Reason::kNone), frame.payload);
    StartQueued();
    MaybeDrained();
  } else {
    Fail(request, ipc::Reason::kWorkerError, frame.payload);
  }
}

void CellDataPath::OnHttpResponse(HttpWorkerLink* link, Request* request, bool reusable) {
  RemoveBusy(link);
  if (reusable) {
    idle_links_.push_back(link);
  } else {
    // The worker ends this connection (Connection: close): the next request opens a fresh one.
    link->Close();
  }
  last_progress_ms_ = Now();
  // The worker answered: its own status, 5xx included, counts ok (docs/http.md).
  FinishRunning(request);
  Complete(request, request->client == nullptr ? &counters_.dropped : &counters_.ok,
           ReplyHeader(ipc::ReplyStatus::kOk, ipc::Reason::kNone), {});
  StartQueued();
  MaybeDrained();
}

void CellDataPath::OnRequestAborted(HttpWorkerLink* link, const std::string& why) {
  Request* request = link->TakeInflight();
  DropLink(link);
  Log(LogLevel::kDebug, name(), upstream_->worker_pid(),
      "request given up, its worker connection closed: " + why);
  // Its client left, or was answered already (request_timeout, 413): it counts as that.
  if (request != nullptr) Fail(request, ipc::Reason::kWorkerError, why);
}

void CellDataPath::OnLinkBroken(Link* link, const std::string& why, bool worker_at_fault) {
  // Requests the worker cannot have read (docs/protocol.md): most often one went out on an idle
  // connection that the worker had closed, or was closing, after its last reply. Their payloads
  // stay valid in the link until its close callback runs.
  struct Taken {
    Request* request;
    bool unread;
    std::string_view payload;
  };
  std::vector<Taken> taken;
  bool unread = false;
  std::string_view payload;
  while (Request* request = link->TakeInflight(&unread, &payload)) {
    taken.push_back(Taken{request, unread && !worker_at_fault, payload});
  }
  DropLink(link);
  if (worker_at_fault) {
    // The supervisor closed the connection: say why, at once, rather than wait for an exit.
    Log(LogLevel::kWarning, name(), upstream_->worker_pid(), "worker broke the protocol: " + why);
  }
  bool resent = false;
  bool orphaned = false;
  for (const Taken& t : taken) {
    if (t.unread && !t.request->resent && upstream_->worker_pid() != 0) {
      if (!resent) {
        Log(LogLevel::kDebug, name(), upstream_->worker_pid(),
            "worker connection closed before the worker read the request (" + why +
                "): sending it again on a new connection");
      }
      resent = true;
      Resend(t.request, t.payload);
    } else if (worker_at_fault) {
      Fail(t.request, ipc::Reason::kWorkerError, "worker broke the protocol: " + why);
    } else {
      // Most often the worker is dying and its exit is about to be reaped: wait for it, so the
      // client learns the exit reason rather than a bare "connection closed".
      orphans_.push_back(t.request);
      if (orphans_.size() == 1) {
        uv_timer_start(&orphan_timer_, &CellDataPath::OnOrphanTimer, kOrphanGraceMs, 0);
      }
      orphaned = true;
    }
  }
  if (orphaned) {
    Log(LogLevel::kDebug, name(), upstream_->worker_pid(),
        "worker connection broke with a request in flight: " + why);
  }
}

void CellDataPath::OnOrphanTimer(uv_timer_t* timer) {
  auto* self = static_cast<CellDataPath*>(timer->data);
  std::vector<Request*> orphans;
  orphans.swap(self->orphans_);
  for (Request* request : orphans) {
    self->Fail(request, ipc::Reason::kWorkerError, "worker closed the connection without replying");
  }
}

void CellDataPath::RemoveBusy(Link* link) {
  size_t i = link->busy_index;
  BH_CHECK(i < busy_links_.size() && busy_links_[i] == link);
  busy_links_[i] = busy_links_.back();
  busy_links_[i]->busy_index = i;
  busy_links_.pop_back();
}

void CellDataPath::DropLink(Link* link) {
  if (link == mux_link_) mux_link_ = nullptr;
  if (link->busy_index < busy_links_.size() && busy_links_[link->busy_index] == link) {
    RemoveBusy(link);
  } else {
    std::erase(idle_links_, link);
  }
  link->Close();
}

void CellDataPath::FinishRunning(Request* request) {
  // Off the deadlines (where a request whose worker connection failed never was), then the slot
  // is freed. The request timer, if armed for it, fires and re-arms for the next deadline.
  deadlines_.Finish(request);
  bulkhead_.Finish(request);
}

void CellDataPath::Answer(Request* request, uint64_t* outcome, const ipc::FrameHeader& header,
                          std::string_view payload) {
  BH_CHECK(!request->answered);
  request->answered = true;
  if (request->dispatched_at_ns != 0) {
    uint64_t now_ns = uv_hrtime();
    request_duration_.Record(now_ns, now_ns - request->admitted_at_ns);
  }
  if (request->client != nullptr) {
    Client* client = request->client;
    client->UnlinkRequest(request);
    ipc::FrameHeader reply = header;
    reply.request_id = request->client_request_id;
    ++replies_unwritten_;
    client->SendReply(reply, payload, outcome);
  } else {
    ++*outcome;
  }
}

void CellDataPath::Complete(Request* request, uint64_t* outcome, const ipc::FrameHeader& header,
                            std::string_view payload) {
  if (!request->answered) Answer(request, outcome, header, payload);
  pool_->Release(request);
}

void CellDataPath::Fail(Request* request, ipc::Reason reason, std::string_view message) {
  FinishRunning(request);
  uint64_t* outcome = &counters_.dropped;
  if (request->client != nullptr) {
    switch (reason) {
      case ipc::Reason::kWorkerDied:
        outcome = &counters_.failed_worker_died;
        break;
      case ipc::Reason::kOomKilled:
        outcome = &counters_.failed_oom_killed;
        break;
      case ipc::Reason::kStalled:
        outcome = &counters_.failed_stalled;
        break;
      case ipc::Reason::kTimeout:
        outcome = &counters_.failed_timeout;
        break;
      default:
        outcome = &counters_.failed_worker_error;
        break;
    }
  }
  Complete(request, outcome, ReplyHeader(ipc::ReplyStatus::kFailed, reason), message);
  StartQueued();
  MaybeDrained();
}

void CellDataPath::Reject(Request* request, ipc::Reason reason) {
  uint64_t* outcome = &counters_.rejected_unavailable;
  if (reason == ipc::Reason::kFull) outcome = &counters_.rejected_full;
  if (reason == ipc::Reason::kQueueTimeout) outcome = &counters_.rejected_queue_timeout;
  ipc::RejectDetail detail;
  detail.cell = config_.name;
  detail.running = bulkhead_.running();
  detail.queued = bulkhead_.queued();
  if (reason == ipc::Reason::kUnavailable) detail.retry_after_ms = upstream_->RetryAfterMs();
  scratch_.clear();
  ipc::AppendRejectDetail(&scratch_, detail);
  Complete(request, outcome, ReplyHeader(ipc::ReplyStatus::kRejected, reason), scratch_);
  scratch_.clear();
}

void CellDataPath::OnClientGone(Request* request) {
  if (request->admission_state() == admission::AdmissionEntry::State::kQueued) {
    bulkhead_.Cancel(request);
    ++counters_.cancelled;
    pool_->Release(request);
    ArmQueueTimer();
  }
  // A running request keeps its slot until the worker answers; the answer is then dropped.
}

void CellDataPath::ArmQueueTimer() {
  std::optional<uint64_t> deadline = bulkhead_.NextDeadline();
  if (!deadline) {
    uv_timer_stop(&queue_timer_);
    return;
  }
  uint64_t now = Now();
  uv_timer_start(&queue_timer_, &CellDataPath::OnQueueTimer, *deadline > now ? *deadline - now : 0,
                 0);
}

void CellDataPath::OnQueueTimer(uv_timer_t* timer) {
  auto* self = static_cast<CellDataPath*>(timer->data);
  while (admission::AdmissionEntry* entry = self->bulkhead_.PopExpired(self->Now())) {
    self->Reject(static_cast<Request*>(entry), ipc::Reason::kQueueTimeout);
  }
  self->ArmQueueTimer();
}

// --- Stall detection and request timeouts. ---

void CellDataPath::OnStallTimer(uv_timer_t* timer) {
  static_cast<CellDataPath*>(timer->data)->CheckStall(/*after_poll=*/false);
}

void CellDataPath::CheckStall(bool after_poll) {
  const uint64_t stall_ms = static_cast<uint64_t>(config_.stall_timeout.count());
  // Idle (nothing to stall on), or no stall_timeout any more.
  if (busy_links_.empty() || upstream_->worker_pid() == 0 || stall_ms == 0) return;
  const uint64_t now = Now();
  const uint64_t counted = now - std::max(last_progress_ms_, stall_counted_from_ms_);
  if (counted < stall_ms) {
    // It answered meanwhile: check again when the newest progress would go stale.
    uv_timer_start(&stall_timer_, &CellDataPath::OnStallTimer, stall_ms - counted, 0);
    return;
  }
  if (!after_poll) {
    verdicts_.stall = true;
    after_poll_->Request();
    return;
  }
  upstream_->Stalled("no reply for " + std::to_string(now - last_progress_ms_) + " ms");
}

void CellDataPath::OnAfterPoll() {
  const PendingVerdicts verdicts = std::exchange(verdicts_, PendingVerdicts{});
  if (verdicts.stall) CheckStall(/*after_poll=*/true);
  if (verdicts.request_timeout) ExpireRequests();
}

void CellDataPath::ArmRequestTimer() {
  std::optional<uint64_t> deadline = deadlines_.NextDeadline();
  if (!deadline) {
    uv_timer_stop(&request_timer_);
    return;
  }
  uint64_t now = Now();
  uv_timer_start(&request_timer_, &CellDataPath::OnRequestTimer,
                 *deadline > now ? *deadline - now : 0, 0);
}

void CellDataPath::OnRequestTimer(uv_timer_t* timer) {
  auto* self = static_cast<CellDataPath*>(timer->data);
  std::optional<uint64_t> deadline = self->deadlines_.NextDeadline();
  if (deadline && *deadline <= self->Now()) {
    // Replies already waiting in the worker connections are read first.
    self->verdicts_.request_timeout = true;
    self->after_poll_->Request();
    return;
  }
  self->ArmRequestTimer();
}

void CellDataPath::ExpireRequests() {
  const uint64_t timeout = deadlines_.timeout_ms();
  while (admission::DeadlineEntry* entry = deadlines_.PopExpired(Now())) {
    auto* request = static_cast<Request*>(entry);
    // The client is answered now; the slot stays taken until the worker answers or is replaced,
    // because the worker really is still busy with it. Without a client it is dropped, as any
    // running request whose client left.
    Answer(request, request->client != nullptr ? &counters_.failed_timeout : &counters_.dropped,
           ReplyHeader(ipc::ReplyStatus::kFailed, ipc::Reason::kTimeout),
           "request_timeout of " + std::to_string(timeout) + " ms passed");
  }
  ArmRequestTimer();
}

uint32_t CellDataPath::in_flight() const {
  return bulkhead_.running() - static_cast<uint32_t>(deadlines_.expired()) + bulkhead_.queued() +
         replies_unwritten_;
}

}  // namespace bulkhead::proxy
