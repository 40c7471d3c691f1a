// SPDX-License-Identifier: MIT
// Spawn: everything the child needs is prepared before the fork; between fork and execve the
// child makes only async-signal-safe system calls (signal-safety(7)) and touches no heap.
#include "cell/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>
#include <tuple>

#include "base/exit_status.h"
#include "base/unique_fd.h"

namespace bulkhead::cell {
namespace {

// clone3(2) arguments, laid out as the kernel's struct clone_args (include/uapi/linux/sched.h,
// CLONE_ARGS_SIZE_VER2 = 88 bytes, Linux 5.7). Declared here because glibc has no clone3 wrapper
// and older kernel headers lack the `cgroup` field.
struct CloneArgs {
  uint64_t flags = 0;
  uint64_t pidfd = 0;
  uint64_t child_tid = 0;
  uint64_t parent_tid = 0;
  uint64_t exit_signal = 0;
  uint64_t stack = 0;
  uint64_t stack_size = 0;
  uint64_t tls = 0;
  uint64_t set_tid = 0;
  uint64_t set_tid_size = 0;
  uint64_t cgroup = 0;
};
static_assert(sizeof(CloneArgs) == 88);
constexpr uint64_t kCloneIntoCgroup = 0x200000000ULL;  // CLONE_INTO_CGROUP

// The report pipe's write end is moved to at least this descriptor, above 0-2 and the listening
// socket's 3, so the child's dup2() calls never overwrite it.
constexpr int kMinReportFd = kListenFdNumber + 1;

// The step of the child that failed, sent to the parent through the report pipe.
enum class ChildStep : int32_t {
  kSignalMask = 1,
  kSetsid,
  kListenFd,
  kOpenDevNull,
  kStdio,
  kCloseFds,
  kChdir,
  kExec,
  kOutputFd,
  kSetgroups,
  kSetgid,
  kSetuid,
  kNoNewPrivileges,
  kOomScoreAdj,
};

// Written once by a failing child: fits in one atomic pipe write (PIPE_BUF).
struct ChildReport {
  ChildStep step;
  int32_t error_number;
  // kExec: index into ChildPlan::exec_candidates of the path that failed; -1 when a bare name was
  // found in no PATH directory.
  int32_t candidate;
};

// Everything the child reads, built in the parent before the fork.
struct ChildPlan {
  std::vector<std::string> exec_candidates;  // paths tried in order with execve
  bool path_search = false;                  // exec_candidates came from a PATH search
  std::vector<char*> argv;                   // nullptr-terminated, pointing into SpawnOptions
  std::vector<std::string> env_storage;
  std::vector<char*> envp;                  // nullptr-terminated, pointing into env_storage
  char* listen_pid_value = nullptr;         // digits of LISTEN_PID go here, inside env_storage
  const char* working_directory = nullptr;  // nullptr: stay
  int listen_fd = -1;
  int report_fd = -1;
  int report_read_fd = -1;
  unsigned int close_fallback_limit = 0;  // highest descriptor + 1 for the pre-5.9 close loop
  int parent_death_signal = 0;
  pid_t parent_pid = 0;
  // SpawnOptions::stdout_fd / stderr_fd, moved above the listening socket's 3; -1: inherit.
  int stdout_fd = -1;
  int stderr_fd = -1;
  // Credentials to take (SpawnOptions::credentials); groups points into SpawnOptions.
  bool change_credentials = false;
  uid_t uid = 0;
  gid_t gid = 0;
  const gid_t* groups = nullptr;
  size_t group_count = 0;
  mode_t umask = kDefaultWorkerUmask;
  bool no_new_privileges = true;
  // SpawnOptions::oom_score_adj as decimal text ("-1000"); empty: leave it as inherited.
  std::string oom_score_adj;
};

constexpr std::string_view kListenPidPrefix = "LISTEN_PID=";
// Room for the digits of any pid_t and the terminating NUL.
constexpr size_t kPidDigits = 21;

bool IsListenVariable(std::string_view entry) {
  return entry.starts_with("LISTEN_PID=") || entry.starts_with("LISTEN_FDS=") ||
         entry.starts_with("LISTEN_FDNAMES=");
}

std::string SearchPath(const std::vector<std::string>& environment) {
  for (const std::string& entry : environment) {
    if (entry.starts_with("PATH=")) return entry.substr(5);
  }
  return kDefaultSearchPath;
}

std::vector<std::string> ExecCandidates(const std::string& program, const std::string& path) {
  if (program.find('/') != std::string::npos) return {program};
  std::vector<std::string> candidates;
  size_t begin = 0;
  while (true) {
    size_t end = path.find(':', begin);
    std::string_view dir = std::string_view(path).substr(
        begin, end == std::string::npos ? std::string::npos : end - begin);
    // POSIX: a zero-length PATH element means the current directory.
    std::string candidate(dir.empty() ? std::string_view(".") : dir);
    candidate += '/';
    candidate += program;
    candidates.push_back(std::move(candidate));
    if (end == std::string::npos) break;
    begin = end + 1;
  }
  return candidates;
}

// ---- Child side: async-signal-safe only. ----

[[noreturn]] void ReportAndExit(const ChildPlan& plan, ChildStep step, int err,
                                int32_t candidate = -1) {
  ChildReport report{step, err, candidate};
  while (::write(plan.report_fd, &report, sizeof report) < 0 && errno == EINTR) {
  }
  ::_exit(err == ENOENT ? kExitExecNotFound : kExitExecNotExecutable);
}

void FormatDecimal(char* out, long value) {
  char reversed[kPidDigits];
  int n = 0;
  do {
    reversed[n++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value > 0 && n < static_cast<int>(kPidDigits) - 1);
  for (int i = 0; i < n; ++i) out[i] = reversed[n - 1 - i];
  out[n] = '\0';
}

// Closes [first, last]; false with errno set on failure.
bool CloseRange(unsigned int first, unsigned int last, unsigned int fallback_limit) {
  if (first > last) return true;
#ifdef SYS_close_range
  if (::syscall(SYS_close_range, first, last, 0) == 0) return true;
  if (errno != ENOSYS) return false;
#endif
  for (unsigned int fd = first; fd <= last && fd < fallback_limit; ++fd)
    ::close(static_cast<int>(fd));
  return true;
}

// The privilege drop of the child, in one place (systemd.exec(5) User=, Group=,
// SupplementaryGroups=, UMask=, NoNewPrivileges=): supplementary groups first, then the group,
// then the user, since each step needs privileges the next one gives up. Raw system calls, not
// glibc's wrappers: after clone3 glibc still believes the parent's threads exist and its setxid
// broadcast would signal them; the child has one thread, so the per-thread call is the whole
// process.
void ApplyCredentials(const ChildPlan& plan) {
  if (plan.change_credentials) {
    if (::syscall(SYS_setgroups, plan.group_count, plan.groups) != 0) {
      ReportAndExit(plan, ChildStep::kSetgroups, errno);
    }
    if (::syscall(SYS_setresgid, plan.gid, plan.gid, plan.gid) != 0) {
      ReportAndExit(plan, ChildStep::kSetgid, errno);
    }
    if (::syscall(SYS_setresuid, plan.uid, plan.uid, plan.uid) != 0) {
      ReportAndExit(plan, ChildStep::kSetuid, errno);
    }
  }
  ::umask(plan.umask);
  if (plan.no_new_privileges && ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    ReportAndExit(plan, ChildStep::kNoNewPrivileges, errno);
  }
}

// /proc/self/oom_score_adj (proc(5)): one write(2) of the decimal value, as the kernel takes it.
void WriteOomScoreAdj(const ChildPlan& plan) {
  int fd = ::open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
  if (fd < 0) ReportAndExit(plan, ChildStep::kOomScoreAdj, errno);
  const size_t length = plan.oom_score_adj.size();
  ssize_t written = 0;
  do {
    written = ::write(fd, plan.oom_score_adj.data(), length);
  } while (written < 0 && errno == EINTR);
  if (written < 0 || static_cast<size_t>(written) != length) {
    ReportAndExit(plan, ChildStep::kOomScoreAdj, written < 0 ? errno : EIO);
  }
  ::close(fd);
}

// The kernel's struct sigaction for rt_sigaction(2) on x86-64 and arm64 (not glibc's), and its
// signal count (_NSIG): signals 1..64.
struct KernelSigaction {
  uintptr_t handler = 0;  // SIG_DFL
  unsigned long flags = 0;
  uintptr_t restorer = 0;
  uint64_t mask = 0;
};
constexpr int kKernelSignals = 65;

[[noreturn]] void RunChild(const ChildPlan& plan) {
  ::close(plan.report_read_fd);

  // Signals: dispositions first, so that no handler of the parent can run once the mask (all
  // blocked by the parent around the fork) is emptied. SIGKILL/SIGSTOP cannot be changed. The
  // raw rt_sigaction(2) reaches the two signals glibc's sigaction refuses (32 and 33, its
  // internal ones): ignored by whoever started bulkheadd, they would survive execve into a worker
  // whose runtime may use them.
  for (int sig = 1; sig < kKernelSignals; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    KernelSigaction default_action;  // SIG_DFL, no flags, empty mask
    ::syscall(SYS_rt_sigaction, sig, &default_action, nullptr, sizeof default_action.mask);
  }
  sigset_t empty;
  sigemptyset(&empty);
  if (::sigprocmask(SIG_SETMASK, &empty, nullptr) != 0) {
    ReportAndExit(plan, ChildStep::kSignalMask, errno);
  }

  if (::setsid() < 0) ReportAndExit(plan, ChildStep::kSetsid, errno);

  // While the child still has the caller's capabilities: lowering it may need CAP_SYS_RESOURCE.
  if (!plan.oom_score_adj.empty()) WriteOomScoreAdj(plan);

  // Before the parent-death signal: a credential change clears it.
  ApplyCredentials(plan);

  if (plan.parent_death_signal != 0) {
    ::prctl(PR_SET_PDEATHSIG, plan.parent_death_signal);
    // The parent may have died between the fork and the request: then nobody would signal us.
    if (::getppid() != plan.parent_pid) ::_exit(128 + plan.parent_death_signal);
  }

  // The listening socket goes to 3 before stdio is touched, since it may sit on 0-2.
  if (plan.listen_fd == kListenFdNumber) {
    if (::fcntl(kListenFdNumber, F_SETFD, 0) < 0) ReportAndExit(plan, ChildStep::kListenFd, errno);
  } else if (plan.listen_fd >= 0) {
    // dup2 clears FD_CLOEXEC on the new descriptor.
    if (::dup2(plan.listen_fd, kListenFdNumber) < 0) {
      ReportAndExit(plan, ChildStep::kListenFd, errno);
    }
  }

  // Not O_CLOEXEC: when 0-2 are closed it lands on one of them and stays; above 2 it is closed
  // with the rest.
  int null_fd = ::open("/dev/null", O_RDWR);
  if (null_fd < 0) ReportAndExit(plan, ChildStep::kOpenDevNull, errno);
  if (null_fd != STDIN_FILENO && ::dup2(null_fd, STDIN_FILENO) < 0) {
    ReportAndExit(plan, ChildStep::kStdio, errno);
  }
  for (int fd : {STDOUT_FILENO, STDERR_FILENO}) {
    int flags = ::fcntl(fd, F_GETFD);
    if (flags < 0) {
      if (::dup2(null_fd, fd) < 0) ReportAndExit(plan, ChildStep::kStdio, errno);
    } else if ((flags & FD_CLOEXEC) != 0 && ::fcntl(fd, F_SETFD, flags & ~FD_CLOEXEC) < 0) {
      ReportAndExit(plan, ChildStep::kStdio, errno);
    }
  }

  // Captured output (SpawnOptions::stdout_fd / stderr_fd): dup2 clears FD_CLOEXEC on 1 and 2; the
  // sources (>= kMinReportFd) are closed below with the rest.
  if ((plan.stdout_fd >= 0 && ::dup2(plan.stdout_fd, STDOUT_FILENO) < 0) ||
      (plan.stderr_fd >= 0 && ::dup2(plan.stderr_fd, STDERR_FILENO) < 0)) {
    ReportAndExit(plan, ChildStep::kOutputFd, errno);
  }

  // Close everything above 2 except the listening socket (3) and the report pipe (closed by exec).
  unsigned int first = plan.listen_fd >= 0 ? kListenFdNumber + 1 : kListenFdNumber;
  unsigned int report = static_cast<unsigned int>(plan.report_fd);
  if (!CloseRange(first, report - 1, plan.close_fallback_limit) ||
      !CloseRange(report + 1, ~0U, plan.close_fallback_limit)) {
    ReportAndExit(plan, ChildStep::kCloseFds, errno);
  }

  if (plan.working_directory != nullptr && ::chdir(plan.working_directory) < 0) {
    ReportAndExit(plan, ChildStep::kChdir, errno);
  }

  if (plan.listen_pid_value != nullptr) FormatDecimal(plan.listen_pid_value, ::getpid());

  // As execvp(3): in a PATH search, ENOENT-like errors move on to the next directory, EACCES is
  // remembered and reported only if no later directory succeeds.
  int32_t denied = -1;
  for (size_t i = 0; i < plan.exec_candidates.size(); ++i) {
    ::execve(plan.exec_candidates[i].c_str(), plan.argv.data(), plan.envp.data());
    int err = errno;
    if (!plan.path_search) ReportAndExit(plan, ChildStep::kExec, err, 0);
    if (err == EACCES) {
      if (denied < 0) denied = static_cast<int32_t>(i);
    } else if (err != ENOENT && err != ENOTDIR && err != ESTALE && err != ENODEV &&
               err != ETIMEDOUT) {
      ReportAndExit(plan, ChildStep::kExec, err, static_cast<int32_t>(i));
    }
  }
  if (denied >= 0) ReportAndExit(plan, ChildStep::kExec, EACCES, denied);
  ReportAndExit(plan, ChildStep::kExec, ENOENT, -1);
}

// ---- Parent side. ----

Status DescribeChildFailure(const ChildReport& report, const SpawnOptions& options,
                            const ChildPlan& plan) {
  int err = report.error_number;
  switch (report.step) {
    case ChildStep::kSignalMask:
      return Status::FromErrno("sigprocmask", err);
    case ChildStep::kSetsid:
      return Status::FromErrno("setsid", err);
    case ChildStep::kListenFd:
      return Status::FromErrno("dup2 listen fd " + std::to_string(options.listen_fd) + " to fd 3",
                               err);
    case ChildStep::kOpenDevNull:
      return Status::FromErrno("open /dev/null", err);
    case ChildStep::kStdio:
      return Status::FromErrno("dup2 /dev/null to stdio", err);
    case ChildStep::kCloseFds:
      return Status::FromErrno("close_range", err);
    case ChildStep::kChdir:
      return Status::FromErrno("chdir " + options.working_directory, err);
    case ChildStep::kOutputFd:
      return Status::FromErrno("dup2 output fd to stdout/stderr", err);
    case ChildStep::kSetgroups:
      return Status::FromErrno(
          "setgroups (" + std::to_string(plan.group_count) + " supplementary groups)", err);
    case ChildStep::kSetgid:
      return Status::FromErrno("setresgid " + std::to_string(plan.gid), err);
    case ChildStep::kSetuid:
      return Status::FromErrno("setresuid " + std::to_string(plan.uid), err);
    case ChildStep::kNoNewPrivileges:
      return Status::FromErrno("prctl PR_SET_NO_NEW_PRIVS", err);
    case ChildStep::kOomScoreAdj:
      return Status::FromErrno(
          "write " + plan.oom_score_adj + " to /proc/self/oom_score_adj" +
              (err == EACCES ? " (going below the oom_score_adj a privileged process set for the "
                               "supervisor needs CAP_SYS_RESOURCE)"
                             : ""),
          err);
    case ChildStep::kExec:
      if (report.candidate >= 0 &&
          static_cast<size_t>(report.candidate) < plan.exec_candidates.size()) {
        return Status::FromErrno("exec " + plan.exec_candidates[report.candidate], err);
      }
      return Status::FromErrno(
          "exec " + options.argv[0] + " (searched PATH=" + SearchPath(options.environment) + ")",
          err);
  }
  return Status::FromErrno("spawn: child step " + std::to_string(static_cast<int>(report.step)),
                           err);
}

void BuildEnvironment(const SpawnOptions& options, ChildPlan* plan) {
  for (const std::string& entry : options.environment) {
    if (!IsListenVariable(entry)) plan->env_storage.push_back(entry);
  }
  size_t listen_pid_index = 0;
  if (options.listen_fd >= 0) {
    plan->env_storage.push_back("LISTEN_FDS=1");
    if (!options.listen_fd_name.empty()) {
      plan->env_storage.push_back("LISTEN_FDNAMES=" + options.listen_fd_name);
    }
    listen_pid_index = plan->env_storage.size();
    // Placeholder: the child writes its own pid here, NUL-terminated, after the fork.
    plan->env_storage.push_back(std::string(kListenPidPrefix) + std::string(kPidDigits, '\0'));
  }
  // Pointers are taken only once env_storage no longer grows.
  for (std::string& entry : plan->env_storage) plan->envp.push_back(entry.data());
  plan->envp.push_back(nullptr);
  if (options.listen_fd >= 0) {
    plan->listen_pid_value = plan->env_storage[listen_pid_index].data() + kListenPidPrefix.size();
  }
}

unsigned int CloseFallbackLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY ||
      limit.rlim_cur > (1u << 20)) {
    return 1u << 20;
  }
  return static_cast<unsigned int>(limit.rlim_cur);
}

// Moves `fd` to a descriptor >= kMinReportFd, keeping FD_CLOEXEC.
Result<UniqueFd> MoveAboveListenFd(UniqueFd fd) {
  if (fd.get() >= kMinReportFd) return fd;
  int moved = ::fcntl(fd.get(), F_DUPFD_CLOEXEC, kMinReportFd);
  if (moved < 0) return Status::FromErrno("spawn: fcntl(F_DUPFD_CLOEXEC)");
  return UniqueFd(moved);
}

pid_t ForkOrClone(const SpawnOptions& options) {
  if (options.cgroup_fd < 0) return ::fork();
  CloneArgs args;
  args.flags = kCloneIntoCgroup;
  args.exit_signal = SIGCHLD;
  args.cgroup = static_cast<uint64_t>(options.cgroup_fd);
  // Without CLONE_VM and with no stack given, the child continues on a copy of this stack, like
  // fork(2) (but without glibc's atfork handlers, which the child does not need).
  return static_cast<pid_t>(::syscall(SYS_clone3, &args, sizeof args));
}

Status ForkError(const SpawnOptions& options, int err) {
  if (options.cgroup_fd < 0) return Status::FromErrno("fork", err);
  std::string what = "clone3 into cgroup fd " + std::to_string(options.cgroup_fd);
  if (err == ENOSYS || err == E2BIG) {
    what += " (CLONE_INTO_CGROUP needs Linux >= 5.7)";
  }
  return Status::FromErrno(what, err);
}

// This process's /proc/self/oom_score_adj, or nullopt when it cannot be read.
std::optional<int> OwnOomScoreAdj() {
  UniqueFd fd(::open("/proc/self/oom_score_adj", O_RDONLY | O_CLOEXEC));
  if (!fd) return std::nullopt;
  char text[16] = {};
  ssize_t n = 0;
  do {
    n = ::read(fd.get(), text, sizeof text - 1);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return std::nullopt;
  int value = 0;
  auto [end, ec] = std::from_chars(text, text + n, value);
  if (ec != std::errc() || (end != text + n && *end != '\n')) return std::nullopt;
  return value;
}

void Reap(pid_t pid) {
  int wait_status = 0;
  while (::waitpid(pid, &wait_status, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace

// What names a failed step in its Status (DescribeChildFailure), kept past SpawnStarted's return.
struct PendingExec::Names {
  SpawnOptions options;
  ChildPlan plan;  // exec_candidates, group_count, gid, uid and oom_score_adj only
};

PendingExec::PendingExec() = default;
PendingExec::PendingExec(UniqueFd report, std::unique_ptr<Names> names)
    : report_(std::move(report)), names_(std::move(names)), outcome_(std::nullopt) {}
PendingExec::~PendingExec() = default;
PendingExec::PendingExec(PendingExec&&) noexcept = default;
PendingExec& PendingExec::operator=(PendingExec&&) noexcept = default;

std::optional<Status> PendingExec::Poll() {
  if (!report_.valid()) return outcome_;
  ChildReport report{};
  ssize_t n;
  do {
    n = ::read(report_.get(), &report, sizeof report);
  } while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return std::nullopt;
  if (n == 0) {
    outcome_ = Status::Ok();  // EOF without a report: execve succeeded and closed the write end
  } else if (n != static_cast<ssize_t>(sizeof report)) {
    // The child writes its report in one write of less than PIPE_BUF: whole or not at all.
    outcome_ = n < 0 ? Status::FromErrno("spawn: read of the child's report")
                     : Status::Error("spawn: truncated failure report from the child");
  } else {
    outcome_ = DescribeChildFailure(report, names_->options, names_->plan);
  }
  report_.Reset();
  names_.reset();
  return outcome_;
}

Result<pid_t> Spawn(const SpawnOptions& options) {
  Result<StartedChild> started = SpawnStarted(options);
  if (!started.ok()) return started.status();
  std::optional<Status> outcome;
  while (!(outcome = started->exec.Poll())) {
    pollfd p{.fd = started->exec.fd(), .events = POLLIN, .revents = 0};
    ::poll(&p, 1, -1);
  }
  if (outcome->ok()) return started->pid;
  Reap(started->pid);
  return *outcome;
}

Result<StartedChild> SpawnStarted(const SpawnOptions& options) {
  if (options.argv.empty() || options.argv[0].empty()) {
    return Status::Error("spawn: argv[0] is empty");
  }

  ChildPlan plan;
  plan.path_search = options.argv[0].find('/') == std::string::npos;
  plan.exec_candidates = ExecCandidates(options.argv[0], SearchPath(options.environment));
  for (const std::string& arg : options.argv) plan.argv.push_back(const_cast<char*>(arg.c_str()));
  plan.argv.push_back(nullptr);
  BuildEnvironment(options, &plan);
  if (!options.working_directory.empty())
    plan.working_directory = options.working_directory.c_str();
  plan.listen_fd = options.listen_fd;
  plan.close_fallback_limit = CloseFallbackLimit();
  plan.parent_death_signal = options.parent_death_signal;
  plan.parent_pid = ::getpid();
  if (options.credentials) {
    plan.change_credentials = true;
    plan.uid = options.credentials->uid;
    plan.gid = options.credentials->gid;
    plan.groups = options.credentials->supplementary_groups.data();
    plan.group_count = options.credentials->supplementary_groups.size();
  }
  plan.umask = options.umask & 0777;
  plan.no_new_privileges = options.no_new_privileges;
  if (options.oom_score_adj && OwnOomScoreAdj() != options.oom_score_adj) {
    plan.oom_score_adj = std::to_string(*options.oom_score_adj);
  }

  int pipe_fds[2];
  // The read end non-blocking: PendingExec::Poll never waits. The write end is too, harmlessly:
  // the child's one report (under PIPE_BUF) into the empty pipe never waits either.
  if (::pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0) return Status::FromErrno("spawn: pipe2");
  UniqueFd report_read(pipe_fds[0]);
  Result<UniqueFd> report_write = MoveAboveListenFd(UniqueFd(pipe_fds[1]));
  if (!report_write.ok()) return report_write.status();
  plan.report_fd = report_write->get();
  plan.report_read_fd = report_read.get();
  // Output descriptors on 0-3 would be overwritten before the child's dup2 to 1 and 2: copies
  // above 3 (close-on-exec) are used instead, held until the child has exec'd.
  UniqueFd stdout_copy;
  UniqueFd stderr_copy;
  for (auto [given, copy, planned] :
       {std::tuple{options.stdout_fd, &stdout_copy, &plan.stdout_fd},
        std::tuple{options.stderr_fd, &stderr_copy, &plan.stderr_fd}}) {
    *planned = given;
    if (given < 0 || given >= kMinReportFd) continue;
    int moved = ::fcntl(given, F_DUPFD_CLOEXEC, kMinReportFd);
    if (moved < 0) return Status::FromErrno("spawn: fcntl(F_DUPFD_CLOEXEC) of an output fd");
    copy->Reset(moved);
    *planned = moved;
  }

  // Block every signal across the fork so that no handler of the parent runs in the child before
  // it resets the dispositions; the child empties its mask, the parent restores its own.
  sigset_t all;
  sigset_t saved;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &saved);
  pid_t pid = ForkOrClone(options);
  if (pid == 0) RunChild(plan);
  int fork_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  report_write->Reset();
  if (pid < 0) return ForkError(options, fork_errno);

  auto names = std::make_unique<PendingExec::Names>();
  names->options = options;
  names->plan.exec_candidates = std::move(plan.exec_candidates);
  names->plan.group_count = plan.group_count;
  names->plan.gid = plan.gid;
  names->plan.uid = plan.uid;
  names->plan.oom_score_adj = std::move(plan.oom_score_adj);
  return StartedChild{pid, PendingExec(std::move(report_read), std::move(names))};
}

std::string DescribeWaitStatus(int wait_status) {
  if (WIFEXITED(wait_status)) return "exit " + std::to_string(WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    std::string text = "signal " + std::to_string(WTERMSIG(wait_status));
    if (WCOREDUMP(wait_status)) text += " (core dumped)";
    return text;
  }
  if (WIFSTOPPED(wait_status)) return "stopped by signal " + std::to_string(WSTOPSIG(wait_status));
  if (WIFCONTINUED(wait_status)) return "continued";
  return "wait status " + std::to_string(wait_status);
}

}  // namespace bulkhead::cell
