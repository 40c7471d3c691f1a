// SPDX-License-Identifier: MIT
// The end-to-end harness (see harness.h). fork/exec by hand rather than posix_spawn, for
// PR_SET_PDEATHSIG; the child makes only async-signal-safe calls, since tests run threads.
#include "tests/e2e/harness.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/unique_fd.h"
#include "ctl/control_client.h"

extern char** environ;

namespace bulkhead::e2e {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// argv/envp arrays for execve, built before fork.
class CStrings {
 public:
  explicit CStrings(const std::vector<std::string>& strings) : strings_(strings) {
    for (std::string& s : strings_) pointers_.push_back(s.data());
    pointers_.push_back(nullptr);
  }
  char** get() { return pointers_.data(); }

 private:
  std::vector<std::string> strings_;
  std::vector<char*> pointers_;
};

// The test's environment with `overrides` ("NAME=value") replacing or adding entries.
std::vector<std::string> Environment(const std::vector<std::string>& overrides) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view entry(*e);
    std::string_view name = entry.substr(0, entry.find('='));
    bool overridden = false;
    for (const std::string& o : overrides) {
      if (std::string_view(o).substr(0, o.find('=')) == name) overridden = true;
    }
    if (!overridden) env.emplace_back(entry);
  }
  env.insert(env.end(), overrides.begin(), overrides.end());
  return env;
}

// Child side of a fork: stdin/stdout/stderr from the given descriptors, then exec. Async-signal-
// safe calls only. `death_signal` 0 means none; `max_open_files` 0 keeps RLIMIT_NOFILE; an empty
// `oom_score_adj` keeps /proc/self/oom_score_adj.
[[noreturn]] void ExecChild(int in, int out, int err, pid_t parent, int death_signal, char** argv,
                            char** envp, uint64_t max_open_files = 0,
                            std::string_view oom_score_adj = {}) {
  if (death_signal != 0) {
    ::prctl(PR_SET_PDEATHSIG, death_signal);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl
  }
  if (::dup2(in, 0) < 0 || ::dup2(out, 1) < 0 || ::dup2(err, 2) < 0) ::_exit(127);
  if (max_open_files != 0) {
    rlimit nofile{static_cast<rlim_t>(max_open_files), static_cast<rlim_t>(max_open_files)};
    if (::setrlimit(RLIMIT_NOFILE, &nofile) != 0) ::_exit(127);
  }
  if (!oom_score_adj.empty()) {
    int fd = ::open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (fd < 0 || ::write(fd, oom_score_adj.data(), oom_score_adj.size()) !=
                      static_cast<ssize_t>(oom_score_adj.size())) {
      ::_exit(127);
    }
    ::close(fd);
  }
  // The signal mask and dispositions of the test (gtest, threads) are not the child's business.
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execve(argv[0], argv, envp);
  ::_exit(127);
}

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

std::string TomlString(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// Waits up to `timeout` for `pid` to exit; its wait status, or nullopt.
std::optional<int> WaitExit(pid_t pid, milliseconds timeout) {
  int wait_status = 0;
  bool exited = WaitFor(
      [&] {
        pid_t got = ::waitpid(pid, &wait_status, WNOHANG);
        return got == pid;
      },
      timeout);
  if (!exited) return std::nullopt;
  return wait_status;
}

// SIGKILL and reap.
int KillAndReap(pid_t pid) {
  ::kill(pid, SIGKILL);
  int wait_status = 0;
  while (::waitpid(pid, &wait_status, 0) < 0 && errno == EINTR) {
  }
  return wait_status;
}

}  // namespace

std::string BulkheaddPath() { return BuildPath("supervisor/bulkheadd"); }
std::string BulkheadctlPath() { return BuildPath("ctl/bulkheadctl"); }

std::string DescribeWaitStatus(int wait_status) {
  if (WIFEXITED(wait_status)) return "exit " + std::to_string(WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) return "signal " + std::to_string(WTERMSIG(wait_status));
  char text[32];
  std::snprintf(text, sizeof text, "status 0x%x", static_cast<unsigned>(wait_status));
  return text;
}

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

  CStrings c_argv(argv);
  CStrings c_env(Environment(env));
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) return bulkhead::Status::FromErrno("fork");
  if (pid == 0) {
    ExecChild(in.get(), out.get(), err.get(), parent, SIGKILL, c_argv.get(), c_env.get());
  }

  ProcessResult result;
  std::optional<int> status = WaitExit(pid, timeout);
  if (!status) {
    result.timed_out = true;
    status = KillAndReap(pid);
  }
  result.wait_status = *status;
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
  KillOrphanedWorkers();
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
         << "restart_delay = " << TomlString(cell.restart_delay) << "\n"
         << cell.extra_toml;
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

