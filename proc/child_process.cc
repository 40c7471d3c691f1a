// SPDX-License-Identifier: MIT
// fork + execve by hand rather than posix_spawn, for PR_SET_PDEATHSIG and the limits; the child
// makes only async-signal-safe calls, since tests start processes from several threads.
#include "proc/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>
#include <utility>

#include "base/exit_status.h"
#include "base/unique_fd.h"
#include "cell/process.h"

extern char** environ;

namespace bulkhead::proc {

namespace {

// SIGTERM-to-SIGKILL grace of the destructor, for a process Stop was never called on.
constexpr std::chrono::milliseconds kDestructorGrace{5000};

// argv/envp arrays for execve, built before fork.
class CStrings {
 public:
  explicit CStrings(std::vector<std::string> strings) : strings_(std::move(strings)) {
    for (std::string& s : strings_) pointers_.push_back(s.data());
    pointers_.push_back(nullptr);
  }
  char** get() { return pointers_.data(); }

 private:
  std::vector<std::string> strings_;
  std::vector<char*> pointers_;
};

// This process's environment with `overrides` ("NAME=value") replacing or adding entries.
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

// The step of the child that failed, sent with its errno through the report pipe.
enum class Step : int { kDup, kRlimit, kOomScoreAdj, kExec };

struct Report {
  Step step;
  int error;
};

const char* StepName(Step step) {
  switch (step) {
    case Step::kDup:
      return "dup2";
    case Step::kRlimit:
      return "setrlimit RLIMIT_NOFILE";
    case Step::kOomScoreAdj:
      return "write /proc/self/oom_score_adj";
    case Step::kExec:
      return "exec";
  }
  return "?";
}

[[noreturn]] void Fail(int report_fd, Step step) {
  Report report{step, errno};
  (void)!::write(report_fd, &report, sizeof report);
  ::_exit(report.error == ENOENT ? kExitExecNotFound : kExitExecNotExecutable);
}

// Child side of Start. Async-signal-safe calls only.
[[noreturn]] void ExecChild(const ChildOptions& options, int in, int report_fd, pid_t parent,
                            char** argv, char** envp, std::string_view oom_score_adj) {
  if (options.parent_death_signal != 0) {
    ::prctl(PR_SET_PDEATHSIG, options.parent_death_signal);
    if (::getppid() != parent) ::_exit(kExitFailure);  // the parent died before prctl
  }
  if (options.own_process_group) ::setpgid(0, 0);
  if (::dup2(in, STDIN_FILENO) < 0) Fail(report_fd, Step::kDup);
  if (options.stdout_fd >= 0 && ::dup2(options.stdout_fd, STDOUT_FILENO) < 0) {
    Fail(report_fd, Step::kDup);
  }
  if (options.stderr_fd >= 0 && ::dup2(options.stderr_fd, STDERR_FILENO) < 0) {
    Fail(report_fd, Step::kDup);
  }
  if (options.max_open_files != 0) {
    rlimit nofile{static_cast<rlim_t>(options.max_open_files),
                  static_cast<rlim_t>(options.max_open_files)};
    if (::setrlimit(RLIMIT_NOFILE, &nofile) != 0) Fail(report_fd, Step::kRlimit);
  }
  if (!oom_score_adj.empty()) {
    int fd = ::open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (fd < 0 || ::write(fd, oom_score_adj.data(), oom_score_adj.size()) !=
                      static_cast<ssize_t>(oom_score_adj.size())) {
      Fail(report_fd, Step::kOomScoreAdj);
    }
    ::close(fd);
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execve(argv[0], argv, envp);
  Fail(report_fd, Step::kExec);
}

// waitpid(pid, 0) until it answers: true once reaped, false if the pid is no child of ours.
bool ReapBlocking(pid_t pid, int* wait_status) {
  pid_t got;
  do {
    got = ::waitpid(pid, wait_status, 0);
  } while (got < 0 && errno == EINTR);
  return got == pid;
}

}  // namespace

Result<ChildProcess> ChildProcess::Start(std::string name, const ChildOptions& options) {
  if (options.argv.empty()) return Status::Error(name + ": empty argv");
  UniqueFd null;
  int in = options.stdin_fd;
  if (in < 0) {
    null = UniqueFd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!null) return Status::FromErrno("open /dev/null");
    in = null.get();
  }
  int report_pipe[2];
  if (::pipe2(report_pipe, O_CLOEXEC) != 0) return Status::FromErrno("pipe2");
  UniqueFd report_read(report_pipe[0]);
  UniqueFd report_write(report_pipe[1]);
  CStrings argv(options.argv);
  CStrings envp(Environment(options.env));
  const std::string oom_score_adj =
      options.oom_score_adj ? std::to_string(*options.oom_score_adj) : std::string();

  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return Status::FromErrno("fork");
  if (pid == 0) {
    ExecChild(options, in, report_write.get(), parent, argv.get(), envp.get(), oom_score_adj);
  }
  report_write.Reset();
  // EOF: the child exec'd (the pipe closed on exec); a whole Report: a step failed.
  Report report{};
  ssize_t got;
  do {
    got = ::read(report_read.get(), &report, sizeof report);
  } while (got < 0 && errno == EINTR);
  if (got == static_cast<ssize_t>(sizeof report)) {
    int wait_status = 0;
    ReapBlocking(pid, &wait_status);
    std::string what = StepName(report.step);
    if (report.step == Step::kExec) what += " " + options.argv.front();
    return Status::FromErrno(name + ": " + what, report.error);
  }
  return ChildProcess(pid, std::move(name), options.own_process_group);
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
  if (Running()) (void)Stop(kDestructorGrace);
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      name_(std::move(other.name_)),
      leads_group_(other.leads_group_),
      wait_status_(std::exchange(other.wait_status_, std::nullopt)),
      lost_(std::move(other.lost_)) {}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    if (Running()) (void)Stop(kDestructorGrace);
    pid_ = std::exchange(other.pid_, -1);
    name_ = std::move(other.name_);
    leads_group_ = other.leads_group_;
    wait_status_ = std::exchange(other.wait_status_, std::nullopt);
    lost_ = std::move(other.lost_);
  }
  return *this;
}

