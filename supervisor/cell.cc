// SPDX-License-Identifier: MIT
#include "supervisor/cell.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "base/check.h"
#include "base/log.h"
#include "cell/process.h"
#include "cell/restart_policy.h"
#include "cell/worker.h"
#include "supervisor/front_connection.h"
#include "supervisor/listen_socket.h"
#include "supervisor/worker_link.h"
#include "supervisor/worker_privileges.h"

namespace bulkhead::supervisor {

namespace {

using Event = Lifecycle::Event;
using Action = Lifecycle::Action;

// How long a request whose worker connection broke waits for the worker's exit (to report the exit
// reason) before it is failed as a worker error.
constexpr uint64_t kOrphanGraceMs = 1000;
// Front socket backlog: clients waiting for accept().
constexpr int kFrontBacklog = 1024;
// How often an emptying cgroup is polled after cgroup.kill, in ms.
constexpr uint64_t kTeardownPollMs = 5;

constexpr const char* kDefaultPath =
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

ipc::FrameHeader ReplyHeader(ipc::ReplyStatus status, ipc::Reason reason) {
  ipc::FrameHeader header;
  header.type = ipc::FrameType::kReply;
  header.status = status;
  header.reason = reason;
  return header;
}

Bulkhead::Limits LimitsOf(const config::CellConfig& config) {
  return Bulkhead::Limits{config.max_concurrent, config.max_queue,
                          static_cast<uint64_t>(config.queue_timeout.count())};
}

}  // namespace

Cell::Cell(uv_loop_t* loop, config::CellConfig config, CellCompartment compartment,
           uint32_t max_payload, RequestPool* pool)
    : loop_(loop),
      config_(std::move(config)),
      compartment_(std::move(compartment)),
      max_payload_(max_payload),
      pool_(pool),
      bulkhead_(LimitsOf(config_)),
      clock_(loop),
      lifecycle_(LifecycleOptionsFromConfig(config_), &clock_, cell::RestartPolicy::RandomJitter()),
      notify_(loop, [this](pid_t sender,
                           const cell::NotifyMessage& message) { OnNotify(sender, message); }),
      output_(loop, config_) {
  for (uv_timer_t* timer : {&backoff_timer_, &stop_timer_, &watchdog_timer_, &queue_timer_,
                            &orphan_timer_, &teardown_timer_, &stall_timer_, &request_timer_}) {
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
  if (compartment_.tree != nullptr) {
    Result<cell::CellCgroup> made = cell::CellCgroup::Create(*compartment_.tree, config_.name);
    if (!made.ok()) return made.status();
    cgroup_.emplace(std::move(made).value());
    // Written again before every spawn; under "required" a failure here fails the first start.
    (void)WriteCellLimits();
    // A cgroup that still has processes belongs to an earlier run that died without stopping
    // them: they are killed before this run's first worker starts (see Start).
    Result<bool> empty = cgroup_->IsEmpty();
    stale_generation_ = !empty.ok() || !*empty;
  }
  // The front socket first: it tells whether another live instance serves this cell.
  Result<UniqueFd> front =
      ClaimListeningSocket(config_.socket, kFrontBacklog, StaleCheck::kRefuseLive,
                           Blocking::kNonBlocking, FrontSocketAccess(config_));
  if (!front.ok()) return front.status();
  int rc = uv_pipe_open(&front_, front->get());
  if (rc != 0) return Status::Error("uv_pipe_open " + config_.socket + ": " + uv_strerror(rc));
  front->Release();
  front_bound_ = true;
  rc = uv_listen(reinterpret_cast<uv_stream_t*>(&front_), kFrontBacklog, &Cell::OnConnection);
  if (rc != 0) return Status::Error("listen " + config_.socket + ": " + uv_strerror(rc));

  Result<UniqueFd> worker = ClaimListeningSocket(
      config_.worker_socket, static_cast<int>(std::max<uint32_t>(config_.max_concurrent, 128)),
      StaleCheck::kAlwaysReclaim, Blocking::kBlocking);
  if (!worker.ok()) return worker.status();
  worker_listen_fd_ = std::move(worker).value();

  Status notify = notify_.Bind(config_.notify_socket, NotifySocketAccess(config_));
  if (!notify.ok()) return notify;
  return Status::Ok();
}

void Cell::OnConnection(uv_stream_t* server, int status) {
  auto* self = static_cast<Cell*>(server->data);
  if (status < 0) {
    Log(LogLevel::kWarning, self->name(), 0, std::string("accept: ") + uv_strerror(status));
    return;
  }
  std::string refusal = self->ConnectionRefusal();
  if (refusal.empty()) {
    FrontConnection::Accept(self, server, self->max_payload_);
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
  FrontConnection::Refuse(server, frame);
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

const char* LimitStateName(LimitState state) {
  switch (state) {
    case LimitState::kEnforced:
      return "enforced";
    case LimitState::kUnlimited:
      return "unlimited";
    case LimitState::kNotEnforced:
      return "not enforced";
  }
  return "?";
}

// --- Lifecycle plumbing. ---

std::string Cell::Start() {
  if (stale_generation_) {
    stale_generation_ = false;
    Log(LogLevel::kWarning, name(), 0,
        "cgroup " + cgroup_->path() +
            " still holds processes of an earlier run: killing them first");
    Teardown([this] { Handle(Event::StartRequested()); });
    return Lifecycle::ReplyText(Lifecycle::Reply::kAccepted);
  }
  return Lifecycle::ReplyText(Handle(Event::StartRequested()).reply);
}

std::string Cell::Restart() {
  // Set before Handle (the spawn may come at once); a refused restart ("restart in progress")
  // leaves the flag of the one under way as it was.
  const bool earlier = operator_restart_;
  operator_restart_ = true;
  std::string reply =
      Lifecycle::ReplyText(Handle(Event::RestartRequested(bulkhead_.running())).reply);
  if (reply != Lifecycle::ReplyText(Lifecycle::Reply::kAccepted)) operator_restart_ = earlier;
  return reply;
}

std::string Cell::Stop(std::function<void()> on_stopped) {
  if (on_stopped) on_stopped_.push_back(std::move(on_stopped));
  return Lifecycle::ReplyText(Handle(Event::StopRequested(bulkhead_.running())).reply);
}

Lifecycle::Transition Cell::Handle(const Event& event) {
  if (executing_) {
    pending_events_.push_back(event);
    return Lifecycle::Transition{};
  }
  Lifecycle::Transition transition = lifecycle_.Handle(event);
  Execute(transition);
  while (!pending_events_.empty()) {
    Event next = pending_events_.front();
    pending_events_.erase(pending_events_.begin());
    Execute(lifecycle_.Handle(next));
  }
  return transition;
}

void Cell::Execute(const Lifecycle::Transition& t) {
  if (!t.log.empty()) Log(t.log_level, name(), pid_ != 0 ? pid_ : pgid_, t.log);
  bool was_executing = std::exchange(executing_, true);
  for (const Action& a : t.actions) {
    switch (a.type) {
      case Action::Type::kSpawn:
        // Always last: its answer is handled at once, outside this list.
        executing_ = was_executing;
        DoSpawn();
        return;
      case Action::Type::kOpenAdmission:
        bulkhead_.SetOpen(true);
        StartQueued();
        break;
      case Action::Type::kCloseAdmission:
        bulkhead_.SetOpen(false);
        break;
      case Action::Type::kRejectQueued:
        RejectQueued();
        break;
      case Action::Type::kFailInFlight:
        FailInFlight(a.reason, a.message);
        break;
      case Action::Type::kSignalStop:
        SignalStop(a.signal);
        break;
      case Action::Type::kKillAll:
        KillAll();
        break;
      case Action::Type::kArmBackoff:
        uv_timer_start(
            &backoff_timer_,
            [](uv_timer_t* timer) {
              static_cast<Cell*>(timer->data)->Handle(Event::BackoffElapsed());
            },
            a.ms, 0);
        break;
      case Action::Type::kArmStopTimer:
        uv_timer_start(
            &stop_timer_,
            [](uv_timer_t* timer) {
              static_cast<Cell*>(timer->data)->Handle(Event::StopTimeout());
            },
            a.ms, 0);
        break;
      case Action::Type::kArmWatchdog:
        uv_timer_start(
            &watchdog_timer_,
            [](uv_timer_t* timer) {
              static_cast<Cell*>(timer->data)->Handle(Event::WatchdogMissed());
            },
            a.ms, 0);
        break;
      case Action::Type::kCancelTimers:
        uv_timer_stop(&backoff_timer_);
        uv_timer_stop(&stop_timer_);
        uv_timer_stop(&watchdog_timer_);
        break;
      case Action::Type::kNotifyStopped: {
        std::vector<std::function<void()>> callbacks;
        callbacks.swap(on_stopped_);
        for (auto& callback : callbacks) callback();
        break;
      }
    }
  }
  executing_ = was_executing;
  NoteState();
}

void Cell::NoteState() {
  if (lifecycle_.state() == observed_state_) return;
  observed_state_ = lifecycle_.state();
  if (state_observer_) state_observer_();
}

void Cell::DrainStaleWorkerConnections() {
  // The listening socket outlives worker generations. A connection the supervisor made to a worker
  // that died before accept()ing it waits in the backlog with its request frame, although the
  // supervisor closed its end and failed that request: the next worker would accept it and run the
  // request again, beside max_concurrent live ones. No link of this cell is open between
  // generations, so whatever waits in the backlog now is stale. The socket is blocking (the worker
  // may accept in blocking mode); no worker shares it at this point, so O_NONBLOCK is set for the
  // drain and cleared again.
  const int fd = worker_listen_fd_.get();
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) return;
  int drained = 0;
  while (true) {
    int conn = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      break;  // EAGAIN: the backlog is empty (or accept failed: nothing more to do)
    }
    ::close(conn);
    ++drained;
  }
  ::fcntl(fd, F_SETFL, flags);
  if (drained > 0) {
    Log(LogLevel::kDebug, name(), 0,
        "closed " + std::to_string(drained) +
            " connection(s) the last worker never accepted (their requests already failed)");
  }
}

void Cell::DoSpawn() {
  BH_CHECK(pid_ == 0);
  // The lifecycle counted a restart before asking for this spawn: attribute it to its cause.
  if (lifecycle_.restarts() > restarts_attributed_) {
    RestartReason why =
        operator_restart_ ? RestartReason::kOperator : ClassifyLastExit(lifecycle_.last_exit());
    restarts_by_reason_[static_cast<size_t>(why)] += lifecycle_.restarts() - restarts_attributed_;
    restarts_attributed_ = lifecycle_.restarts();
  }
  operator_restart_ = false;
  Status limits = cgroup_ ? WriteCellLimits() : Status::Ok();
  if (!limits.ok() && compartment_.required) {
    // cgroup = "required": no worker runs outside its limits. A failed start, as an exec error.
    std::string why = "cgroup = \"required\" but limits not enforced: " + limits.message();
    Log(LogLevel::kError, name(), 0, "cannot start worker: " + why);
    Execute(lifecycle_.Handle(Event::SpawnFailed(why)));
  } else {
    SpawnWorker();
  }
  // Events raised while the answer's actions ran.
  while (!executing_ && !pending_events_.empty()) {
    Event next = pending_events_.front();
    pending_events_.erase(pending_events_.begin());
    Execute(lifecycle_.Handle(next));
  }
}

void Cell::SpawnWorker() {
  if (idle_links_.empty() && busy_links_.empty()) DrainStaleWorkerConnections();
  cell::SpawnOptions options;
  options.argv = config_.command;
  bool has_path = false;
  for (const auto& [key, value] : config_.environment) {
    if (key == "NOTIFY_SOCKET" || key == "WATCHDOG_USEC" || key == "WATCHDOG_PID" ||
        key == cell::kMaxPayloadEnv) {
      continue;
    }
    options.environment.push_back(key + "=" + value);
    if (key == "PATH") has_path = true;
  }
  if (!has_path) options.environment.emplace_back(kDefaultPath);
  options.environment.push_back("NOTIFY_SOCKET=" + notify_.path());
  // The worker SDK reads its payload limit here (cell/worker.h MaxPayloadFromEnv).
  options.environment.push_back(std::string(cell::kMaxPayloadEnv) + "=" +
                                std::to_string(max_payload_));
  if (config_.watchdog.count() > 0) {
    options.environment.push_back("WATCHDOG_USEC=" +
                                  std::to_string(config_.watchdog.count() * 1000));
  }
  AppendUserEnvironment(config_, &options.environment);
  options.credentials = WorkerCredentials(config_);
  options.umask = static_cast<mode_t>(config_.umask);
  options.no_new_privileges = config_.no_new_privileges;
  options.working_directory = config_.working_directory;
  options.listen_fd = worker_listen_fd_.get();
  options.listen_fd_name = config_.name;
  // A supervisor that dies without stopping its cells (SIGKILL, a failed check) takes the workers
  // with it: none keeps running unnoticed, holding an old generation's socket.
  options.parent_death_signal = SIGKILL;
  if (cgroup_) {
    // The worker is born inside its cgroup (clone3 CLONE_INTO_CGROUP): so is all it forks.
    options.cgroup_fd = cgroup_->dir_fd();
    oom_baseline_ = OomKillCount();
  }
  status_text_.clear();
  Status output = output_.Prepare(&options);
  if (!output.ok())
    Log(LogLevel::kWarning, name(), 0, "worker output not captured: " + output.message());
  Result<pid_t> pid = cell::Spawn(options);
  output_.Spawned(pid.ok() ? *pid : 0);
  if (!pid.ok()) {
    Log(LogLevel::kError, name(), 0, "cannot start worker: " + pid.status().message());
    Execute(lifecycle_.Handle(Event::SpawnFailed(pid.status().message())));
  } else {
    pid_ = pgid_ = *pid;
    Execute(lifecycle_.Handle(Event::Spawned()));
  }
}

void Cell::OnWorkerExit(int wait_status) {
  BH_CHECK(pid_ != 0);
  pid_t pid = pid_;
  pid_ = 0;
  // Its last words first: they often tell why it ended.
  output_.WorkerExited();
  // An OOM kill is told apart from a manual SIGKILL by the cgroup's memory.events counters,
  // compared with their value when this worker started (cgroup-v2.rst: memory.events oom_kill,
  // oom_group_kill).
  bool oom_killed = cgroup_ && OomKillCount() > oom_baseline_;
  if (oom_killed) ++oom_kills_;
  std::string description = cell::DescribeWaitStatus(wait_status);
  Log(LogLevel::kDebug, name(), pid,
      "worker reaped: " + description + (oom_killed ? " (OOM kill)" : ""));
  // The lifecycle hears of the exit only once nothing of this generation is left.
  Teardown([this, wait_status, description, oom_killed] {
    Handle(Event::Exited(wait_status, description, oom_killed));
  });
}

void Cell::FailInFlight(ipc::Reason reason, const std::string& message) {
  std::vector<WorkerLink*> links;
  links.swap(busy_links_);
  for (WorkerLink* link : links) {
    Request* request = link->TakeInflight();
    link->Close();
    if (request != nullptr) Fail(request, reason, message);
  }
  // Idle connections belong to the old worker generation too.
  for (WorkerLink* link : idle_links_) link->Close();
  idle_links_.clear();
  std::vector<Request*> orphans;
  orphans.swap(orphans_);
  uv_timer_stop(&orphan_timer_);
  for (Request* request : orphans) Fail(request, reason, message);
}

void Cell::RejectQueued() {
  while (AdmissionEntry* entry = bulkhead_.PopExpired(UINT64_MAX)) {
    Reject(static_cast<Request*>(entry), ipc::Reason::kUnavailable);
  }
  ArmQueueTimer();
}

void Cell::MaybeDrained() {
  if (bulkhead_.running() == 0 && lifecycle_.state() == Lifecycle::State::kStopping) {
    Handle(Event::Drained());
  }
}

// --- Teardown of a worker generation. ---

uint64_t Cell::OomKillCount() const {
  if (!cgroup_) return 0;
  Result<cell::CgroupStats> stats = cgroup_->ReadStats();
  if (!stats.ok()) return 0;
  return stats->memory_events.oom_kill + stats->memory_events.oom_group_kill;
}

Status Cell::WriteCellLimits() {
  limits_written_ = cgroup_->WriteLimits(compartment_.limits);
  Status status = limits_written_.status();
  if (!status.ok()) {
    Log(compartment_.required ? LogLevel::kError : LogLevel::kWarning, name(), pid_,
        "cgroup limits not enforced: " + status.message());
  }
  return status;
}

void Cell::SignalStop(int signal) {
  if (cgroup_ && config_.kill_mode == config::KillMode::kControlGroup) {
    // systemd's KillMode=control-group: every process of the cell, a setsid helper included.
    Status signalled = cgroup_->Signal(signal);
    if (signalled.ok()) return;
    Log(LogLevel::kError, name(), pid_, "cgroup signal: " + signalled.message());
  }
  if (cgroup_) {
    // kill_mode = "mixed" (systemd's KillMode=mixed): the worker alone; whatever else is left
    // gets SIGKILL (cgroup.kill) once it has exited or at stop_timeout.
    if (pid_ > 0) ::kill(pid_, signal);
    return;
  }
  // Without a cgroup: the worker's process group (it leads one since the spawn); a helper that
  // left it (setsid) is not reached.
  if (pgid_ > 0) {
    ::kill(-pgid_, signal);
    if (pid_ > 0) ::kill(pid_, signal);  // in case it left its process group
  }
}

void Cell::KillAll() {
  if (cgroup_) {
    Status killed = cgroup_->Kill();
    if (!killed.ok()) Log(LogLevel::kError, name(), pgid_, "cgroup kill: " + killed.message());
    return;
  }
  // The worker leads its own process group: whatever it forked without leaving the group goes too.
  if (pgid_ > 0) {
    ::kill(-pgid_, SIGKILL);
    if (pid_ > 0) ::kill(pid_, SIGKILL);
  }
}

void Cell::Teardown(std::function<void()> then) {
  // A stop with kill_mode = "control-group" signalled every process of the cell: those left
  // when the worker exits may finish their cleanup until stop_timeout, when the stop timer's
  // SIGKILL (KillAll) comes, as systemd waits for the whole control group.
  teardown_kill_from_ms_ = cgroup_ && config_.kill_mode == config::KillMode::kControlGroup
                               ? lifecycle_.signalled_stop_deadline_ms()
                               : 0;
  if (Now() >= teardown_kill_from_ms_) KillAll();
  if (!cgroup_) {
    then();
    return;
  }
  after_teardown_ = std::move(then);
  teardown_started_ms_ = Now();
  teardown_warned_ = false;
  uv_timer_start(&teardown_timer_, &Cell::OnTeardownTimer, 0, kTeardownPollMs);
}

void Cell::OnTeardownTimer(uv_timer_t* timer) {
  auto* self = static_cast<Cell*>(timer->data);
  Result<bool> empty = self->cgroup_->IsEmpty();
  if (empty.ok() && *empty) {
    uv_timer_stop(timer);
    if (self->after_teardown_) std::exchange(self->after_teardown_, nullptr)();
    return;
  }
  // cgroup.procs is not empty yet: kill again (a process may have forked meanwhile) and wait. The
  // next generation never starts beside a survivor of this one.
  if (self->Now() >= self->teardown_kill_from_ms_) self->KillAll();
  if (!self->teardown_warned_ &&
      self->Now() > std::max(self->teardown_started_ms_, self->teardown_kill_from_ms_) + 5000) {
    self->teardown_warned_ = true;
    Log(LogLevel::kError, self->name(), 0,
        "cgroup " + self->cgroup_->path() + " still has processes 5 s after cgroup.kill" +
            (empty.ok() ? "" : ": " + empty.status().message()));
  }
}

// --- Notify socket (sd_notify(3)). ---

bool Cell::SpeaksForCell(pid_t sender) const {
  if (pid_ == 0) return false;
  if (sender == pid_) return true;
  if (cgroup_) {
    // Any process of the cell's cgroup (systemd's NotifyAccess=all).
    Result<std::vector<pid_t>> procs = cgroup_->Procs();
    return procs.ok() && std::find(procs->begin(), procs->end(), sender) != procs->end();
  }
  // Without a cgroup: a process of the worker's session (the worker called setsid at spawn).
  return ::getsid(sender) == pid_;
}

void Cell::OnNotify(pid_t sender, const cell::NotifyMessage& message) {
  if (!SpeaksForCell(sender)) {
    Log(LogLevel::kWarning, name(), sender,
        "notify message from a process outside the cell ignored");
    return;
  }
  if (message.status) status_text_ = *message.status;
  if (message.ready) Handle(Event::Ready());
  if (message.watchdog_ping) Handle(Event::WatchdogPing());
  if (message.watchdog_trigger) Handle(Event::Stalled("worker sent WATCHDOG=trigger"));
}

// --- Shutdown. ---

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
  if (cgroup_) {
    Status removed = cgroup_->Remove();
    if (!removed.ok()) Log(LogLevel::kWarning, name(), 0, "cgroup: " + removed.message());
  }
  for (uv_timer_t* timer : {&backoff_timer_, &stop_timer_, &watchdog_timer_, &queue_timer_,
                            &orphan_timer_, &teardown_timer_, &stall_timer_, &request_timer_}) {
    uv_close(reinterpret_cast<uv_handle_t*>(timer), &Cell::OnHandleClosed);
  }
  uv_close(reinterpret_cast<uv_handle_t*>(&front_), &Cell::OnHandleClosed);
  // Only socket files this cell bound are removed (never a live instance's).
  if (front_bound_) ::unlink(config_.socket.c_str());
  if (worker_listen_fd_.valid()) ::unlink(config_.worker_socket.c_str());
  worker_listen_fd_.Reset();
  ++open_handles_;
  output_.Close([this] {
    BH_CHECK(open_handles_ > 0);
    if (--open_handles_ == 0 && on_closed_) std::exchange(on_closed_, nullptr)();
  });
  ++open_handles_;
  notify_.Close([this] {
    BH_CHECK(open_handles_ > 0);
    if (--open_handles_ == 0 && on_closed_) std::exchange(on_closed_, nullptr)();
  });
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
  config_ = next;
  if (worker_listen_fd_.valid()) {
    // More links may connect at once than the backlog Bind gave: listen(2) again resizes it.
    ::listen(worker_listen_fd_.get(),
             static_cast<int>(std::max<uint32_t>(config_.max_concurrent, 128)));
  }
  lifecycle_.SetOptions(LifecycleOptionsFromConfig(config_));
  bulkhead_.SetLimits(LimitsOf(config_));
  output_.SetOptions(config_);
  if (config_.request_timeout.count() > 0) {
    ArmRequestTimer();
  } else {
    uv_timer_stop(&request_timer_);
  }
  if (config_.stall_timeout.count() == 0) {
    uv_timer_stop(&stall_timer_);
  } else if (!busy_links_.empty()) {
    // Checks at once against the new timeout and re-arms itself for what remains.
    uv_timer_start(&stall_timer_, &Cell::OnStallTimer, 0, 0);
  }
  // A raised max_concurrent starts queued requests now; a changed queue_timeout re-arms the queue
  // timer for the head's new deadline.
  StartQueued();
  Status written = Status::Ok();
  if (cgroup_limits) {
    compartment_.limits = *cgroup_limits;
    if (cgroup_) written = WriteCellLimits();
  }
  return written;
}

// --- Request path. ---

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
  request->admitted_at_ns = uv_hrtime();
  request->dispatched_at_ns = 0;
  conn->LinkRequest(request);
  if (lifecycle_.RefusesRequests()) {
    ++counters_.rejected_at_admission;
    Reject(request, ipc::Reason::kUnavailable);
    return;
  }
  switch (bulkhead_.Admit(request, request->admitted_at_ms)) {
    case Bulkhead::Decision::kRun:
      ++counters_.admitted;
      Dispatch(request, frame.payload);
      break;
    case Bulkhead::Decision::kQueued:
      ++counters_.admitted;
      request->payload.assign(frame.payload);
      if (bulkhead_.queued() == 1) ArmQueueTimer();
      break;
    case Bulkhead::Decision::kRejectedFull:
      ++counters_.rejected_at_admission;
      Reject(request, ipc::Reason::kFull);
      break;
    case Bulkhead::Decision::kRejectedUnavailable:
      ++counters_.rejected_at_admission;
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
  uint64_t now = Now();
  // A worker that had nothing to do starts its stall clock now.
  if (busy_links_.empty()) last_progress_ms_ = now;
  link->busy_index = busy_links_.size();
  busy_links_.push_back(link);

  request->dispatched_at_ms = now;
  request->dispatched_at_ns = uv_hrtime();
  queue_wait_.Record(request->dispatched_at_ns,
                     request->dispatched_at_ns - request->admitted_at_ns);
  request->run_prev = running_tail_;
  request->run_next = nullptr;
  if (running_tail_ != nullptr) {
    running_tail_->run_next = request;
  } else {
    running_head_ = request;
  }
  running_tail_ = request;
  if (config_.stall_timeout.count() > 0 &&
      !uv_is_active(reinterpret_cast<uv_handle_t*>(&stall_timer_))) {
    uv_timer_start(&stall_timer_, &Cell::OnStallTimer,
                   static_cast<uint64_t>(config_.stall_timeout.count()), 0);
  }
  if (config_.request_timeout.count() > 0 && running_head_ == request) ArmRequestTimer();
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
  last_progress_ms_ = Now();

  const ipc::FrameHeader& in = frame.header;
  if (in.status == ipc::ReplyStatus::kOk) {
    FinishRunning(request);
    if (request->client == nullptr && !request->answered) {
      ++counters_.dropped;
    } else if (!request->answered) {
      ++counters_.ok;
    }
    Complete(request, ReplyHeader(ipc::ReplyStatus::kOk, ipc::Reason::kNone), frame.payload);
    StartQueued();
    MaybeDrained();
  } else if (in.status == ipc::ReplyStatus::kFailed) {
    Fail(request, ipc::Reason::kWorkerError, frame.payload);
  } else {
    Fail(request, ipc::Reason::kWorkerError,
         std::string("worker replied with status ") + ipc::StatusName(in.status));
  }
}

void Cell::OnLinkBroken(WorkerLink* link, const std::string& why, bool worker_at_fault) {
  Request* request = link->TakeInflight();
  DropLink(link);
  if (worker_at_fault) {
    // The supervisor closed the connection: say why, at once, rather than wait for an exit.
    Log(LogLevel::kWarning, name(), pid_, "worker broke the protocol: " + why);
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

void Cell::FinishRunning(Request* request) {
  // Off the running list (where a request whose worker connection failed never was), then the
  // slot is freed.
  if (request->run_prev != nullptr || running_head_ == request) {
    if (request->run_prev != nullptr) {
      request->run_prev->run_next = request->run_next;
    } else {
      running_head_ = request->run_next;
    }
    if (request->run_next != nullptr) {
      request->run_next->run_prev = request->run_prev;
    } else {
      running_tail_ = request->run_prev;
    }
  }
  request->run_prev = request->run_next = nullptr;
  if (request->answered) --answered_running_;
  bulkhead_.Finish(request);
}

void Cell::Answer(Request* request, const ipc::FrameHeader& header, std::string_view payload) {
  BH_CHECK(!request->answered);
  request->answered = true;
  if (request->dispatched_at_ns != 0) {
    uint64_t now_ns = uv_hrtime();
    request_duration_.Record(now_ns, now_ns - request->admitted_at_ns);
  }
  if (request->client != nullptr) {
    FrontConnection* client = request->client;
    client->UnlinkRequest(request);
    ipc::FrameHeader reply = header;
    reply.request_id = request->client_request_id;
    client->SendReply(reply, payload);
  }
}

void Cell::Complete(Request* request, const ipc::FrameHeader& header, std::string_view payload) {
  if (!request->answered) Answer(request, header, payload);
  pool_->Release(request);
}

void Cell::Fail(Request* request, ipc::Reason reason, std::string_view message) {
  FinishRunning(request);
  if (request->client == nullptr && !request->answered) {
    ++counters_.dropped;
  } else if (!request->answered) {
    switch (reason) {
      case ipc::Reason::kWorkerDied:
        ++counters_.failed_worker_died;
        break;
      case ipc::Reason::kOomKilled:
        ++counters_.failed_oom_killed;
        break;
      case ipc::Reason::kStalled:
        ++counters_.failed_stalled;
        break;
      case ipc::Reason::kTimeout:
        ++counters_.failed_timeout;
        break;
      default:
        ++counters_.failed_worker_error;
        break;
    }
  }
  Complete(request, ReplyHeader(ipc::ReplyStatus::kFailed, reason), message);
  StartQueued();
  MaybeDrained();
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
  if (reason == ipc::Reason::kUnavailable) detail.retry_after_ms = lifecycle_.RetryAfterMs();
  scratch_.clear();
  ipc::AppendRejectDetail(&scratch_, detail);
  Complete(request, ReplyHeader(ipc::ReplyStatus::kRejected, reason), scratch_);
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

// --- Stall detection and request timeouts. ---

void Cell::OnStallTimer(uv_timer_t* timer) {
  auto* self = static_cast<Cell*>(timer->data);
  if (self->busy_links_.empty() || self->pid_ == 0) return;  // idle: nothing to stall on
  uint64_t stall_ms = static_cast<uint64_t>(self->config_.stall_timeout.count());
  uint64_t quiet = self->Now() - self->last_progress_ms_;
  if (quiet < stall_ms) {
    // It answered meanwhile: check again when the newest progress would go stale.
    uv_timer_start(timer, &Cell::OnStallTimer, stall_ms - quiet, 0);
    return;
  }
  self->Handle(Event::Stalled("no reply for " + std::to_string(quiet) + " ms"));
}

void Cell::ArmRequestTimer() {
  // The oldest running request that has no answer yet times out first (one timeout per cell).
  Request* oldest = running_head_;
  while (oldest != nullptr && oldest->answered) oldest = oldest->run_next;
  if (oldest == nullptr) {
    uv_timer_stop(&request_timer_);
    return;
  }
  uint64_t deadline =
      oldest->dispatched_at_ms + static_cast<uint64_t>(config_.request_timeout.count());
  uint64_t now = Now();
  uv_timer_start(&request_timer_, &Cell::OnRequestTimer, deadline > now ? deadline - now : 0, 0);
}

void Cell::OnRequestTimer(uv_timer_t* timer) {
  auto* self = static_cast<Cell*>(timer->data);
  uint64_t timeout = static_cast<uint64_t>(self->config_.request_timeout.count());
  uint64_t now = self->Now();
  for (Request* r = self->running_head_; r != nullptr && r->dispatched_at_ms + timeout <= now;
       r = r->run_next) {
    if (r->answered) continue;
    // The client is answered now; the slot stays taken until the worker answers or is replaced,
    // because the worker really is still busy with it.
    ++self->counters_.failed_timeout;
    ++self->answered_running_;
    self->Answer(r, ReplyHeader(ipc::ReplyStatus::kFailed, ipc::Reason::kTimeout),
                 "request_timeout of " + std::to_string(timeout) + " ms passed");
  }
  self->ArmRequestTimer();
}

CellSnapshot Cell::Snapshot() const {
  CellSnapshot s;
  s.name = config_.name;
  s.state = lifecycle_.state();
  uint64_t now = uv_now(loop_);
  s.state_since_ms = now - std::min(now, lifecycle_.since_ms());
  s.pid = pid_;
  s.socket = config_.socket;
  s.worker_socket = config_.worker_socket;
  s.limits = bulkhead_.limits();
  s.running = bulkhead_.running();
  s.queued = bulkhead_.queued();
  s.clients = static_cast<uint32_t>(clients_.size());
  s.max_connections = config_.max_connections;
  s.connection_limit = std::min(config_.max_connections, connection_share_);
  s.worker_connections = static_cast<uint32_t>(worker_connections());
  s.starts = lifecycle_.starts();
  s.restarts = lifecycle_.restarts();
  s.last_exit = lifecycle_.last_exit();
  s.reason = lifecycle_.reason();
  s.status_text = status_text_;
  if (pid_ != 0) s.uptime_ms = now - std::min(now, lifecycle_.worker_started_at_ms());
  if (lifecycle_.next_start_at_ms() > now) s.next_start_in_ms = lifecycle_.next_start_at_ms() - now;
  s.counters = counters_;
  s.limits_note = compartment_.not_enforced_reason;
  s.cgroup_limits = compartment_.limits;
  s.oom_kills = oom_kills_;
  s.in_flight = bulkhead_.running() - answered_running_ + bulkhead_.queued();
  uint64_t now_ns = uv_hrtime();
  s.queue_wait = queue_wait_.total();
  s.request_duration = request_duration_.total();
  s.recent_queue_wait = queue_wait_.Recent(now_ns);
  s.recent_request_duration = request_duration_.Recent(now_ns);
  s.restarts_by_reason = restarts_by_reason_;
  if (cgroup_) {
    s.cgroup_path = cgroup_->path();
    Result<cell::CgroupStats> stats = cgroup_->ReadStats();
    if (stats.ok()) {
      s.cgroup = std::move(stats).value();
    } else {
      s.limits_note = "cannot read " + cgroup_->path() + ": " + stats.status().message();
    }
  }
  // Per limit: written at the last WriteCellLimits, and its controller's files still there now (a
  // controller withdrawn from cells/cgroup.subtree_control takes its files and limits with it).
  std::string lost;
  for (size_t i = 0; i < cell::kLimitCount; ++i) {
    const auto limit = static_cast<cell::Limit>(i);
    const bool set = cell::LimitIsSet(compartment_.limits, limit);
    bool present = cgroup_.has_value() && s.cgroup.has_value();
    if (present && cell::LimitController(limit) == "memory") present = s.cgroup->has_memory;
    if (present && cell::LimitController(limit) == "pids") present = s.cgroup->has_pids;
    if (present && cell::LimitController(limit) == "cpu") present = s.cgroup->has_cpu;
    if (cgroup_ && !limits_written_.of(limit).ok()) {
      s.limit_states[i] = LimitState::kNotEnforced;
    } else if (!set) {
      s.limit_states[i] = LimitState::kUnlimited;
    } else if (present) {
      s.limit_states[i] = LimitState::kEnforced;
    } else {
      s.limit_states[i] = LimitState::kNotEnforced;
      if (cgroup_ && s.cgroup && lost.empty()) {
        lost = std::string(cell::LimitName(limit)) + ": the " +
               std::string(cell::LimitController(limit)) + " controller is no longer enabled for " +
               cgroup_->path();
      }
    }
  }
  s.limits_enforced = cgroup_.has_value() && s.cgroup.has_value() &&
                      std::find(s.limit_states.begin(), s.limit_states.end(),
                                LimitState::kNotEnforced) == s.limit_states.end();
  if (cgroup_ && s.cgroup) {
    Status written = limits_written_.status();
    s.limits_note = !written.ok() ? written.message() : lost;
  }
  return s;
}

}  // namespace bulkhead::supervisor
