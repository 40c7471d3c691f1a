// SPDX-License-Identifier: MIT
#include "supervisor/cell.h"

#include <fcntl.h>
#include <poll.h>
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
// How often an emptying cgroup is polled after cgroup.kill, in ms.
constexpr uint64_t kTeardownPollMs = 5;
// How long after an OOM kill is seen the worker is checked for having survived it, in ms. The
// kernel raises memory.events oom_kill just before it queues SIGKILL to the victim (mm/oom_kill.c),
// so a look at the very moment of the rise could find a victim not yet signalled; this long after,
// a victim is dying (SIGKILL pending, exiting) or dead, whatever the load.
constexpr uint64_t kOomSurvivalCheckMs = 200;
// How often memory.events is read when it cannot be watched (uv_fs_event failed), in ms.
constexpr uint64_t kOomPollMs = 1000;
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
      compartment_(std::move(compartment)),
      max_payload_(max_payload),
      pool_(pool),
      bulkhead_(LimitsOf(config_)),
      clock_(loop),
      lifecycle_(lifecycle::LifecycleOptionsFromConfig(config_), &clock_,
                 cell::RestartPolicy::RandomJitter()),
      notify_(loop, [this](pid_t sender,
                           const cell::NotifyMessage& message) { OnNotify(sender, message); }),
      output_(loop, config_),
      deadlines_(static_cast<uint64_t>(config_.request_timeout.count())),
      after_poll_(loop, [this] { OnAfterPoll(); }) {
  for (uv_timer_t* timer : {&backoff_timer_, &stop_timer_, &watchdog_timer_, &queue_timer_,
                            &orphan_timer_, &teardown_timer_, &stall_timer_, &request_timer_,
                            &start_timer_, &accept_timer_, &write_timer_}) {
    uv_timer_init(loop_, timer);
    timer->data = this;
    ++open_handles_;
  }
  uv_timer_init(loop_, &oom_timer_);
  oom_timer_.data = this;
  ++open_handles_;
  uv_fs_event_init(loop_, &memory_events_watch_);
  memory_events_watch_.data = this;
  ++open_handles_;
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
    StartOomWatch();
    // Written again before every spawn; under "required" a failure here fails the first start.
    (void)WriteCellLimits();
    // A cgroup that still has processes belongs to an earlier run that died without stopping
    // them: they are killed before this run's first worker starts (see Start).
    Result<bool> empty = cgroup_->IsEmpty();
    stale_generation_ = !empty.ok() || !*empty;
  }
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

  Result<ipc::ListeningSocket> worker = ipc::ClaimListeningSocket(
      config_.worker_socket, static_cast<int>(std::max<uint32_t>(config_.max_concurrent, 128)),
      ipc::Blocking::kBlocking, lifecycle::WorkerSocketAccess());
  if (!worker.ok()) return worker.status();
  worker_file_ = std::move(worker->file);
  worker_listen_fd_ = std::move(worker->fd);

  Status notify = notify_.Bind(config_.notify_socket, lifecycle::NotifySocketAccess(config_));
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

// --- Lifecycle plumbing. ---

std::string Cell::Start() {
  if (stale_generation_) {
    stale_generation_ = false;
    Log(LogLevel::kWarning, name(), 0,
        "cgroup " + cgroup_->path() +
            " still holds processes of an earlier run: killing them first");
    Teardown([this] { Handle(Event::StartRequested()); });
    return lifecycle::Lifecycle::ReplyText(lifecycle::Lifecycle::Reply::kAccepted);
  }
  return lifecycle::Lifecycle::ReplyText(Handle(Event::StartRequested()).reply);
}

std::string Cell::Restart() {
  // Set before Handle (the spawn may come at once); a refused restart ("restart in progress")
  // leaves the flag of the one under way as it was.
  const bool earlier = operator_restart_;
  operator_restart_ = true;
  std::string reply =
      lifecycle::Lifecycle::ReplyText(Handle(Event::RestartRequested(bulkhead_.running())).reply);
  if (reply != lifecycle::Lifecycle::ReplyText(lifecycle::Lifecycle::Reply::kAccepted))
    operator_restart_ = earlier;
  return reply;
}

std::string Cell::Stop(std::function<void()> on_stopped) {
  if (on_stopped) on_stopped_.push_back(std::move(on_stopped));
  return lifecycle::Lifecycle::ReplyText(Handle(Event::StopRequested(bulkhead_.running())).reply);
}

lifecycle::Lifecycle::Transition Cell::Handle(const Event& event) {
  if (executing_) {
    pending_events_.push_back(event);
    return lifecycle::Lifecycle::Transition{};
  }
  lifecycle::Lifecycle::Transition transition = lifecycle_.Handle(event);
  Execute(transition);
  while (!pending_events_.empty()) {
    Event next = pending_events_.front();
    pending_events_.erase(pending_events_.begin());
    Execute(lifecycle_.Handle(next));
  }
  return transition;
}

