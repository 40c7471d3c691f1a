// SPDX-License-Identifier: MIT
#include "supervisor/reexec.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string_view>

#include "base/clock.h"
#include "config/listen_address.h"
#include "supervisor/reexec_state.h"

extern char** environ;

namespace bulkhead::supervisor {

namespace {

constexpr std::string_view kDeleted = " (deleted)";
constexpr std::string_view kStateFlag = "--reexec-state";

// The signals bulkheadd handles (Supervisor::HandleSignals): none may take its default action
// (termination, for most) between the exec and the new image's handlers.
sigset_t HandledSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int signum :
       {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGRTMIN + 3, SIGRTMIN + 4}) {
    sigaddset(&set, signum);
  }
  return set;
}

}  // namespace

const char* ReexecPhaseName(ReexecPhase phase) {
  switch (phase) {
    case ReexecPhase::kIdle:
      return "idle";
    case ReexecPhase::kDraining:
      return "draining";
    case ReexecPhase::kExecuting:
      return "executing";
  }
  return "?";
}

Result<std::string> OwnBinaryPath() {
  char buffer[4096];
  ssize_t n = ::readlink("/proc/self/exe", buffer, sizeof buffer - 1);
  if (n < 0) return Status::FromErrno("readlink /proc/self/exe");
  std::string path(buffer, static_cast<size_t>(n));
  // The kernel names a replaced binary "PATH (deleted)": the file at PATH now is the new one.
  if (path.size() > kDeleted.size() && path.ends_with(kDeleted)) {
    path.resize(path.size() - kDeleted.size());
  }
  return path;
}

Result<std::vector<std::string>> OwnArguments() {
  std::ifstream file("/proc/self/cmdline", std::ios::binary);
  if (!file) return Status::FromErrno("open /proc/self/cmdline");
  const std::string cmdline((std::istreambuf_iterator<char>(file)),
                            std::istreambuf_iterator<char>());
  std::vector<std::string> arguments;
  size_t at = 0;
  while (at < cmdline.size()) {
    size_t end = cmdline.find('\0', at);
    if (end == std::string::npos) end = cmdline.size();
    arguments.emplace_back(cmdline, at, end - at);
    at = end + 1;
  }
  if (arguments.empty()) return Status::Error("/proc/self/cmdline is empty");
  // An earlier re-exec's state fd is long closed: drop the flag and its value.
  std::vector<std::string> kept;
  for (size_t i = 0; i < arguments.size(); ++i) {
    if (i > 0 && arguments[i] == kStateFlag) {
      ++i;
      continue;
    }
    if (i > 0 && arguments[i].starts_with(std::string(kStateFlag) + "=")) continue;
    kept.push_back(std::move(arguments[i]));
  }
  return kept;
}

