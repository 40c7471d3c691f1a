// SPDX-License-Identifier: MIT
#include "bench/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "base/exit_status.h"
#include "base/unique_fd.h"
#include "cell/process.h"

namespace bulkhead::bench {

namespace {

// Interval of the exit polling loop.
constexpr int kPollIntervalMs = 5;
// SIGTERM-to-SIGKILL deadline in the destructor, for a process Stop was never called on.
constexpr std::chrono::milliseconds kDestructorTimeout{5000};

std::string DescribeWaitStatus(int wait_status) {
  if (WIFEXITED(wait_status)) return "exit " + std::to_string(WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) return "signal " + std::to_string(WTERMSIG(wait_status));
  return "status " + std::to_string(wait_status);
}

}  // namespace

Result<ChildProcess> ChildProcess::StartBulkheadd(const std::string& binary,
                                                  const std::string& config_path,
                                                  const std::string& log_path) {
  if (::access(binary.c_str(), X_OK) != 0) {
    return Status::FromErrno("bulkheadd at " + binary + " (build it, or pass --bin-dir)");
  }
  UniqueFd log(::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (!log) return Status::FromErrno("open " + log_path);
  std::string binary_copy = binary, config_copy = config_path;
  char config_flag[] = "--config";
  char* argv[] = {binary_copy.data(), config_flag, config_copy.data(), nullptr};
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return Status::FromErrno("fork");
  if (pid == 0) {
    // Child: async-signal-safe calls only.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(kExitFailure);
    ::dup2(log.get(), STDOUT_FILENO);
    ::dup2(log.get(), STDERR_FILENO);
    ::execv(argv[0], argv);
    static constexpr char kMessage[] = "bulkhead-bench: execv bulkheadd failed\n";
    (void)!::write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
    ::_exit(kExitExecNotFound);
  }
  return ChildProcess(pid, "bulkheadd", /*leads_group=*/false);
}

Result<ChildProcess> ChildProcess::StartWorker(const std::vector<std::string>& argv,
                                               int listen_fd) {
  cell::SpawnOptions options;
  options.argv = argv;
  options.listen_fd = listen_fd;
  options.listen_fd_name = "direct";
  Result<pid_t> pid = cell::Spawn(options);
  if (!pid.ok()) return pid.status();
  return ChildProcess(*pid, argv.front(), /*leads_group=*/true);
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0) (void)Stop(kDestructorTimeout, {});
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      name_(std::move(other.name_)),
      leads_group_(other.leads_group_),
      exit_description_(std::move(other.exit_description_)),
      dependents_(std::move(other.dependents_)) {}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    if (pid_ > 0) (void)Stop(kDestructorTimeout, {});
    pid_ = std::exchange(other.pid_, -1);
    name_ = std::move(other.name_);
    leads_group_ = other.leads_group_;
    exit_description_ = std::move(other.exit_description_);
    dependents_ = std::move(other.dependents_);
  }
  return *this;
}

bool ChildProcess::Running() {
  if (pid_ <= 0) return false;
  if (!exit_description_.empty()) return false;
  int wait_status = 0;
  pid_t got = ::waitpid(pid_, &wait_status, WNOHANG);
  if (got == 0 || (got < 0 && errno == EINTR)) return true;
  if (got < 0) {
    exit_description_ = std::string("waitpid: ") + std::strerror(errno);
  } else if (WIFEXITED(wait_status) || WIFSIGNALED(wait_status)) {
    exit_description_ = DescribeWaitStatus(wait_status);
  } else {
    return true;  // stopped or continued: still there
  }
  return false;
}

void ChildProcess::Kill() {
  if (leads_group_) ::kill(-pid_, SIGKILL);
  ::kill(pid_, SIGKILL);
  int wait_status = 0;
  pid_t got;
  do {
    got = ::waitpid(pid_, &wait_status, 0);
  } while (got < 0 && errno == EINTR);
  exit_description_ = got == pid_ ? DescribeWaitStatus(wait_status) : "lost";
  for (pid_t group : dependents_) ::kill(-group, SIGKILL);
}

Status ChildProcess::Stop(std::chrono::milliseconds timeout,
                          const std::vector<std::string>& accepted) {
  if (pid_ <= 0) return Status::Error(name_ + ": not started");
  const pid_t pid = pid_;
  bool exited_in_time = !Running();
  if (!exited_in_time) {
    ::kill(pid_, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (Running() && std::chrono::steady_clock::now() < deadline) {
      ::poll(nullptr, 0, kPollIntervalMs);
    }
    exited_in_time = !Running();
    if (!exited_in_time) Kill();
  }
  pid_ = -1;
  const std::string who = name_ + " (pid " + std::to_string(pid) + ")";
  if (!exited_in_time) {
    return Status::Error(who + " ignored SIGTERM for " + std::to_string(timeout.count()) +
                         " ms; killed");
  }
  for (const std::string& ok : accepted) {
    if (exit_description_ == ok) return Status::Ok();
  }
  return Status::Error(who + " ended with " + exit_description_);
}

}  // namespace bulkhead::bench
