// SPDX-License-Identifier: MIT
#include "supervisor/cell.h"

#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <utility>

#include "base/check.h"
#include "base/log.h"
#include "cell/process.h"
#include "supervisor/front_connection.h"
#include "supervisor/listen_socket.h"
#include "supervisor/worker_link.h"

namespace bulkhead::supervisor {

namespace {

// How long a request whose worker connection broke waits for the worker's exit (to report the exit
// reason) before it is failed as a worker error.
constexpr uint64_t kOrphanGraceMs = 1000;
// Front socket backlog: clients waiting for accept().
constexpr int kFrontBacklog = 1024;

constexpr const char* kDefaultPath =
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

ipc::FrameHeader ReplyHeader(ipc::ReplyStatus status, ipc::Reason reason, uint64_t id) {
  ipc::FrameHeader header;
  header.type = ipc::FrameType::kReply;
  header.status = status;
  header.reason = reason;
  header.request_id = id;
  return header;
}

Bulkhead::Limits LimitsOf(const config::CellConfig& config) {
  return Bulkhead::Limits{config.max_concurrent, config.max_queue,
                          static_cast<uint64_t>(config.queue_timeout.count())};
}

}  // namespace

const char* CellStateName(CellState state) {
  switch (state) {
    case CellState::kStopped:
      return "stopped";
    case CellState::kRunning:
      return "running";
    case CellState::kBackoff:
      return "backoff";
    case CellState::kStopping:
      return "stopping";
  }
  return "unknown";
}

Cell::Cell(uv_loop_t* loop, config::CellConfig config, uint32_t max_payload, RequestPool* pool)
    : loop_(loop),
      config_(std::move(config)),
      max_payload_(max_payload),
      pool_(pool),
      bulkhead_(LimitsOf(config_)) {
  for (uv_timer_t* timer : {&restart_timer_, &queue_timer_, &orphan_timer_, &kill_timer_}) {
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
  Result<UniqueFd> worker = ClaimListeningSocket(
      config_.worker_socket, static_cast<int>(std::max<uint32_t>(config_.max_concurrent, 128)),
      StaleCheck::kAlwaysReclaim, Blocking::kBlocking);
  if (!worker.ok()) return worker.status();
  worker_listen_fd_ = std::move(worker).value();

  Result<UniqueFd> front =
      ClaimListeningSocket(config_.socket, kFrontBacklog, StaleCheck::kRefuseLive);
  if (!front.ok()) return front.status();
  int rc = uv_pipe_open(&front_, front->get());
  if (rc != 0) return Status::Error("uv_pipe_open " + config_.socket + ": " + uv_strerror(rc));
  front->Release();
  rc = uv_listen(reinterpret_cast<uv_stream_t*>(&front_), kFrontBacklog, &Cell::OnConnection);
  if (rc != 0) return Status::Error("listen " + config_.socket + ": " + uv_strerror(rc));
  front_open_ = true;
  return Status::Ok();
}

void Cell::OnConnection(uv_stream_t* server, int status) {
  auto* self = static_cast<Cell*>(server->data);
  if (status < 0) {
    Log(LogLevel::kWarning, self->name(), 0, std::string("accept: ") + uv_strerror(status));
    return;
  }
  FrontConnection::Accept(self, server, self->max_payload_);
}

void Cell::Start() {
  BH_CHECK(pid_ == 0);
  if (stopping_) return;
  cell::SpawnOptions options;
  options.argv = config_.command;
  bool has_path = false;
  for (const auto& [key, value] : config_.environment) {
    options.environment.push_back(key + "=" + value);
    if (key == "PATH") has_path = true;
  }
  if (!has_path) options.environment.emplace_back(kDefaultPath);
  options.working_directory = config_.working_directory;
  options.listen_fd = worker_listen_fd_.get();
  options.listen_fd_name = config_.name;
  ++starts_;
  Result<pid_t> pid = cell::Spawn(options);
  if (!pid.ok()) {
    last_exit_ = "exec failed: " + pid.status().message();
    Log(LogLevel::kError, name(), 0, "cannot start worker: " + pid.status().message());
    ScheduleRestart();
    return;
  }
  pid_ = *pid;
  started_at_ms_ = Now();
  state_ = CellState::kRunning;
  Log(LogLevel::kInfo, name(), pid_, "worker started");
  bulkhead_.SetOpen(true);
  StartQueued();
}

void Cell::ScheduleRestart() {
  state_ = CellState::kBackoff;
  uint64_t delay = static_cast<uint64_t>(config_.restart_delay.count());
  next_start_at_ms_ = Now() + delay;
  uv_timer_start(&restart_timer_, &Cell::OnRestartTimer, delay, 0);
}

void Cell::OnRestartTimer(uv_timer_t* timer) {
  auto* self = static_cast<Cell*>(timer->data);
  if (self->stopping_ || self->pid_ != 0) return;
  ++self->restarts_;
  self->Start();
}

void Cell::OnWorkerExit(int wait_status) {
  BH_CHECK(pid_ != 0);
  pid_t pid = pid_;
  last_exit_ = cell::DescribeWaitStatus(wait_status);
  pid_ = 0;
  bulkhead_.SetOpen(false);
  // The worker leads its own process group: whatever it left behind goes with it, so that two
  // generations never run side by side.
  ::kill(-pid, SIGKILL);
  Log(stopping_ ? LogLevel::kInfo : LogLevel::kWarning, name(), pid,
      "worker exited: " + last_exit_);

  std::vector<WorkerLink*> links;
  links.swap(busy_links_);
  links.insert(links.end(), idle_links_.begin(), idle_links_.end());
  idle_links_.clear();
  for (WorkerLink* link : links) {
    Request* request = link->TakeInflight();
    link->Close();
    if (request != nullptr) Fail(request, ipc::Reason::kWorkerDied, last_exit_);
  }
  std::vector<Request*> orphans;
  orphans.swap(orphans_);
  uv_timer_stop(&orphan_timer_);
  for (Request* request : orphans) Fail(request, ipc::Reason::kWorkerDied, last_exit_);

  if (stopping_) {
    state_ = CellState::kStopped;
    uv_timer_stop(&kill_timer_);
    if (on_stopped_) std::exchange(on_stopped_, nullptr)();
    return;
  }
  ScheduleRestart();
}

void Cell::Stop(uint64_t kill_after_ms, std::function<void()> on_stopped) {
  stopping_ = true;
  on_stopped_ = std::move(on_stopped);
  uv_timer_stop(&restart_timer_);
  bulkhead_.SetOpen(false);
  // What waits will not be served by this cell any more.
  while (AdmissionEntry* entry = bulkhead_.PopExpired(UINT64_MAX)) {
    Reject(static_cast<Request*>(entry), ipc::Reason::kUnavailable);
  }
  ArmQueueTimer();
  if (pid_ == 0) {
    state_ = CellState::kStopped;
    if (on_stopped_) std::exchange(on_stopped_, nullptr)();
    return;
  }
  state_ = CellState::kStopping;
  Log(LogLevel::kInfo, name(), pid_, "stopping worker (SIGTERM)");
  ::kill(-pid_, SIGTERM);
  ::kill(pid_, SIGTERM);  // in case the worker left its process group
  uv_timer_start(&kill_timer_, &Cell::OnKillTimer, kill_after_ms, 0);
}

void Cell::OnKillTimer(uv_timer_t* timer) {
  auto* self = static_cast<Cell*>(timer->data);
  if (self->pid_ == 0) return;
  Log(LogLevel::kWarning, self->name(), self->pid_, "worker ignored SIGTERM: sending SIGKILL");
  ::kill(-self->pid_, SIGKILL);
  ::kill(self->pid_, SIGKILL);
}

void Cell::DisconnectClients() {
  std::vector<FrontConnection*> clients(clients_.begin(), clients_.end());
  for (FrontConnection* conn : clients) conn->Close();
}

void Cell::CloseHandles(std::function<void()> on_closed) {
  BH_CHECK(pid_ == 0);
  on_closed_ = std::move(on_closed);
  for (WorkerLink* link : idle_links_) link->Close();
  idle_links_.clear();
  BH_CHECK(busy_links_.empty());
  for (uv_timer_t* timer : {&restart_timer_, &queue_timer_, &orphan_timer_, &kill_timer_}) {
    uv_close(reinterpret_cast<uv_handle_t*>(timer), &Cell::OnHandleClosed);
  }
  uv_close(reinterpret_cast<uv_handle_t*>(&front_), &Cell::OnHandleClosed);
  front_open_ = false;
  worker_listen_fd_.Reset();
}

void Cell::OnHandleClosed(uv_handle_t* handle) {
  auto* self = static_cast<Cell*>(handle->data);
  BH_CHECK(self->open_handles_ > 0);
  if (--self->open_handles_ == 0 && self->on_closed_) std::exchange(self->on_closed_, nullptr)();
}

void Cell::OnClientConnected(FrontConnection* conn) { clients_.insert(conn); }
void Cell::OnClientDisconnected(FrontConnection* conn) { clients_.erase(conn); }

void Cell::OnBadRequest(const std::string& why) {
  ++counters_.bad_request;
  Log(LogLevel::kWarning, name(), 0, "bad request, closing client connection: " + why);
}

void Cell::OnRequest(FrontConnection* conn, const ipc::FrameView& frame) {
  Request* request = pool_->Acquire();
  request->cell = this;
  request->client_request_id = frame.header.request_id;
  request->admitted_at_ms = Now();
  conn->LinkRequest(request);
  if (stopping_) {
    Reject(request, ipc::Reason::kUnavailable);
    return;
  }
  switch (bulkhead_.Admit(request, request->admitted_at_ms)) {
    case Bulkhead::Decision::kRun:
      Dispatch(request, frame.payload);
      break;
    case Bulkhead::Decision::kQueued:
      request->payload.assign(frame.payload);
      if (bulkhead_.queued() == 1) ArmQueueTimer();
      break;
    case Bulkhead::Decision::kRejectedFull:
      Reject(request, ipc::Reason::kFull);
      break;
    case Bulkhead::Decision::kRejectedUnavailable:
      Reject(request, ipc::Reason::kUnavailable);
      break;
  }
}

void Cell::Dispatch(Request* request, std::string_view payload) {
  WorkerLink* link = nullptr;
  if (!idle_links_.empty()) {
    link = idle_links_.back();
    idle_links_.pop_back();
  } else {
    Result<WorkerLink*> made =
        WorkerLink::Connect(this, loop_, config_.worker_socket, max_payload_);
    if (!made.ok()) {
      Log(LogLevel::kError, name(), pid_, "cannot connect to worker: " + made.status().message());
      Fail(request, ipc::Reason::kWorkerError,
           "cannot connect to worker: " + made.status().message());
      return;
    }
    link = *made;
  }
  link->busy_index = busy_links_.size();
  busy_links_.push_back(link);
  link->Send(request, payload);
}

void Cell::StartQueued() {
  while (AdmissionEntry* entry = bulkhead_.StartNext()) {
    auto* request = static_cast<Request*>(entry);
    // The payload is moved out so the request keeps no copy while it runs.
    scratch_.swap(request->payload);
    Dispatch(request, scratch_);
    scratch_.clear();
  }
  ArmQueueTimer();
}

void Cell::OnWorkerReply(WorkerLink* link, Request* request, const ipc::FrameView& frame) {
  RemoveBusy(link);
  idle_links_.push_back(link);

  const ipc::FrameHeader& in = frame.header;
  if (in.status == ipc::ReplyStatus::kOk) {
    bulkhead_.Finish(request);
    ++counters_.ok;
    Complete(request, ReplyHeader(ipc::ReplyStatus::kOk, ipc::Reason::kNone, 0), frame.payload);
  } else if (in.status == ipc::ReplyStatus::kFailed) {
    Fail(request, ipc::Reason::kWorkerError, frame.payload);
    return;  // Fail starts the queued work
  } else {
    Fail(request, ipc::Reason::kWorkerError,
         std::string("worker replied with status ") + ipc::StatusName(in.status));
    return;
  }
  StartQueued();
}

void Cell::OnLinkBroken(WorkerLink* link, std::string why) {
  Request* request = link->TakeInflight();
  DropLink(link);
  if (request == nullptr) return;
  if (pid_ == 0) {
    Fail(request, ipc::Reason::kWorkerDied, last_exit_.empty() ? why : last_exit_);
    return;
  }
  // Most often the worker is dying and its exit is about to be reaped: wait for it, so the client
  // learns the exit reason rather than a bare "connection closed".
  orphans_.push_back(request);
  if (orphans_.size() == 1) {
    uv_timer_start(&orphan_timer_, &Cell::OnOrphanTimer, kOrphanGraceMs, 0);
  }
  Log(LogLevel::kDebug, name(), pid_, "worker connection broke with a request in flight: " + why);
}

void Cell::OnOrphanTimer(uv_timer_t* timer) {
  auto* self = static_cast<Cell*>(timer->data);
  std::vector<Request*> orphans;
  orphans.swap(self->orphans_);
  for (Request* request : orphans) {
    self->Fail(request, ipc::Reason::kWorkerError, "worker closed the connection without replying");
  }
}

void Cell::RemoveBusy(WorkerLink* link) {
  size_t i = link->busy_index;
  BH_CHECK(i < busy_links_.size() && busy_links_[i] == link);
  busy_links_[i] = busy_links_.back();
  busy_links_[i]->busy_index = i;
  busy_links_.pop_back();
}

void Cell::DropLink(WorkerLink* link) {
  if (link->busy_index < busy_links_.size() && busy_links_[link->busy_index] == link) {
    RemoveBusy(link);
  } else {
    std::erase(idle_links_, link);
  }
  link->Close();
}

void Cell::Complete(Request* request, const ipc::FrameHeader& header, std::string_view payload) {
  if (request->client != nullptr) {
    FrontConnection* client = request->client;
    client->UnlinkRequest(request);
    ipc::FrameHeader reply = header;
    reply.request_id = request->client_request_id;
    client->SendReply(reply, payload);
  }
  pool_->Release(request);
}

void Cell::Fail(Request* request, ipc::Reason reason, std::string_view message) {
  bulkhead_.Finish(request);
  if (reason == ipc::Reason::kWorkerDied) {
    ++counters_.failed_worker_died;
  } else {
    ++counters_.failed_worker_error;
  }
  Complete(request, ReplyHeader(ipc::ReplyStatus::kFailed, reason, 0), message);
  StartQueued();
}

void Cell::Reject(Request* request, ipc::Reason reason) {
  switch (reason) {
    case ipc::Reason::kFull:
      ++counters_.rejected_full;
      break;
    case ipc::Reason::kQueueTimeout:
      ++counters_.rejected_queue_timeout;
      break;
    default:
      ++counters_.rejected_unavailable;
      break;
  }
  ipc::RejectDetail detail;
  detail.cell = config_.name;
  detail.running = bulkhead_.running();
  detail.queued = bulkhead_.queued();
  if (state_ == CellState::kBackoff && next_start_at_ms_ > Now()) {
    detail.retry_after_ms = static_cast<uint32_t>(next_start_at_ms_ - Now());
  }
  scratch_.clear();
  ipc::AppendRejectDetail(&scratch_, detail);
  Complete(request, ReplyHeader(ipc::ReplyStatus::kRejected, reason, 0), scratch_);
  scratch_.clear();
}

void Cell::OnClientGone(Request* request) {
  if (request->admission_state() == AdmissionEntry::State::kQueued) {
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
  while (AdmissionEntry* entry = self->bulkhead_.PopExpired(self->Now())) {
    self->Reject(static_cast<Request*>(entry), ipc::Reason::kQueueTimeout);
  }
  self->ArmQueueTimer();
}

CellSnapshot Cell::Snapshot() const {
  CellSnapshot s;
  s.name = config_.name;
  s.state = state_;
  s.pid = pid_;
  s.socket = config_.socket;
  s.worker_socket = config_.worker_socket;
  s.limits = bulkhead_.limits();
  s.running = bulkhead_.running();
  s.queued = bulkhead_.queued();
  s.clients = static_cast<uint32_t>(clients_.size());
  s.worker_connections = static_cast<uint32_t>(idle_links_.size() + busy_links_.size());
  s.starts = starts_;
  s.restarts = restarts_;
  s.last_exit = last_exit_;
  uint64_t now = uv_now(loop_);
  if (pid_ != 0) s.uptime_ms = now - started_at_ms_;
  if (state_ == CellState::kBackoff && next_start_at_ms_ > now) {
    s.next_start_in_ms = next_start_at_ms_ - now;
  }
  s.counters = counters_;
  return s;
}

}  // namespace bulkhead::supervisor