Status CheckStateVersions(const std::string& binary, int version, uint64_t timeout_ms) {
  const std::string what = binary + " --reexec-state-versions";
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return Status::FromErrno(what + ": pipe2");
  UniqueFd read_end(pipe_fds[0]);
  UniqueFd write_end(pipe_fds[1]);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, write_end.get(), STDOUT_FILENO);
  // The child starts with no signal blocked and every signal at its default.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  sigset_t all;
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::string arg0 = binary;
  std::string arg1 = "--reexec-state-versions";
  char* argv[] = {arg0.data(), arg1.data(), nullptr};
  pid_t pid = 0;
  const int spawned = ::posix_spawn(&pid, binary.c_str(), &actions, &attr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (spawned != 0) return Status::FromErrno("exec " + binary, spawned);
  write_end.Reset();

  // Its output until EOF, bounded by the deadline.
  const uint64_t deadline = MonotonicClock().NowMs() + timeout_ms;
  std::string output;
  bool timed_out = false;
  while (true) {
    const uint64_t now = MonotonicClock().NowMs();
    if (now >= deadline) {
      timed_out = true;
      break;
    }
    pollfd p{.fd = read_end.get(), .events = POLLIN, .revents = 0};
    int ready = ::poll(&p, 1, static_cast<int>(std::min<uint64_t>(deadline - now, 1000)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    char buffer[256];
    ssize_t n = ::read(read_end.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (output.size() < 4096) output.append(buffer, static_cast<size_t>(n));
  }
  // Once its stdout is closed it is exiting; a child that closed it and hangs is killed at the
  // deadline all the same.
  int wait_status = 0;
  while (true) {
    pid_t reaped = ::waitpid(pid, &wait_status, WNOHANG);
    if (reaped == pid) break;
    if (reaped < 0 && errno != EINTR) return Status::FromErrno(what + ": waitpid");
    if (timed_out || MonotonicClock().NowMs() >= deadline) {
      timed_out = true;
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &wait_status, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    pollfd none_fd{.fd = -1, .events = 0, .revents = 0};
    ::poll(&none_fd, 0, 5);  // a child past its EOF exits in microseconds
  }
  if (timed_out) {
    return Status::Error(what + ": no answer within " + std::to_string(timeout_ms) + " ms");
  }
  if (WIFSIGNALED(wait_status)) {
    return Status::Error(what + ": killed by signal " + std::to_string(WTERMSIG(wait_status)));
  }
  if (WEXITSTATUS(wait_status) != 0) {
    return Status::Error(what + ": exit " + std::to_string(WEXITSTATUS(wait_status)) +
                         " (a bulkheadd too old to re-execute into, or not bulkheadd)");
  }
  Result<std::vector<int>> versions = ParseVersionsLine(output);
  if (!versions.ok()) return Status::Error(binary + ": " + versions.status().message());
  if (std::find(versions->begin(), versions->end(), version) == versions->end()) {
    std::string read;
    for (int v : *versions) read += (read.empty() ? "" : " ") + std::to_string(v);
    return Status::Error(what + ": reads " + read + ", this bulkheadd writes " +
                         std::to_string(version));
  }
  return Status::Ok();
}

Status ExecWithState(const std::string& binary, const std::vector<std::string>& arguments,
                     int state_fd, const std::vector<int>& keep) {
  std::vector<int> fds = keep;
  fds.push_back(state_fd);
  std::vector<int> cleared;
  Status status = Status::Ok();
  for (int fd : fds) {
    const int flags = ::fcntl(fd, F_GETFD);
    if (flags < 0 || ::fcntl(fd, F_SETFD, flags & ~FD_CLOEXEC) != 0) {
      status = Status::FromErrno("fcntl fd " + std::to_string(fd) + " F_SETFD");
      break;
    }
    cleared.push_back(fd);
  }
  if (status.ok()) {
    std::vector<std::string> args = arguments;
    args.emplace_back(kStateFlag);
    args.push_back(std::to_string(state_fd));
    std::vector<char*> argv;
    argv.reserve(args.size() + 1);
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    const sigset_t handled = HandledSignals();
    sigset_t before;
    ::pthread_sigmask(SIG_BLOCK, &handled, &before);
    ::execve(binary.c_str(), argv.data(), environ);
    status = Status::FromErrno("execve " + binary);
    ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
  }
  for (int fd : cleared) (void)SetCloexec(fd);
  return status;
}

void UnblockReexecSignals() {
  const sigset_t handled = HandledSignals();
  ::pthread_sigmask(SIG_UNBLOCK, &handled, nullptr);
}

Status SetCloexec(int fd) {
  const int flags = ::fcntl(fd, F_GETFD);
  if (flags < 0 || ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC) != 0) {
    return Status::FromErrno("fcntl fd " + std::to_string(fd) + " FD_CLOEXEC");
  }
  return Status::Ok();
}

Result<std::string> SocketAddress(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return Status::FromErrno("getsockname fd " + std::to_string(fd));
  }
  if (addr.ss_family == AF_UNIX) {
    const auto* un = reinterpret_cast<const sockaddr_un*>(&addr);
    const size_t max =
        len > offsetof(sockaddr_un, sun_path) ? len - offsetof(sockaddr_un, sun_path) : 0;
    return std::string(un->sun_path, strnlen(un->sun_path, max));
  }
  Result<config::ListenAddress> tcp =
      config::ListenAddressFromSockaddr(reinterpret_cast<const sockaddr*>(&addr));
  if (!tcp.ok()) return Status::Error("fd " + std::to_string(fd) + ": " + tcp.status().message());
  return tcp->ToString();
}

Result<UniqueFd> TakeListeningFd(int fd, const std::string& address) {
  const std::string where = "fd " + std::to_string(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Status::FromErrno(where);
  if (!S_ISSOCK(st.st_mode)) return Status::Error(where + ": not a socket");
  int listening = 0;
  socklen_t len = sizeof listening;
  if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0) {
    return Status::FromErrno(where + ": getsockopt SO_ACCEPTCONN");
  }
  Result<std::string> bound = SocketAddress(fd);
  if (!bound.ok()) return bound.status();
  if (*bound != address) {
    return Status::Error(where + ": bound to " + *bound + ", not " + address);
  }
  Status cloexec = SetCloexec(fd);
  if (!cloexec.ok()) return cloexec;
  // A datagram socket (the notify socket) never listens; a stream one must.
  int type = 0;
  len = sizeof type;
  if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0) {
    return Status::FromErrno(where + ": getsockopt SO_TYPE");
  }
  if (type == SOCK_STREAM && listening == 0) return Status::Error(where + ": not listening");
  return UniqueFd(fd);
}

}  // namespace bulkhead::supervisor
