// SPDX-License-Identifier: MIT
#include "supervisor/supervisor.h"

#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "base/check.h"
#include "base/exit_status.h"
#include "base/log.h"
#include "ipc/frame.h"
#include "supervisor/listen_socket.h"

namespace bulkhead::supervisor {

namespace {

nlohmann::json PolicyJson(const config::CellConfig& c) {
  auto ms = [](std::chrono::milliseconds d) { return static_cast<uint64_t>(d.count()); };
  const char* restart = c.restart == config::RestartMode::kAlways      ? "always"
                        : c.restart == config::RestartMode::kOnFailure ? "on-failure"
                                                                       : "never";
  return {
      {"restart", restart},
      {"restart_delay_ms", ms(c.restart_delay)},
      {"restart_max_delay_ms", ms(c.restart_max_delay)},
      {"restart_reset_after_ms", ms(c.restart_reset_after)},
      {"start_limit_burst", c.start_limit_burst},
      {"start_limit_interval_ms", ms(c.start_limit_interval)},
      {"request_timeout_ms", ms(c.request_timeout)},
      {"stall_timeout_ms", ms(c.stall_timeout)},
      {"ready", c.ready == config::ReadyMode::kNotify ? "notify" : "exec"},
      {"watchdog_ms", ms(c.watchdog)},
      {"stop_signal", c.stop_signal},
      {"stop_timeout_ms", ms(c.stop_timeout)},
  };
}

nlohmann::json SnapshotJson(const CellSnapshot& s) {
  const CellCounters& c = s.counters;
  nlohmann::json j = {
      {"name", s.name},
      {"state", Lifecycle::StateName(s.state)},
      {"state_since_ms", s.state_since_ms},
      {"pid", s.pid == 0 ? nlohmann::json(nullptr) : nlohmann::json(s.pid)},
      {"socket", s.socket},
      {"worker_socket", s.worker_socket},
      {"max_concurrent", s.limits.max_concurrent},
      {"running", s.running},
      {"max_queue", s.limits.max_queue},
      {"queued", s.queued},
      {"queue_timeout_ms", s.limits.queue_timeout_ms},
      {"clients", s.clients},
      {"max_connections", s.max_connections},
      {"connection_limit", s.connection_limit},
      {"connections_refused", c.refused_connections},
      {"worker_connections", s.worker_connections},
      {"ok", c.ok},
      {"rejected", c.rejected()},
      {"failed", c.failed()},
      {"cancelled", c.cancelled},
      {"dropped", c.dropped},
      {"bad_request", c.bad_request},
      {"rejected_by_reason",
       {{"full", c.rejected_full},
        {"queue_timeout", c.rejected_queue_timeout},
        {"unavailable", c.rejected_unavailable}}},
      {"failed_by_reason",
       {{"worker_error", c.failed_worker_error},
        {"worker_died", c.failed_worker_died},
        {"oom_killed", c.failed_oom_killed},
        {"timeout", c.failed_timeout},
        {"stalled", c.failed_stalled}}},
      {"starts", s.starts},
      {"restarts", s.restarts},
      {"last_exit", s.last_exit.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.last_exit)},
      {"reason", s.reason.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.reason)},
      {"status_text",
       s.status_text.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.status_text)},
      {"uptime_ms", s.uptime_ms},
      {"next_start_in_ms", s.next_start_in_ms},
      {"limits_enforced", s.limits_enforced},
      {"oom_kills", s.oom_kills},
  };
  if (!s.limits_enforced) j["limits_note"] = s.limits_note;
  auto optional = [](const auto& value) {
    return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
  };
  const cell::CgroupLimits& l = s.cgroup_limits;
  j["limits"] = {
      {"cpu_quota_us", optional(l.cpu_quota_us)},
      {"cpu_period_us", l.cpu_period_us.value_or(cell::kDefaultCpuPeriodUs)},
      {"cpu_weight", optional(l.cpu_weight)},
      {"memory_max", optional(l.memory_max)},
      {"memory_high", optional(l.memory_high)},
      {"memory_swap_max", optional(l.memory_swap_max)},
      {"pids_max", optional(l.pids_max)},
  };
  if (s.cgroup) {
    const cell::CgroupStats& k = *s.cgroup;
    j["cgroup"] = {
        {"path", s.cgroup_path},
        {"memory_current", k.memory_current},
        {"memory_max", optional(k.memory_max)},
        {"cpu_usage_usec", k.cpu.usage_usec},
        {"cpu_nr_periods", k.cpu.nr_periods},
        {"cpu_nr_throttled", k.cpu.nr_throttled},
        {"cpu_throttled_usec", k.cpu.throttled_usec},
        {"pids_current", k.pids_current},
        {"pids_max", optional(k.pids_max)},
        {"oom_kill", k.memory_events.oom_kill},
        {"oom_group_kill", k.memory_events.oom_group_kill},
    };
  } else {
    j["cgroup"] = nullptr;
  }
  return j;
}