std::string Harness::Log() const {
  std::ifstream in(log_path(), std::ios::binary);
  std::ostringstream content;
  content << in.rdbuf();
  return content.str();
}

bulkhead::Status Harness::Start() {
  if (running())
    return bulkhead::Status::Error("bulkheadd is already running (pid " + std::to_string(pid_) +
                                   ")");
  UniqueFd log(::open(log_path().c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (!log) return bulkhead::Status::FromErrno("open " + log_path());
  UniqueFd null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!null) return bulkhead::Status::FromErrno("open /dev/null");

  CStrings argv({BulkheaddPath(), "--config", config_path()});
  CStrings env(Environment(options_.env));
  const std::string oom_score_adj =
      options_.oom_score_adj ? std::to_string(*options_.oom_score_adj) : std::string();
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) return bulkhead::Status::FromErrno("fork");
  if (pid == 0) {
    ExecChild(null.get(), log.get(), log.get(), parent, SIGTERM, argv.get(), env.get(),
              options_.max_open_files, oom_score_adj);
  }
  pid_ = pid;

  std::string last_problem = "no status response yet";
  std::optional<int> exited;
  bool ready = WaitFor(
      [&] {
        int wait_status = 0;
        if (::waitpid(pid_, &wait_status, WNOHANG) == pid_) {
          exited = wait_status;
          return true;
        }
        nlohmann::json response = Status();
        if (response.value("ok", false) != true) {
          last_problem = response.dump();
          return false;
        }
        for (const CellSpec& spec : options_.cells) {
          if (!spec.wait_running) continue;
          for (const nlohmann::json& cell : response["cells"]) {
            if (cell.value("name", "") != spec.name) continue;
            if (cell.value("state", "") != "running" || cell["pid"].is_null()) {
              last_problem = "cell " + spec.name + " is not running: " + cell.dump();
              return false;
            }
          }
        }
        return true;
      },
      options_.start_timeout);
  if (exited) {
    pid_ = -1;
    return bulkhead::Status::Error("bulkheadd exited during startup with " +
                                   DescribeWaitStatus(*exited) + "; its log:\n" + Log());
  }
  if (!ready) {
    KillAndReap(pid_);
    pid_ = -1;
    return bulkhead::Status::Error("bulkheadd was not ready within " +
                                   std::to_string(options_.start_timeout.count()) + " ms (" +
                                   last_problem + "); its log:\n" + Log());
  }
  return bulkhead::Status::Ok();
}

Result<int> Harness::Stop(int signum) {
  if (!running()) return bulkhead::Status::Error("bulkheadd is not running");
  const pid_t pid = std::exchange(pid_, -1);
  ::kill(pid, signum);
  std::optional<int> status = WaitExit(pid, options_.stop_timeout);
  if (!status) {
    KillAndReap(pid);
    return bulkhead::Status::Error(
        "bulkheadd did not exit within " + std::to_string(options_.stop_timeout.count()) +
        " ms of signal " + std::to_string(signum) + " and was killed; its log:\n" + Log());
  }
  return *status;
}

void Harness::Kill() {
  if (!running()) return;
  KillAndReap(std::exchange(pid_, -1));
}

void Harness::KillOrphanedWorkers() {
  for (pid_t pid : SeenWorkerPids()) {
    int wait_status = 0;
    // 0: a live child of ours (adopted as subreaper). Anything else: reaped already or not ours,
    // and then never signalled.
    if (::waitpid(pid, &wait_status, WNOHANG) != 0) continue;
    ::kill(-pid, SIGKILL);  // the worker leads its own process group
    KillAndReap(pid);
  }
}

std::set<pid_t> Harness::SeenWorkerPids() const {
  std::lock_guard<std::mutex> lock(mu_);
  return seen_workers_;
}

void Harness::Remember(const nlohmann::json& response) {
  if (!response.contains("cells") || !response["cells"].is_array()) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (const nlohmann::json& cell : response["cells"]) {
    if (cell.contains("pid") && cell["pid"].is_number_integer()) {
      seen_workers_.insert(cell["pid"].get<pid_t>());
    }
  }
}

nlohmann::json Harness::Status(const std::string& cell) {
  ctl::ControlReply reply = ctl::QueryControl(control_socket(), ctl::StatusRequest(cell),
                                              Clock::now() + milliseconds(5000));
  if (!reply.response) return {{"ok", false}, {"error", reply.error}};
  Remember(*reply.response);
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