void Cell::Execute(const lifecycle::Lifecycle::Transition& t) {
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
        ++watchdog_arms_;
        uv_timer_start(&watchdog_timer_, &Cell::OnWatchdogTimer, a.ms, 0);
        break;
      case Action::Type::kArmStartTimer:
        uv_timer_start(
            &start_timer_,
            [](uv_timer_t* timer) {
              static_cast<Cell*>(timer->data)->Handle(Event::StartTimeout());
            },
            a.ms, 0);
        break;
      case Action::Type::kCancelTimers:
        ++watchdog_arms_;
        uv_timer_stop(&backoff_timer_);
        uv_timer_stop(&stop_timer_);
        uv_timer_stop(&watchdog_timer_);
        uv_timer_stop(&start_timer_);
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
    lifecycle::RestartReason why = operator_restart_
                                       ? lifecycle::RestartReason::kOperator
                                       : lifecycle::ClassifyLastExit(lifecycle_.last_exit());
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
  accept_warned_ = false;
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
  if (!has_path) options.environment.push_back(std::string("PATH=") + config::kDefaultWorkerPath);
  options.environment.push_back("NOTIFY_SOCKET=" + notify_.path());
  // The worker SDK reads its payload limit here (cell/worker.h MaxPayloadFromEnv).
  options.environment.push_back(std::string(cell::kMaxPayloadEnv) + "=" +
                                std::to_string(max_payload_));
  if (config_.watchdog.count() > 0) {
    options.environment.push_back("WATCHDOG_USEC=" +
                                  std::to_string(config_.watchdog.count() * 1000));
  }
  lifecycle::AppendUserEnvironment(config_, &options.environment);
  options.credentials = lifecycle::WorkerCredentials(config_);
  options.umask = static_cast<mode_t>(config_.umask);
  options.no_new_privileges = config_.no_new_privileges;
  // Set in the child, so the worker never inherits bulkheadd's own oom_score_adj.
  options.oom_score_adj = config_.oom_score_adjust;
  options.working_directory = config_.working_directory;
  options.listen_fd = worker_listen_fd_.get();
  options.listen_fd_name = config_.name;
  // A supervisor that dies without stopping its cells (SIGKILL, a failed check) takes the workers
  // with it: none keeps running unnoticed, holding an old generation's socket.
  options.parent_death_signal = SIGKILL;
  if (cgroup_) {
    // The worker is born inside its cgroup (clone3 CLONE_INTO_CGROUP): so is all it forks.
    options.cgroup_fd = cgroup_->dir_fd();
    // OOM kills before this worker concern none of its processes.
    LookForOomKills();
    oom_->WorkerStarted();
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
  // An OOM kill of the worker: a SIGKILL, and an OOM kill in memory.events that it was not seen
  // to survive (cell::OomKillTracker). The last look is taken while pid_ still names the worker.
  bool oom_killed = false;
  if (oom_) {
    oom_killed = oom_->WorkerDied(wait_status, LookForOomKills());
    if (!oom_polling_) uv_timer_stop(&oom_timer_);
  }
  pid_ = 0;
  // Its last words first: they often tell why it ended.
  output_.WorkerExited();
  std::string description = cell::DescribeWaitStatus(wait_status);
  Log(LogLevel::kDebug, name(), pid,
      "worker reaped: " + description + (oom_killed ? " (OOM kill)" : ""));
  // The lifecycle hears of the exit only once nothing of this generation is left.
  Teardown([this, wait_status, description, oom_killed] {
    Handle(Event::Exited(wait_status, description, oom_killed));
  });
}

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
  if (bulkhead_.running() == 0 && lifecycle_.state() == lifecycle::Lifecycle::State::kStopping) {
    Handle(Event::Drained());
  }
}

// --- Teardown of a worker generation. ---

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

// --- OOM kills (memory.events). ---

void Cell::StartOomWatch() {
  Result<cell::MemoryEvents> events = cgroup_->ReadMemoryEvents();
  if (!events.ok()) {
    Log(LogLevel::kWarning, name(), 0, "OOM kills: " + events.status().message());
  }
  // Kills before this run are not counted: they are the earlier run's.
  oom_.emplace(events.ok() ? *events : cell::MemoryEvents{});
  const std::string path = cgroup_->memory_events_path();
  int rc = uv_fs_event_start(&memory_events_watch_, &Cell::OnMemoryEvents, path.c_str(), 0);
  if (rc != 0) {
    Log(LogLevel::kWarning, name(), 0,
        "cannot watch " + path + " (" + uv_strerror(rc) + "): reading it every " +
            std::to_string(kOomPollMs) + " ms instead");
    oom_polling_ = true;
    uv_timer_start(&oom_timer_, &Cell::OnOomTimer, kOomPollMs, kOomPollMs);
  }
}

