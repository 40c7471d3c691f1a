// SPDX-License-Identifier: MIT
#include "supervisor/supervisor.h"

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
#include "supervisor/runtime_dir_lock.h"

namespace bulkhead::supervisor {

namespace {

// How often the end of a shutdown looks again whether the clients have read their answers.
constexpr uint64_t kClientDrainPollMs = 20;

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

  control_ = std::make_unique<control::ControlServer>(
      &loop_, &time_, [this](const std::string& line, const control::ControlPeer& peer) {
        return HandleControl(line, peer);
      });
  // The runtime_dir lock first: a second instance on the same runtime_dir must not touch the
  // running one's cgroups, sockets or files (not even create its access log).
  if (status.ok()) status = ipc::MakeDirectories(config_.supervisor.runtime_dir, 0755);
  if (status.ok()) {
    Result<RuntimeDirLock> lock = RuntimeDirLock::Acquire(config_.supervisor.runtime_dir);
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

  if (status.ok()) {
    ipc::SocketAccess control_access;
    control_access.mode = config_.supervisor.control_socket_mode;
    control_access.group = config_.supervisor.control_socket_group;
    status = control_->Listen(config_.supervisor.control_socket, control_access);
  }
  if (config_.supervisor.metrics_listen) {
    metrics_ = std::make_unique<control::MetricsServer>(&loop_, &time_,
                                                        [this] { return RenderMetrics(); });
    if (status.ok()) status = metrics_->Listen(*config_.supervisor.metrics_listen);
    if (status.ok()) LogInfo("metrics endpoint: http://" + metrics_->bound_address() + "/metrics");
  }
  for (auto& cell : cells_) {
    if (!status.ok()) break;
    status = cell->Bind();
    if (!status.ok()) status = Status::Error("cells." + cell->name() + ": " + status.message());
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
  std::vector<Cell*> all;
  for (auto& cell : cells_) all.push_back(cell.get());
  StartInNeedsOrder(all);
  booted_ = true;
  OnCellStateChanged();
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
    if (!missing.empty()) {
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
  LogWarning("cell limits (cpu, memory, pids) are NOT enforced: " + cgroup_note_ +
             ". Set cgroup = \"off\" to silence this, or \"required\" to refuse to start.");
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
    case SIGUSR2:
      LogWarning(std::string(signum == SIGUSR1 ? "SIGUSR1" : "SIGUSR2") +
                 " has no meaning to bulkheadd: ignored");
      break;
  }
}

void Supervisor::ReapChildren() {
  // Every exited child, until none is left: SIGCHLDs coalesce, and as PID 1 or a subreaper
  // (supervisor/init_mode.h) orphans are our children too. A worker's status goes to its cell;
  // anything else is an orphan, reaped and forgotten. (Exec failures are reaped inside Spawn.)
  int reaped = ReapExitedChildren(WaitAnyChild, [this](pid_t pid, int wait_status) {
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
}

void Supervisor::BeginShutdown(int signum) {
  if (shutting_down_) return;
  shutting_down_ = true;
  const char* name = signum == SIGINT         ? "SIGINT"
                     : signum == SIGRTMIN + 3 ? "SIGRTMIN+3 (halt)"
                     : signum == SIGRTMIN + 4 ? "SIGRTMIN+4 (poweroff)"
                                              : "SIGTERM";
  LogInfo(std::string("received ") + name + ": stopping every cell");
  notifier_.Stopping();
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
    nodes.push_back(
        {cell->name(), ConfigOf(cell->name()).needs, cell->state(), cell->order_step()});
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
    Log(LogLevel::kInfo, cell->name(), 0, "every cell it needs is running: starting");
    cell->Start();
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
  LogInfo("every cell stopped; exiting");
  exit_code_ = kExitOk;
  CloseAll();
}

void Supervisor::CloseAll() {
  for (auto& cell : cells_) cell->DisconnectClients();
  for (auto& cell : cells_) cell->CloseHandles(handles_.Part());
  control_->Close(handles_.Part());
  if (metrics_) metrics_->Close(handles_.Part());
  write_batch_->Close(handles_.Part());
  if (access_log_) access_log_->Close(handles_.Part());
  client_drain_timer_.reset();
  order_timer_.reset();
  // The signal handles close with the rest.
  handles_.Close([this] {
    cells_.clear();
    control_.reset();
    metrics_.reset();
    access_log_.reset();
  });
}

void Supervisor::OnCellStateChanged() {
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
    access_log.lines = access_log_->lines();
    access_log.dropped = access_log_->dropped();
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
        {"client_connection_budget", client_budget_}}},
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

}  // namespace bulkhead::supervisor
