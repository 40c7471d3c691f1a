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

// Time a worker gets between SIGTERM and SIGKILL at shutdown.
constexpr uint64_t kStopTimeoutMs = 5000;

nlohmann::json SnapshotJson(const CellSnapshot& s) {
  const CellCounters& c = s.counters;
  nlohmann::json j = {
      {"name", s.name},
      {"state", CellStateName(s.state)},
      {"pid", s.pid == 0 ? nlohmann::json(nullptr) : nlohmann::json(s.pid)},
      {"socket", s.socket},
      {"worker_socket", s.worker_socket},
      {"max_concurrent", s.limits.max_concurrent},
      {"running", s.running},
      {"max_queue", s.limits.max_queue},
      {"queued", s.queued},
      {"queue_timeout_ms", s.limits.queue_timeout_ms},
      {"clients", s.clients},
      {"worker_connections", s.worker_connections},
      {"ok", c.ok},
      {"rejected", c.rejected()},
      {"failed", c.failed()},
      {"cancelled", c.cancelled},
      {"bad_request", c.bad_request},
      {"rejected_by_reason",
       {{"full", c.rejected_full},
        {"queue_timeout", c.rejected_queue_timeout},
        {"unavailable", c.rejected_unavailable}}},
      {"failed_by_reason",
       {{"worker_error", c.failed_worker_error}, {"worker_died", c.failed_worker_died}}},
      {"starts", s.starts},
      {"restarts", s.restarts},
      {"last_exit", s.last_exit.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.last_exit)},
      {"uptime_ms", s.uptime_ms},
      {"next_start_in_ms", s.next_start_in_ms},
  };
  return j;
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
  for (uv_signal_t* sig : {&sigchld_, &sigterm_, &sigint_, &sighup_}) {
    uv_signal_init(&loop_, sig);
    sig->data = this;
  }
  uv_signal_start(&sigchld_, &Supervisor::OnSignal, SIGCHLD);
  uv_signal_start(&sigterm_, &Supervisor::OnSignal, SIGTERM);
  uv_signal_start(&sigint_, &Supervisor::OnSignal, SIGINT);
  uv_signal_start(&sighup_, &Supervisor::OnSignal, SIGHUP);

  control_ = std::make_unique<ControlServer>(
      &loop_, [this](const std::string& line) { return HandleControl(line); });
  for (config::CellConfig& cell_config : config_.cells) {
    cells_.push_back(
        std::make_unique<Cell>(&loop_, cell_config, config_.supervisor.max_payload_bytes, &pool_));
  }

  Status status = MakeDirectories(config_.supervisor.runtime_dir, 0755);
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

  LogInfo("bulkheadd started: " + std::to_string(cells_.size()) + " cells, control socket " +
          config_.supervisor.control_socket);
  for (auto& cell : cells_) cell->Start();
  uv_run(&loop_, UV_RUN_DEFAULT);
  return exit_code_;
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
    cell->Stop(kStopTimeoutMs, [this] {
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
      for (auto& cell : cells_) {
        ::unlink(cell->Snapshot().socket.c_str());
        ::unlink(cell->Snapshot().worker_socket.c_str());
      }
      ::unlink(config_.supervisor.control_socket.c_str());
      cells_.clear();
      control_.reset();
    }
  };
  for (auto& cell : cells_) cell->CloseHandles(closed);
  control_->Close(closed);
  for (uv_signal_t* sig : {&sigchld_, &sigterm_, &sigint_, &sighup_}) {
    uv_close(reinterpret_cast<uv_handle_t*>(sig), nullptr);
  }
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
      cells.push_back(SnapshotJson(cell->Snapshot()));
    }
    if (!only.empty() && cells.empty()) return ErrorResponse("no cell named " + only);
    nlohmann::json response = {
        {"ok", true},
        {"supervisor",
         {{"pid", ::getpid()},
          {"version", BULKHEAD_VERSION},
          {"uptime_ms", uv_now(&loop_) - started_at_ms_},
          {"config", config_.source},
          {"live_requests", pool_.live()}}},
        {"cells", cells},
    };
    return response.dump();
  }
  return ErrorResponse("unknown command " + command->dump());
}

}  // namespace bulkhead::supervisor
