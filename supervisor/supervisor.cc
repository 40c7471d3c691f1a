// SPDX-License-Identifier: MIT
#include "supervisor/supervisor.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "base/check.h"
#include "base/exit_status.h"
#include "base/log.h"
#include "base/version.h"
#include "cell/process.h"
#include "control/metrics_text.h"
#include "control/reload_plan.h"
#include "control/status_json.h"
#include "ipc/frame.h"
#include "ipc/listen_socket.h"
#include "supervisor/container.h"
#include "supervisor/reaper.h"
#include "supervisor/reexec.h"
#include "supervisor/reexec_settle.h"
#include "supervisor/reexec_state.h"
#include "supervisor/runtime_dir_lock.h"

namespace bulkhead::supervisor {

namespace {

// How often the end of a shutdown looks again whether the clients have read their answers.
constexpr uint64_t kClientDrainPollMs = 20;
// The longest settle_timeout_ms a reexec request may ask for: a day, in ms.
constexpr uint64_t kReexecSettleMostMs = 24ULL * 60 * 60 * 1000;
// After a re-exec's drain deadline: how long the answers of what was failed get to be written.
constexpr uint64_t kReexecAnswerGraceMs = 1'000;
// Bound on `NEW --reexec-state-versions` (it prints one line and exits: milliseconds).
constexpr uint64_t kReexecCheckTimeoutMs = 5'000;

// The "logs" control command (docs/control.md) for the cell `name` (the command table checked
// that it exists).
std::string LogsResponse(const nlohmann::json& request, const std::string& name,
                         const lifecycle::CellLogs& cell_logs) {
  std::optional<uint64_t> from;
  std::optional<uint64_t> last;
  for (auto [key, value] : {std::pair{"from", &from}, std::pair{"lines", &last}}) {
    auto it = request.find(key);
    if (it == request.end()) continue;
    if (!it->is_number_unsigned()) {
      return control::CommandError(std::string("\"") + key + "\" must be an unsigned integer");
    }
    *value = it->get<uint64_t>();
  }
  lifecycle::LogRing::Page page = cell_logs.Read(name, from, last);
  nlohmann::json journal = nullptr;
  if (cell_logs.journal()) {
    journal = {{"unit", cell_logs.journal()->unit}, {"pid", cell_logs.journal()->pid}};
  }
  // Lines are logfmt (docs/logging.md): valid UTF-8 whatever the worker wrote, so dump() cannot
  // throw on them.
  return nlohmann::json({{"ok", true},
                         {"cell", name},
                         {"lines", page.lines},
                         {"next", page.next},
                         {"missed", page.missed},
                         {"journal", journal}})
      .dump();
}

}  // namespace

Supervisor::Supervisor(config::Config config)
    : config_(std::move(config)),
      cell_logs_(StderrLogStyle() == LogStyle::kJournal),
      commands_(control::ControlAccess(::geteuid(), config_.supervisor.control_group),
                ControlHandlers(), [this] { return CellNames(); }) {
  BH_CHECK(uv_loop_init(&loop_) == 0);
  SetLogSink(&cell_logs_);
}

Supervisor::~Supervisor() {
  if (GetLogSink() == &cell_logs_) SetLogSink(nullptr);
  // Every handle must have been closed: a leaked handle is a bug, and fails here.
  BH_CHECK(uv_loop_close(&loop_) == 0);
}

int Supervisor::Run() {
  started_at_ms_ = time_.NowMs();
  client_drain_timer_ = time_.CreateTimer([this] { FinishShutdown(); });
  order_timer_ = time_.CreateTimer([this] { AdvanceOrder(); });
  write_batch_.emplace(&loop_);
  Log(write_batch_->setting_unknown() ? LogLevel::kWarning : LogLevel::kInfo, {}, 0,
      write_batch_->how());
  Status status = HandleSignals();
  reexec_wait_ = std::make_unique<ReexecWait>(&loop_, &time_, [this] { AdvanceReexec(); });
  reexec_check_ = std::make_unique<ReexecCheck>(&loop_, &time_, &handles_);
  cgroup_poll_ = std::make_unique<CgroupPoll>(&time_);
  // The file this image runs, before anyone replaces or moves it.
  Result<std::string> running = OwnBinaryPath();
  if (running.ok()) binary_file_ = std::move(running).value();
  binary_file_id_ = FileIdOf("/proc/self/exe");
  if (!adopted_) {
    // The path it was started as, before anyone moves the file aside (a re-exec runs this path),
    // symlinks kept (StartedAsPath).
    Result<std::string> binary = StartedAsPath();
    if (binary.ok()) binary_path_ = std::move(binary).value();
  }
  if (adopted_) {
    // The previous image blocked these across the exec (ExecWithState): handled from here on.
    UnblockReexecSignals();
    started_at_ms_ -= std::min(started_at_ms_, adopted_->uptime_ms);
    reloads_ = adopted_->reloads;
    reexecs_ = adopted_->reexecs + 1;
    access_log_lines_before_ = adopted_->access_log_lines;
    access_log_dropped_before_ = adopted_->access_log_dropped;
    binary_path_ = adopted_->binary;
    if (!reexec_fell_back_.empty()) {
      // Failure 5: status says so until the next re-exec (bulkheadctl reexec reports it).
      reexec_error_ =
          "the new binary could not take the state over, the previous binary runs "
          "again: " +
          reexec_fell_back_;
      LogError("re-exec: " + reexec_error_);
    }
  }

  control_ = std::make_unique<control::ControlServer>(
      &loop_, &time_, [this](const std::string& line, const control::ControlPeer& peer) {
        return HandleControl(line, peer);
      });
  // The runtime_dir lock first: a second instance on the same runtime_dir must not touch the
  // running one's cgroups, sockets or files (not even create its access log).
  if (status.ok()) status = ipc::MakeDirectories(config_.supervisor.runtime_dir, 0755);
  if (status.ok()) {
    Result<RuntimeDirLock> lock =
        adopted_
            ? RuntimeDirLock::Adopt(UniqueFd(adopted_->lock_fd), config_.supervisor.runtime_dir)
            : RuntimeDirLock::Acquire(config_.supervisor.runtime_dir);
    if (lock.ok()) {
      runtime_dir_lock_ = std::move(lock).value();
    } else {
      status = Status::Error("supervisor.runtime_dir: " + lock.status().message());
    }
  }
  if (status.ok() && !config_.supervisor.access_log.empty()) {
    Result<std::unique_ptr<proxy::AccessLog>> log =
        proxy::AccessLog::Open(&loop_, &time_, config_.supervisor.access_log);
    if (log.ok()) {
      access_log_ = std::move(log).value();
      LogInfo("access log: " + config_.supervisor.access_log);
    } else {
      status = Status::Error("supervisor.access_log: " + log.status().message());
    }
  }
  if (status.ok()) status = SetUpCgroups();
  for (const config::CellConfig& cell_config : config_.cells) {
    cells_.push_back(MakeCell(cell_config));
  }

  if (config_.supervisor.metrics_listen) {
    metrics_ = std::make_unique<control::MetricsServer>(&loop_, &time_,
                                                        [this] { return RenderMetrics(); });
  }
  if (status.ok() && adopted_) {
    status = AdoptListeners();
    if (!status.ok()) status = Status::Error("re-exec: " + status.message());
  } else if (status.ok()) {
    status = ListenControl();
    if (metrics_ && status.ok()) status = metrics_->Listen(*config_.supervisor.metrics_listen);
    for (auto& cell : cells_) {
      if (!status.ok()) break;
      status = cell->Bind();
      if (!status.ok()) status = Status::Error("cells." + cell->name() + ": " + status.message());
    }
  }
  if (metrics_ && status.ok()) {
    LogInfo("metrics endpoint: http://" + metrics_->bound_address() + "/metrics");
  }
  if (!status.ok() && adopted_) {
    // Failure 5: nothing was started or stopped yet; the previous binary takes the state back.
    // Past this line it could not (this image is the fallback, or it cannot be run).
    ReexecFallBack(std::move(reexec_fallback_), adopted_->Fds(), status.message());
    takeover_failed_ = true;
  }
  if (!status.ok()) {
    LogError("startup failed: " + status.message());
    notifier_.Status("startup failed: " + status.message());
    exit_code_ = kExitFailure;
    CloseAll();
    uv_run(&loop_, UV_RUN_DEFAULT);
    runtime_dir_lock_.Release();
    return exit_code_;
  }

  SetUpConnectionBudget();
  LogInfo("bulkheadd started: " + std::to_string(cells_.size()) +
          (cells_.size() == 1 ? " cell" : " cells") + ", control socket " +
          config_.supervisor.control_socket);
  if (adopted_) {
    AdoptWorkers();
  } else {
    std::vector<Cell*> all;
    for (auto& cell : cells_) all.push_back(cell.get());
    StartInNeedsOrder(all);
  }
  booted_ = true;
  OnCellStateChanged();
  FollowCgroupPoll();
  uv_run(&loop_, UV_RUN_DEFAULT);
  // Every socket file is removed by now: the next instance may take the runtime_dir.
  runtime_dir_lock_.Release();
  return exit_code_;
}

Status Supervisor::HandleSignals() {
  // SIGUSR1 and SIGUSR2: their default action would end the supervisor and every cell without a
  // word. SIGRTMIN+3 and SIGRTMIN+4: systemd's halt and poweroff requests (systemd(1), "Signals"),
  // which podman's systemd mode and other managers send to a container's PID 1: an orderly
  // shutdown, as SIGTERM.
  for (int signum :
       {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGRTMIN + 3, SIGRTMIN + 4}) {
    Result<uv_signal_t*> handle = handles_.TryOpen(uv_signal_init, &loop_);
    if (!handle.ok()) return Status::Error("uv_signal_init: " + handle.status().message());
    (*handle)->data = this;
    uv_signal_start(*handle, &Supervisor::OnSignal, signum);
  }
  return Status::Ok();
}

Status Supervisor::SetUpCgroups() {
  config::CgroupMode mode = config_.supervisor.cgroup;
  if (mode == config::CgroupMode::kOff) {
    cgroup_note_ = "cgroup = \"off\" in the config";
    return Status::Ok();
  }
  cell::DelegateOptions options;
  // "auto" applies every controller on offer: without memory, pids_max and cpu_max still hold.
  options.require_all_controllers = mode == config::CgroupMode::kRequired;
  options.parent = config_.supervisor.cgroup_parent;
  Result<cell::CgroupTree> tree = cell::CgroupTree::Delegate(options);
  if (tree.ok()) {
    cgroup_tree_.emplace(std::move(tree).value());
    LogInfo("cgroup v2: cells live under " + cgroup_tree_->cells_path());
    std::string missing;
    for (const std::string& controller : cgroup_tree_->missing_controllers()) {
      missing += (missing.empty() ? "" : " ") + controller;
    }
    // Said at the first start, not again by every image a re-exec makes.
    if (!missing.empty() && !adopted_) {
      LogWarning("cgroup controller(s) " + missing + " not available in " +
                 cgroup_tree_->controllers_file() +
                 ": the limits they hold are NOT enforced, the others are. Delegate them, or set "
                 "cgroup = \"required\" to refuse to start without them.");
    }
    return Status::Ok();
  }
  std::string reason = tree.status().message();
  std::string hint =
      CgroupSetupHint(tree.status(), DetectContainer(ReadContainerSigns()), ::geteuid());
  if (!hint.empty()) reason += "; " + hint;
  if (mode == config::CgroupMode::kRequired) {
    return Status::Error("cgroup = \"required\" but limits cannot be enforced: " + reason);
  }
  cgroup_note_ = std::move(reason);
  // Said at the first start, not again by every image a re-exec makes (status keeps saying it).
  if (!adopted_) {
    LogWarning("cell limits (cpu, memory, pids) are NOT enforced: " + cgroup_note_ +
               ". Set cgroup = \"off\" to silence this, or \"required\" to refuse to start.");
  }
  return Status::Ok();
}

void Supervisor::SetUpConnectionBudget() {
  Result<uint64_t> nofile = NofileSoftLimit();
  Result<size_t> open_now = OpenDescriptorCount();
  if (!nofile.ok() || !open_now.ok()) {
    LogWarning("no client connection budget: " +
               (nofile.ok() ? open_now.status() : nofile.status()).message());
    return;
  }
  uint64_t worker_links = 0;
  uint64_t wanted = 0;
  std::vector<uint32_t> max_connections;
  for (const config::CellConfig& c : config_.cells) {
    worker_links += WorkerLinksOf(c);
    wanted += c.max_connections;
    max_connections.push_back(c.max_connections);
  }
  // At a reload, connections already open are part of what the budget covers, not fixed costs.
  uint64_t fixed = *open_now;
  for (const auto& cell : cells_) {
    fixed -= std::min<uint64_t>(fixed, cell->clients() + cell->worker_connections());
  }
  client_budget_ = ClientConnectionBudget(*nofile, fixed, worker_links);
  std::vector<uint32_t> shares = ShareConnectionBudget(client_budget_, max_connections);
  // Every cell gets its share, its whole max_connections when all fit (a reload may have lifted
  // an earlier split).
  for (size_t i = 0; i < cells_.size(); ++i) cells_[i]->SetConnectionShare(shares[i]);
  std::string figures = "RLIMIT_NOFILE " + std::to_string(*nofile) + ", " +
                        std::to_string(*open_now) + " descriptors open, " +
                        std::to_string(worker_links) + " kept for worker connections, " +
                        std::to_string(kDescriptorHeadroom) + " in reserve";
  if (client_budget_ >= wanted) {
    LogInfo("client connection budget: " + std::to_string(client_budget_) + " (" + figures + ")");
    return;
  }
  std::string split;
  for (size_t i = 0; i < cells_.size(); ++i) {
    split += (i == 0 ? "" : ", ") + cells_[i]->name() + " " + std::to_string(shares[i]);
  }
  LogWarning("at most " + std::to_string(client_budget_) + " client connections in all (" +
             figures + "), fewer than the cells' max_connections add up to (" +
             std::to_string(wanted) + "): cells get " + split +
             "; raise the limit (LimitNOFILE=, ulimit -n) to accept more");
}

void Supervisor::OnSignal(uv_signal_t* handle, int signum) {
  auto* self = static_cast<Supervisor*>(handle->data);
  if (signum == SIGRTMIN + 3 || signum == SIGRTMIN + 4) {
    self->BeginShutdown(signum);
    return;
  }
  switch (signum) {
    case SIGCHLD:
      self->ReapChildren();
      break;
    case SIGTERM:
    case SIGINT:
      self->BeginShutdown(signum);
      break;
    case SIGHUP:
      // Reload logs what it did, or why it changed nothing.
      LogInfo("SIGHUP: reloading " + self->config_.source);
      self->Reload();
      break;
    case SIGUSR1:
      LogWarning("SIGUSR1 has no meaning to bulkheadd: ignored");
      break;
    case SIGUSR2:
      // nginx's binary upgrade signal (docs/reexec.md); BeginReexec logs what it did.
      self->BeginReexec("SIGUSR2", std::nullopt);
      break;
  }
}

void Supervisor::ReapChildren() {
  // Every exited child, until none is left: SIGCHLDs coalesce, and as PID 1 or a subreaper
  // (supervisor/init_mode.h) orphans are our children too. A worker's status goes to its cell;
  // anything else is an orphan, reaped and forgotten. (Exec failures are reaped inside Spawn.)
  int reaped = ReapExitedChildren(WaitAnyChild, [this](pid_t pid, int wait_status) {
    if (reexec_check_ && reexec_check_->OnChildExit(pid, wait_status)) return;
    // Looked up at each reap, not from a table built before the loop: OnWorkerExit may start the
    // next worker at once, and that one may exit before this loop ends.
    // Cells a reload retired are still draining: their workers are ours until they exit.
    for (auto* cells : {&cells_, &retiring_}) {
      for (auto& cell : *cells) {
        if (cell->IsWorker(pid)) {
          cell->OnProcessExit(pid, wait_status);
          return;
        }
      }
    }
    Log(LogLevel::kDebug, {}, pid, "reaped orphan: " + cell::DescribeWaitStatus(wait_status));
  });
  if (reaped < 0) LogError(Status::FromErrno("waitpid", -reaped).message());
  if (reaped > 0) NotifyReexec();  // a worker reaped may be what a settling re-exec waits for
}

void Supervisor::BeginShutdown(int signum) {
  if (shutting_down_) return;
  shutting_down_ = true;
  const char* name = signum == SIGINT         ? "SIGINT"
                     : signum == SIGRTMIN + 3 ? "SIGRTMIN+3 (halt)"
                     : signum == SIGRTMIN + 4 ? "SIGRTMIN+4 (poweroff)"
                                              : "SIGTERM";
  LogInfo(std::string("received ") + name + ": stopping every cell");
  if (reexec_phase_ == ReexecPhase::kChecking) {
    LogInfo("re-exec dropped: bulkheadd is shutting down");
    reexec_check_->Cancel();
    SetReexecPhase(ReexecPhase::kIdle);
  }
  if (reexec_phase_ == ReexecPhase::kSettling) {
    LogInfo("re-exec dropped: bulkheadd is shutting down");
    SetReexecPhase(ReexecPhase::kIdle);
  }
  if (reexec_phase_ == ReexecPhase::kDraining || reexec_phase_ == ReexecPhase::kClosingLog) {
    // The shutdown wins: the re-exec is dropped, the cells accept again to answer as they stop
    // (an access log closing opens again once closed: ReopenAccessLog).
    LogInfo("re-exec dropped: bulkheadd is shutting down");
    SetReexecPhase(ReexecPhase::kIdle);
    for (auto& cell : cells_) cell->ResumeAccept();
  }
  notifier_.Stopping();
  FollowCgroupPoll();
  uint64_t longest_stop_ms = 0;
  for (auto& cell : cells_) longest_stop_ms = std::max(longest_stop_ms, cell->stop_timeout_ms());
  client_drain_deadline_ms_ = time_.NowMs() + longest_stop_ms;
  cells_running_ = static_cast<int>(cells_.size());
  if (cells_running_ == 0) {
    MaybeFinishShutdown();
    return;
  }
  // A held start is dropped (the cell has no worker); every cell stops once no cell that needs
  // it is left running (AdvanceOrder), unrelated cells together.
  for (auto& cell : cells_) cell->set_order_step(OrderStep::kStopHeld);
  AdvanceOrder();
}

std::vector<OrderNode> Supervisor::OrderNodes() const {
  std::vector<OrderNode> nodes;
  nodes.reserve(cells_.size());
  for (const auto& cell : cells_) {
    nodes.push_back({cell->name(), ConfigOf(cell->name()).needs, cell->state(), cell->order_step(),
                     cell->next_start_at_ms()});
  }
  return nodes;
}

void Supervisor::StartInNeedsOrder(std::span<Cell* const> cells) {
  std::vector<size_t> among;
  for (size_t i = 0; i < cells_.size(); ++i) {
    if (std::find(cells.begin(), cells.end(), cells_[i].get()) != cells.end()) among.push_back(i);
  }
  const std::vector<OrderNode> nodes = OrderNodes();
  for (size_t i : NeedsFirst(nodes, among)) RequestStart(*cells_[i], /*restart=*/false);
}

std::string Supervisor::RequestStart(Cell& cell, bool restart) {
  using State = lifecycle::Lifecycle::State;
  if (cell.order_step() == OrderStep::kWaitingToStart) return "ok";
  if (cell.state() == State::kStopped || cell.state() == State::kFailed) {
    const std::vector<OrderNode> nodes = OrderNodes();
    size_t index = 0;
    while (cells_[index].get() != &cell) ++index;
    const std::vector<UnreadyNeed> unready = UnreadyNeeds(nodes, index);
    if (!unready.empty()) {
      cell.set_order_step(OrderStep::kWaitingToStart);
      Log(LogLevel::kInfo, cell.name(), 0, "start waits for " + DescribeUnready(unready));
      ScheduleOrder();  // AdvanceOrder tells whether it is stuck
      return "ok";
    }
  }
  return restart ? cell.Restart() : cell.Start();
}

void Supervisor::ScheduleOrder() {
  if (!order_timer_ || order_timer_->armed()) return;
  const bool held = std::any_of(cells_.begin(), cells_.end(), [](const std::unique_ptr<Cell>& c) {
    return c->order_step() == OrderStep::kWaitingToStart || c->order_step() == OrderStep::kStopHeld;
  });
  if (held) order_timer_->Start(0);
}

void Supervisor::AdvanceOrder() {
  // The nodes view the cells: pick first, then feed the cells their events.
  const std::vector<OrderNode> nodes = OrderNodes();
  std::vector<Cell*> to_start;
  std::vector<Cell*> to_stop;
  for (size_t i : CellsToStart(nodes)) to_start.push_back(cells_[i].get());
  if (shutting_down_) {
    for (size_t i : CellsToStop(nodes)) to_stop.push_back(cells_[i].get());
  }
  for (Cell* cell : to_start) {
    cell->set_order_step(OrderStep::kFree);
    // A reload may have taken its needs away while it was held.
    Log(LogLevel::kInfo, cell->name(), 0,
        ConfigOf(cell->name()).needs.empty() ? "it needs no cell any more: starting"
                                             : "every cell it needs is running: starting");
    cell->Start();
  }
  // What each start still held waits for, once this round's starts went out: stuck behind a cell
  // that does not start by itself, or on its way, at its needs' next start when one is in backoff
  // (what its callers are told).
  const std::vector<OrderNode> held = OrderNodes();
  for (size_t i = 0; i < cells_.size(); ++i) {
    if (cells_[i]->order_step() != OrderStep::kWaitingToStart) continue;
    cells_[i]->set_held_start(HeldStartOf(held, cells_[i]->name()));
  }
  for (Cell* cell : to_stop) {
    cell->set_order_step(OrderStep::kStopAsked);
    cell->Stop([this, cell] {
      cell->set_order_step(OrderStep::kStopped);
      ScheduleOrder();
      if (--cells_running_ == 0) MaybeFinishShutdown();
    });
  }
}

void Supervisor::MaybeFinishShutdown() {
  // Cells a reload removed may still be draining: their workers are reaped through SIGCHLD, which
  // stays handled until every one has stopped.
  if (shutting_down_ && cells_running_ == 0 && retiring_stopping_ == 0) FinishShutdown();
}

void Supervisor::FinishShutdown() {
  // Answers already made are part of the drain (as HAProxy's soft stop and Envoy's drain let
  // open connections finish): a client still reading its answers gets until the deadline.
  uint64_t unsent = 0;
  for (auto& cell : cells_) unsent += cell->unsent_bytes();
  const uint64_t now = time_.NowMs();
  if (unsent > 0 && now < client_drain_deadline_ms_) {
    if (!draining_clients_) {
      draining_clients_ = true;
      LogInfo("every cell stopped; waiting up to " +
              std::to_string(client_drain_deadline_ms_ - now) + " ms for clients to read " +
              std::to_string(unsent) + " bytes of answers");
    }
    client_drain_timer_->Start(kClientDrainPollMs);
    return;
  }
  if (unsent > 0) {
    LogWarning(std::to_string(unsent) +
               " bytes of answers unread by clients at the stop deadline: " +
               "their connections close (counted undelivered)");
  }
  exit_code_ = kExitOk;
  // Told once every handle closed: the access log's close tells what its grace cost first.
  CloseAll("every cell stopped; exiting");
}

void Supervisor::CloseAll(std::string closed_message) {
  for (auto& cell : cells_) cell->DisconnectClients();
  for (auto& cell : cells_) cell->CloseHandles(handles_.Part());
  control_->Close(handles_.Part());
  if (metrics_) metrics_->Close(handles_.Part());
  write_batch_->Close(handles_.Part());
  if (access_log_ && access_log_closing_) {
    access_log_part_ = handles_.Part();  // run when the re-exec's close of the log ends
  } else if (access_log_) {
    access_log_->Close(handles_.Part());
  }
  client_drain_timer_.reset();
  order_timer_.reset();
  if (reexec_wait_) reexec_wait_->Close(handles_.Part());
  if (reexec_check_) reexec_check_->Cancel();
  reexec_check_.reset();
  cgroup_poll_.reset();
  // The signal handles close with the rest.
  handles_.Close([this, closed_message = std::move(closed_message)] {
    cells_.clear();
    control_.reset();
    metrics_.reset();
    access_log_.reset();
    if (!closed_message.empty()) LogInfo(closed_message);
  });
}

void Supervisor::FollowCgroupPoll() {
  std::vector<CgroupPoll::Polled*> polled;
  polled.reserve(cells_.size());
  for (auto& cell : cells_) polled.push_back(cell.get());
  cgroup_poll_->Follow(polled, cgroup_tree_.has_value(), shutting_down_);
}

void Supervisor::OnCellStateChanged() {
  NotifyReexec();
  if (!booted_) return;
  ScheduleOrder();
  // A reload's new worker that runs is in force: a later crash of it is no reason to restart the
  // cell at the next reload (NotTakenOver).
  std::erase_if(reload_starts_, [this](const auto& entry) {
    const Cell* cell = FindCell(entry.first);
    return cell != nullptr && TookOver(*cell, entry.second);
  });
  std::vector<lifecycle::Lifecycle::State> states;
  states.reserve(cells_.size());
  for (const auto& cell : cells_) states.push_back(cell->state());
  // A cell whose first start waits for the cells it needs has not left starting either.
  bool starting = false;
  for (const auto& cell : cells_) {
    starting |= cell->state() == lifecycle::Lifecycle::State::kStarting ||
                cell->order_step() == OrderStep::kWaitingToStart;
  }
  std::string summary = DescribeCellStates(states);
  notifier_.Status(summary);
  if (!ready_sent_ && !starting && !shutting_down_) {
    ready_sent_ = true;
    notifier_.Ready();
    if (notifier_.enabled()) LogInfo("READY=1 sent to the service manager: " + summary);
  }
}

const config::CellConfig& Supervisor::CellNamed(const config::Config& config,
                                                const std::string& name) {
  for (const config::CellConfig& c : config.cells) {
    if (c.name == name) return c;
  }
  BH_CHECK(false);
  return config.cells.front();
}

const config::CellConfig& Supervisor::ConfigOf(const std::string& name) const {
  return CellNamed(config_, name);
}

std::vector<control::CellSnapshot> Supervisor::Snapshots() const {
  std::vector<control::CellSnapshot> snapshots;
  snapshots.reserve(cells_.size());
  const std::vector<OrderNode> nodes = OrderNodes();
  for (size_t i = 0; i < cells_.size(); ++i) {
    snapshots.push_back(cells_[i]->Snapshot());
    if (cells_[i]->order_step() != OrderStep::kWaitingToStart) continue;
    for (const UnreadyNeed& need : UnreadyNeeds(nodes, i)) {
      std::string held_by = need.held ? IdleCellBehind(nodes, need.cell) : "";
      snapshots.back().waiting_for.push_back(
          {need.cell, UnreadyStateName(need), 0, std::move(held_by)});
    }
  }
  // A need in backoff says when it starts next (`bulkheadctl start` of the held cell shows it).
  for (control::CellSnapshot& snapshot : snapshots) {
    for (control::CellSnapshot::Need& need : snapshot.waiting_for) {
      auto it =
          std::find_if(snapshots.begin(), snapshots.end(),
                       [&need](const control::CellSnapshot& s) { return s.name == need.cell; });
      if (it != snapshots.end()) need.next_start_in_ms = it->next_start_in_ms;
    }
  }
  return snapshots;
}

std::string Supervisor::RenderMetrics() const {
  control::AccessLogCounts access_log;
  if (access_log_) {
    access_log.open = true;
    access_log.lines = access_log_lines_before_ + access_log_->lines();
    access_log.dropped = access_log_dropped_before_ + access_log_->dropped();
  }
  return control::MetricsText(Snapshots(), reloads_, access_log);
}

std::string Supervisor::HandleControl(const std::string& request_line) {
  return HandleControl(request_line, control::SelfAsPeer());
}

std::string Supervisor::HandleControl(const std::string& request_line,
                                      const control::ControlPeer& peer) {
  return commands_.Handle(request_line, peer);
}

control::CommandHandlers Supervisor::ControlHandlers() {
  control::CommandHandlers handlers;
  handlers.status = [this](const control::CommandCall& call) { return StatusControl(call.cell); };
  handlers.metrics = [this](const control::CommandCall&) {
    return nlohmann::json({{"ok", true},
                           {"content_type", control::kMetricsContentType},
                           {"text", RenderMetrics()}})
        .dump();
  };
  handlers.logs = [this](const control::CommandCall& call) {
    return LogsResponse(call.request, call.cell, cell_logs_);
  };
  handlers.reload = [this](const control::CommandCall&) { return ReloadControl(); };
  handlers.reexec = [this](const control::CommandCall& call) {
    return ReexecControl(call.request);
  };
  handlers.start = handlers.stop = handlers.restart = [this](const control::CommandCall& call) {
    return CellCommandControl(call.row.name, call.cell);
  };
  return handlers;
}

std::vector<std::string> Supervisor::CellNames() const {
  std::vector<std::string> names;
  names.reserve(cells_.size());
  for (const std::unique_ptr<Cell>& cell : cells_) names.push_back(cell->name());
  return names;
}

std::string Supervisor::StatusControl(const std::string& only) {
  nlohmann::json cells = nlohmann::json::array();
  for (const control::CellSnapshot& snapshot : Snapshots()) {
    if (!only.empty() && snapshot.name != only) continue;
    cells.push_back(control::CellStatusJson(snapshot, ConfigOf(snapshot.name)));
  }
  uint64_t client_connections = 0;
  for (auto& cell : cells_) client_connections += cell->clients();
  // What a re-exec executes (a symlink's path as started).
  const Result<std::string> binary = ReexecBinaryPath();
  nlohmann::json response = {
      {"ok", true},
      {"supervisor",
       {{"pid", ::getpid()},
        {"version", std::string(Version())},
        {"uptime_ms", time_.NowMs() - started_at_ms_},
        {"config", config_.source},
        {"live_requests", pool_.live()},
        {"max_payload_bytes", config_.supervisor.max_payload_bytes},
        {"metrics_listen",
         metrics_ ? nlohmann::json(metrics_->bound_address()) : nlohmann::json(nullptr)},
        {"client_connections", client_connections},
        {"client_connection_budget", client_budget_},
        {"reexec",
         {{"phase", ReexecPhaseName(reexec_phase_)},
          {"count", reexecs_},
          {"binary", binary.ok() ? binary.value() : std::string()},
          {"binary_file", binary_file_},
          {"binary_replaced", BinaryReplaced()},
          // What a settling waits for, each "cells.NAME: why" (empty in any other phase).
          {"waiting_for", reexec_phase_ == ReexecPhase::kSettling
                              ? nlohmann::json(ReexecWaitingFor())
                              : nlohmann::json::array()},
          // The most it may still last before bulkheadd ends it (`reexec --join` waits it).
          {"ends_within_ms", ReexecEndsWithin()},
          {"last_error",
           reexec_error_.empty() ? nlohmann::json(nullptr) : nlohmann::json(reexec_error_)}}}}},
      {"cells", cells},
  };
  return response.dump();
}

std::string Supervisor::CellCommandControl(std::string_view command, const std::string& name) {
  for (auto& cell : cells_) {
    if (cell->name() != name) continue;
    if (shutting_down_) return control::CommandError("bulkheadd is shutting down");
    std::string answer;
    if (command == "stop") {
      // A held start is withdrawn: the cell has no worker, and stays stopped.
      const bool held = cell->order_step() == OrderStep::kWaitingToStart;
      cell->set_order_step(OrderStep::kFree);
      answer = held ? "ok" : cell->Stop(nullptr);
      if (held) OnCellStateChanged();
    } else {
      answer = RequestStart(*cell, /*restart=*/command == "restart");
    }
    bool accepted = answer == "ok";
    nlohmann::json response = {{"ok", accepted}, {"cell", cell->name()}, {"result", answer}};
    if (!accepted) response["error"] = answer;
    return response.dump();
  }
  return control::CommandError("no cell named " + name);
}

// --- Re-exec (docs/reexec.md). ---

std::string Supervisor::ReexecControl(const nlohmann::json& request) {
  const uint64_t count = reexecs_;
  std::optional<uint64_t> settle_timeout_ms;
  if (auto it = request.find("settle_timeout_ms"); it != request.end()) {
    // At most a day, as bulkheadctl's durations: a larger one would overflow the deadline.
    if (!it->is_number_unsigned() || it->get<uint64_t>() > kReexecSettleMostMs) {
      return control::CommandError("\"settle_timeout_ms\" must be an unsigned integer, at most " +
                                   std::to_string(kReexecSettleMostMs));
    }
    settle_timeout_ms = it->get<uint64_t>();
  }
  std::string refused = BeginReexec("bulkheadctl reexec", settle_timeout_ms);
  if (!refused.empty()) return control::CommandError(refused);
  // The answer goes out before the exec closes this connection: the caller waits for a status
  // whose reexec.count passed `count` (or whose last_error says why the exec failed), at most
  // the settling's bound longer than a re-exec that did not wait for its cells.
  const uint64_t settle_ms = reexec_settle_deadline_ms_ - reexec_settle_started_ms_;
  return nlohmann::json({{"ok", true},
                         {"result", "re-executing"},
                         {"binary", reexec_binary_},
                         {"pid", ::getpid()},
                         {"count", count},
                         {"settle_timeout_ms", settle_ms}})
      .dump();
}

std::string Supervisor::ReexecRefused() {
  if (shutting_down_) return "bulkheadd is shutting down";
  // The new image reads the config file again: it must be the one in force.
  config::LoadResult loaded = config::LoadConfigFile(config_.source);
  if (!loaded.config) {
    return "the new image reads " + config_.source +
           " again, and it is refused now: " + loaded.errors.front().ToString();
  }
  // --log-level wins over the file's, as at a reload; the new image is given it again (same
  // arguments).
  if (!pinned_log_level_.empty()) loaded.config->supervisor.log_level = pinned_log_level_;
  const control::ReloadPlan plan = control::PlanReload(config_, *loaded.config);
  if (!plan.errors.empty()) {
    // A change that a reload refuses as well: its own text says what to do instead.
    return "the new image reads " + config_.source +
           " again, and it differs from the config in force by a change a reload refuses too: " +
           plan.errors.front() + " (put the file back to re-execute)";
  }
  if (plan.log_level_changed) {
    // Live by reload; the new image would take it without one, unlogged.
    return "the new image reads " + config_.source +
           " again, and it differs from the config in force: supervisor.log_level changed "
           "(reload first)";
  }
  for (const control::CellPlan& cell : plan.cells) {
    if (cell.action == control::CellPlan::Action::kUnchanged) continue;
    return "the new image reads " + config_.source +
           " again, and it differs from the config in force: cells." + cell.name + " " +
           control::CellActionName(cell.action) + " (reload first)";
  }
  return "";
}

std::vector<std::string> Supervisor::ReexecWaitingFor() const {
  std::vector<std::string> waiting;
  if (!retiring_.empty()) waiting.emplace_back("cells removed by a reload are still draining");
  for (const auto& cell : cells_) {
    if (std::string blocker = cell->ReexecBlocker(); !blocker.empty()) {
      waiting.push_back("cells." + cell->name() + ": " + blocker);
    }
  }
  return waiting;
}

nlohmann::json Supervisor::ReexecEndsWithin() const {
  if (reexec_phase_ != ReexecPhase::kSettling && reexec_phase_ != ReexecPhase::kChecking &&
      reexec_phase_ != ReexecPhase::kDraining) {
    return nullptr;
  }
  uint64_t longest_stop_ms = 0;
  for (const auto& cell : cells_) {
    longest_stop_ms = std::max(longest_stop_ms, cell->stop_timeout_ms());
  }
  const bool draining = reexec_phase_ == ReexecPhase::kDraining;
  return ReexecEndsWithinMs(
      {.settle_deadline_ms = reexec_settle_deadline_ms_,
       .checked = reexec_checked_,
       .check_ms = kReexecCheckTimeoutMs,
       .drain_ms = longest_stop_ms,
       .grace_ms = kReexecAnswerGraceMs,
       .drain_deadline_ms = draining ? std::optional<uint64_t>(reexec_deadline_ms_) : std::nullopt,
       .abandoned = draining && reexec_abandoned_},
      time_.NowMs());
}

std::string Supervisor::ReexecUnsettled() const {
  std::vector<std::string> waiting = ReexecWaitingFor();
  return waiting.empty() ? "" : std::move(waiting.front());
}

std::string Supervisor::BeginReexec(std::string_view why,
                                    std::optional<uint64_t> settle_timeout_ms) {
  auto refuse = [&](std::string reason) {
    LogWarning(std::string(why) + ": re-exec refused: " + reason);
    return reason;
  };
  if (shutting_down_) return refuse("bulkheadd is shutting down");
  if (reexec_phase_ != ReexecPhase::kIdle) return refuse("a re-exec is already under way");
  if (std::string refused = ReexecRefused(); !refused.empty()) return refuse(refused);
  Result<std::string> binary = ReexecBinaryPath();
  if (!binary.ok()) return refuse(binary.status().message());
  reexec_binary_ = std::move(binary).value();
  reexec_why_ = std::string(why);
  reexec_error_.clear();
  reexec_checked_ = false;
  reexec_told_reloading_ = false;
  std::vector<SettleTimeouts> timeouts;
  for (const config::CellConfig& c : config_.cells) {
    timeouts.push_back({.start_timeout_ms = static_cast<uint64_t>(c.start_timeout.count()),
                        .stop_timeout_ms = static_cast<uint64_t>(c.stop_timeout.count())});
  }
  reexec_settle_started_ms_ = time_.NowMs();
  reexec_settle_deadline_ms_ =
      reexec_settle_started_ms_ + settle_timeout_ms.value_or(ReexecSettleBoundMs(timeouts));
  if (std::string unsettled = ReexecUnsettled(); !unsettled.empty()) {
    // Every cell serves meanwhile; AdvanceReexec looks again at each change of a cell, until
    // none is unsettled or the bound.
    SetReexecPhase(ReexecPhase::kSettling);
    LogInfo(reexec_why_ + ": the re-exec waits for the cells to settle (at most " +
            std::to_string(reexec_settle_deadline_ms_ - reexec_settle_started_ms_) +
            " ms): " + unsettled);
    return "";
  }
  Status started = StartReexecCheck();
  if (!started.ok()) {
    // Begun (last_error was cleared above): this is how it ended, for status and `reexec --join`.
    reexec_error_ = started.message();
    return refuse(started.message());
  }
  return "";
}

Result<std::string> Supervisor::ReexecBinaryPath() const {
  if (!binary_path_.empty()) return binary_path_;
  return OwnBinaryPath();
}

bool Supervisor::BinaryReplaced() const {
  const Result<std::string> binary = ReexecBinaryPath();
  if (!binary.ok() || !binary_file_id_) return false;
  const std::optional<FileId> on_disk = FileIdOf(binary.value());
  return on_disk && *on_disk != *binary_file_id_;
}

Status Supervisor::StartReexecCheck() {
  Status started =
      reexec_check_->Start(reexec_binary_, ReexecState::kVersion, kReexecCheckTimeoutMs,
                           [this](const Status& readable) { OnReexecChecked(readable); });
  if (started.ok()) SetReexecPhase(ReexecPhase::kChecking);
  return started;
}

void Supervisor::OnReexecChecked(const Status& readable) {
  BH_CHECK(reexec_phase_ == ReexecPhase::kChecking);
  // The cells may have changed while the check ran.
  std::string refused = readable.ok() ? ReexecRefused() : readable.message();
  if (!refused.empty()) {
    ReexecRefusedNow(refused);
    return;
  }
  reexec_checked_ = true;
  if (std::string unsettled = ReexecUnsettled(); !unsettled.empty()) {
    // A cell began to start or stop meanwhile (a crash loop's next start): settled again first,
    // within the same deadline; the binary is not asked again.
    SetReexecPhase(ReexecPhase::kSettling);
    return;
  }
  BeginReexecDrain();
}

void Supervisor::ReexecRefusedNow(const std::string& why) {
  SetReexecPhase(ReexecPhase::kIdle);
  reexec_error_ = why;
  // Refused after a drain that went back to settling: the service manager hears it is over.
  if (reexec_told_reloading_) notifier_.Ready();
  reexec_told_reloading_ = false;
  LogError(reexec_why_ + ": re-exec refused, nothing changed: " + why);
}

void Supervisor::SettleReexec() {
  const std::string unsettled = ReexecUnsettled();
  const SettleStep step = JudgeSettle(unsettled, time_.NowMs(), reexec_settle_started_ms_,
                                      reexec_settle_deadline_ms_);
  switch (step.kind) {
    case SettleStep::Kind::kWait:
      return;  // the next change of a cell, or the bound, looks again
    case SettleStep::Kind::kRefuse:
      ReexecRefusedNow(step.refusal);
      return;
    case SettleStep::Kind::kGoOn:
      break;
  }
  if (std::string refused = ReexecRefused(); !refused.empty()) {
    ReexecRefusedNow(refused);
    return;
  }
  if (reexec_checked_) {
    BeginReexecDrain();
    return;
  }
  LogInfo(reexec_why_ + ": the cells settled, the re-exec goes on");
  Status started = StartReexecCheck();
  if (!started.ok()) ReexecRefusedNow(started.message());
}

void Supervisor::BeginReexecDrain() {
  reexec_abandoned_ = false;
  uint64_t longest_stop_ms = 0;
  for (auto& cell : cells_) longest_stop_ms = std::max(longest_stop_ms, cell->stop_timeout_ms());
  reexec_deadline_ms_ = time_.NowMs() + longest_stop_ms;
  SetReexecPhase(ReexecPhase::kDraining);
  LogInfo(reexec_why_ + ": re-executing " + reexec_binary_ +
          " once no request is in flight (at most " + std::to_string(longest_stop_ms) +
          " ms); new connections wait in the backlog");
  if (ready_sent_ && !reexec_told_reloading_) {
    notifier_.Reloading();
    reexec_told_reloading_ = true;
  }
  for (auto& cell : cells_) cell->PauseAccept();
  // The first look: nothing may be in flight already. Later ones come with the end of each
  // cell's last request (Cell::SetReexecObserver), or at the bound.
  reexec_wait_->Notify();
}

void Supervisor::SetReexecPhase(ReexecPhase phase) {
  reexec_phase_ = phase;
  ArmReexecBound();
}

void Supervisor::ArmReexecBound() {
  if (!reexec_wait_) return;
  std::optional<uint64_t> deadline_ms;
  switch (reexec_phase_) {
    case ReexecPhase::kSettling:
      deadline_ms = reexec_settle_deadline_ms_;
      break;
    case ReexecPhase::kDraining:
      deadline_ms = reexec_deadline_ms_;
      break;
    case ReexecPhase::kIdle:
    case ReexecPhase::kChecking:
    case ReexecPhase::kClosingLog:
    case ReexecPhase::kExecuting:
      break;
  }
  reexec_wait_->SetBound(deadline_ms);
}

void Supervisor::NotifyReexec() {
  // The phase first: no re-exec waits while the cells are closed and destroyed.
  if ((reexec_phase_ == ReexecPhase::kSettling || reexec_phase_ == ReexecPhase::kDraining) &&
      reexec_wait_) {
    reexec_wait_->Notify();
  }
}

void Supervisor::AdvanceReexec() {
  if (reexec_phase_ == ReexecPhase::kSettling) {
    SettleReexec();
    return;
  }
  if (reexec_phase_ != ReexecPhase::kDraining) return;
  uint64_t in_flight = 0;
  for (auto& cell : cells_) in_flight += cell->in_flight() + (cell->unsent_bytes() > 0 ? 1 : 0);
  const uint64_t now = time_.NowMs();
  if (in_flight > 0 && now >= reexec_deadline_ms_ && !reexec_abandoned_) {
    // As a shutdown answers them: queued ones REJECTED unavailable, running ones FAILED. Their
    // answers get kReexecAnswerGraceMs to be written before the exec.
    LogWarning("re-exec: " + std::to_string(in_flight) +
               " request(s) still in flight at the deadline: answered as at a shutdown");
    for (auto& cell : cells_) cell->AbandonInFlight("bulkheadd re-executed before the answer");
    reexec_abandoned_ = true;
    reexec_deadline_ms_ = now + kReexecAnswerGraceMs;
    ArmReexecBound();
    return;  // the answers' last write, or the grace's end, looks again
  }
  // Until the end of the last request (an event) or the bound.
  if (in_flight > 0 && now < reexec_deadline_ms_) return;
  if (std::string unsettled = ReexecUnsettled(); !unsettled.empty()) {
    // A cell began to start or stop during the drain (a crash loop's next start): the cells serve
    // again and the re-exec settles anew, within the deadline set at its request.
    LogInfo(reexec_why_ + ": the drain is over, but the re-exec waits for the cells to settle: " +
            unsettled);
    for (auto& cell : cells_) cell->ResumeAccept();
    SetReexecPhase(ReexecPhase::kSettling);
    SettleReexec();
    return;
  }
  CloseLogAndExec();
}

void Supervisor::CloseLogAndExec() {
  if (!access_log_) {
    ExecNow();
    return;
  }
  SetReexecPhase(ReexecPhase::kClosingLog);
  access_log_closing_ = true;
  access_log_->Close([this] {
    access_log_closing_ = false;
    if (access_log_part_) {
      // CloseAll came meanwhile: this close was its part.
      std::function<void()> part = std::move(access_log_part_);
      part();
      return;
    }
    if (reexec_phase_ == ReexecPhase::kClosingLog) {
      ExecNow();
    } else {
      ReopenAccessLog();  // a shutdown dropped the re-exec: its answers are logged
    }
  });
}

void Supervisor::ReopenAccessLog() {
  Result<std::unique_ptr<proxy::AccessLog>> log =
      proxy::AccessLog::Open(&loop_, &time_, config_.supervisor.access_log);
  if (!log.ok()) {
    // The cells keep the closed log, which drops (and counts) their lines.
    LogError("re-exec: the access log cannot be opened again, its lines are dropped: " +
             log.status().message());
    return;
  }
  for (auto* cells : {&cells_, &retiring_}) {
    for (auto& cell : *cells) cell->SetAccessLog(log->get());
  }
  if (access_log_) {
    // The counters go on from the closed log's.
    access_log_lines_before_ += access_log_->lines();
    access_log_dropped_before_ += access_log_->dropped();
  }
  access_log_ = std::move(log).value();
}

void Supervisor::ExecNow() {
  // A cell may have changed during the drain (a worker crashed, and its restart is starting).
  for (const auto& cell : cells_) {
    if (std::string blocker = cell->ReexecBlocker(); !blocker.empty()) {
      ReexecFailed("at the exec, cells." + cell->name() + ": " + blocker);
      return;
    }
  }
  SetReexecPhase(ReexecPhase::kExecuting);
  ReexecState state;
  state.written_by = std::string(Version());
  state.uptime_ms = time_.NowMs() - started_at_ms_;
  state.reexecs = reexecs_;
  state.binary = binary_path_;
  state.reloads = reloads_;
  state.lock_fd = runtime_dir_lock_.fd();
  if (access_log_) {
    state.access_log_lines = access_log_lines_before_ + access_log_->lines();
    state.access_log_dropped = access_log_dropped_before_ + access_log_->dropped();
  }
  state.listeners.push_back(
      {"control", "", control_->listen_fd(), config_.supervisor.control_socket});
  if (metrics_) {
    Result<std::string> address = SocketAddress(metrics_->listen_fd());
    state.listeners.push_back({"metrics", "", metrics_->listen_fd(), address.ok() ? *address : ""});
    state.metrics_bound = metrics_->bound_address();
  }
  // Held until the exec: their fds are in the state.
  std::vector<std::pair<Cell*, proxy::FrontListener::HeldConnection>> held;
  for (auto& cell : cells_) {
    cell->Capture(&state);
    for (proxy::FrontListener::HeldConnection& connection : cell->TakeHeldConnections()) {
      state.connections.push_back({cell->name(), connection.fd.get(), connection.tcp});
      held.emplace_back(cell.get(), std::move(connection));
    }
  }
  // Control connections between two requests ("cell" empty in the state): a bulkheadctl that
  // sent its request as the exec came gets its answer from the new image.
  std::vector<UniqueFd> control_held = control_->HandOver();
  for (const UniqueFd& fd : control_held) state.connections.push_back({"", fd.get(), false});
  const Status written =
      reexec_hooks_.write_state ? reexec_hooks_.write_state(state) : Status::Ok();
  Result<UniqueFd> memfd =
      written.ok() ? WriteStateMemfd(state.Encode()) : Result<UniqueFd>(written);
  Status status = memfd.ok() ? Status::Ok() : memfd.status();
  Result<std::vector<std::string>> arguments = OwnArguments();
  if (status.ok() && !arguments.ok()) status = arguments.status();
  if (status.ok()) {
    LogInfo("re-exec: exec " + reexec_binary_ + " (" + std::to_string(state.cells.size()) +
            " cells, " + std::to_string(state.connections.size()) +
            " connection(s) waiting to be read)");
    // This binary, run again by the new image if it cannot read the state (failure 5). Without
    // it the exec goes ahead: the new binary claimed our version.
    Result<UniqueFd> fallback = OpenOwnBinary();
    if (!fallback.ok()) LogWarning("re-exec: no fallback: " + fallback.status().message());
    if (reexec_hooks_.before_exec) reexec_hooks_.before_exec(state);
    status = ExecWithState(reexec_binary_, *arguments, memfd->get(), state.Fds(),
                           fallback.ok() ? fallback->get() : -1);
  }
  // Only a failed exec returns: the connections taken out are served here after all.
  for (auto& [cell, connection] : held) cell->AdoptClient(std::move(connection));
  for (UniqueFd& fd : control_held) control_->AdoptConnection(std::move(fd));
  ReexecFailed(status.message());
}

void Supervisor::ReexecFailed(const std::string& why) {
  reexec_error_ = why;
  SetReexecPhase(ReexecPhase::kIdle);
  LogError("re-exec failed, this bulkheadd goes on serving: " + why);
  if (access_log_) ReopenAccessLog();  // CloseLogAndExec closed it
  for (auto& cell : cells_) cell->ResumeAccept();
  if (ready_sent_) notifier_.Ready();
}

Status Supervisor::ListenControl() {
  ipc::SocketAccess access;
  access.mode = config_.supervisor.control_socket_mode;
  access.group = config_.supervisor.control_socket_group;
  return control_->Listen(config_.supervisor.control_socket, access);
}

Status Supervisor::AdoptListeners() {
  const ReexecState& state = *adopted_;
  auto find = [&state](std::string_view role, const std::string& cell) {
    std::vector<const ReexecState::Listener*> found;
    for (const ReexecState::Listener& listener : state.listeners) {
      if (listener.role == role && listener.cell == cell) found.push_back(&listener);
    }
    return found;
  };
  // The one socket of `role`, bound where `address` says ("" : wherever the state says).
  auto take = [&find](std::string_view role, const std::string& cell, const std::string& address,
                      const std::string& also = "") -> Result<UniqueFd> {
    std::vector<const ReexecState::Listener*> found = find(role, cell);
    if (found.size() != 1) {
      return Status::Error(std::string(cell.empty() ? "" : "cells." + cell + ": ") + "no single " +
                           std::string(role) + " socket in the state");
    }
    Result<UniqueFd> fd = TakeListeningFd(found.front()->fd,
                                          address.empty() ? found.front()->address : address, also);
    if (!fd.ok()) {
      return Status::Error(std::string(role) + " socket: " + fd.status().message());
    }
    return fd;
  };
  // Failure 6 for the control and metrics sockets: one that is not the socket the state names
  // is bound afresh where the config says, as at a start (a stale socket file is reclaimed),
  // logged at error. The fd is left open as it is, with FD_CLOEXEC set. A state without the
  // socket at all is failure 5, as it is for a cell's.
  auto rebind = [&find](std::string_view role, const Status& why) {
    for (const ReexecState::Listener* listener : find(role, "")) (void)SetCloexec(listener->fd);
    LogError("re-exec: " + why.message() +
             ": bound afresh (connections waiting on the old socket are lost)");
  };
  Status status = Status::Ok();
  if (find("control", "").size() != 1) {
    return Status::Error("no single control socket in the state");
  }
  if (Result<UniqueFd> control = take("control", "", config_.supervisor.control_socket);
      control.ok()) {
    status = control_->Adopt(std::move(control).value(), config_.supervisor.control_socket);
  } else {
    rebind("control", control.status());
    status = ListenControl();
  }
  if (!status.ok()) return status;
  if (metrics_) {
    if (find("metrics", "").size() != 1) {
      return Status::Error("no single metrics socket in the state");
    }
    if (Result<UniqueFd> metrics = take("metrics", "", ""); metrics.ok()) {
      status = metrics_->Adopt(std::move(metrics).value(), *config_.supervisor.metrics_listen,
                               state.metrics_bound);
    } else {
      rebind("metrics", metrics.status());
      status = metrics_->Listen(*config_.supervisor.metrics_listen);
    }
    if (!status.ok()) return status;
  }
  for (auto& cell : cells_) {
    const config::CellConfig& c = ConfigOf(cell->name());
    auto entry = std::find_if(state.cells.begin(), state.cells.end(),
                              [&c](const ReexecState::Cell& e) { return e.name == c.name; });
    if (entry == state.cells.end()) {
      // Not in the previous image (the check before the exec refuses this): bound afresh.
      status = cell->Bind();
    } else {
      // Failure 6: a client-facing listener (front, listen) that is not the socket the state
      // names is bound afresh by the cell (an empty fd), logged at error; its worker is still
      // adopted. The fd is left open as it is (this image may have opened it since), with
      // FD_CLOEXEC set so that no worker inherits it.
      auto afresh = [&c](const std::vector<const ReexecState::Listener*>& named,
                         const Status& why) -> Result<UniqueFd> {
        for (const ReexecState::Listener* listener : named) (void)SetCloexec(listener->fd);
        Log(LogLevel::kError, c.name, 0,
            "re-exec: " + why.message() +
                ": bound afresh (connections waiting on the old socket are lost)");
        return UniqueFd();
      };
      Result<UniqueFd> front = take("front", c.name, c.socket);
      if (!front.ok()) front = afresh(find("front", c.name), front.status());
      // After an overlapping restart the worker socket is the one its swap bound at the next
      // path and renamed into place.
      Result<UniqueFd> worker =
          take("worker", c.name, c.worker_socket, lifecycle::NextSocketPath(c.worker_socket));
      Result<UniqueFd> notify = take("notify", c.name, c.notify_socket);
      std::vector<UniqueFd> tcp;
      for (const ReexecState::Listener* listener : find("listen", c.name)) {
        Result<UniqueFd> fd = TakeListeningFd(listener->fd, listener->address);
        if (!fd.ok())
          fd = afresh({listener}, Status::Error("listen socket: " + fd.status().message()));
        tcp.push_back(std::move(fd).value());
      }
      for (const Result<UniqueFd>* fd : {&front, &worker, &notify}) {
        if (status.ok() && !fd->ok()) status = fd->status();
      }
      if (status.ok() && tcp.size() != c.listen.size()) {
        status = Status::Error("the state has " + std::to_string(tcp.size()) +
                               " listen socket(s), the config " + std::to_string(c.listen.size()));
      }
      if (status.ok()) {
        status = cell->Adopt(*entry, std::move(front).value(), std::move(tcp),
                             std::move(worker).value(), std::move(notify).value());
      } else {
        // Failure 5: the previous binary takes the state back (ReexecFallBack), so what was
        // taken of this cell stays open: closed here, its fd numbers would name nothing there.
        for (Result<UniqueFd>* fd : {&front, &worker, &notify}) {
          if (fd->ok()) (void)(*fd)->Release();
        }
        for (UniqueFd& fd : tcp) (void)fd.Release();
      }
    }
    if (!status.ok()) return Status::Error("cells." + cell->name() + ": " + status.message());
  }
  return Status::Ok();
}

void Supervisor::AdoptWorkers() {
  ReexecState state = std::move(*adopted_);
  adopted_.reset();
  // Taken over from here on: no way back to the previous binary.
  reexec_fallback_ = {};
  // Starts held for the cells they need, asked again once every cell is taken over: each then
  // waits for its needs as they are here (or starts at once when they run by now).
  std::vector<Cell*> held;
  for (auto& cell : cells_) {
    auto entry =
        std::find_if(state.cells.begin(), state.cells.end(),
                     [&cell](const ReexecState::Cell& e) { return e.name == cell->name(); });
    if (entry == state.cells.end()) {
      RequestStart(*cell, /*restart=*/false);
      continue;
    }
    if (entry->start_held && !entry->worker) held.push_back(cell.get());
    UniqueFd out;
    UniqueFd err;
    if (entry->worker) {
      for (auto [fd, into] :
           {std::pair{entry->worker->stdout_fd, &out}, std::pair{entry->worker->stderr_fd, &err}}) {
        if (fd >= 0 && SetCloexec(fd).ok()) into->Reset(fd);
      }
    }
    Status adopted = entry->worker && reexec_hooks_.adopt_worker
                         ? reexec_hooks_.adopt_worker(*entry)
                         : Status::Ok();
    if (adopted.ok()) adopted = cell->AdoptWorker(*entry, std::move(out), std::move(err));
    if (!adopted.ok()) {
      // Failure 6: it cannot be this cell's worker. It goes (with what it forked: its process
      // group; reaped as an orphan), and the cell starts afresh with its counts carried.
      Log(LogLevel::kError, cell->name(), entry->worker->pid,
          "re-exec: worker not adopted, killed and started afresh: " + adopted.message());
      ::kill(-entry->worker->pgid, SIGKILL);
      ReexecState::Cell stopped = *entry;
      stopped.worker.reset();
      stopped.state = "stopped";
      (void)cell->AdoptWorker(stopped, UniqueFd(), UniqueFd());
      RequestStart(*cell, /*restart=*/false);
    }
  }
  StartInNeedsOrder(held);
  size_t connections = 0;
  for (const ReexecState::Connection& connection : state.connections) {
    if (connection.cell.empty() && SetCloexec(connection.fd).ok()) {
      control_->AdoptConnection(UniqueFd(connection.fd));
      continue;
    }
    Cell* cell = FindCell(connection.cell);
    if (cell == nullptr || !SetCloexec(connection.fd).ok()) {
      ::close(connection.fd);
      continue;
    }
    cell->AdoptClient({UniqueFd(connection.fd), connection.tcp});
    ++connections;
  }
  // The bench (bench/restart_bench.cc) finds "re-executed (re-exec N" in this line.
  LogInfo("re-executed (re-exec " + std::to_string(reexecs_) + ", state written by bulkheadd " +
          state.written_by + ", binary " +
          (binary_file_.empty() ? std::string("?") : binary_file_) +
          "): " + std::to_string(state.cells.size()) + " cells and " + std::to_string(connections) +
          " waiting connection(s) taken over");
  // A worker that exited during the exec is a zombie whose SIGCHLD came before our handler:
  // reaped now that the cells know their workers.
  ReapChildren();
}

}  // namespace bulkhead::supervisor