cell::OomKillTracker::Look Cell::LookForOomKills() {
  if (!oom_ || !cgroup_) return {};
  Result<cell::MemoryEvents> events = cgroup_->ReadMemoryEvents();
  if (!events.ok()) return {};  // the cgroup is being removed (shutdown)
  const bool group_kill = compartment_.limits.oom_group;
  cell::OomKillTracker::Look look = oom_->Observe(*events, group_kill, pid_ != 0);
  if (!look.rose) return look;
  auto counter = [](const char* key, uint64_t before, uint64_t now) {
    return std::string(key) + " " + std::to_string(now) + " (+" +
           std::to_string(now >= before ? now - before : 0) + ")";
  };
  // The kernel names the victim (pid, command, oom_score_adj) only in its log; memory.events
  // holds counters alone.
  Log(LogLevel::kWarning, name(), pid_,
      "OOM kill in the cell: memory.events " +
          counter("oom_kill", look.before.oom_kill, look.now.oom_kill) + ", " +
          counter("oom_group_kill", look.before.oom_group_kill, look.now.oom_group_kill) +
          " (oom_policy " + (group_kill ? "kill" : "continue") +
          (compartment_.limits.memory_max
               ? ", memory.max " + std::to_string(*compartment_.limits.memory_max)
               : std::string()) +
          "); the kernel log names the victim");
  if (oom_->pending()) {
    oom_seen_ms_ = Now();
    if (!oom_polling_) uv_timer_start(&oom_timer_, &Cell::OnOomTimer, kOomSurvivalCheckMs, 0);
  }
  return look;
}

void Cell::OnMemoryEvents(uv_fs_event_t* handle, const char* /*filename*/, int /*events*/,
                          int status) {
  auto* self = static_cast<Cell*>(handle->data);
  if (status < 0) {
    Log(LogLevel::kWarning, self->name(), 0,
        std::string("watching memory.events: ") + uv_strerror(status));
  }
  self->LookForOomKills();
}

void Cell::OnOomTimer(uv_timer_t* timer) {
  auto* self = static_cast<Cell*>(timer->data);
  self->LookForOomKills();
  if (!self->oom_ || !self->oom_->pending() || self->pid_ == 0) return;
  const uint64_t since = self->Now() - self->oom_seen_ms_;
  if (since < kOomSurvivalCheckMs) {
    if (!self->oom_polling_) {
      uv_timer_start(timer, &Cell::OnOomTimer, kOomSurvivalCheckMs - since, 0);
    }
    return;
  }
  // A victim is dying or dead by now: its reap settles its fate (OnWorkerExit). A worker that is
  // neither survived, and its later death is not blamed on this OOM kill.
  Result<bool> dying = cell::ProcessIsDying(self->pid_);
  if (!dying.ok() || *dying) return;
  self->oom_->WorkerSurvived();
  Log(LogLevel::kWarning, self->name(), self->pid_,
      "the worker survived the OOM kill and keeps serving");
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
  std::vector<proxy::FrontConnection*> clients(clients_.begin(), clients_.end());
  for (proxy::FrontConnection* conn : clients) conn->Close();
}

