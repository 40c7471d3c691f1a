// SPDX-License-Identifier: MIT
#include "supervisor/cell.h"

#include <algorithm>
#include <utility>

#include "base/check.h"
#include "base/log.h"
#include "ipc/listen_socket.h"
#include "lifecycle/worker_privileges.h"
#include "proxy/front_connection.h"
#include "proxy/worker_link.h"

namespace bulkhead::supervisor {

namespace {

using Event = lifecycle::Lifecycle::Event;
using Action = lifecycle::Lifecycle::Action;

// How long a request whose worker connection broke waits for the worker's exit (to report the exit
// reason) before it is failed as a worker error.
constexpr uint64_t kOrphanGraceMs = 1000;
// Front socket backlog: clients waiting for accept().
constexpr int kFrontBacklog = 1024;
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

Cell::Cell(uv_loop_t* loop, config::CellConfig config, lifecycle::CellCompartment compartment,
           uint32_t max_payload, proxy::RequestPool* pool)
    : loop_(loop),
      config_(std::move(config)),
      max_payload_(max_payload),
      pool_(pool),
      bulkhead_(LimitsOf(config_)),
      deadlines_(static_cast<uint64_t>(config_.request_timeout.count())),
      after_poll_(loop,
                  [this] {
                    runner_.OnAfterPoll();
                    OnAfterPoll();
                  }),
      runner_(loop, config_, std::move(compartment), max_payload, &after_poll_, this) {
  for (uv_timer_t* timer : {&queue_timer_, &orphan_timer_, &stall_timer_, &request_timer_,
                            &accept_timer_, &write_timer_}) {
    uv_timer_init(loop_, timer);
    timer->data = this;
    ++open_handles_;
  }
  uv_pipe_init(loop_, &front_, 0);
  front_.data = this;
  ++open_handles_;
}

Cell::~Cell() { BH_CHECK(open_handles_ == 0); }

Status Cell::Bind() {
  Status cgroup = runner_.CreateCgroup();
  if (!cgroup.ok()) return cgroup;
  // The front socket first: it tells whether another live instance serves this cell.
  Result<ipc::ListeningSocket> front =
      ipc::ClaimListeningSocket(config_.socket, kFrontBacklog, ipc::Blocking::kNonBlocking,
                                lifecycle::FrontSocketAccess(config_));
  if (!front.ok()) return front.status();
  front_file_ = std::move(front->file);
  int rc = uv_pipe_open(&front_, front->fd.get());
  if (rc != 0) return Status::Error("uv_pipe_open " + config_.socket + ": " + uv_strerror(rc));
  front->fd.Release();
  rc = uv_listen(reinterpret_cast<uv_stream_t*>(&front_), kFrontBacklog, &Cell::OnConnection);
  if (rc != 0) return Status::Error("listen " + config_.socket + ": " + uv_strerror(rc));
  return runner_.BindSockets();
}

void Cell::OnConnection(uv_stream_t* server, int status) {
  auto* self = static_cast<Cell*>(server->data);
  if (status < 0) {
    Log(LogLevel::kWarning, self->name(), 0, std::string("accept: ") + uv_strerror(status));
    return;
  }
  std::string refusal = self->ConnectionRefusal();
  if (refusal.empty()) {
    proxy::FrontConnection::Accept(self, server, self->max_payload_);
    return;
  }
  // libuv has accepted the connection already (it asks only whether to keep it): answer it once
  // and close it, so the client learns why rather than hang in the backlog.
  ++self->counters_.refused_connections;
  ipc::RejectDetail detail;
  detail.cell = self->config_.name;
  detail.running = self->bulkhead_.running();
  detail.queued = self->bulkhead_.queued();
  ipc::FrameHeader header =
      ReplyHeader(ipc::ReplyStatus::kRejected, ipc::Reason::kTooManyConnections);
  header.request_id = 0;
  self->scratch_.clear();
  ipc::AppendRejectDetail(&self->scratch_, detail);
  std::string frame;
  ipc::AppendFrame(&frame, header, self->scratch_);
  self->scratch_.clear();
  proxy::FrontConnection::Refuse(server, frame);
  uint64_t now = self->Now();
  ++self->refusals_unlogged_;
  if (self->refusal_logged_ms_ == 0 || now - self->refusal_logged_ms_ >= 1000) {
    Log(LogLevel::kWarning, self->name(), 0,
        "refused " + std::to_string(self->refusals_unlogged_) +
            " client connection(s): " + refusal);
    self->refusal_logged_ms_ = now;
    self->refusals_unlogged_ = 0;
  }
}

std::string Cell::ConnectionRefusal() const {
  if (clients_.size() >= config_.max_connections) {
    return "max_connections of " + std::to_string(config_.max_connections) + " reached";
  }
  if (clients_.size() >= connection_share_) {
    return "its share of the client connection budget (" + std::to_string(connection_share_) +
           ", from RLIMIT_NOFILE) is used up";
  }
  return {};
}

// --- What the lifecycle asks of the data path. ---

std::string Cell::Start() { return runner_.Start(); }
std::string Cell::Restart() { return runner_.Restart(bulkhead_.running()); }
std::string Cell::Stop(std::function<void()> on_stopped) {
  return runner_.Stop(bulkhead_.running(), std::move(on_stopped));
}

void Cell::OpenAdmission() {
  bulkhead_.SetOpen(true);
  StartQueued();
}

void Cell::CloseAdmission() { bulkhead_.SetOpen(false); }

void Cell::WorkerStarting() { accept_warned_ = false; }

void Cell::FailInFlight(ipc::Reason reason, const std::string& message) {
  std::vector<proxy::WorkerLink*> links;
  links.swap(busy_links_);
  for (proxy::WorkerLink* link : links) {
    proxy::Request* request = link->TakeInflight();
    link->Close();
    if (request != nullptr) Fail(request, reason, message);
  }
  // Idle connections belong to the old worker generation too.
  for (proxy::WorkerLink* link : idle_links_) link->Close();
  idle_links_.clear();
  std::vector<proxy::Request*> orphans;
  orphans.swap(orphans_);
  uv_timer_stop(&orphan_timer_);
  for (proxy::Request* request : orphans) Fail(request, reason, message);
}

void Cell::RejectQueued() {
  while (admission::AdmissionEntry* entry = bulkhead_.PopExpired(UINT64_MAX)) {
    Reject(static_cast<proxy::Request*>(entry), ipc::Reason::kUnavailable);
  }
  ArmQueueTimer();
}

void Cell::MaybeDrained() {
  if (bulkhead_.running() == 0) runner_.Drained();
}

// --- Shutdown. ---

void Cell::DisconnectClients() {
  std::vector<proxy::FrontConnection*> clients(clients_.begin(), clients_.end());
  for (proxy::FrontConnection* conn : clients) conn->Close();
}

void Cell::CloseHandles(std::function<void()> on_closed) {
  BH_CHECK(runner_.pid() == 0);
  on_closed_ = std::move(on_closed);
  for (proxy::WorkerLink* link : idle_links_) link->Close();
  idle_links_.clear();
  BH_CHECK(busy_links_.empty());
  for (uv_timer_t* timer : {&queue_timer_, &orphan_timer_, &stall_timer_, &request_timer_,
                            &accept_timer_, &write_timer_}) {
    uv_close(reinterpret_cast<uv_handle_t*>(timer), &Cell::OnHandleClosed);
  }
  uv_close(reinterpret_cast<uv_handle_t*>(&front_), &Cell::OnHandleClosed);
  // Only socket files this cell bound are removed, while they are still the ones it bound.
  front_file_.Remove();
  auto closed = [this] {
    BH_CHECK(open_handles_ > 0);
    if (--open_handles_ == 0 && on_closed_) std::exchange(on_closed_, nullptr)();
  };
  ++open_handles_;
  runner_.Close(closed);
  ++open_handles_;
  after_poll_.Close(closed);
}

void Cell::OnHandleClosed(uv_handle_t* handle) {
  auto* self = static_cast<Cell*>(handle->data);
  BH_CHECK(self->open_handles_ > 0);
  if (--self->open_handles_ == 0 && self->on_closed_) std::exchange(self->on_closed_, nullptr)();
}

// --- Reload. ---

Status Cell::Reconfigure(const config::CellConfig& next,
                         const std::optional<cell::CgroupLimits>& cgroup_limits) {
  BH_CHECK(next.name == config_.name && next.socket == config_.socket &&
           next.worker_socket == config_.worker_socket &&
           next.notify_socket == config_.notify_socket);
  // A stall_timeout set or changed now counts the silence from now (systemd#9467): a worker busy
  // for longer than the new timeout is not killed for the time before it existed.
  if (next.stall_timeout != config_.stall_timeout) stall_counted_from_ms_ = Now();
  config_ = next;
  Status written = runner_.Reconfigure(next, cgroup_limits);
  bulkhead_.SetLimits(LimitsOf(config_));
  // A changed request_timeout counts from now for the requests running now.
  deadlines_.SetTimeout(static_cast<uint64_t>(config_.request_timeout.count()), Now());
  ArmRequestTimer();
  if (config_.stall_timeout.count() == 0) {
    uv_timer_stop(&stall_timer_);
  } else if (!busy_links_.empty()) {
    // Checks at once against the new timeout and re-arms itself for what remains.
    uv_timer_start(&stall_timer_, &Cell::OnStallTimer, 0, 0);
  }
  // A raised max_concurrent starts queued requests now; a changed queue_timeout re-arms the queue
  // timer for the head's new deadline.
  StartQueued();
  return written;
}

// --- Request path. ---

void Cell::OnClientConnected(proxy::FrontConnection* conn) { clients_.insert(conn); }
void Cell::OnClientDisconnected(proxy::FrontConnection* conn) {
  clients_.erase(conn);
  waiting_clients_.erase(conn);
}

// --- Clients that do not read (max_unsent_bytes, client_write_timeout). ---

void Cell::CountDelivered(uint64_t* outcome) {
  BH_CHECK(replies_unwritten_ > 0);
  --replies_unwritten_;
  ++*outcome;
}

void Cell::CountUndelivered(uint64_t replies) {
  BH_CHECK(replies_unwritten_ >= replies);
  replies_unwritten_ -= replies;
  counters_.undelivered += replies;
}

uint64_t Cell::UnsentBytes() const {
  uint64_t total = 0;
  for (const proxy::FrontConnection* conn : waiting_clients_) total += conn->unsent_bytes();
  return total;
}

void Cell::OnRepliesWaiting(proxy::FrontConnection* conn) {
  waiting_clients_.insert(conn);
  if (config_.client_write_timeout.count() > 0 &&
      !uv_is_active(reinterpret_cast<uv_handle_t*>(&write_timer_))) {
    const uint64_t timeout = static_cast<uint64_t>(config_.client_write_timeout.count());
    const uint64_t tick = std::clamp<uint64_t>(timeout / 4, 100, 1000);
    uv_timer_start(&write_timer_, &Cell::OnWriteTimer, tick, tick);
  }
  uint64_t total = UnsentBytes();
  if (total <= config_.max_unsent_bytes) return;
  // Over the budget: the clients that have accepted nothing for the longest go first, until the
  // rest fits (the one just answered too, when it is the slowest).
  const uint64_t now = Now();
  std::vector<proxy::FrontConnection*> by_stall(waiting_clients_.begin(), waiting_clients_.end());
  for (proxy::FrontConnection* waiting : by_stall) waiting->CheckProgress(now);
  std::sort(by_stall.begin(), by_stall.end(),
            [](proxy::FrontConnection* a, proxy::FrontConnection* b) {
              if (a->stalled_since_ms() != b->stalled_since_ms()) {
                return a->stalled_since_ms() < b->stalled_since_ms();
              }
              return a->unsent_bytes() > b->unsent_bytes();
            });
  for (proxy::FrontConnection* slowest : by_stall) {
    if (total <= config_.max_unsent_bytes) break;
    const size_t unsent = slowest->unsent_bytes();
    if (unsent == 0) continue;
    total -= unsent;
    slowest->CloseUnread("the cell's max_unsent_bytes of " +
                         std::to_string(config_.max_unsent_bytes) +
                         " is used up and it accepted nothing for the longest");
  }
}

void Cell::OnWriteTimer(uv_timer_t* timer) {
  auto* self = static_cast<Cell*>(timer->data);
  const uint64_t now = self->Now();
  const uint64_t timeout = static_cast<uint64_t>(self->config_.client_write_timeout.count());
  std::vector<proxy::FrontConnection*> waiting(self->waiting_clients_.begin(),
                                               self->waiting_clients_.end());
  for (proxy::FrontConnection* conn : waiting) {
    if (conn->CheckProgress(now) == 0) {
      self->waiting_clients_.erase(conn);
    } else if (timeout > 0 && now - conn->stalled_since_ms() >= timeout) {
      conn->CloseUnread("accepted no byte for " + std::to_string(now - conn->stalled_since_ms()) +
                        " ms, client_write_timeout is " + std::to_string(timeout) + " ms");
    }
  }
  if (self->waiting_clients_.empty() || timeout == 0) uv_timer_stop(timer);
}

void Cell::OnBadRequest(const std::string& why) {
  ++counters_.bad_request;
  Log(LogLevel::kWarning, name(), 0, "bad request, closing client connection: " + why);
}

void Cell::OnRequest(proxy::FrontConnection* conn, const ipc::FrameView& frame) {
  proxy::Request* request = pool_->Acquire();
  request->cell = this;
  request->client_request_id = frame.header.request_id;
  request->admitted_at_ms = Now();
  request->admitted_at_ns = uv_hrtime();
  request->dispatched_at_ns = 0;
  conn->LinkRequest(request);
  if (runner_.RefusesRequests()) {
    ++counters_.rejected_at_admission;
    Reject(request, ipc::Reason::kUnavailable);
    return;
  }
  switch (bulkhead_.Admit(request, request->admitted_at_ms)) {
    case admission::Bulkhead::Decision::kRun:
      ++counters_.admitted;
      Dispatch(request, frame.payload);
      break;
    case admission::Bulkhead::Decision::kQueued:
      ++counters_.admitted;
      request->payload.assign(frame.payload);
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

proxy::WorkerLink* Cell::TakeLink(proxy::Request* request, bool fresh) {
  if (!fresh && !idle_links_.empty()) {
    proxy::WorkerLink* link = idle_links_.back();
    idle_links_.pop_back();
    return link;
  }
  Result<proxy::WorkerLink*> made =
      proxy::WorkerLink::Connect(this, loop_, config_.worker_socket, max_payload_);
  if (!made.ok()) {
    Log(LogLevel::kError, name(), runner_.pid(),
        "cannot connect to worker: " + made.status().message());
    Fail(request, ipc::Reason::kWorkerError,
         "cannot connect to worker: " + made.status().message());
    return nullptr;
  }
  last_link_opened_ms_ = Now();
  if (!uv_is_active(reinterpret_cast<uv_handle_t*>(&accept_timer_))) {
    uv_timer_start(&accept_timer_, &Cell::OnAcceptTimer, kAcceptWarnMs, 0);
  }
  return *made;
}

void Cell::OnAcceptTimer(uv_timer_t* timer) {
  auto* self = static_cast<Cell*>(timer->data);
  if (self->runner_.pid() == 0 || !self->runner_.HasUnacceptedConnection()) return;
  // When the newest connection is kAcceptWarnMs old, the one waiting is at least as old.
  const uint64_t newest_age = self->Now() - self->last_link_opened_ms_;
  if (newest_age < kAcceptWarnMs) {
    uv_timer_start(timer, &Cell::OnAcceptTimer, kAcceptWarnMs - newest_age, 0);
    return;
  }
  if (!self->accept_warned_) {
    self->accept_warned_ = true;
    Log(LogLevel::kWarning, self->name(), self->runner_.pid(),
        "worker has not accepted a connection the supervisor opened at least " +
            std::to_string(kAcceptWarnMs / 1000) +
            " s ago: a worker must accept every connection on its listening socket and serve its "
            "connections concurrently, each one persistent (docs/protocol.md); requests sent on "
            "this one wait");
  }
}

void Cell::Dispatch(proxy::Request* request, std::string_view payload) {
  proxy::WorkerLink* link = TakeLink(request, /*fresh=*/false);
  if (link == nullptr) return;
  uint64_t now = Now();
  // A worker that had nothing to do starts its stall clock now.
  if (busy_links_.empty()) last_progress_ms_ = now;
  link->busy_index = busy_links_.size();
  busy_links_.push_back(link);

  request->dispatched_at_ns = uv_hrtime();
  queue_wait_.Record(request->dispatched_at_ns,
                     request->dispatched_at_ns - request->admitted_at_ns);
  deadlines_.Start(request, now);
  if (config_.stall_timeout.count() > 0 &&
      !uv_is_active(reinterpret_cast<uv_handle_t*>(&stall_timer_))) {
    uv_timer_start(&stall_timer_, &Cell::OnStallTimer,
                   static_cast<uint64_t>(config_.stall_timeout.count()), 0);
  }
  ArmRequestTimer();
  link->Send(request, payload);
}

void Cell::Resend(proxy::Request* request, std::string_view payload) {
  request->resent = true;
  // Keeps its slot, its place on the running list and its dispatch time (request_timeout).
  proxy::WorkerLink* link = TakeLink(request, /*fresh=*/true);
  if (link == nullptr) return;
  link->busy_index = busy_links_.size();
  busy_links_.push_back(link);
  link->Send(request, payload);
}

void Cell::StartQueued() {
  while (admission::AdmissionEntry* entry = bulkhead_.StartNext()) {
    auto* request = static_cast<proxy::Request*>(entry);
    // The payload is moved out so the request keeps no copy while it runs.
    scratch_.swap(request->payload);
    Dispatch(request, scratch_);
    scratch_.clear();
  }
  ArmQueueTimer();
}

void Cell::OnWorkerReply(proxy::WorkerLink* link, proxy::Request* request,
                         const ipc::FrameView& frame) {
  RemoveBusy(link);
  idle_links_.push_back(link);
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

void Cell::OnLinkBroken(proxy::WorkerLink* link, const std::string& why, bool worker_at_fault) {
  // A request the worker cannot have read (docs/protocol.md): most often it went out on an idle
  // connection that the worker had closed, or was closing, after its last reply.
  std::string unread_payload;
  const bool unread = !worker_at_fault && link->inflight_unread();
  if (unread) unread_payload.assign(link->inflight_payload());
  proxy::Request* request = link->TakeInflight();
  DropLink(link);
  if (unread && !request->resent && runner_.pid() != 0) {
    Log(LogLevel::kDebug, name(), runner_.pid(),
        "worker connection closed before the worker read the request (" + why +
            "): sending it again on a new connection");
    Resend(request, unread_payload);
    return;
  }
  if (worker_at_fault) {
    // The supervisor closed the connection: say why, at once, rather than wait for an exit.
    Log(LogLevel::kWarning, name(), runner_.pid(), "worker broke the protocol: " + why);
    if (request != nullptr)
      Fail(request, ipc::Reason::kWorkerError, "worker broke the protocol: " + why);
    return;
  }
  if (request == nullptr) return;
  // Most often the worker is dying and its exit is about to be reaped: wait for it, so the client
  // learns the exit reason rather than a bare "connection closed".
  orphans_.push_back(request);
  if (orphans_.size() == 1) {
    uv_timer_start(&orphan_timer_, &Cell::OnOrphanTimer, kOrphanGraceMs, 0);
  }
  Log(LogLevel::kDebug, name(), runner_.pid(),
      "worker connection broke with a request in flight: " + why);
}

void Cell::OnOrphanTimer(uv_timer_t* timer) {
  auto* self = static_cast<Cell*>(timer->data);
  std::vector<proxy::Request*> orphans;
  orphans.swap(self->orphans_);
  for (proxy::Request* request : orphans) {
    self->Fail(request, ipc::Reason::kWorkerError, "worker closed the connection without replying");
  }
}

void Cell::RemoveBusy(proxy::WorkerLink* link) {
  size_t i = link->busy_index;
  BH_CHECK(i < busy_links_.size() && busy_links_[i] == link);
  busy_links_[i] = busy_links_.back();
  busy_links_[i]->busy_index = i;
  busy_links_.pop_back();
}

void Cell::DropLink(proxy::WorkerLink* link) {
  if (link->busy_index < busy_links_.size() && busy_links_[link->busy_index] == link) {
    RemoveBusy(link);
  } else {
    std::erase(idle_links_, link);
  }
  link->Close();
}

void Cell::FinishRunning(proxy::Request* request) {
  // Off the deadlines (where a request whose worker connection failed never was), then the slot
  // is freed. The request timer, if armed for it, fires and re-arms for the next deadline.
  deadlines_.Finish(request);
  bulkhead_.Finish(request);
}

void Cell::Answer(proxy::Request* request, uint64_t* outcome, const ipc::FrameHeader& header,
                  std::string_view payload) {
  BH_CHECK(!request->answered);
  request->answered = true;
  if (request->dispatched_at_ns != 0) {
    uint64_t now_ns = uv_hrtime();
    request_duration_.Record(now_ns, now_ns - request->admitted_at_ns);
  }
  if (request->client != nullptr) {
    proxy::FrontConnection* client = request->client;
    client->UnlinkRequest(request);
    ipc::FrameHeader reply = header;
    reply.request_id = request->client_request_id;
    ++replies_unwritten_;
    client->SendReply(reply, payload, outcome);
  } else {
    ++*outcome;
  }
}

void Cell::Complete(proxy::Request* request, uint64_t* outcome, const ipc::FrameHeader& header,
                    std::string_view payload) {
  if (!request->answered) Answer(request, outcome, header, payload);
  pool_->Release(request);
}

void Cell::Fail(proxy::Request* request, ipc::Reason reason, std::string_view message) {
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

void Cell::Reject(proxy::Request* request, ipc::Reason reason) {
  uint64_t* outcome = &counters_.rejected_unavailable;
  if (reason == ipc::Reason::kFull) outcome = &counters_.rejected_full;
  if (reason == ipc::Reason::kQueueTimeout) outcome = &counters_.rejected_queue_timeout;
  ipc::RejectDetail detail;
  detail.cell = config_.name;
  detail.running = bulkhead_.running();
  detail.queued = bulkhead_.queued();
  if (reason == ipc::Reason::kUnavailable) detail.retry_after_ms = runner_.RetryAfterMs();
  scratch_.clear();
  ipc::AppendRejectDetail(&scratch_, detail);
  Complete(request, outcome, ReplyHeader(ipc::ReplyStatus::kRejected, reason), scratch_);
  scratch_.clear();
}

void Cell::OnClientGone(proxy::Request* request) {
  if (request->admission_state() == admission::AdmissionEntry::State::kQueued) {
    bulkhead_.Cancel(request);
    ++counters_.cancelled;
    pool_->Release(request);
    ArmQueueTimer();
  }
  // A running request keeps its slot until the worker answers; the answer is then dropped.
}

void Cell::ArmQueueTimer() {
  std::optional<uint64_t> deadline = bulkhead_.NextDeadline();
  if (!deadline) {
    uv_timer_stop(&queue_timer_);
    return;
  }
  uint64_t now = Now();
  uv_timer_start(&queue_timer_, &Cell::OnQueueTimer, *deadline > now ? *deadline - now : 0, 0);
}

void Cell::OnQueueTimer(uv_timer_t* timer) {
  auto* self = static_cast<Cell*>(timer->data);
  while (admission::AdmissionEntry* entry = self->bulkhead_.PopExpired(self->Now())) {
    self->Reject(static_cast<proxy::Request*>(entry), ipc::Reason::kQueueTimeout);
  }
  self->ArmQueueTimer();
}

// --- Stall detection and request timeouts. ---

void Cell::OnStallTimer(uv_timer_t* timer) {
  static_cast<Cell*>(timer->data)->CheckStall(/*after_poll=*/false);
}

void Cell::CheckStall(bool after_poll) {
  const uint64_t stall_ms = static_cast<uint64_t>(config_.stall_timeout.count());
  // Idle (nothing to stall on), or no stall_timeout any more.
  if (busy_links_.empty() || runner_.pid() == 0 || stall_ms == 0) return;
  const uint64_t now = Now();
  const uint64_t counted = now - std::max(last_progress_ms_, stall_counted_from_ms_);
  if (counted < stall_ms) {
    // It answered meanwhile: check again when the newest progress would go stale.
    uv_timer_start(&stall_timer_, &Cell::OnStallTimer, stall_ms - counted, 0);
    return;
  }
  if (!after_poll) {
    verdicts_.stall = true;
    after_poll_.Request();
    return;
  }
  runner_.Stalled("no reply for " + std::to_string(now - last_progress_ms_) + " ms");
}

void Cell::OnAfterPoll() {
  const PendingVerdicts verdicts = std::exchange(verdicts_, PendingVerdicts{});
  if (verdicts.stall) CheckStall(/*after_poll=*/true);
  if (verdicts.request_timeout) ExpireRequests();
}

void Cell::ArmRequestTimer() {
  std::optional<uint64_t> deadline = deadlines_.NextDeadline();
  if (!deadline) {
    uv_timer_stop(&request_timer_);
    return;
  }
  uint64_t now = Now();
  uv_timer_start(&request_timer_, &Cell::OnRequestTimer, *deadline > now ? *deadline - now : 0, 0);
}

void Cell::OnRequestTimer(uv_timer_t* timer) {
  auto* self = static_cast<Cell*>(timer->data);
  std::optional<uint64_t> deadline = self->deadlines_.NextDeadline();
  if (deadline && *deadline <= self->Now()) {
    // Replies already waiting in the worker connections are read first.
    self->verdicts_.request_timeout = true;
    self->after_poll_.Request();
    return;
  }
  self->ArmRequestTimer();
}

void Cell::ExpireRequests() {
  const uint64_t timeout = deadlines_.timeout_ms();
  while (admission::DeadlineEntry* entry = deadlines_.PopExpired(Now())) {
    auto* request = static_cast<proxy::Request*>(entry);
    // The client is answered now; the slot stays taken until the worker answers or is replaced,
    // because the worker really is still busy with it.
    Answer(request, &counters_.failed_timeout,
           ReplyHeader(ipc::ReplyStatus::kFailed, ipc::Reason::kTimeout),
           "request_timeout of " + std::to_string(timeout) + " ms passed");
  }
  ArmRequestTimer();
}

control::CellSnapshot Cell::Snapshot() const {
  control::CellSnapshot s;
  const lifecycle::Lifecycle& lifecycle = runner_.lifecycle();
  s.name = config_.name;
  s.state = lifecycle.state();
  uint64_t now = uv_now(loop_);
  s.state_since_ms = now - std::min(now, lifecycle.since_ms());
  s.state_detail = lifecycle.StateDetail();
  s.pid = runner_.pid();
  s.socket = config_.socket;
  s.worker_socket = config_.worker_socket;
  s.limits = bulkhead_.limits();
  s.running = bulkhead_.running();
  s.queued = bulkhead_.queued();
  s.clients = static_cast<uint32_t>(clients_.size());
  s.max_connections = config_.max_connections;
  s.connection_limit = std::min(config_.max_connections, connection_share_);
  s.worker_connections = static_cast<uint32_t>(worker_connections());
  s.starts = lifecycle.starts();
  s.restarts = lifecycle.restarts();
  s.last_exit = lifecycle.last_exit();
  s.reason = lifecycle.reason();
  s.status_text = runner_.status_text();
  if (s.pid != 0) s.uptime_ms = now - std::min(now, lifecycle.worker_started_at_ms());
  if (lifecycle.next_start_at_ms() > now) s.next_start_in_ms = lifecycle.next_start_at_ms() - now;
  s.counters = counters_;
  s.in_flight =
      bulkhead_.running() - static_cast<uint32_t>(deadlines_.expired()) + bulkhead_.queued();
  s.in_flight += replies_unwritten_;
  s.unsent_bytes = UnsentBytes();
  uint64_t now_ns = uv_hrtime();
  s.queue_wait = queue_wait_.total();
  s.request_duration = request_duration_.total();
  s.recent_queue_wait = queue_wait_.Recent(now_ns);
  s.recent_request_duration = request_duration_.Recent(now_ns);
  s.restarts_by_reason = runner_.restarts_by_reason();
  lifecycle::WorkerRunner::CompartmentStatus compartment = runner_.ReadCompartment();
  s.limits_enforced = compartment.limits_enforced;
  s.limits_note = std::move(compartment.limits_note);
  s.limit_states = compartment.limit_states;
  s.cgroup_path = std::move(compartment.cgroup_path);
  s.cgroup_limits = compartment.cgroup_limits;
  s.cgroup = std::move(compartment.cgroup);
  s.oom_kills = compartment.oom_kills;
  return s;
}

}  // namespace bulkhead::supervisor