std::string ChildProcess::Who() const { return name_ + " (pid " + std::to_string(pid_) + ")"; }

bool ChildProcess::Running() {
  if (pid_ <= 0 || reaped()) return false;
  int wait_status = 0;
  const pid_t got = ::waitpid(pid_, &wait_status, WNOHANG);
  if (got == pid_) {
    wait_status_ = wait_status;
    return false;
  }
  if (got < 0 && errno != EINTR) {
    lost_ = std::string("waitpid: ") + std::strerror(errno);
    return false;
  }
  return true;  // 0: still running; EINTR: asked again next time
}

std::string ChildProcess::exit_description() const {
  return wait_status_ ? cell::DescribeWaitStatus(*wait_status_) : lost_;
}

std::optional<int> ChildProcess::WaitExit(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (Running()) {
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    ::poll(nullptr, 0, static_cast<int>(kPollInterval.count()));
  }
  return wait_status_;  // nullopt too when the pid was lost
}

WaitOutcome ChildProcess::WaitUntil(const std::function<bool()>& ready,
                                    std::chrono::milliseconds timeout,
                                    const std::atomic<bool>* interrupted) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (!Running()) return WaitOutcome::kExited;
    if (ready()) return WaitOutcome::kReady;
    if (interrupted != nullptr && interrupted->load()) return WaitOutcome::kInterrupted;
    if (std::chrono::steady_clock::now() >= deadline) return WaitOutcome::kTimedOut;
    ::poll(nullptr, 0, static_cast<int>(kPollInterval.count()));
  }
}

Result<int> ChildProcess::Stop(std::chrono::milliseconds grace, int signum) {
  if (pid_ <= 0) return Status::Error(name_ + ": not started");
  if (Running()) ::kill(pid_, signum);
  if (std::optional<int> exited = WaitExit(grace)) return *exited;
  if (!lost_.empty()) return Status::Error(Who() + ": " + lost_);
  Kill();
  return Status::Error(Who() + " did not exit within " + std::to_string(grace.count()) +
                       " ms of signal " + std::to_string(signum) + "; killed with SIGKILL");
}

Status ChildProcess::StopExpecting(std::chrono::milliseconds grace,
                                   const std::vector<std::string>& accepted) {
  Result<int> stopped = Stop(grace);
  if (!stopped.ok()) return stopped.status();
  const std::string description = exit_description();
  for (const std::string& ok : accepted) {
    if (description == ok) return Status::Ok();
  }
  return Status::Error(Who() + " ended with " + description);
}

std::optional<int> ChildProcess::Kill() {
  if (pid_ <= 0 || reaped() || !lost_.empty()) return std::nullopt;
  if (leads_group_) ::kill(-pid_, SIGKILL);
  ::kill(pid_, SIGKILL);
  int wait_status = 0;
  if (!ReapBlocking(pid_, &wait_status)) {
    lost_ = std::string("waitpid: ") + std::strerror(errno);
    return std::nullopt;
  }
  wait_status_ = wait_status;
  return wait_status;
}

}  // namespace bulkhead::proc
