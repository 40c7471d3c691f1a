// SPDX-License-Identifier: MIT
#include "supervisor/reexec.h"

#include <fcntl.h>
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
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string_view>

#include "base/log.h"
#include "config/listen_address.h"
#include "supervisor/reexec_state.h"

extern char** environ;

namespace bulkhead::supervisor {

namespace {

constexpr std::string_view kDeleted = " (deleted)";

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
    case ReexecPhase::kSettling:
      return "settling";
    case ReexecPhase::kChecking:
      return "checking";
    case ReexecPhase::kDraining:
      return "draining";
    case ReexecPhase::kClosingLog:
      return "closing-log";
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

std::optional<FileId> FileIdOf(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return FileId{.dev = st.st_dev, .ino = st.st_ino};
}

std::string AbsoluteArgv0(std::string_view argv0, std::string_view cwd) {
  if (argv0.find('/') == std::string_view::npos) return "";
  std::filesystem::path path(argv0);
  if (path.is_relative()) path = std::filesystem::path(cwd) / path;
  return path.lexically_normal().string();
}

Result<std::string> StartedAsPath() {
  Result<std::string> own = OwnBinaryPath();
  if (!own.ok()) return own;
  Result<std::vector<std::string>> arguments = OwnArguments();
  char cwd[4096];
  if (!arguments.ok() || ::getcwd(cwd, sizeof cwd) == nullptr) return own;
  const std::string argv0 = AbsoluteArgv0(arguments->front(), cwd);
  const std::optional<FileId> named = argv0.empty() ? std::nullopt : FileIdOf(argv0);
  if (!named || named != FileIdOf("/proc/self/exe")) return own;
  return argv0;
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
  // An earlier re-exec's fds are long closed: drop its flags and their values.
  std::vector<std::string> kept;
  for (size_t i = 0; i < arguments.size(); ++i) {
    bool dropped = false;
    for (std::string_view flag : {kStateFlag, kFallbackExeFlag, kFellBackFlag}) {
      if (i == 0) break;
      if (arguments[i] == flag) {
        ++i;
        dropped = true;
        break;
      }
      if (arguments[i].starts_with(std::string(flag) + "=")) {
        dropped = true;
        break;
      }
    }
    if (!dropped) kept.push_back(std::move(arguments[i]));
  }
  return kept;
}

Result<VersionsChild> SpawnVersionsChild(const std::string& binary) {
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
  const int flags = ::fcntl(read_end.get(), F_GETFL);
  if (flags < 0 || ::fcntl(read_end.get(), F_SETFL, flags | O_NONBLOCK) != 0) {
    Status status = Status::FromErrno(what + ": fcntl O_NONBLOCK");
    ::kill(pid, SIGKILL);  // reaped by the reaper
    return status;
  }
  return VersionsChild{.pid = pid, .stdout_read = std::move(read_end)};
}

Status JudgeStateVersions(const std::string& binary, int version, std::string_view output,
                          int wait_status) {
  const std::string what = binary + " --reexec-state-versions";
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

namespace {

// Clears FD_CLOEXEC on `keep`, blocks the handled signals, runs `exec` (which returns only on
// failure, with errno set), then puts the flags and the mask back. Returns exec's error.
template <typename Exec>
Status ExecKeeping(const std::vector<int>& keep, const std::string& what, Exec exec) {
  std::vector<int> cleared;
  Status status = Status::Ok();
  for (int fd : keep) {
    const int flags = ::fcntl(fd, F_GETFD);
    if (flags < 0 || ::fcntl(fd, F_SETFD, flags & ~FD_CLOEXEC) != 0) {
      status = Status::FromErrno("fcntl fd " + std::to_string(fd) + " F_SETFD");
      break;
    }
    cleared.push_back(fd);
  }
  if (status.ok()) {
    const sigset_t handled = HandledSignals();
    sigset_t before;
    ::pthread_sigmask(SIG_BLOCK, &handled, &before);
    exec();
    status = Status::FromErrno(what);
    ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
  }
  for (int fd : cleared) (void)SetCloexec(fd);
  return status;
}

std::vector<char*> Argv(std::vector<std::string>& args) {
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  return argv;
}

}  // namespace

Result<UniqueFd> OpenOwnBinary() {
  const int fd = ::open("/proc/self/exe", O_PATH | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno("open /proc/self/exe");
  return UniqueFd(fd);
}

Status ExecWithState(const std::string& binary, const std::vector<std::string>& arguments,
                     int state_fd, const std::vector<int>& keep, int fallback_exe_fd) {
  std::vector<int> fds = keep;
  fds.push_back(state_fd);
  std::vector<std::string> args = arguments;
  args.emplace_back(kStateFlag);
  args.push_back(std::to_string(state_fd));
  if (fallback_exe_fd >= 0) {
    fds.push_back(fallback_exe_fd);
    args.emplace_back(kFallbackExeFlag);
    args.push_back(std::to_string(fallback_exe_fd));
  }
  std::vector<char*> argv = Argv(args);
  return ExecKeeping(fds, "execve " + binary,
                     [&] { ::execve(binary.c_str(), argv.data(), environ); });
}

Status ExecFallback(int exe_fd, const std::vector<std::string>& arguments, int state_fd,
                    const std::vector<int>& keep, const std::string& why) {
  std::vector<int> fds = keep;
  fds.push_back(state_fd);
  std::vector<std::string> args = arguments;
  args.emplace_back(kStateFlag);
  args.push_back(std::to_string(state_fd));
  args.emplace_back(kFellBackFlag);
  args.push_back(why);
  std::vector<char*> argv = Argv(args);
  // Not kept: the previous binary's fd would leak into it (an ELF runs from a CLOEXEC fd).
  (void)SetCloexec(exe_fd);
  return ExecKeeping(fds, "execveat fd " + std::to_string(exe_fd) + " (the previous binary)", [&] {
    ::syscall(SYS_execveat, exe_fd, "", argv.data(), environ, AT_EMPTY_PATH);
  });
}

void ReexecFallBack(ReexecFallback fallback, const std::vector<int>& keep, const std::string& why) {
  LogError("re-exec: this image cannot take the state over: " + why);
  if (!fallback.exe) {
    LogError(
        "re-exec: no previous binary to run again (no --reexec-fallback-exe: this image is the "
        "fallback, or was started with --reexec-state by hand): exiting");
    return;
  }
  Result<std::vector<std::string>> arguments = OwnArguments();
  Status status = arguments.ok() ? Status::Ok() : arguments.status();
  if (status.ok()) {
    LogError(
        "re-exec: running the previous binary again with the same state; its workers keep "
        "their pids");
    // A fd this image failed to adopt because it is closed cannot be kept; the others are.
    std::vector<int> open;
    for (int fd : keep) {
      if (::fcntl(fd, F_GETFD) >= 0) open.push_back(fd);
    }
    status = ExecFallback(fallback.exe.get(), *arguments, fallback.state.get(), open, why);
  }
  LogError("re-exec: the previous binary cannot be run again, exiting: " + status.message());
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

Result<UniqueFd> TakeListeningFd(int fd, const std::string& address, const std::string& also) {
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
  if (*bound != address && (also.empty() || *bound != also)) {
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
