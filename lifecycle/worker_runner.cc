// SPDX-License-Identifier: MIT
#include "lifecycle/worker_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <utility>

#include "base/check.h"
#include "base/log.h"
#include "cell/process.h"
#include "cell/restart_policy.h"
#include "lifecycle/worker_environment.h"
#include "lifecycle/worker_privileges.h"

namespace bulkhead::lifecycle {

namespace {

using Event = Lifecycle::Event;
using Action = Lifecycle::Action;

// The worker socket's backlog: every link the data path may open at once (max_concurrent), and
// never less than 128.
int WorkerBacklog(const config::CellConfig& config) {
  return static_cast<int>(std::max<uint32_t>(config.max_concurrent, 128));
}

WorkerSwap::Options SwapOptionsFromConfig(const config::CellConfig& config) {
  return WorkerSwap::Options{
      .start_timeout_ms = static_cast<uint64_t>(config.start_timeout.count()),
      .stop_timeout_ms = static_cast<uint64_t>(config.stop_timeout.count()),
      .stop_signal = config.stop_signal};
}

// How often a next worker with ready = "exec" is looked at for its first accept, ms.
constexpr uint64_t kAcceptPollMs = 5;

}  // namespace

std::string NextSocketPath(const std::string& worker_socket) { return worker_socket + ".next"; }

WorkerRunner::WorkerRunner(uv_loop_t* loop, loop::TimeSource* time, config::CellConfig config,
                           CellCompartment compartment, uint32_t max_payload,
                           loop::AfterPoll* after_poll, DataPathControl* data_path,
                           WorkerLauncher* launcher)
    : launcher_(launcher),
      config_(std::move(config)),
      compartment_(std::move(compartment)),
      max_payload_(max_payload),
      after_poll_(after_poll),
      data_path_(data_path),
      lifecycle_(LifecycleOptionsFromConfig(config_), time, cell::RestartPolicy::RandomJitter()),
      notify_(loop, [this](pid_t sender,
                           const cell::NotifyMessage& message) { OnNotify(sender, message); }),
      output_a_(loop, time, config_),
      output_b_(loop, time, config_),
      oom_watch_(loop, time, &config_.name, [this] { return pid_; }),
      backoff_timer_(time->CreateTimer([this] { Handle(Event::BackoffElapsed()); })),
      stop_timer_(time->CreateTimer([this] { Handle(Event::StopTimeout()); })),
      watchdog_timer_(time->CreateTimer([this] { OnWatchdogTimer(); })),
      start_timer_(time->CreateTimer([this] { OnStartTimer(); })),
      teardown_(time, &config_.name),
      swap_teardown_(time, &config_.name),
      probe_(
          loop, time, after_poll, &config_.name,
          HealthProbe::Callbacks{
              .on_ready = [this](std::string what) { Handle(Event::ProbeReady(std::move(what))); },
              .on_stalled = [this](std::string why) { Handle(Event::Stalled(std::move(why))); }}),
      swap_(SwapOptionsFromConfig(config_)),
      loop_(loop),
      next_probe_(
          loop, time, after_poll, &config_.name,
          HealthProbe::Callbacks{.on_ready = [this](const std::string& what) { OnNextReady(what); },
                                 // Readiness only: a stall is judged once it serves.
                                 .on_stalled = [](const std::string&) {}}),
      time_(time) {}

WorkerRunner::~WorkerRunner() = default;

Status WorkerRunner::CreateCgroup() {
  if (compartment_.tree == nullptr) return Status::Ok();
  Result<cell::CellCgroup> made = cell::CellCgroup::Create(*compartment_.tree, config_.name);
  if (!made.ok()) return made.status();
  cgroup_.emplace(std::move(made).value());
  oom_watch_.Start(&*cgroup_, &compartment_.limits);
  // Written again before every spawn; under "required" a failure here fails the first start.
  (void)WriteCellLimits();
  // A cgroup that still has processes belongs to an earlier run that died without stopping
  // them: they are killed before this run's first worker starts (see Start).
  Result<bool> empty = cgroup_->IsEmpty();
  stale_generation_ = !empty.ok() || !*empty;
  if (!stale_generation_) {
    // Empty generation leaves of an earlier run: gen-1 is made again at the first spawn.
    Status removed = cgroup_->RemoveGenerations();
    if (!removed.ok()) Log(LogLevel::kWarning, name(), 0, "cgroup: " + removed.message());
  }
  UpdatePressureWatch();
  return Status::Ok();
}

Status WorkerRunner::BindSockets() {
  Result<ipc::ListeningSocket> worker =
      ipc::ClaimListeningSocket(config_.worker_socket, WorkerBacklog(config_),
                                ipc::Blocking::kBlocking, WorkerSocketAccess());
  if (!worker.ok()) return worker.status();
  worker_file_ = std::move(worker->file);
  worker_listen_fd_ = std::move(worker->fd);
  return notify_.Bind(config_.notify_socket, NotifySocketAccess(config_));
}

// --- Re-exec (docs/reexec.md). ---

std::optional<uint64_t> WorkerRunner::PollCgroup() {
  if (!cgroup_ || pid_ == 0) return std::nullopt;
  if (config_.concurrency != config::ConcurrencyMode::kAdaptive) {
    Result<cell::Pressure> pressure = cgroup_->ReadPressure(cell::PressureResource::kCpu);
    if (!pressure.ok()) return std::nullopt;
    return pressure->some.total_us;
  }
  Result<cell::CgroupUsage> usage = cgroup_->ReadUsage();
  if (!usage.ok()) {
    if (!std::exchange(usage_read_failed_, true)) {
      Log(LogLevel::kWarning, name(), pid_, "adaptive: " + usage.status().message());
    }
    return std::nullopt;
  }
  usage_read_failed_ = false;
  data_path_->CgroupUsagePolled(*usage);
  return usage->cpu_stall_us;
}

std::array<std::string, admission::kSignalCount> WorkerRunner::KernelSignalsOff() const {
  using admission::Signal;
  std::array<std::string, admission::kSignalCount> off;
  if (config_.concurrency != config::ConcurrencyMode::kAdaptive) return off;
  const uint8_t live = pressure_ ? pressure_->live() : 0;
  const auto set = [&](Signal signal, const std::string& why) {
    if ((live & admission::SignalBit(signal)) == 0) off[static_cast<size_t>(signal)] = why;
  };
  const Signal kernel[] = {Signal::kCpuPressure, Signal::kMemoryPressure, Signal::kCpuThrottling,
                           Signal::kMemoryUsage};
  if (!cgroup_) {
    const std::string why =
        compartment_.tree == nullptr
            ? "no cgroup for the cell: limits not enforced (" +
                  (compartment_.not_enforced_reason.empty() ? std::string("no cgroup v2")
                                                            : compartment_.not_enforced_reason) +
                  ")"
            : std::string("no cgroup for the cell: it could not be created (see the log)");
    for (Signal signal : kernel) set(signal, why);
    return off;
  }
  const cell::CgroupLimits& limits = compartment_.limits;
  const std::string no_memory = "the memory controller is not enabled for the cells";
  const std::string no_cpu = "the cpu controller is not enabled for the cells";
  const bool memory = ControllerEnabled("memory");
  const bool cpu = ControllerEnabled("cpu");
  const auto trigger = [&](Signal signal) {
    std::string failure = pressure_ ? pressure_->failure(signal) : std::string();
    return failure.empty() ? std::string("its PSI trigger is not watched") : failure;
  };
  set(Signal::kMemoryPressure, memory ? trigger(Signal::kMemoryPressure) : no_memory);
  set(Signal::kCpuPressure,
      admission::RegistersCpuTrigger(limits.cpu_quota_us,
                                     limits.cpu_period_us.value_or(cell::kDefaultCpuPeriodUs))
          ? trigger(Signal::kCpuPressure)
          : "cpu_max is below one CPU: its quota alone shows as CPU stall (cpu_throttling "
            "stands in)");
  set(Signal::kCpuThrottling, !cpu                   ? no_cpu
                              : !limits.cpu_quota_us ? std::string("no cpu_max")
                                                     : std::string("not polled"));
  set(Signal::kMemoryUsage, !memory              ? no_memory
                            : !limits.memory_max ? std::string("no memory_max")
                                                 : std::string("not polled"));
  return off;
}

std::string WorkerRunner::ReexecBlocker() const {
  using State = Lifecycle::State;
  if (swap_.phase() != WorkerSwap::Phase::kIdle || swap_generation_ || next_pid_ != 0 ||
      prev_pid_ != 0) {
    return "a worker swap (overlapping restart) is under way";
  }
  if (teardown_.watching()) return "its last worker generation is still being torn down";
  if (executing_ || !pending_events_.empty()) return "its lifecycle is handling an event";
  switch (lifecycle_.state()) {
    case State::kRunning:
      return pid_ != 0 ? "" : "its worker was reaped and is being torn down";
    case State::kStopped:
    case State::kBackoff:
    case State::kFailed:
      return pid_ == 0 ? "" : "its worker has not exited yet";
    case State::kStarting:
    case State::kStopping:
      break;
  }
  return std::string("it is ") + Lifecycle::StateName(lifecycle_.state()) +
         " (a cell starting or stopping is carried across a re-exec once it runs, is stopped or "
         "in backoff)";
}

WorkerRunner::ReexecFds WorkerRunner::reexec_fds() const {
  return {.worker_listen = worker_listen_fd_.get(),
          .notify = notify_.fd(),
          .stdout_read = output_->stdout_fd(),
          .stderr_read = output_->stderr_fd()};
}

Status WorkerRunner::AdoptSockets(UniqueFd worker_listen, UniqueFd notify) {
  Result<ipc::SocketFile> file = ipc::SocketFile::Record(config_.worker_socket);
  if (!file.ok()) return Status::Error(config_.worker_socket + ": " + file.status().message());
  worker_file_ = std::move(file).value();
  worker_listen_fd_ = std::move(worker_listen);
  return notify_.Adopt(std::move(notify), config_.notify_socket);
}

void WorkerRunner::AdoptStopped(uint64_t starts, uint64_t restarts, std::string last_exit,
                                const RestartCounts& restarts_by_reason) {
  lifecycle_.RestoreCounts(starts, restarts, std::move(last_exit));
  restarts_by_reason_ = restarts_by_reason;
  restarts_attributed_ = restarts;
}

void WorkerRunner::AdoptBackoff(uint32_t consecutive_failures, uint64_t next_start_in_ms,
                                const Lifecycle::CarriedCrashLoop& crash_loop) {
  lifecycle_.RestoreCrashLoop(crash_loop);
  Lifecycle::Transition adopted;
  adopted.from = Lifecycle::State::kStopped;
  adopted.to = Lifecycle::State::kBackoff;
  adopted.actions = lifecycle_.AdoptBackoff(consecutive_failures, next_start_in_ms);
  adopted.log = "backoff adopted from the previous bulkheadd image: next start in " +
                std::to_string(next_start_in_ms) + " ms";
  Execute(adopted);
}

void WorkerRunner::AdoptFailed(std::string reason, bool gave_up) {
  lifecycle_.AdoptFailed(std::move(reason), gave_up);
  Lifecycle::Transition adopted;
  adopted.from = Lifecycle::State::kStopped;
  adopted.to = Lifecycle::State::kFailed;
  adopted.log = "failed, as in the previous bulkheadd image: " + lifecycle_.reason();
  Execute(adopted);
}

Status WorkerRunner::AdoptWorker(AdoptedWorker worker) {
  BH_CHECK(pid_ == 0 && lifecycle_.state() == Lifecycle::State::kStopped);
  if (cgroup_ && !worker.cgroup_path.empty()) {
    // Its leaf is "<cell's cgroup>/gen-N": opened as it is (CreateGeneration adopts an existing
    // one), and the next generation is N + 1.
    const std::string prefix = cgroup_->path() + "/gen-";
    uint64_t generation = 0;
    const std::string_view rest =
        std::string_view(worker.cgroup_path)
            .substr(worker.cgroup_path.starts_with(prefix) ? prefix.size()
                                                           : worker.cgroup_path.size());
    auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), generation);
    if (rest.empty() || ec != std::errc() || end != rest.data() + rest.size()) {
      return Status::Error("cgroup " + worker.cgroup_path + " is not a generation of " +
                           cgroup_->path());
    }
    Result<cell::CellCgroup> leaf = cgroup_->CreateGeneration(generation);
    if (!leaf.ok())
      return Status::Error("cgroup " + worker.cgroup_path + ": " + leaf.status().message());
    generation_.emplace(std::move(leaf).value());
    generations_made_ = std::max(generations_made_, generation);
    oom_watch_.WorkerStarted();
  }
  // Its processes are this run's, not an earlier run's left in the cgroup.
  stale_generation_ = false;
  AdoptStopped(worker.starts, worker.restarts, std::move(worker.last_exit),
               worker.restarts_by_reason);
  lifecycle_.RestoreCrashLoop(worker.crash_loop);
  pid_ = worker.pid;
  pgid_ = worker.pgid;
  output_->Adopt(std::move(worker.stdout_read), std::move(worker.stderr_read), pid_);
  Lifecycle::Transition adopted;
  adopted.from = Lifecycle::State::kStopped;
  adopted.to = Lifecycle::State::kRunning;
  adopted.actions = lifecycle_.Adopt(worker.uptime_ms);
  adopted.log = "worker adopted from the previous bulkheadd image";
  Execute(adopted);
  return Status::Ok();
}