cell::CgroupLimits CgroupLimitsOf(const config::CellConfig& c) {
  cell::CgroupLimits limits;
  limits.cpu_quota_us = c.cpu_max_quota_us;
  limits.cpu_period_us = c.cpu_max_period_us;
  limits.cpu_weight = c.cpu_weight;
  limits.memory_max = c.memory_max;
  limits.memory_high = c.memory_high;
  limits.memory_swap_max = c.memory_swap_max;
  limits.pids_max = c.pids_max;
  return limits;
}

std::string ErrorResponse(const std::string& message) {
  return nlohmann::json({{"ok", false}, {"error", message}}).dump();
}

}  // namespace

Supervisor::Supervisor(config::Config config) : config_(std::move(config)) {
  BH_CHECK(uv_loop_init(&loop_) == 0);
}

Supervisor::~Supervisor() {
  // Every handle must have been closed: a leaked handle is a bug, and fails here.
  BH_CHECK(uv_loop_close(&loop_) == 0);
}

int Supervisor::Run() {
  started_at_ms_ = uv_now(&loop_);
  for (uv_signal_t* sig : {&sigchld_, &sigterm_, &sigint_, &sighup_, &sigusr1_, &sigusr2_}) {
    uv_signal_init(&loop_, sig);
    sig->data = this;
  }
  uv_signal_start(&sigchld_, &Supervisor::OnSignal, SIGCHLD);
  uv_signal_start(&sigterm_, &Supervisor::OnSignal, SIGTERM);
  uv_signal_start(&sigint_, &Supervisor::OnSignal, SIGINT);
  uv_signal_start(&sighup_, &Supervisor::OnSignal, SIGHUP);
  // Their default action would end the supervisor and every cell without a word.
  uv_signal_start(&sigusr1_, &Supervisor::OnSignal, SIGUSR1);
  uv_signal_start(&sigusr2_, &Supervisor::OnSignal, SIGUSR2);

  control_ = std::make_unique<ControlServer>(
      &loop_, [this](const std::string& line) { return HandleControl(line); });
  Status status = SetUpCgroups();
  for (config::CellConfig& cell_config : config_.cells) {
    CellCompartment compartment;
    if (cgroup_tree_) compartment.tree = &*cgroup_tree_;
    compartment.not_enforced_reason = cgroup_note_;
    compartment.limits = CgroupLimitsOf(cell_config);
    cells_.push_back(std::make_unique<Cell>(&loop_, cell_config, std::move(compartment),
                                            config_.supervisor.max_payload_bytes, &pool_));
  }

  if (status.ok()) status = MakeDirectories(config_.supervisor.runtime_dir, 0755);
  if (status.ok()) status = control_->Listen(config_.supervisor.control_socket);
  for (auto& cell : cells_) {
    if (!status.ok()) break;
    status = cell->Bind();
    if (!status.ok()) status = Status::Error("cells." + cell->name() + ": " + status.message());
  }
  if (!status.ok()) {
    LogError("startup failed: " + status.message());
    exit_code_ = kExitFailure;
    CloseAll();
    uv_run(&loop_, UV_RUN_DEFAULT);
    return exit_code_;
  }

  SetUpConnectionBudget();
  LogInfo("bulkheadd started: " + std::to_string(cells_.size()) + " cells, control socket " +
          config_.supervisor.control_socket);
  for (auto& cell : cells_) cell->Start();
  uv_run(&loop_, UV_RUN_DEFAULT);
  return exit_code_;
}

Status Supervisor::SetUpCgroups() {
  config::CgroupMode mode = config_.supervisor.cgroup;
  if (mode == config::CgroupMode::kOff) {
    cgroup_note_ = "cgroup = \"off\" in the config";
    return Status::Ok();
  }
  Result<cell::CgroupTree> tree = cell::CgroupTree::Delegate();
  if (tree.ok()) {
    cgroup_tree_.emplace(std::move(tree).value());
    LogInfo("cgroup v2: cells live under " + cgroup_tree_->cells_path());
    return Status::Ok();
  }
  if (mode == config::CgroupMode::kRequired) {
    return Status::Error("cgroup = \"required\" but limits cannot be enforced: " +
                         tree.status().message());
  }
  cgroup_note_ = tree.status().message();
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
    worker_links += c.max_concurrent;
    wanted += c.max_connections;
    max_connections.push_back(c.max_connections);
  }
  client_budget_ = ClientConnectionBudget(*nofile, *open_now, worker_links);
  std::vector<uint32_t> shares = ShareConnectionBudget(client_budget_, max_connections);
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
    cells_[i]->SetConnectionShare(shares[i]);
    split += (i == 0 ? "" : ", ") + cells_[i]->name() + " " + std::to_string(shares[i]);
  }
  LogWarning("at most " + std::to_string(client_budget_) + " client connections in all (" +
             figures + "), fewer than the cells' max_connections add up to (" +
             std::to_string(wanted) + "): cells get " + split +
             "; raise the limit (LimitNOFILE=, ulimit -n) to accept more");
}

