// SPDX-License-Identifier: MIT
// The end-to-end harness (see harness.h): the config it writes, and what it adds to
// proc::BulkheaddProcess (failures reported with bulkheadd's log, RunProcess for any binary).
#include "tests/e2e/harness.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "base/unique_fd.h"
#include "ctl/control_client.h"

namespace bulkhead::e2e {
namespace {

using proc::TomlString;
using std::chrono::milliseconds;

std::string ReadAll(int fd) {
  std::string data;
  char buffer[64 * 1024];
  off_t offset = 0;
  while (true) {
    ssize_t n = ::pread(fd, buffer, sizeof buffer, offset);
    if (n <= 0) break;
    data.append(buffer, static_cast<size_t>(n));
    offset += n;
  }
  return data;
}

}  // namespace

std::string BulkheaddPath() { return BuildPath("supervisor/bulkheadd"); }
std::string BulkheadctlPath() { return BuildPath("ctl/bulkheadctl"); }

int ProcessResult::exit_code() const {
  return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1;
}

std::string ProcessResult::Describe() const {
  return DescribeWaitStatus(wait_status) + (timed_out ? " (timed out)" : "") +
         "\n--- stdout ---\n" + out + "--- stderr ---\n" + err;
}

Result<ProcessResult> RunProcess(const std::vector<std::string>& argv, std::string_view input,
                                 milliseconds timeout, const std::vector<std::string>& env) {
  // memfds rather than pipes: no reader thread, no deadlock on large outputs.
  UniqueFd in(::memfd_create("stdin", MFD_CLOEXEC));
  UniqueFd out(::memfd_create("stdout", MFD_CLOEXEC));
  UniqueFd err(::memfd_create("stderr", MFD_CLOEXEC));
  if (!in || !out || !err) return bulkhead::Status::FromErrno("memfd_create");
  for (size_t done = 0; done < input.size();) {
    ssize_t n = ::write(in.get(), input.data() + done, input.size() - done);
    if (n < 0) return bulkhead::Status::FromErrno("write stdin memfd");
    done += static_cast<size_t>(n);
  }
  if (::lseek(in.get(), 0, SEEK_SET) < 0) return bulkhead::Status::FromErrno("lseek");

  Result<proc::ChildProcess> child =
      proc::ChildProcess::Start(argv.front(), proc::ChildOptions{.argv = argv,
                                                                 .env = env,
                                                                 .stdin_fd = in.get(),
                                                                 .stdout_fd = out.get(),
                                                                 .stderr_fd = err.get(),
                                                                 .parent_death_signal = SIGKILL});
  if (!child.ok()) return child.status();

  ProcessResult result;
  std::optional<int> status = child->WaitExit(timeout);
  if (!status) {
    result.timed_out = true;
    status = child->Kill();
  }
  result.wait_status = status.value_or(0);
  result.out = ReadAll(out.get());
  result.err = ReadAll(err.get());
  return result;
}

std::vector<std::string> WithStderrAsJournal(const std::vector<std::string>& argv) {
  // stat runs with the same stderr (a memfd from RunProcess), so its numbers are stderr's.
  std::vector<std::string> wrapped = {
      "/bin/sh", "-c",
      "JOURNAL_STREAM=$(stat -L -c %d:%i /proc/self/fd/2) && export JOURNAL_STREAM && exec \"$@\"",
      "sh"};
  wrapped.insert(wrapped.end(), argv.begin(), argv.end());
  return wrapped;
}

Harness::Harness(HarnessOptions options) : options_(std::move(options)) {
  // Workers orphaned by a killed bulkheadd are re-parented to us, so we can reap them by pid.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  daemon_.emplace(
      proc::BulkheaddOptions{.binary = options_.binary.empty() ? BulkheaddPath() : options_.binary,
                             .config_path = config_path(),
                             .control_socket = control_socket(),
                             .log_path = log_path(),
                             .args = options_.args,
                             .env = options_.env,
                             .max_open_files = options_.max_open_files,
                             .oom_score_adj = options_.oom_score_adj,
                             .stop_timeout = options_.stop_timeout});
  WriteConfig();
}

Harness::~Harness() {
  if (running()) {
    Result<int> stopped = Stop();
    if (!stopped.ok()) {
      Report("bulkheadd did not stop cleanly: " + stopped.status().message());
    } else if (!WIFEXITED(*stopped) || WEXITSTATUS(*stopped) != 0) {
      Report("bulkheadd ended with " + DescribeWaitStatus(*stopped) + " after SIGTERM, not exit 0" +
             "; its log:\n" + Log());
    }
  }
  daemon_->KillOrphanedWorkers();
}

