// SPDX-License-Identifier: MIT
#include "bench/stage_support.h"

#include <chrono>
#include <csignal>
#include <fstream>
#include <sstream>

namespace bulkhead::bench {

namespace {
// Deadline of each control-socket exchange, and SIGTERM-to-SIGKILL when stopping bulkheadd (it
// gives its workers 5 s) or a worker.
constexpr std::chrono::milliseconds kBulkheaddTimeout{10000};
}  // namespace

Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << text;
  file.close();
  if (!file) return Status::Error("cannot write " + path);
  return Status::Ok();
}

std::string ReadText(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

std::string BenchSupervisorToml(const std::string& root, const std::string& cgroup,
                                const std::string& log_level) {
  std::string toml = "[supervisor]\nruntime_dir = " + proc::TomlString(root + "/run") +
                     "\nlog_level = " + proc::TomlString(log_level) + "\n";
  if (!cgroup.empty()) toml += "cgroup = " + proc::TomlString(cgroup) + "\n";
  return toml;
}

Status StartBenchBulkheadd(const std::string& bin_dir, const std::string& root,
                           const std::string& config, const std::atomic<bool>* interrupted,
                           std::optional<proc::BulkheaddProcess>* out) {
  const std::string config_path = root + "/bench.toml";
  Status status = WriteText(config_path, config);
  if (!status.ok()) return status;
  out->emplace(proc::BulkheaddOptions{.binary = bin_dir + "/supervisor/bulkheadd",
                                      .config_path = config_path,
                                      .control_socket = root + "/run/control.sock",
                                      .log_path = root + "/bulkheadd.log",
                                      .stop_timeout = kBulkheaddTimeout,
                                      .control_timeout = kBulkheaddTimeout,
                                      .interrupted = interrupted});
  status = (*out)->Start();
  if (!status.ok()) return Status::Error(status.message() + " (build it, or pass --bin-dir)");
  return Status::Ok();
}

Status StopBenchProcesses(const std::vector<proc::ChildProcess*>& workers,
                          std::optional<proc::BulkheaddProcess>* bulkheadd) {
  Status status = Status::Ok();
  for (proc::ChildProcess* worker : workers) {
    if (worker->pid() <= 0) continue;
    Status stopped = worker->StopExpecting(kBulkheaddTimeout, {"signal 15", "exit 0"});
    if (status.ok()) status = stopped;
  }
  if (*bulkheadd && (*bulkheadd)->running()) {
    Status stopped = (*bulkheadd)->StopCleanly();
    if (status.ok()) status = stopped;
  }
  return status;
}

std::atomic<bool>& StopRequested() {
  static std::atomic<bool> requested{false};
  return requested;
}

namespace {
void OnStopSignal(int) { StopRequested().store(true); }
}  // namespace

void CatchStopSignals() {
  StopRequested();  // constructed before a handler can run
  std::signal(SIGINT, OnStopSignal);
  std::signal(SIGTERM, OnStopSignal);
}

nlohmann::json CellStatusJson(proc::BulkheaddProcess& bulkheadd, const std::string& cell) {
  ctl::ControlReply reply = bulkheadd.Control({{"command", "status"}, {"cell", cell}});
  if (!reply.response || !(*reply.response)["cells"].is_array() ||
      (*reply.response)["cells"].empty()) {
    return nullptr;
  }
  return (*reply.response)["cells"][0];
}

}  // namespace bulkhead::bench