void Supervisor::OnSignal(uv_signal_t* handle, int signum) {
  auto* self = static_cast<Supervisor*>(handle->data);
  switch (signum) {
    case SIGCHLD:
      self->ReapChildren();
      break;
    case SIGTERM:
    case SIGINT:
      self->BeginShutdown(signum);
      break;
    case SIGHUP:
      LogWarning("SIGHUP: configuration reload is not supported yet; nothing changed");
      break;
    case SIGUSR1:
    case SIGUSR2:
      LogWarning(std::string(signum == SIGUSR1 ? "SIGUSR1" : "SIGUSR2") +
                 " has no meaning to bulkheadd: ignored");
      break;
  }
}

void Supervisor::ReapChildren() {
  // Reap by pid: only our own workers. (Exec failures are reaped by the launcher.)
  for (auto& cell : cells_) {
    pid_t pid = cell->pid();
    if (pid == 0) continue;
    int wait_status = 0;
    pid_t got = ::waitpid(pid, &wait_status, WNOHANG);
    if (got == pid) cell->OnWorkerExit(wait_status);
  }
}

void Supervisor::BeginShutdown(int signum) {
  if (shutting_down_) return;
  shutting_down_ = true;
  LogInfo(std::string("received ") + (signum == SIGINT ? "SIGINT" : "SIGTERM") +
          ": stopping every cell");
  cells_running_ = static_cast<int>(cells_.size());
  if (cells_running_ == 0) {
    FinishShutdown();
    return;
  }
  for (auto& cell : cells_) {
    cell->Stop([this] {
      if (--cells_running_ == 0) FinishShutdown();
    });
  }
}

void Supervisor::FinishShutdown() {
  LogInfo("every cell stopped; exiting");
  exit_code_ = kExitOk;
  CloseAll();
}

void Supervisor::CloseAll() {
  for (auto& cell : cells_) cell->DisconnectClients();
  closing_ = static_cast<int>(cells_.size()) + 1;
  auto closed = [this] {
    if (--closing_ == 0) {
      cells_.clear();
      control_.reset();
    }
  };
  for (auto& cell : cells_) cell->CloseHandles(closed);
  control_->Close(closed);
  for (uv_signal_t* sig : {&sigchld_, &sigterm_, &sigint_, &sighup_, &sigusr1_, &sigusr2_}) {
    uv_close(reinterpret_cast<uv_handle_t*>(sig), nullptr);
  }
}

const config::CellConfig& Supervisor::ConfigOf(const std::string& name) const {
  for (const config::CellConfig& c : config_.cells) {
    if (c.name == name) return c;
  }
  BH_CHECK(false);
  return config_.cells.front();
}

std::string Supervisor::HandleControl(const std::string& request_line) {
  nlohmann::json request = nlohmann::json::parse(request_line, nullptr, /*allow_exceptions=*/false);
  if (request.is_discarded() || !request.is_object()) {
    return ErrorResponse("request is not a JSON object");
  }
  auto command = request.find("command");
  if (command == request.end() || !command->is_string()) {
    return ErrorResponse("request has no \"command\" string");
  }
  if (*command == "status") {
    std::string only;
    if (auto cell = request.find("cell"); cell != request.end()) {
      if (!cell->is_string()) return ErrorResponse("\"cell\" must be a string");
      only = cell->get<std::string>();
    }
    nlohmann::json cells = nlohmann::json::array();
    for (auto& cell : cells_) {
      if (!only.empty() && cell->name() != only) continue;
      nlohmann::json j = SnapshotJson(cell->Snapshot());
      j["policy"] = PolicyJson(ConfigOf(cell->name()));
      cells.push_back(std::move(j));
    }
    if (!only.empty() && cells.empty()) return ErrorResponse("no cell named " + only);
    uint64_t client_connections = 0;
    for (auto& cell : cells_) client_connections += cell->clients();
    nlohmann::json response = {
        {"ok", true},
        {"supervisor",
         {{"pid", ::getpid()},
          {"version", BULKHEAD_VERSION},
          {"uptime_ms", uv_now(&loop_) - started_at_ms_},
          {"config", config_.source},
          {"live_requests", pool_.live()},
          {"client_connections", client_connections},
          {"client_connection_budget", client_budget_}}},
        {"cells", cells},
    };
    return response.dump();
  }
  if (*command == "start" || *command == "stop" || *command == "restart") {
    auto cell_name = request.find("cell");
    if (cell_name == request.end() || !cell_name->is_string()) {
      return ErrorResponse("\"" + command->get<std::string>() + "\" needs a \"cell\" string");
    }
    for (auto& cell : cells_) {
      if (cell->name() != cell_name->get<std::string>()) continue;
      if (shutting_down_) return ErrorResponse("bulkheadd is shutting down");
      std::string answer = *command == "start"  ? cell->Start()
                           : *command == "stop" ? cell->Stop(nullptr)
                                                : cell->Restart();
      bool accepted = answer == "ok";
      nlohmann::json response = {{"ok", accepted}, {"cell", cell->name()}, {"result", answer}};
      if (!accepted) response["error"] = answer;
      return response.dump();
    }
    return ErrorResponse("no cell named " + cell_name->get<std::string>());
  }
  return ErrorResponse("unknown command " + command->dump());
}

}  // namespace bulkhead::supervisor