void Cell::CloseHandles(std::function<void()> on_closed) {
  BH_CHECK(pid_ == 0);
  on_closed_ = std::move(on_closed);
  for (proxy::WorkerLink* link : idle_links_) link->Close();
  idle_links_.clear();
  BH_CHECK(busy_links_.empty());
  if (cgroup_) {
    Status removed = cgroup_->Remove();
    if (!removed.ok()) Log(LogLevel::kWarning, name(), 0, "cgroup: " + removed.message());
  }
  for (uv_timer_t* timer : {&backoff_timer_, &stop_timer_, &watchdog_timer_, &queue_timer_,
                            &orphan_timer_, &teardown_timer_, &stall_timer_, &request_timer_,
                            &start_timer_, &oom_timer_, &accept_timer_, &write_timer_}) {
    uv_close(reinterpret_cast<uv_handle_t*>(timer), &Cell::OnHandleClosed);
  }
  uv_close(reinterpret_cast<uv_handle_t*>(&memory_events_watch_), &Cell::OnHandleClosed);
  uv_close(reinterpret_cast<uv_handle_t*>(&front_), &Cell::OnHandleClosed);
  // Only socket files this cell bound are removed, while they are still the ones it bound.
  front_file_.Remove();
  worker_file_.Remove();
  worker_listen_fd_.Reset();
  ++open_handles_;
  output_.Close([this] {
    BH_CHECK(open_handles_ > 0);
    if (--open_handles_ == 0 && on_closed_) std::exchange(on_closed_, nullptr)();
  });
  ++open_handles_;
  after_poll_.Close([this] {
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
  // A stall_timeout set or changed now counts the silence from now (systemd#9467): a worker busy
  // for longer than the new timeout is not killed for the time before it existed.
  if (next.stall_timeout != config_.stall_timeout) stall_counted_from_ms_ = Now();
  config_ = next;
  if (worker_listen_fd_.valid()) {
    // More links may connect at once than the backlog Bind gave: listen(2) again resizes it.
    ::listen(worker_listen_fd_.get(),
             static_cast<int>(std::max<uint32_t>(config_.max_concurrent, 128)));
  }
  lifecycle_.SetOptions(lifecycle::LifecycleOptionsFromConfig(config_));
  bulkhead_.SetLimits(LimitsOf(config_));
  output_.SetOptions(config_);
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
  Status written = Status::Ok();
  if (cgroup_limits) {
    compartment_.limits = *cgroup_limits;
    if (cgroup_) written = WriteCellLimits();
  }
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
  if (lifecycle_.RefusesRequests()) {
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
    Log(LogLevel::kError, name(), pid_, "cannot connect to worker: " + made.status().message());
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
  if (self->pid_ == 0 || !self->worker_listen_fd_.valid()) return;
  // A listening socket polls readable while a connection waits in its backlog, not accepted.
  pollfd p{.fd = self->worker_listen_fd_.get(), .events = POLLIN, .revents = 0};
  if (::poll(&p, 1, 0) != 1 || (p.revents & POLLIN) == 0) return;  // all accepted
  // When the newest connection is kAcceptWarnMs old, the one waiting is at least as old.
  const uint64_t newest_age = self->Now() - self->last_link_opened_ms_;
  if (newest_age < kAcceptWarnMs) {
    uv_timer_start(timer, &Cell::OnAcceptTimer, kAcceptWarnMs - newest_age, 0);
    return;
  }
  if (!self->accept_warned_) {
    self->accept_warned_ = true;
    Log(LogLevel::kWarning, self->name(), self->pid_,
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
  if (unread && !request->resent && pid_ != 0) {
    Log(LogLevel::kDebug, name(), pid_,
        "worker connection closed before the worker read the request (" + why +
            "): sending it again on a new connection");
    Resend(request, unread_payload);
    return;
  }
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
  if (reason == ipc::Reason::kUnavailable) detail.retry_after_ms = lifecycle_.RetryAfterMs();
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
  if (busy_links_.empty() || pid_ == 0 || stall_ms == 0) return;
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
  Handle(Event::Stalled("no reply for " + std::to_string(now - last_progress_ms_) + " ms"));
}

void Cell::OnWatchdogTimer(uv_timer_t* timer) {
  auto* self = static_cast<Cell*>(timer->data);
  self->verdicts_.watchdog = true;
  self->verdicts_.watchdog_arms = self->watchdog_arms_;
  self->after_poll_.Request();
}

void Cell::OnAfterPoll() {
  const PendingVerdicts verdicts = std::exchange(verdicts_, PendingVerdicts{});
  // A WATCHDOG=1 read by the poll re-armed the watchdog: the miss did not happen.
  if (verdicts.watchdog && watchdog_arms_ == verdicts.watchdog_arms) {
    Handle(Event::WatchdogMissed());
  }
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
  s.name = config_.name;
  s.state = lifecycle_.state();
  uint64_t now = uv_now(loop_);
  s.state_since_ms = now - std::min(now, lifecycle_.since_ms());
  s.state_detail = lifecycle_.StateDetail();
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
  s.oom_kills = oom_ ? oom_->kills() : 0;
  s.in_flight =
      bulkhead_.running() - static_cast<uint32_t>(deadlines_.expired()) + bulkhead_.queued();
  s.in_flight += replies_unwritten_;
  s.unsent_bytes = UnsentBytes();
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
      s.limit_states[i] = lifecycle::LimitState::kNotEnforced;
    } else if (!set) {
      s.limit_states[i] = lifecycle::LimitState::kUnlimited;
    } else if (present) {
      s.limit_states[i] = lifecycle::LimitState::kEnforced;
    } else {
      s.limit_states[i] = lifecycle::LimitState::kNotEnforced;
      if (cgroup_ && s.cgroup && lost.empty()) {
        lost = std::string(cell::LimitName(limit)) + ": the " +
               std::string(cell::LimitController(limit)) + " controller is no longer enabled for " +
               cgroup_->path();
      }
    }
  }
  s.limits_enforced = cgroup_.has_value() && s.cgroup.has_value() &&
                      std::find(s.limit_states.begin(), s.limit_states.end(),
                                lifecycle::LimitState::kNotEnforced) == s.limit_states.end();
  if (cgroup_ && s.cgroup) {
    Status written = limits_written_.status();
    s.limits_note = !written.ok() ? written.message() : lost;
  }
  return s;
}

}  // namespace bulkhead::supervisor