void Harness::Report(const std::string& message) const {
  if (options_.on_failure) {
    options_.on_failure(message);
  } else {
    std::fprintf(stderr, "bulkhead e2e harness: %s\n", message.c_str());
  }
}

void Harness::WriteConfig() const {
  std::ostringstream toml;
  toml << "[supervisor]\n"
       << "runtime_dir = " << TomlString(runtime_dir()) << "\n"
       << options_.supervisor_toml << "\n";
  for (const CellSpec& cell : options_.cells) {
    toml << "[cells." << cell.name << "]\ncommand = [";
    std::vector<std::string> command = cell.command;
    if (command.empty()) command.push_back(TestWorkerPath());
    for (size_t i = 0; i < command.size(); ++i) toml << (i ? ", " : "") << TomlString(command[i]);
    toml << "]\n"
         << "max_concurrent = " << cell.max_concurrent << "\n"
         << "max_queue = " << cell.max_queue << "\n"
         << "queue_timeout = " << TomlString(cell.queue_timeout) << "\n"
         << "restart_delay = " << TomlString(cell.restart_delay) << "\n";
    if (!cell.worker_connections.empty()) {
      toml << "worker_connections = " << TomlString(cell.worker_connections) << "\n";
    }
    toml << cell.extra_toml;
    if (!cell.environment.empty()) {
      toml << "[cells." << cell.name << ".environment]\n";
      for (const auto& [name, value] : cell.environment) {
        toml << TomlString(name) << " = " << TomlString(value) << "\n";
      }
    }
    toml << "\n";
  }
  std::ofstream(config_path()) << toml.str();
}

void Harness::RewriteConfig(std::vector<CellSpec> cells,
                            std::optional<std::string> supervisor_toml) {
  options_.cells = std::move(cells);
  if (supervisor_toml) options_.supervisor_toml = std::move(*supervisor_toml);
  WriteConfig();
}

std::string Harness::Log() const { return daemon_->Log(); }

bulkhead::Status Harness::Start() {
  bulkhead::Status started = daemon_->Start();
  if (!started.ok()) return started;
  std::vector<std::string> cells;
  for (const CellSpec& spec : options_.cells) {
    if (spec.wait_running) cells.push_back(spec.name);
  }
  bulkhead::Status ready = daemon_->WaitUntilRunning(cells, options_.start_timeout);
  if (!ready.ok()) {
    daemon_->Kill();
    return bulkhead::Status::Error(ready.message() + "; its log:\n" + Log());
  }
  return bulkhead::Status::Ok();
}

Result<int> Harness::Stop(int signum) {
  if (!running()) return bulkhead::Status::Error("bulkheadd is not running");
  Result<int> stopped = daemon_->Stop(signum);
  if (!stopped.ok()) {
    return bulkhead::Status::Error(stopped.status().message() + "; its log:\n" + Log());
  }
  return stopped;
}

void Harness::Kill() { daemon_->Kill(); }

void Harness::KillOrphanedWorkers() { daemon_->KillOrphanedWorkers(); }

std::set<pid_t> Harness::SeenWorkerPids() const { return daemon_->SeenWorkerPids(); }

nlohmann::json Harness::Status(const std::string& cell) {
  ctl::ControlReply reply = daemon_->Control(ctl::StatusRequest(cell));
  if (!reply.response) return {{"ok", false}, {"error", reply.error}};
  return *reply.response;
}

nlohmann::json Harness::Cell(const std::string& name) {
  nlohmann::json response = Status(name);
  if (response.value("ok", false) != true || !response["cells"].is_array()) return nullptr;
  for (const nlohmann::json& cell : response["cells"]) {
    if (cell.value("name", "") == name) return cell;
  }
  return nullptr;
}

bool Harness::WaitForCell(const std::string& name,
                          const std::function<bool(const nlohmann::json&)>& predicate,
                          milliseconds timeout) {
  return WaitFor(
      [&] {
        nlohmann::json cell = Cell(name);
        return !cell.is_null() && predicate(cell);
      },
      timeout);
}

Result<ipc::Client> Harness::Connect(const std::string& cell) {
  return ipc::Client::Connect(CellSocket(cell));
}

Result<ipc::Client::Reply> Harness::Call(const std::string& cell, std::string_view payload,
                                         milliseconds timeout) {
  Result<ipc::Client> client = Connect(cell);
  if (!client.ok()) return client.status();
  if (bulkhead::Status set = client->SetTimeout(timeout); !set.ok()) return set;
  return client->Call(payload);
}

Result<ProcessResult> Harness::Ctl(const std::vector<std::string>& args, std::string_view input) {
  std::vector<std::string> argv = {BulkheadctlPath(), "--socket", control_socket()};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProcess(argv, input);
}

}  // namespace bulkhead::e2e
