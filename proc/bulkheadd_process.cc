// SPDX-License-Identifier: MIT
#include "proc/bulkheadd_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "base/unique_fd.h"

namespace bulkhead::proc {

namespace {

std::optional<CellStatus> ParseCell(const nlohmann::json& cell) {
  if (!cell.is_object()) return std::nullopt;
  CellStatus out;
  for (auto [key, field] : {std::pair{"name", &out.name}, std::pair{"state", &out.state},
                            std::pair{"socket", &out.socket}}) {
    auto it = cell.find(key);
    if (it == cell.end() || !it->is_string()) return std::nullopt;
    *field = it->get<std::string>();
  }
  for (auto [key, field] : {std::pair{"running", &out.running}, std::pair{"queued", &out.queued},
                            std::pair{"ok", &out.ok}, std::pair{"rejected", &out.rejected},
                            std::pair{"failed", &out.failed}}) {
    auto it = cell.find(key);
    if (it == cell.end() || !it->is_number_unsigned()) return std::nullopt;
    *field = it->get<uint64_t>();
  }
  if (auto pid = cell.find("pid"); pid != cell.end() && pid->is_number_integer()) {
    out.pid = pid->get<pid_t>();
  }
  return out;
}

}  // namespace

BulkheaddProcess::BulkheaddProcess(BulkheaddOptions options) : options_(std::move(options)) {}

BulkheaddProcess::~BulkheaddProcess() {
  if (running()) (void)Stop();
}

Status BulkheaddProcess::Start() {
  if (running()) {
    return Status::Error("bulkheadd is already running (pid " + std::to_string(pid()) + ")");
  }
  UniqueFd log(::open(options_.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (!log) return Status::FromErrno("open " + options_.log_path);
  ChildOptions child{.argv = {options_.binary, "--config", options_.config_path},
                     .env = options_.env,
                     .stdout_fd = log.get(),
                     .stderr_fd = log.get(),
                     .parent_death_signal = SIGTERM,
                     .max_open_files = options_.max_open_files,
                     .oom_score_adj = options_.oom_score_adj};
  child.argv.insert(child.argv.end(), options_.args.begin(), options_.args.end());
  Result<ChildProcess> started = ChildProcess::Start("bulkheadd", child);
  if (!started.ok()) return started.status();
  process_ = std::move(started).value();
  return Status::Ok();
}

std::string BulkheaddProcess::WaitProblem(WaitOutcome outcome,
                                          std::chrono::milliseconds timeout) const {
  switch (outcome) {
    case WaitOutcome::kExited:
      return "bulkheadd exited with " + exit_description();
    case WaitOutcome::kInterrupted:
      return "interrupted";
    case WaitOutcome::kTimedOut:
    case WaitOutcome::kReady:
      break;
  }
  return "not reached within " + std::to_string(timeout.count()) + " ms";
}

Status BulkheaddProcess::WaitUntilRunning(const std::vector<std::string>& cells,
                                          std::chrono::milliseconds timeout) {
  std::string last_problem = "no status response yet";
  const WaitOutcome outcome = process_.WaitUntil(
      [&] {
        ctl::ControlReply reply = Control(ctl::StatusRequest());
        if (!reply.response) {
          last_problem = reply.error;
          return false;
        }
        const nlohmann::json& response = *reply.response;
        if (response.value("ok", false) != true || !response["cells"].is_array()) {
          last_problem = response.dump();
          return false;
        }
        for (const std::string& name : cells) {
          const nlohmann::json* found = nullptr;
          for (const nlohmann::json& cell : response["cells"]) {
            if (cell.value("name", "") == name) found = &cell;
          }
          if (found == nullptr) {
            last_problem = "no cell " + name + " in " + response.dump();
            return false;
          }
          if (found->value("state", "") != "running" || !(*found)["pid"].is_number_integer()) {
            last_problem = "cell " + name + " is not running: " + found->dump();
            return false;
          }
        }
        return true;
      },
      timeout, options_.interrupted);
  switch (outcome) {
    case WaitOutcome::kReady:
      return Status::Ok();
    case WaitOutcome::kExited:
      return Status::Error("bulkheadd exited during startup with " + exit_description());
    case WaitOutcome::kInterrupted:
      return Status::Error("interrupted");
    case WaitOutcome::kTimedOut:
      break;
  }
  return Status::Error("bulkheadd was not ready within " + std::to_string(timeout.count()) +
                       " ms (" + last_problem + ")");
}

ctl::ControlReply BulkheaddProcess::Control(const nlohmann::json& request) {
  ctl::ControlReply reply =
      ctl::QueryControl(options_.control_socket, request,
                        std::chrono::steady_clock::now() + options_.control_timeout);
  if (reply.response) Remember(*reply.response);
  return reply;
}

void BulkheaddProcess::Remember(const nlohmann::json& response) {
  auto cells = response.find("cells");
  if (cells == response.end() || !cells->is_array()) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (const nlohmann::json& cell : *cells) {
    if (!cell.is_object()) continue;
    const std::string name = cell.value("name", "");
    auto pid = cell.find("pid");
    if (pid != cell.end() && pid->is_number_integer()) {
      seen_workers_.insert(pid->get<pid_t>());
      last_workers_[name] = pid->get<pid_t>();
    } else {
      last_workers_.erase(name);
    }
  }
}

Result<CellStatus> BulkheaddProcess::Cell(const std::string& name) {
  ctl::ControlReply reply = Control(ctl::StatusRequest(name));
  if (!reply.response) return Status::Error(reply.error);
  const nlohmann::json& parsed = *reply.response;
  if (auto ok = parsed.find("ok"); ok == parsed.end() || *ok != true) {
    return Status::Error("control: " + parsed.dump());
  }
  auto cells = parsed.find("cells");
  if (cells == parsed.end() || !cells->is_array() || cells->size() != 1) {
    return Status::Error("control: expected one cell in " + parsed.dump());
  }
  std::optional<CellStatus> status = ParseCell((*cells)[0]);
  if (!status) return Status::Error("control: unexpected cell object " + (*cells)[0].dump());
  return *status;
}

Result<CellStatus> BulkheaddProcess::WaitForCell(const std::string& name,
                                                 const std::function<bool(const CellStatus&)>& done,
                                                 std::chrono::milliseconds timeout) {
  std::optional<CellStatus> last;
  std::string error = "no status yet";
  const WaitOutcome outcome = process_.WaitUntil(
      [&] {
        Result<CellStatus> status = Cell(name);
        if (!status.ok()) {
          error = status.status().message();
          return false;
        }
        last = *status;
        return done(*status);
      },
      timeout, options_.interrupted);
  if (outcome == WaitOutcome::kReady) return *last;
  std::string seen = last ? "state " + last->state + " running " + std::to_string(last->running) +
                                " queued " + std::to_string(last->queued)
                          : error;
  return Status::Error("cell " + name + ": " + WaitProblem(outcome, timeout) + " (" + seen + ")");
}

Result<int> BulkheaddProcess::Stop(int signum) {
  if (!running()) return Status::Error("bulkheadd is not running");
  Result<int> stopped = process_.Stop(options_.stop_timeout, signum);
  if (!stopped.ok()) {
    // Its workers lead their own process groups (cell::Spawn calls setsid) and outlive it.
    std::map<std::string, pid_t> workers;
    {
      std::lock_guard<std::mutex> lock(mu_);
      workers = last_workers_;
    }
    for (const auto& [cell, worker] : workers) ::kill(-worker, SIGKILL);
    return Status::Error(stopped.status().message() + ", and its workers' process groups");
  }
  return stopped;
}

Status BulkheaddProcess::StopCleanly() {
  Result<int> stopped = Stop();
  if (!stopped.ok()) return stopped.status();
  if (!WIFEXITED(*stopped) || WEXITSTATUS(*stopped) != 0) {
    return Status::Error("bulkheadd ended with " + exit_description() + " after SIGTERM");
  }
  return Status::Ok();
}

void BulkheaddProcess::Kill() {
  if (running()) process_.Kill();
}

void BulkheaddProcess::KillOrphanedWorkers() {
  for (pid_t pid : SeenWorkerPids()) {
    int wait_status = 0;
    // 0: a live child of ours (adopted as subreaper). Anything else: reaped already or not ours,
    // and then never signalled.
    if (::waitpid(pid, &wait_status, WNOHANG) != 0) continue;
    ::kill(-pid, SIGKILL);  // the worker leads its own process group
    ::kill(pid, SIGKILL);
    while (::waitpid(pid, &wait_status, 0) < 0 && errno == EINTR) {
    }
  }
}

std::set<pid_t> BulkheaddProcess::SeenWorkerPids() const {
  std::lock_guard<std::mutex> lock(mu_);
  return seen_workers_;
}

std::string BulkheaddProcess::Log() const {
  std::ifstream in(options_.log_path, std::ios::binary);
  std::ostringstream content;
  content << in.rdbuf();
  return content.str();
}

std::string TomlString(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      char escape[8];
      std::snprintf(escape, sizeof escape, "\\u%04x", static_cast<unsigned char>(c));
      out += escape;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string BuildDirOfThisProgram() {
  std::error_code error;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) return "build";
  return self.parent_path().parent_path().string();
}

}  // namespace bulkhead::proc