// --- Lifecycle plumbing. ---

std::string WorkerRunner::Start() {
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

std::string WorkerRunner::Restart(uint32_t in_flight, bool overlap) {
  if (!overlap) {
    // A next worker started before has the config of then: it goes, this restart proceeds.
    ExecuteSwap(swap_.Cancel("the cell restarts without overlap"));
  } else if (swap_.phase() != WorkerSwap::Phase::kIdle || swap_generation_) {
    // A swap's other generation is still being torn down (its leaf not yet removed): the swap
    // is not over.
    return Lifecycle::ReplyText(Lifecycle::Reply::kRestartInProgress);
  } else if (CanOverlap()) {
    return BeginSwap(in_flight);
  }
  // Set before Handle (the spawn may come at once); a refused restart ("restart in progress")
  // leaves the flag of the one under way as it was.
  const bool earlier = operator_restart_;
  operator_restart_ = true;
  std::string reply = Lifecycle::ReplyText(Handle(Event::RestartRequested(in_flight)).reply);
  if (reply != Lifecycle::ReplyText(Lifecycle::Reply::kAccepted)) operator_restart_ = earlier;
  return reply;
}

std::string WorkerRunner::Stop(uint32_t in_flight, std::function<void()> on_stopped) {
  if (on_stopped) on_stopped_.push_back(std::move(on_stopped));
  return Lifecycle::ReplyText(Handle(Event::StopRequested(in_flight)).reply);
}

void WorkerRunner::Drained() {
  if (lifecycle_.state() == Lifecycle::State::kStopping) Handle(Event::Drained());
}

void WorkerRunner::Stalled(std::string why) { Handle(Event::Stalled(std::move(why))); }

Lifecycle::Transition WorkerRunner::Handle(const Event& event) {
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

void WorkerRunner::Execute(const Lifecycle::Transition& t) {
  if (!t.log.empty()) Log(t.log_level, name(), pid_ != 0 ? pid_ : pgid_, t.log);
  // Before the actions: kRejectQueued's rejections say what the new state says of a start.
  PushAvailability();
  bool was_executing = std::exchange(executing_, true);
  for (const Action& a : t.actions) {
    switch (a.type) {
      case Action::Type::kSpawn:
        // Always last: its answer is handled at once, outside this list.
        executing_ = was_executing;
        DoSpawn();
        return;
      case Action::Type::kOpenAdmission:
        data_path_->OpenAdmission();
        break;
      case Action::Type::kCloseAdmission:
        data_path_->CloseAdmission();
        break;
      case Action::Type::kRejectQueued:
        data_path_->RejectQueued();
        break;
      case Action::Type::kFailInFlight:
        data_path_->FailInFlight(a.reason, a.message);
        break;
      case Action::Type::kSignalStop:
        SignalStop(a.signal);
        break;
      case Action::Type::kKillAll:
        KillAll();
        break;
      case Action::Type::kArmBackoff:
        backoff_timer_->Start(a.ms);
        break;
      case Action::Type::kArmStopTimer:
        stop_timer_->Start(a.ms);
        break;
      case Action::Type::kArmWatchdog:
        ++watchdog_arms_;
        watchdog_timer_->Start(a.ms);
        break;
      case Action::Type::kArmStartTimer:
        start_timer_->Start(a.ms);
        break;
      case Action::Type::kCancelTimers:
        ++watchdog_arms_;
        for (loop::Timer* timer :
             {backoff_timer_.get(), stop_timer_.get(), watchdog_timer_.get(), start_timer_.get()}) {
          timer->Stop();
        }
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

void WorkerRunner::PushAvailability() {
  const admission::Availability now = lifecycle_.Availability();
  if (pushed_availability_ == now) return;
  pushed_availability_ = now;
  data_path_->SetAvailability(now);
}

void WorkerRunner::NoteState() {
  PushAvailability();
  // The serving worker is going (stop, stall, crash) before the next one took over: the swap is
  // over, the lifecycle's own restart or stop goes on.
  if (swap_.phase() == WorkerSwap::Phase::kStarting &&
      (lifecycle_.state() != Lifecycle::State::kRunning || pid_ == 0)) {
    ExecuteSwap(swap_.Cancel(std::string("the serving worker is ") +
                             Lifecycle::StateName(lifecycle_.state())));
  }
  UpdateProbe();
  UpdatePressureWatch();
  if (settle_observer_) settle_observer_();
  if (lifecycle_.state() == observed_state_) return;
  // A worker the lifecycle started runs (a restart without overlap, a start, a crash's restart):
  // an earlier overlapping restart's failure no longer says how the cell got here.
  if (lifecycle_.state() == Lifecycle::State::kRunning) swap_.ForgetFailure();
  observed_state_ = lifecycle_.state();
  if (state_observer_) state_observer_();
}

// --- Spawn. ---

void WorkerRunner::DrainStaleWorkerConnections() {
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

bool WorkerRunner::HasUnacceptedConnection() const {
  if (!worker_listen_fd_.valid()) return false;
  // A listening socket polls readable while a connection waits in its backlog, not accepted.
  pollfd p{.fd = worker_listen_fd_.get(), .events = POLLIN, .revents = 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
}

void WorkerRunner::DoSpawn() {
  BH_CHECK(pid_ == 0);
  // The previous generation is torn down whole before a spawn: its process group no longer names
  // anything (a failed start is then logged without a pid).
  pgid_ = 0;
  // The lifecycle counted a restart before asking for this spawn: attribute it to its cause.
  if (lifecycle_.restarts() > restarts_attributed_) {
    RestartReason why =
        operator_restart_ ? RestartReason::kOperator : ClassifyLastExit(lifecycle_.last_exit());
    restarts_by_reason_[static_cast<size_t>(why)] += lifecycle_.restarts() - restarts_attributed_;
    restarts_attributed_ = lifecycle_.restarts();
  }
  operator_restart_ = false;
  // The worker's generation leaf first (kept from a failed spawn), then the cell's limits, which
  // its memory.oom.group follows.
  Status generation = cgroup_ && !generation_ ? MakeGeneration(&generation_) : Status::Ok();
  Status limits = cgroup_ && generation.ok() ? WriteCellLimits() : Status::Ok();
  if (!generation.ok()) {
    // Nowhere to start the worker inside the cell: a failed start, as an exec error.
    Execute(lifecycle_.Handle(Event::SpawnFailed("cgroup: " + generation.message())));
  } else if (!limits.ok() && compartment_.required) {
    // cgroup = "required": no worker runs outside its limits. A failed start, as an exec error.
    std::string why = "cgroup = \"required\" but limits not enforced: " + limits.message();
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

void WorkerRunner::SpawnWorker() {
  if (data_path_->worker_connections() == 0) DrainStaleWorkerConnections();
  data_path_->WorkerStarting();
  cell::SpawnOptions options =
      BuildWorkerEnvironment(config_, notify_.path(), max_payload_, worker_listen_fd_.get());
  if (cgroup_) {
    // The worker is born inside its generation's cgroup (clone3 CLONE_INTO_CGROUP): so is all it
    // forks.
    options.cgroup_fd = generation_->dir_fd();
    oom_watch_.WorkerStarted();
  }
  status_text_.clear();
  Status output = output_->Prepare(&options);
  if (!output.ok())
    Log(LogLevel::kWarning, name(), 0, "worker output not captured: " + output.message());
  Result<pid_t> pid = launcher_->Spawn(options);
  output_->Spawned(pid.ok() ? *pid : 0);
  if (!pid.ok()) {
    // The lifecycle logs it once, with what follows (restart, or give up).
    Execute(lifecycle_.Handle(Event::SpawnFailed(pid.status().message())));
  } else {
    pid_ = pgid_ = *pid;
    Execute(lifecycle_.Handle(Event::Spawned()));
  }
}

void WorkerRunner::OnWorkerExit(int wait_status) {
  BH_CHECK(pid_ != 0);
  pid_t pid = pid_;
  // An OOM kill of the worker: a SIGKILL, and an OOM kill in memory.events that it was not seen
  // to survive (cell::OomKillTracker). The last look is taken while pid_ still names the worker.
  const bool oom_killed = oom_watch_.WorkerDied(wait_status);
  pid_ = 0;
  UpdateProbe();
  UpdatePressureWatch();
  // Its last words first: they often tell why it ended.
  output_->WorkerExited();
  std::string description = cell::DescribeWaitStatus(wait_status);
  Log(LogLevel::kDebug, name(), pid,
      "worker reaped: " + description + (oom_killed ? " (OOM kill)" : ""));
  // The lifecycle hears of the exit only once nothing of this generation is left.
  Teardown([this, wait_status, description, oom_killed] {
    Handle(Event::Exited(wait_status, description, oom_killed));
  });
}

// --- Teardown of a worker generation. ---

cell::CgroupLimits WorkerRunner::EffectiveLimits() const {
  cell::CgroupLimits limits = compartment_.limits;
  if (config_.concurrency == config::ConcurrencyMode::kAdaptive && limits.memory_max &&
      !limits.memory_high) {
    // The kernel throttles the cell at memory.high and PSI reports it before memory.max's OOM
    // kill (admission/adaptive_limit.h, "memory.high: decided").
    limits.memory_high = admission::AdaptiveMemoryHigh(*limits.memory_max);
  }
  return limits;
}

bool WorkerRunner::ControllerEnabled(std::string_view controller) const {
  if (compartment_.tree == nullptr) return false;
  const std::vector<std::string>& missing = compartment_.tree->missing_controllers();
  return std::find(missing.begin(), missing.end(), controller) == missing.end();
}

void WorkerRunner::UpdatePressureWatch() {
  PressureWatch::Want want;
  if (cgroup_ && config_.concurrency == config::ConcurrencyMode::kAdaptive) {
    const cell::CgroupLimits& limits = compartment_.limits;
    const bool memory = ControllerEnabled("memory");
    const bool cpu = ControllerEnabled("cpu");
    want.cgroup = &*cgroup_;
    want.memory_trigger = memory;
    want.cpu_trigger = admission::RegistersCpuTrigger(
        limits.cpu_quota_us, limits.cpu_period_us.value_or(cell::kDefaultCpuPeriodUs));
    if (cpu && limits.cpu_quota_us) {
      want.polled_signals |= admission::SignalBit(admission::Signal::kCpuThrottling);
    }
    if (memory && limits.memory_max) {
      want.polled_signals |= admission::SignalBit(admission::Signal::kMemoryUsage);
    }
  }
  if (!pressure_) {
    if (want.cgroup == nullptr) return;  // nothing wanted, nothing open
    pressure_ = std::make_unique<PressureWatch>(
        loop_, &config_.name,
        PressureWatch::Callbacks{
            .on_fired = [this](admission::Signal s) { data_path_->PressureFired(s); },
            .on_signals = [this](uint8_t live) { data_path_->AdaptiveSignals(live); }});
  }
  pressure_->Follow(want);
}

Status WorkerRunner::WriteCellLimits() {
  cell::CgroupLimits limits = EffectiveLimits();
  // With generations of their own memory.oom.group, the cell's is 0: the kernel kills the
  // highest group between the victim and the cgroup whose limit was hit (cgroup-v2.rst,
  // "memory.oom.group"), so an OOM kill takes one generation whole, never both of a swap.
  if (generation_oom_group_) limits.oom_group = false;
  limits_written_ = cgroup_->WriteLimits(limits);
  for (std::optional<cell::CellCgroup>* generation : {&generation_, &swap_generation_}) {
    if (!*generation) continue;
    Status group = (*generation)->WriteOomGroup(compartment_.limits.oom_group);
    if (!group.ok() && limits_written_.oom_group.ok()) limits_written_.oom_group = group;
  }
  Status status = limits_written_.status();
  if (!status.ok()) {
    Log(compartment_.required ? LogLevel::kError : LogLevel::kWarning, name(), pid_,
        "cgroup limits not enforced: " + status.message());
  }
  return status;
}

void WorkerRunner::SignalStop(int signal) {
  SignalGeneration(signal, cgroup_ ? &LiveCgroup() : nullptr, pid_, pgid_);
}

void WorkerRunner::SignalGeneration(int signal, cell::CellCgroup* generation, pid_t pid,
                                    pid_t pgid) {
  if (generation != nullptr && config_.kill_mode == config::KillMode::kControlGroup) {
    // systemd's KillMode=control-group: every process of the generation, a setsid helper
    // included.
    Status signalled = generation->Signal(signal);
    if (signalled.ok()) return;
    Log(LogLevel::kError, name(), pid, "cgroup signal: " + signalled.message());
  }
  if (generation != nullptr) {
    // kill_mode = "mixed" (systemd's KillMode=mixed): the worker alone; whatever else is left
    // gets SIGKILL (cgroup.kill) once it has exited or at stop_timeout.
    if (pid > 0) launcher_->Kill(pid, signal);
    return;
  }
  // Without a cgroup: the worker's process group (it leads one since the spawn); a helper that
  // left it (setsid) is not reached.
  if (pgid > 0) {
    launcher_->Kill(-pgid, signal);
    if (pid > 0) launcher_->Kill(pid, signal);  // in case it left its process group
  }
}

void WorkerRunner::KillAll() {
  if (cgroup_) {
    Status killed = LiveCgroup().Kill();
    if (!killed.ok()) Log(LogLevel::kError, name(), pgid_, "cgroup kill: " + killed.message());
    return;
  }
  // The worker leads its own process group: whatever it forked without leaving the group goes too.
  if (pgid_ > 0) {
    launcher_->Kill(-pgid_, SIGKILL);
    if (pid_ > 0) launcher_->Kill(pid_, SIGKILL);
  }
}

void WorkerRunner::Teardown(std::function<void()> then) {
  if (!cgroup_) {
    // Nothing to watch: the worker's process group is killed, and what left it is not tracked.
    KillAll();
    then();
    return;
  }
  // A stop with kill_mode = "control-group" signalled every process of the cell: those left
  // when the worker exits may finish their cleanup until stop_timeout, when the stop timer's
  // SIGKILL (KillAll) comes, as systemd waits for the whole control group.
  const uint64_t kill_from_ms = config_.kill_mode == config::KillMode::kControlGroup
                                    ? lifecycle_.signalled_stop_deadline_ms()
                                    : 0;
  teardown_.Start(this, kill_from_ms, [this, then = std::move(then)] {
    // Its leaf goes with it (or, for what an earlier run left, every empty one), before `then`
    // may spawn the next generation.
    Status removed = generation_ ? generation_->Remove() : cgroup_->RemoveGenerations();
    if (!removed.ok()) Log(LogLevel::kWarning, name(), 0, "cgroup: " + removed.message());
    generation_.reset();
    then();
    if (settle_observer_) settle_observer_();
  });
}

Result<bool> WorkerRunner::IsEmpty() { return LiveCgroup().IsEmpty(); }

std::string WorkerRunner::Describe() const { return "cgroup " + LiveCgroup().path(); }

Status WorkerRunner::MakeGeneration(std::optional<cell::CellCgroup>* into) {
  Result<cell::CellCgroup> made = cgroup_->CreateGeneration(++generations_made_);
  if (!made.ok()) return made.status();
  into->emplace(std::move(made).value());
  generation_oom_group_ = (*into)->HasOomGroup();
  // Not a failed start: WriteCellLimits reports it (and fails the start under "required").
  Status group = (*into)->WriteOomGroup(compartment_.limits.oom_group);
  if (!group.ok()) Log(LogLevel::kWarning, name(), 0, "cgroup: " + group.message());
  return Status::Ok();
}

void WorkerRunner::RetireSwapGeneration() {
  if (!swap_generation_) return;
  swap_teardown_.Start(&swap_generation_view_, /*kill_from_ms=*/0, [this] {
    Status removed = swap_generation_->Remove();
    if (!removed.ok()) Log(LogLevel::kWarning, name(), 0, "cgroup: " + removed.message());
    swap_generation_.reset();
    if (settle_observer_) settle_observer_();
  });
}

Result<bool> WorkerRunner::SwapGeneration::IsEmpty() {
  return runner_->swap_generation_->IsEmpty();
}

void WorkerRunner::SwapGeneration::KillAll() { runner_->KillGeneration(0, 0); }

std::string WorkerRunner::SwapGeneration::Describe() const {
  return "cgroup " + runner_->swap_generation_->path();
}

// --- Notify socket (sd_notify(3)) and watchdog. ---

bool WorkerRunner::SpeaksForCell(pid_t sender) const {
  if (pid_ == 0) return false;
  if (sender == pid_) return true;
  if (cgroup_) {
    // Any process of the worker's generation (systemd's NotifyAccess=all).
    Result<std::vector<pid_t>> procs = LiveCgroup().Procs();
    return procs.ok() && std::find(procs->begin(), procs->end(), sender) != procs->end();
  }
  // Without a cgroup: a process of the worker's session (the worker called setsid at spawn).
  return ::getsid(sender) == pid_;
}

void WorkerRunner::OnNotify(pid_t sender, const cell::NotifyMessage& message) {
  if (swap_.has_next() && next_pid_ != 0 && InSwapGeneration(sender, next_pid_)) {
    // The next worker of a swap: only its READY=1 counts (the rest once it serves).
    if (message.ready) OnNextReady("READY=1");
    return;
  }
  if (swap_.has_previous() && prev_pid_ != 0 && InSwapGeneration(sender, prev_pid_)) {
    return;  // the previous worker of a swap, finishing: it no longer speaks for the cell
  }
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

void WorkerRunner::OnWatchdogTimer() {
  watchdog_verdict_ = true;
  watchdog_verdict_arms_ = watchdog_arms_;
  after_poll_->Request();
}

void WorkerRunner::OnStartTimer() {
  if (probe_.state() == HealthProbe::State::kReadiness && !probe_.last_answer().empty()) {
    Log(LogLevel::kWarning, name(), pid_,
        "health probe GET " + config_.ready_http_path + ": last answer " + probe_.last_answer());
  }
  Handle(Event::StartTimeout());
}

void WorkerRunner::OnAfterPoll() {
  // A WATCHDOG=1 read by the poll re-armed the watchdog: the miss did not happen.
  if (std::exchange(watchdog_verdict_, false) && watchdog_arms_ == watchdog_verdict_arms_) {
    Handle(Event::WatchdogMissed());
  }
  probe_.OnAfterPoll();
  next_probe_.OnAfterPoll();
}

// --- Worker swap (restart_overlap, worker_swap.h). ---

bool WorkerRunner::InSwapGeneration(pid_t sender, pid_t leader) const {
  if (sender == leader) return true;
  if (swap_generation_) {
    Result<std::vector<pid_t>> procs = swap_generation_->Procs();
    return procs.ok() && std::find(procs->begin(), procs->end(), sender) != procs->end();
  }
  return !cgroup_ && ::getsid(sender) == leader;
}

bool WorkerRunner::CanOverlap() const {
  return config_.restart_overlap && lifecycle_.state() == Lifecycle::State::kRunning && pid_ != 0 &&
         swap_.phase() == WorkerSwap::Phase::kIdle && worker_listen_fd_.valid() &&
         NextSocketPath(config_.worker_socket).size() < sizeof(sockaddr_un::sun_path);
}

std::string WorkerRunner::RestartWithoutOverlap(uint32_t in_flight, const std::string& why) {
  Log(LogLevel::kWarning, name(), pid_, "restart without overlap: " + why);
  ReleaseNext();
  RetireSwapGeneration();
  operator_restart_ = true;
  return Lifecycle::ReplyText(Handle(Event::RestartRequested(in_flight)).reply);
}

std::string WorkerRunner::BeginSwap(uint32_t in_flight) {
  const std::string path = NextSocketPath(config_.worker_socket);
  Result<ipc::ListeningSocket> next = ipc::ClaimListeningSocket(
      path, WorkerBacklog(config_), ipc::Blocking::kBlocking, WorkerSocketAccess());
  if (!next.ok()) {
    return RestartWithoutOverlap(
        in_flight, "cannot bind the next worker's socket: " + next.status().message());
  }
  next_file_ = std::move(next->file);
  next_listen_fd_ = std::move(next->fd);
  cell::SpawnOptions options =
      BuildWorkerEnvironment(config_, notify_.path(), max_payload_, next_listen_fd_.get());
  // With the cell's cgroup, the next worker is born in a generation leaf of its own beside the
  // serving one's: the cell's limits cover both, and each is torn down whole.
  Status generation = cgroup_ ? MakeGeneration(&swap_generation_) : Status::Ok();
  if (generation.ok() && cgroup_) {
    // cgroup = "required": no worker starts outside its limits, the next one of a swap neither.
    Status limits = WriteCellLimits();
    if (!limits.ok() && compartment_.required) {
      generation =
          Status::Error("cgroup = \"required\" but limits not enforced: " + limits.message());
    }
  }
  if (swap_generation_) options.cgroup_fd = swap_generation_->dir_fd();
  Result<cell::StartedChild> started = Status::Error("not started");
  if (generation.ok()) {
    Status output = swap_output_->Prepare(&options);
    if (!output.ok())
      Log(LogLevel::kWarning, name(), 0, "worker output not captured: " + output.message());
    started = launcher_->SpawnStarted(options);
    swap_output_->Spawned(started.ok() ? started->pid : 0);
  }
  if (!started.ok() && started.status().error_number() == EAGAIN) {
    // The next worker cannot fit beside the previous one (fork or clone3 EAGAIN: the cell's
    // pids.max, or the user's RLIMIT_NPROC), which is what a cell stuck at its limits looks
    // like: the restart the operator asked for is done as without overlap, the previous
    // generation torn down whole first.
    return RestartWithoutOverlap(
        in_flight,
        "the next worker cannot start beside the previous one: " + started.status().message());
  }
  ExecuteSwap(swap_.Begin(time_->NowMs()));
  if (!started.ok()) {
    ExecuteSwap(swap_.NextExited(
        "start failed: " + (generation.ok() ? started.status().message() : generation.message())));
    RetireSwapGeneration();
    return Lifecycle::ReplyText(Lifecycle::Reply::kAccepted);
  }
  next_pid_ = started->pid;
  next_exec_ = std::move(started->exec);
  if (next_exec_.fd() >= 0) {
    Result<uv_poll_t*> watch = handles_.TryOpen(uv_poll_init, loop_, next_exec_.fd());
    if (watch.ok()) {
      exec_watch_ = *watch;
      exec_watch_->data = this;
      uv_poll_start(exec_watch_, UV_READABLE | UV_DISCONNECT, &WorkerRunner::OnNextExec);
    } else {
      // Cannot watch it: its exit (a failed step exits 126 or 127) still ends the swap.
      Log(LogLevel::kWarning, name(), next_pid_,
          "cannot watch the next worker's exec: " + watch.status().message());
    }
  }
  Log(LogLevel::kInfo, name(), next_pid_,
      "restart: next worker started beside pid " + std::to_string(pid_) +
          ", which takes every request until the next one is ready");
  switch (config_.ready) {
    case config::ReadyMode::kExec: {
      // Ready at its first accept: a connection of our own waits in its socket's backlog.
      UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
      sockaddr_un addr{};
      addr.sun_family = AF_UNIX;
      std::copy(path.begin(), path.end(), addr.sun_path);
      if (fd.valid() &&
          ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0) {
        accept_probe_fd_ = std::move(fd);
        AcceptPollTimer().Start(kAcceptPollMs);
      } else {
        OnNextReady("exec");  // cannot watch its accept: the exec is its readiness
      }
      break;
    }
    case config::ReadyMode::kNotify:
      break;  // its READY=1 (OnNotify)
    case config::ReadyMode::kHttp: {
      config::CellConfig probe_config = config_;
      probe_config.worker_socket = path;
      next_probe_.Follow(HealthProbe::State::kReadiness, next_pid_, probe_config);
      break;
    }
  }
  return Lifecycle::ReplyText(Lifecycle::Reply::kAccepted);
}

loop::Timer& WorkerRunner::SwapTimer() {
  if (!swap_timer_) {
    swap_timer_ = time_->CreateTimer([this] { ExecuteSwap(swap_.OnTimer(time_->NowMs())); });
  }
  return *swap_timer_;
}

loop::Timer& WorkerRunner::AcceptPollTimer() {
  if (!accept_poll_timer_) accept_poll_timer_ = time_->CreateTimer([this] { OnAcceptPoll(); });
  return *accept_poll_timer_;
}

void WorkerRunner::OnAcceptPoll() {
  if (swap_.phase() != WorkerSwap::Phase::kStarting || !next_listen_fd_.valid()) return;
  pollfd p{.fd = next_listen_fd_.get(), .events = POLLIN, .revents = 0};
  if (::poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0) {
    AcceptPollTimer().Start(kAcceptPollMs);  // our connection still waits
    return;
  }
  OnNextReady("first accept");
}

void WorkerRunner::OnNextReady(const std::string& what) {
  if (swap_.phase() != WorkerSwap::Phase::kStarting) return;
  // Every connect(2) to the worker socket's path reaches the next worker from here on; the
  // previous one keeps its own descriptor of the old socket, and the links it accepted.
  if (::rename(next_file_.path().c_str(), config_.worker_socket.c_str()) != 0) {
    ExecuteSwap(swap_.Fail("cannot hand the worker socket over: " +
                           Status::FromErrno("rename " + next_file_.path(), errno).message()));
    return;
  }
  Result<ipc::SocketFile> moved = ipc::SocketFile::Record(config_.worker_socket);
  worker_file_ = moved.ok() ? std::move(moved).value() : ipc::SocketFile();
  next_file_ = ipc::SocketFile();  // renamed: nothing left at its path
  worker_listen_fd_ = std::move(next_listen_fd_);
  Log(LogLevel::kInfo, name(), next_pid_, "restart: next worker ready (" + what + ")");
  ExecuteSwap(swap_.NextReady(time_->NowMs()));
}

void WorkerRunner::Handover() {
  prev_pid_ = pid_;
  prev_pgid_ = pgid_;
  pid_ = pgid_ = next_pid_;
  next_pid_ = 0;
  std::swap(output_, swap_output_);
  std::swap(generation_, swap_generation_);
  status_text_.clear();
  ReleaseNext();
  for (const Action& a : lifecycle_.WorkerReplaced()) {
    BH_CHECK(a.type == Action::Type::kArmWatchdog);
    ++watchdog_arms_;
    watchdog_timer_->Start(a.ms);
  }
  restarts_by_reason_[static_cast<size_t>(RestartReason::kOperator)] +=
      lifecycle_.restarts() - restarts_attributed_;
  restarts_attributed_ = lifecycle_.restarts();
  UpdateProbe();  // liveness, for the worker that serves now
  const bool busy = data_path_->RetireWorkerLinks();
  Log(LogLevel::kInfo, name(), pid_,
      "restart: serving; previous worker pid " + std::to_string(prev_pid_) +
          (busy ? " finishes what it has in flight" : " has nothing in flight"));
  if (!busy) ExecuteSwap(swap_.PreviousDrained());
}

void WorkerRunner::RetiredLinksDrained() { ExecuteSwap(swap_.PreviousDrained()); }

void WorkerRunner::ExecuteSwap(const std::vector<WorkerSwap::Action>& actions) {
  for (const WorkerSwap::Action& a : actions) {
    switch (a.type) {
      case WorkerSwap::Action::Type::kHandover:
        Handover();
        break;
      case WorkerSwap::Action::Type::kSignalPrevious:
        SignalGeneration(a.signal, swap_generation_ ? &*swap_generation_ : nullptr, prev_pid_,
                         prev_pgid_);
        break;
      case WorkerSwap::Action::Type::kKillPrevious:
        Log(LogLevel::kWarning, name(), prev_pid_,
            "restart: previous worker still runs at stop_timeout: SIGKILL");
        KillGeneration(prev_pid_, prev_pgid_);
        break;
      case WorkerSwap::Action::Type::kKillNext:
        if (swap_.failure().empty()) {
          Log(LogLevel::kInfo, name(), next_pid_,
              "restart: the next worker is dropped: " + swap_.dropped());
        } else {
          Log(LogLevel::kWarning, name(), next_pid_, "restart failed: " + swap_.failure());
        }
        KillGeneration(next_pid_, next_pid_);
        ReleaseNext();
        break;
    }
  }
  ArmSwapTimer();
  NoteState();
}

void WorkerRunner::KillGeneration(pid_t pid, pid_t pgid) {
  if (swap_generation_) {
    Status killed = swap_generation_->Kill();
    if (!killed.ok()) Log(LogLevel::kError, name(), pid, "cgroup kill: " + killed.message());
    return;
  }
  if (pgid > 0) launcher_->Kill(-pgid, SIGKILL);
  if (pid > 0) launcher_->Kill(pid, SIGKILL);
}

void WorkerRunner::OnNextExec(uv_poll_t* handle, int status, int /*events*/) {
  auto* self = static_cast<WorkerRunner*>(handle->data);
  uv_poll_stop(handle);  // before Poll() may close the descriptor
  std::optional<Status> exec = self->next_exec_.Poll();
  if (!exec && status == 0) {
    uv_poll_start(handle, UV_READABLE | UV_DISCONNECT, &WorkerRunner::OnNextExec);
    return;
  }
  self->CloseExecWatch();
  if (!exec || exec->ok()) return;
  // The swap fails as at the next worker's exit (which follows: 126 or 127, reaped as any next
  // worker's in OnProcessExit), with the step's words rather than the exit code.
  self->ExecuteSwap(self->swap_.Fail(
      "the next worker exited before it was ready (start failed: " + exec->message() + ")"));
}

void WorkerRunner::CloseExecWatch() {
  if (exec_watch_ != nullptr) {
    uv_poll_stop(exec_watch_);
    handles_.Close(exec_watch_);
    exec_watch_ = nullptr;
  }
  next_exec_ = cell::PendingExec();
}

void WorkerRunner::ReleaseNext() {
  CloseExecWatch();
  if (accept_poll_timer_) accept_poll_timer_->Stop();
  accept_probe_fd_.Reset();
  next_probe_.Follow(HealthProbe::State::kOff, 0, config_);
  next_file_.Remove();
  next_listen_fd_.Reset();
}

void WorkerRunner::ArmSwapTimer() {
  const uint64_t deadline = swap_.Deadline();
  if (deadline == 0) {
    if (swap_timer_) swap_timer_->Stop();
    return;
  }
  const uint64_t now = time_->NowMs();
  SwapTimer().Start(deadline > now ? deadline - now : 0);
}

bool WorkerRunner::IsWorker(pid_t pid) const {
  return pid > 0 && (pid == pid_ || pid == next_pid_ || pid == prev_pid_);
}

void WorkerRunner::OnProcessExit(pid_t pid, int wait_status) {
  if (pid == pid_) {
    OnWorkerExit(wait_status);
    return;
  }
  const std::string description = cell::DescribeWaitStatus(wait_status);
  if (pid == next_pid_) {
    // A step that failed before execve reported why before the exit: its words, not "exit 127".
    std::optional<Status> exec = next_exec_.Poll();
    CloseExecWatch();
    swap_output_->WorkerExited();
    KillGeneration(0, next_pid_);  // what it forked in its generation
    RetireSwapGeneration();
    next_pid_ = 0;
    Log(LogLevel::kDebug, name(), pid, "next worker reaped: " + description);
    ExecuteSwap(
        swap_.NextExited(exec && !exec->ok() ? "start failed: " + exec->message() : description));
    return;
  }
  BH_CHECK(pid == prev_pid_);
  swap_output_->WorkerExited();
  KillGeneration(0, prev_pgid_);
  RetireSwapGeneration();
  prev_pid_ = prev_pgid_ = 0;
  Log(LogLevel::kInfo, name(), pid, "restart done: previous worker exited: " + description);
  swap_.PreviousExited();
  // After the swap is over: a retired link's close then reports a drain nobody waits for.
  data_path_->PreviousWorkerExited(description);
  ArmSwapTimer();
  NoteState();
}

// --- HTTP probe (ready = "http:/PATH"). ---

void WorkerRunner::UpdateProbe() {
  HealthProbe::State want = HealthProbe::State::kOff;
  if (config_.ready == config::ReadyMode::kHttp && pid_ != 0) {
    if (lifecycle_.state() == Lifecycle::State::kStarting) {
      want = HealthProbe::State::kReadiness;
    } else if (lifecycle_.state() == Lifecycle::State::kRunning &&
               config_.stall_timeout.count() > 0) {
      want = HealthProbe::State::kLiveness;
    }
  }
  probe_.Follow(want, pid_, config_);
}

// --- Reload and shutdown. ---

Status WorkerRunner::Reconfigure(const config::CellConfig& next,
                                 const std::optional<cell::CgroupLimits>& cgroup_limits) {
  const config::ConcurrencyMode was = config_.concurrency;
  config_ = next;
  if (worker_listen_fd_.valid()) {
    // More links may connect at once than the backlog Bind gave: listen(2) again resizes it.
    ::listen(worker_listen_fd_.get(), WorkerBacklog(config_));
  }
  lifecycle_.SetOptions(LifecycleOptionsFromConfig(config_));
  PushAvailability();  // queue_timeout moves a backoff's refusal
  swap_.SetOptions(SwapOptionsFromConfig(config_));
  output_a_.SetOptions(config_);
  output_b_.SetOptions(config_);
  UpdateProbe();  // stall_timeout may have turned liveness probing on, off, or re-timed it
  Status written = Status::Ok();
  if (cgroup_limits) compartment_.limits = *cgroup_limits;
  // A switch between fixed and adaptive moves memory.high (EffectiveLimits).
  if (cgroup_ && (cgroup_limits || next.concurrency != was)) {
    written = WriteCellLimits();
  }
  // The triggers follow the mode (and cpu.max: RegistersCpuTrigger).
  UpdatePressureWatch();
  return written;
}

void WorkerRunner::Close(std::function<void()> on_closed) {
  BH_CHECK(pid_ == 0);
  // The cell stopped while a swap's other worker still ran (a next one being abandoned, a
  // previous one finishing): nothing of this cell outlives it.
  if (next_pid_ != 0 || prev_pid_ != 0) {
    KillGeneration(next_pid_, next_pid_);
    KillGeneration(prev_pid_, prev_pgid_);
    swap_output_->WorkerExited();
    next_pid_ = prev_pid_ = prev_pgid_ = 0;
  }
  ReleaseNext();
  if (swap_timer_) swap_timer_->Stop();
  swap_teardown_.Cancel();
  // Its descriptors first: they hold the cgroup's files open.
  if (pressure_) pressure_->Close(handles_.Part());
  if (cgroup_) {
    generation_.reset();
    swap_generation_.reset();
    Status removed = cgroup_->RemoveGenerations();
    if (removed.ok()) removed = cgroup_->Remove();
    if (!removed.ok()) Log(LogLevel::kWarning, name(), 0, "cgroup: " + removed.message());
  }
  probe_.Follow(HealthProbe::State::kOff, 0, config_);
  teardown_.Cancel();
  for (loop::Timer* timer :
       {backoff_timer_.get(), stop_timer_.get(), watchdog_timer_.get(), start_timer_.get()}) {
    timer->Stop();
  }
  // Only a socket file this cell bound is removed, while it is still the one it bound.
  worker_file_.Remove();
  worker_listen_fd_.Reset();
  output_a_.Close(handles_.Part());
  output_b_.Close(handles_.Part());
  notify_.Close(handles_.Part());
  oom_watch_.Close(handles_.Part());
  handles_.Close(std::move(on_closed));
}

// --- Status. ---

WorkerRunner::CompartmentStatus WorkerRunner::ReadCompartment() const {
  CompartmentStatus s;
  s.limits_note = compartment_.not_enforced_reason;
  s.cgroup_limits = EffectiveLimits();
  s.oom_kills = oom_watch_.kills();
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
    const bool set = cell::LimitIsSet(s.cgroup_limits, limit);
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

}  // namespace bulkhead::lifecycle
