// SPDX-License-Identifier: MIT
#include "proxy/cell_data_path.h"

#include <algorithm>
#include <charconv>
#include <ctime>
#include <utility>

#include "base/check.h"
#include "base/log.h"
#include "ipc/listen_socket.h"
#include "proxy/client.h"

namespace bulkhead::proxy {

namespace {

// How long a request whose worker connection broke waits for the worker's exit (to report the exit
// reason) before it is failed as a worker error.
constexpr uint64_t kOrphanGraceMs = 1000;
// A connection to the worker still waiting in its listening socket's backlog this long, in ms,
// gets a warning: the worker does not serve its connections concurrently (docs/protocol.md).
constexpr uint64_t kAcceptWarnMs = 5000;

admission::Bulkhead::Limits LimitsOf(const config::CellConfig& config) {
  return admission::Bulkhead::Limits{config.max_concurrent, config.max_queue,
                                     static_cast<uint64_t>(config.queue_timeout.count())};
}

admission::AdaptiveLimit::Options AdaptiveOptionsOf(const config::CellConfig& config) {
  admission::AdaptiveLimit::Options options;
  options.floor = config.min_concurrent;
  options.ceiling = config.max_concurrent;
  options.tolerance = config.latency_tolerance / 100.0;
  return options;
}

}  // namespace

CellDataPath::CellDataPath(uv_loop_t* loop, loop::TimeSource* time, config::CellConfig config,
                           uint32_t max_payload, ExchangePool* pool, loop::WriteBatch* write_batch,
                           loop::AfterPoll* after_poll, Upstream* upstream)
    : loop_(loop),
      time_(time),
      config_(std::move(config)),
      wire_(&WireFor(config_.protocol)),
      max_payload_(max_payload),
      pool_(pool),
      write_batch_(write_batch),
      after_poll_(after_poll),
      upstream_(upstream),
      bulkhead_(LimitsOf(config_)),
      queue_timer_(time->CreateTimer([this] { OnQueueTimer(); })),
      orphan_timer_(time->CreateTimer([this] { OnOrphanTimer(); })),
      stall_timer_(time->CreateTimer([this] { CheckStall(/*after_poll=*/false); })),
      request_timer_(time->CreateTimer([this] { OnRequestTimer(); })),
      accept_timer_(time->CreateTimer([this] { OnAcceptTimer(); })),
      front_(loop, time, &config_, max_payload, this, &bulkhead_, &counters_),
      slow_clients_(time),
      deadlines_(static_cast<uint64_t>(config_.request_timeout.count())) {
  multiplex_ = config_.worker_connections == config::WorkerConnections::kMultiplex;
  uv_prepare_init(loop_, &flush_prepare_);
  flush_prepare_.data = this;
  ++open_handles_;
  slow_clients_.SetLimits(config_.max_unsent_bytes,
                          static_cast<uint64_t>(config_.client_write_timeout.count()));
  ApplyConcurrency();
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

bool CellDataPath::RetireWorkerLinks() {
  accept_warned_ = false;
  // What this loop turn wrote to the multiplexed link goes out now: OnFlushPrepare flushes only
  // mux_link_, which is about to be the next worker's.
  if (mux_link_ != nullptr) mux_link_->Flush();
  mux_link_ = nullptr;
  for (Link* link : idle_links_) link->Close();
  idle_links_.clear();
  for (Link* link : busy_links_) {
    if (!link->retiring) {
      link->retiring = true;
      ++retiring_links_;
    }
  }
  return retiring_links_ > 0;
}

void CellDataPath::RetiredLinkDone() {
  BH_CHECK(retiring_links_ > 0);
  if (--retiring_links_ == 0) upstream_->RetiredLinksDrained();
}

void CellDataPath::FailInFlight(ipc::Reason reason, const std::string& message) {
  mux_link_ = nullptr;
  std::vector<Link*> links;
  links.swap(busy_links_);
  // Retired links go to the previous generation of a worker swap, which still runs: they finish
  // on their own.
  for (Link* link : links) {
    if (link->retiring) {
      link->busy_index = busy_links_.size();
      busy_links_.push_back(link);
    }
  }
  std::erase_if(links, [](const Link* link) { return link->retiring; });
  std::vector<Exchange*> exchanges;
  for (Link* link : links) {
    exchanges.clear();
    while (Exchange* exchange = link->TakeInflight()) exchanges.push_back(exchange);
    link->Close();
    for (Exchange* exchange : exchanges) Fail(exchange, reason, message);
  }
  // Idle connections belong to the old worker generation too.
  for (Link* link : idle_links_) link->Close();
  idle_links_.clear();
  std::vector<Exchange*> orphans;
  orphans.swap(orphans_);
  // Orphans of a retired link wait for the previous worker's exit, which runs on.
  if (retired_orphans_.empty()) orphan_timer_->Stop();
  for (Exchange* exchange : orphans) Fail(exchange, reason, message);
}

void CellDataPath::PreviousWorkerExited(const std::string& message) {
  std::vector<Link*> retired;
  for (Link* link : busy_links_) {
    if (link->retiring) retired.push_back(link);
  }
  std::vector<Exchange*> exchanges;
  for (Link* link : retired) {
    while (Exchange* exchange = link->TakeInflight()) exchanges.push_back(exchange);
    DropLink(link);
  }
  exchanges.insert(exchanges.end(), retired_orphans_.begin(), retired_orphans_.end());
  retired_orphans_.clear();
  if (orphans_.empty()) orphan_timer_->Stop();
  for (Exchange* exchange : exchanges) Fail(exchange, ipc::Reason::kWorkerDied, message);
}

void CellDataPath::RejectQueued() {
  while (admission::AdmissionEntry* entry = bulkhead_.PopExpired(UINT64_MAX)) {
    Reject(static_cast<Exchange*>(entry), ipc::Reason::kUnavailable);
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
  for (loop::Timer* timer : {queue_timer_.get(), orphan_timer_.get(), stall_timer_.get(),
                             request_timer_.get(), accept_timer_.get()}) {
    timer->Stop();
  }
  slow_clients_.Stop();
  uv_close(reinterpret_cast<uv_handle_t*>(&flush_prepare_), &CellDataPath::OnHandleClosed);
  ++open_handles_;
  front_.Close([this] {
    BH_CHECK(open_handles_ > 0);
    if (--open_handles_ == 0 && on_closed_) std::exchange(on_closed_, nullptr)();
  });
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
  ApplyConcurrency();
  slow_clients_.SetLimits(config_.max_unsent_bytes,
                          static_cast<uint64_t>(config_.client_write_timeout.count()));
  // A changed request_timeout counts from now for the requests running now.
  deadlines_.SetTimeout(static_cast<uint64_t>(config_.request_timeout.count()), Now());
  ArmRequestTimer();
  if (config_.stall_timeout.count() == 0) {
    stall_timer_->Stop();
  } else if (!busy_links_.empty()) {
    // Checks at once against the new timeout and re-arms itself for what remains.
    stall_timer_->Start(0);
  }
  // A raised max_concurrent starts queued requests now; a changed queue_timeout re-arms the queue
  // timer for the head's new deadline.
  StartQueued();
}

void CellDataPath::ApplyConcurrency() {
  if (config_.concurrency == config::ConcurrencyMode::kFixed) {
    // SetLimits gave the Bulkhead max_concurrent.
    adaptive_.reset();
    return;
  }
  if (adaptive_ == nullptr) {
    // It starts at the floor: the base can only be measured there. Requests running above it
    // finish; queued ones wait in order.
    adaptive_ = std::make_unique<admission::AdaptiveLimit>(time_, AdaptiveOptionsOf(config_));
    SetKernelSignals(kernel_signals_);
  } else {
    adaptive_->SetBounds(config_.min_concurrent, config_.max_concurrent);
    adaptive_->SetTolerance(AdaptiveOptionsOf(config_).tolerance);
  }
  bulkhead_.SetMaxConcurrent(adaptive_->limit());
}

void CellDataPath::PressureFired(admission::Signal signal, admission::CpuNeighbours neighbours) {
  if (adaptive_ != nullptr) TakeAdaptiveLimit(adaptive_->OnPressure(signal, neighbours));
}

void CellDataPath::CgroupUsagePolled(const CgroupSample& sample) {
  if (adaptive_ == nullptr) return;
  uint32_t limit = adaptive_->limit();
  if (adaptive_->signal_live(admission::Signal::kCpuThrottling)) {
    limit = adaptive_->OnCpuStat(sample.nr_periods, sample.nr_throttled);
  }
  if (adaptive_->signal_live(admission::Signal::kMemoryUsage) && sample.memory_max > 0) {
    limit =
        adaptive_->OnMemoryUsage(sample.working_set, sample.memory_max, bulkhead_.running());
  }
  TakeAdaptiveLimit(limit);
}

void CellDataPath::SetKernelSignals(uint8_t live) {
  kernel_signals_ = live;
  if (adaptive_ == nullptr) return;
  for (admission::Signal signal :
       {admission::Signal::kCpuPressure, admission::Signal::kMemoryPressure,
        admission::Signal::kCpuThrottling, admission::Signal::kMemoryUsage}) {
    adaptive_->SetSignalLive(signal, (live & admission::SignalBit(signal)) != 0);
  }
}

void CellDataPath::TakeAdaptiveLimit(uint32_t limit) {
  if (limit == bulkhead_.limits().max_concurrent) return;
  bulkhead_.SetMaxConcurrent(limit);
  StartQueued();  // kernel signals never raise it; should one, the queue takes it at once
}

void CellDataPath::SampleServiceTime(const Exchange& exchange) {
  if (adaptive_ == nullptr || exchange.dispatched_at_ns == 0) return;
  const uint32_t limit =
      adaptive_->OnSample(exchange.ServiceNs(time_->NowNs()) / 1000, bulkhead_.running());
  // A lowered limit only stops new starts; a raised one is taken by the StartQueued that follows
  // the answer.
  if (limit != bulkhead_.limits().max_concurrent) bulkhead_.SetMaxConcurrent(limit);
}

// --- Client connections. ---

void CellDataPath::OnClientConnected(Client* conn) {
  if (access_log_ != nullptr) conn->LabelPeer();
  front_.Opened(conn);
}

void CellDataPath::OnClientDisconnected(Client* conn) {
  front_.Closed(conn);
  slow_clients_.Forget(conn);
  NotifyIfQuiet();
}

void CellDataPath::CountDelivered(uint64_t* outcome) {
  BH_CHECK(replies_unwritten_ > 0);
  --replies_unwritten_;
  ++*outcome;
  NotifyIfQuiet();
}

void CellDataPath::CountUndelivered(uint64_t replies) {
  BH_CHECK(replies_unwritten_ >= replies);
  replies_unwritten_ -= replies;
  counters_.undelivered += replies;
  NotifyIfQuiet();
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

void CellDataPath::OnRequest(Client* conn, const RequestInfo& info, std::string_view payload) {
  Exchange* exchange = pool_->Acquire();
  exchange->info = info;
  exchange->body_pipe = info.body == RequestInfo::Body::kStreamed ? Exchange::BodyPipe::kWaiting
                                                                  : Exchange::BodyPipe::kClosed;
  exchange->admitted_at_ms = Now();
  exchange->admitted_at_ns = time_->NowNs();
  exchange->dispatched_at_ns = 0;
  exchange->client_paused_ns = 0;
  exchange->body_whole_at_ns = 0;
  exchange->bytes_in = payload.size();
  exchange->bytes_out = 0;
  exchange->http_status = 0;
  exchange->worker_pid = 0;
  if (access_log_ != nullptr) {
    char frame_id[24];
    std::string_view id = info.request_id;
    if (info.method.empty()) {
      const std::to_chars_result end =
          std::to_chars(frame_id, frame_id + sizeof frame_id, info.client_request_id);
      id = std::string_view(frame_id, static_cast<size_t>(end.ptr - frame_id));
    }
    AppendRequestFields(&exchange->access_fields, conn->peer_label(), id, info.method, info.target);
  }
  // The views are the front end's, valid during this call only.
  exchange->info.method = exchange->info.target = exchange->info.request_id = {};
  conn->Attach(exchange);
  if (availability_.Refuses(exchange->admitted_at_ms)) {
    ++counters_.rejected_at_admission;
    Reject(exchange, ipc::Reason::kUnavailable);
    return;
  }
  switch (bulkhead_.Admit(exchange, exchange->admitted_at_ms)) {
    case admission::Bulkhead::Decision::kRun:
      ++counters_.admitted;
      Dispatch(exchange, payload);
      break;
    case admission::Bulkhead::Decision::kQueued:
      ++counters_.admitted;
      exchange->payload.assign(payload);
      if (bulkhead_.queued() == 1) ArmQueueTimer();
      break;
    case admission::Bulkhead::Decision::kRejectedFull:
      ++counters_.rejected_at_admission;
      Reject(exchange, ipc::Reason::kFull);
      break;
    case admission::Bulkhead::Decision::kRejectedUnavailable:
      ++counters_.rejected_at_admission;
      Reject(exchange, ipc::Reason::kUnavailable);
      break;
  }
}

Link* CellDataPath::TakeLink(Exchange* exchange, bool fresh) {
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
  Result<Link*> made = wire_->connect(this, loop_, config_.worker_socket,
                                      LinkSettings{max_payload_, multiplex_, write_batch_});
  if (!made.ok()) {
    Log(LogLevel::kError, name(), upstream_->worker_pid(),
        "cannot connect to worker: " + made.status().message());
    Fail(exchange, ipc::Reason::kWorkerError,
         "cannot connect to worker: " + made.status().message());
    return nullptr;
  }
  if (multiplex_) mux_link_ = *made;
  last_link_opened_ms_ = Now();
  if (!accept_timer_->armed()) accept_timer_->Start(kAcceptWarnMs);
  return *made;
}

void CellDataPath::OnAcceptTimer() {
  if (upstream_->worker_pid() == 0 || !upstream_->HasUnacceptedConnection()) return;
  // When the newest connection is kAcceptWarnMs old, the one waiting is at least as old.
  const uint64_t newest_age = Now() - last_link_opened_ms_;
  if (newest_age < kAcceptWarnMs) {
    accept_timer_->Start(kAcceptWarnMs - newest_age);
    return;
  }
  if (!accept_warned_) {
    accept_warned_ = true;
    Log(LogLevel::kWarning, name(), upstream_->worker_pid(),
        "worker has not accepted a connection the supervisor opened at least " +
            std::to_string(kAcceptWarnMs / 1000) +
            " s ago: a worker must accept every connection on its listening socket and serve its "
            "connections concurrently, each one persistent (docs/protocol.md); requests sent on "
            "this one wait");
  }
}

void CellDataPath::Dispatch(Exchange* exchange, std::string_view payload) {
  // A request whose body is streamed after its head goes out on a fresh connection: an idle one
  // may be closing under it, and it could not be resent then, part of its body being gone
  // (HttpWorkerLink::TakeInflight). Every other request, a POST too, takes an idle connection: one
  // the worker closes under it before reading it is resent.
  Link* link = TakeLink(exchange, exchange->info.body == RequestInfo::Body::kStreamed);
  if (link == nullptr) return;
  uint64_t now = Now();
  // A worker that had nothing to do starts its stall clock now.
  if (busy_links_.empty()) last_progress_ms_ = now;

  exchange->dispatched_at_ns = time_->NowNs();
  exchange->worker_pid = upstream_->worker_pid();
  queue_wait_.Record(exchange->dispatched_at_ns,
                     exchange->dispatched_at_ns - exchange->admitted_at_ns);
  deadlines_.Start(exchange, now);
  if (config_.stall_timeout.count() > 0 && !stall_timer_->armed()) {
    stall_timer_->Start(static_cast<uint64_t>(config_.stall_timeout.count()));
  }
  ArmRequestTimer();
  SendOn(link, exchange, payload);
}

void CellDataPath::SendOn(Link* link, Exchange* exchange, std::string_view payload) {
  if (!link->busy()) {
    link->busy_index = busy_links_.size();
    busy_links_.push_back(link);
  }
  link->Send(exchange, payload);
  if (link == mux_link_) uv_prepare_start(&flush_prepare_, &CellDataPath::OnFlushPrepare);
}

void CellDataPath::OnFlushPrepare(uv_prepare_t* prepare) {
  auto* self = static_cast<CellDataPath*>(prepare->data);
  uv_prepare_stop(prepare);
  // A write that fails at once breaks the link; the requests on it that the worker cannot have
  // read go out again on a new link, written here too (a prepare started from its own callback
  // would only run after the next poll).
  Link* flushed = nullptr;
  while (self->mux_link_ != nullptr && self->mux_link_ != flushed) {
    flushed = self->mux_link_;
    flushed->Flush();
  }
}

void CellDataPath::Resend(Exchange* exchange, std::string_view payload) {
  exchange->resent = true;
  // Keeps its slot, its place on the running list and its dispatch time (request_timeout).
  Link* link = TakeLink(exchange, /*fresh=*/true);
  if (link == nullptr) return;
  SendOn(link, exchange, payload);
}

void CellDataPath::StartQueued() {
  while (admission::AdmissionEntry* entry = bulkhead_.StartNext()) {
    auto* exchange = static_cast<Exchange*>(entry);
    // The payload is moved out so the exchange keeps no copy while it runs.
    scratch_.swap(exchange->payload);
    Dispatch(exchange, scratch_);
    scratch_.clear();
  }
  ArmQueueTimer();
}

void CellDataPath::OnWorkerAnswer(Link* link, Exchange* exchange, const Outcome& outcome,
                                  bool reusable) {
  bool retired = false;
  if (!link->busy()) {
    RemoveBusy(link);
    if (link->retiring) {
      // The previous generation of a swap: nothing new goes to it.
      retired = true;
      link->Close();
    } else if (reusable) {
      idle_links_.push_back(link);
    } else {
      // The worker ends this connection (Connection: close), or the exchange said it must not
      // carry another: the next request opens a fresh one.
      if (link == mux_link_) mux_link_ = nullptr;
      link->Close();
    }
  }
  last_progress_ms_ = Now();
  // The worker answered, with a reply or an error of its own: its service time is a sample
  // either way.
  SampleServiceTime(*exchange);
  if (outcome.kind != Outcome::Kind::kOk) {
    Fail(exchange, outcome.reason, outcome.text);
  } else {
    // The worker answered: on an HTTP cell its own status, 5xx included, counts ok
    // (docs/http.md).
    FinishRunning(exchange);
    Complete(exchange, exchange->client == nullptr ? &counters_.dropped : &counters_.ok, outcome);
    StartQueued();
    MaybeDrained();
  }
  if (retired) RetiredLinkDone();
}

void CellDataPath::OnExchangeAborted(Link* link, const std::string& why) {
  Exchange* exchange = link->TakeInflight();
  DropLink(link);
  Log(LogLevel::kDebug, name(), upstream_->worker_pid(),
      "request given up, its worker connection closed: " + why);
  // Its client left, or was answered already (request_timeout, 413): it counts as that.
  if (exchange != nullptr) Fail(exchange, ipc::Reason::kWorkerError, why);
}

void CellDataPath::OnLinkBroken(Link* link, const std::string& why, bool worker_at_fault) {
  // Requests the worker cannot have read (docs/protocol.md): most often one went out on an idle
  // connection that the worker had closed, or was closing, after its last reply. Their payloads
  // stay valid in the link until its close callback runs.
  struct Taken {
    Exchange* exchange;
    bool unread;
    std::string_view payload;
  };
  std::vector<Taken> taken;
  bool unread = false;
  std::string_view payload;
  while (Exchange* exchange = link->TakeInflight(&unread, &payload)) {
    taken.push_back(Taken{exchange, unread && !worker_at_fault, payload});
  }
  const bool retired = link->retiring;
  DropLink(link);
  if (worker_at_fault) {
    // The supervisor closed the connection: say why, at once, rather than wait for an exit.
    Log(LogLevel::kWarning, name(), upstream_->worker_pid(), "worker broke the protocol: " + why);
  }
  bool resent = false;
  bool orphaned = false;
  for (const Taken& t : taken) {
    if (t.unread && !t.exchange->resent && upstream_->worker_pid() != 0) {
      if (!resent) {
        Log(LogLevel::kDebug, name(), upstream_->worker_pid(),
            "worker connection closed before the worker read the request (" + why +
                "): sending it again on a new connection");
      }
      resent = true;
      Resend(t.exchange, t.payload);
    } else if (worker_at_fault) {
      Fail(t.exchange, ipc::Reason::kWorkerError, "worker broke the protocol: " + why);
    } else {
      // Most often the worker is dying and its exit is about to be reaped: wait for it, so the
      // client learns the exit reason rather than a bare "connection closed".
      (retired ? retired_orphans_ : orphans_).push_back(t.exchange);
      if (orphans_.size() + retired_orphans_.size() == 1) orphan_timer_->Start(kOrphanGraceMs);
      orphaned = true;
    }
  }
  if (orphaned) {
    Log(LogLevel::kDebug, name(), upstream_->worker_pid(),
        "worker connection broke with a request in flight: " + why);
  }
}

void CellDataPath::OnOrphanTimer() {
  std::vector<Exchange*> orphans;
  orphans.swap(orphans_);
  orphans.insert(orphans.end(), retired_orphans_.begin(), retired_orphans_.end());
  retired_orphans_.clear();
  for (Exchange* exchange : orphans) {
    Fail(exchange, ipc::Reason::kWorkerError, "worker closed the connection without replying");
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
  bool retired = false;
  if (link->busy_index < busy_links_.size() && busy_links_[link->busy_index] == link) {
    RemoveBusy(link);
    retired = link->retiring;
  } else {
    std::erase(idle_links_, link);
  }
  link->Close();
  if (retired) RetiredLinkDone();
}

void CellDataPath::FinishRunning(Exchange* exchange) {
  // Off the deadlines (where an exchange whose worker connection failed never was), then the slot
  // is freed. The request timer, if armed for it, fires and re-arms for the next deadline.
  deadlines_.Finish(exchange);
  bulkhead_.Finish(exchange);
}

void CellDataPath::Answer(Exchange* exchange, uint64_t* counter, const Outcome& outcome) {
  BH_CHECK(!exchange->answered);
  exchange->answered = true;
  if (exchange->dispatched_at_ns != 0) {
    const uint64_t now_ns = time_->NowNs();
    request_duration_.Record(now_ns, now_ns - exchange->admitted_at_ns);
  }
  Client* client = exchange->client;
  if (access_log_ != nullptr) {
    LogAccess(*exchange, outcome, client == nullptr ? "dropped" : std::string_view());
  }
  if (client == nullptr) {
    ++*counter;
    return;
  }
  client->Detach(exchange);
  ++replies_unwritten_;
  client->OnOutcome(exchange, outcome, counter);
}

void CellDataPath::LogAccess(const Exchange& exchange, const Outcome& outcome,
                             std::string_view outcome_name) {
  static constexpr std::string_view kKindNames[] = {"ok", "rejected", "failed"};
  AccessRecord record;
  ::clock_gettime(CLOCK_REALTIME, &record.time);
  record.cell = config_.name;
  record.request_fields = exchange.access_fields;
  record.outcome =
      outcome_name.empty() ? kKindNames[static_cast<size_t>(outcome.kind)] : outcome_name;
  record.reason = outcome.reason == ipc::Reason::kNone ? "" : ipc::ReasonName(outcome.reason);
  // A client that left: the reason the metrics give it (bulkhead_requests_total's client_gone).
  if (!outcome_name.empty()) record.reason = "client_gone";
  // The worker's status when its response began; else bulkheadd's own answer's, if it gave one.
  // A client that left (dropped) got a status only if part of the response reached it.
  const bool client_left = exchange.client == nullptr;
  record.http_status = client_left && exchange.bytes_out == 0 ? 0 : exchange.http_status;
  if (record.http_status == 0 && outcome.kind != Outcome::Kind::kOk && outcome_name.empty()) {
    record.http_status = wire_->local_status(outcome);
  }
  const uint64_t now_ns = time_->NowNs();
  if (exchange.dispatched_at_ns != 0) {
    record.queue_wait_us = (exchange.dispatched_at_ns - exchange.admitted_at_ns) / 1000;
    record.worker_us = (now_ns - exchange.dispatched_at_ns) / 1000;
  } else {
    record.queue_wait_us = (now_ns - exchange.admitted_at_ns) / 1000;
  }
  // What went to the worker: nothing for a request never dispatched (rejected, cancelled).
  record.bytes_in = exchange.dispatched_at_ns != 0 ? exchange.bytes_in : 0;
  // What reached the client: a frame's reply payload comes in the outcome; an HTTP response was
  // counted as it was relayed to the client (Exchange::SendResponse).
  record.bytes_out = exchange.bytes_out;
  if (outcome.kind == Outcome::Kind::kOk && !client_left) record.bytes_out += outcome.text.size();
  record.worker_pid = exchange.worker_pid;
  if (adaptive_ != nullptr) record.limit = bulkhead_.limits().max_concurrent;
  access_log_->Append(record);
}

void CellDataPath::Complete(Exchange* exchange, uint64_t* counter, const Outcome& outcome) {
  // Never on a link here, so the client end cannot end it under the answer (Answer).
  BH_CHECK(exchange->link == nullptr);
  if (!exchange->answered) Answer(exchange, counter, outcome);
  pool_->Release(exchange);
  NotifyIfQuiet();
}

void CellDataPath::Fail(Exchange* exchange, ipc::Reason reason, std::string_view message) {
  FinishRunning(exchange);
  uint64_t* counter = &counters_.dropped;
  if (exchange->client != nullptr) {
    switch (reason) {
      case ipc::Reason::kWorkerDied:
        counter = &counters_.failed_worker_died;
        break;
      case ipc::Reason::kOomKilled:
        counter = &counters_.failed_oom_killed;
        break;
      case ipc::Reason::kStalled:
        counter = &counters_.failed_stalled;
        break;
      case ipc::Reason::kTimeout:
        counter = &counters_.failed_timeout;
        break;
      default:
        counter = &counters_.failed_worker_error;
        break;
    }
  }
  Complete(exchange, counter, Outcome::Failed(reason, message));
  StartQueued();
  MaybeDrained();
}

void CellDataPath::Reject(Exchange* exchange, ipc::Reason reason) {
  uint64_t* counter = &counters_.rejected_unavailable;
  if (reason == ipc::Reason::kFull) counter = &counters_.rejected_full;
  if (reason == ipc::Reason::kQueueTimeout) counter = &counters_.rejected_queue_timeout;
  const bool unavailable = reason == ipc::Reason::kUnavailable;
  Complete(exchange, counter,
           Outcome::Rejected(reason, bulkhead_.running(), bulkhead_.queued(),
                             unavailable ? availability_.RetryAfterMs(Now()) : 0,
                             unavailable ? availability_.next_start
                                         : admission::Availability::NextStart::kUnknown));
}

void CellDataPath::OnClientGone(Exchange* exchange) {
  if (exchange->admission_state() == admission::AdmissionEntry::State::kQueued) {
    bulkhead_.Cancel(exchange);
    ++counters_.cancelled;
    if (access_log_ != nullptr) LogAccess(*exchange, Outcome::Ok({}), "cancelled");
    pool_->Release(exchange);
    ArmQueueTimer();
    NotifyIfQuiet();
  }
  // A running request keeps its slot until the worker answers; the answer is then dropped.
}

void CellDataPath::ArmQueueTimer() {
  std::optional<uint64_t> deadline = bulkhead_.NextDeadline();
  if (!deadline) {
    queue_timer_->Stop();
    return;
  }
  const uint64_t now = Now();
  queue_timer_->Start(*deadline > now ? *deadline - now : 0);
}

void CellDataPath::OnQueueTimer() {
  while (admission::AdmissionEntry* entry = bulkhead_.PopExpired(Now())) {
    Reject(static_cast<Exchange*>(entry), ipc::Reason::kQueueTimeout);
  }
  ArmQueueTimer();
}

// --- Stall detection and request timeouts. ---

void CellDataPath::CheckStall(bool after_poll) {
  const uint64_t stall_ms = static_cast<uint64_t>(config_.stall_timeout.count());
  // Idle (nothing to stall on), or no stall_timeout any more.
  if (busy_links_.empty() || upstream_->worker_pid() == 0 || stall_ms == 0) return;
  const uint64_t now = Now();
  const uint64_t counted = now - std::max(last_progress_ms_, stall_counted_from_ms_);
  if (counted < stall_ms) {
    // It answered meanwhile: check again when the newest progress would go stale.
    stall_timer_->Start(stall_ms - counted);
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
    request_timer_->Stop();
    return;
  }
  const uint64_t now = Now();
  request_timer_->Start(*deadline > now ? *deadline - now : 0);
}

void CellDataPath::OnRequestTimer() {
  std::optional<uint64_t> deadline = deadlines_.NextDeadline();
  if (deadline && *deadline <= Now()) {
    // Replies already waiting in the worker connections are read first.
    verdicts_.request_timeout = true;
    after_poll_->Request();
    return;
  }
  ArmRequestTimer();
}

void CellDataPath::ExpireRequests() {
  const uint64_t timeout = deadlines_.timeout_ms();
  const std::string message = "request_timeout of " + std::to_string(timeout) + " ms passed";
  while (admission::DeadlineEntry* entry = deadlines_.PopExpired(Now())) {
    auto* exchange = static_cast<Exchange*>(entry);
    // The client is answered now; the slot stays taken until the worker answers or is replaced,
    // because the worker really is still busy with it. Without a client it is dropped, as any
    // running exchange whose client left. The client end may end its worker side under the answer
    // (a body still streaming), which recycles it.
    Answer(exchange, exchange->client != nullptr ? &counters_.failed_timeout : &counters_.dropped,
           Outcome::Failed(ipc::Reason::kTimeout, message));
  }
  ArmRequestTimer();
}

uint32_t CellDataPath::in_flight() const {
  return bulkhead_.running() - static_cast<uint32_t>(deadlines_.expired()) + bulkhead_.queued() +
         replies_unwritten_;
}

}  // namespace bulkhead::proxy
