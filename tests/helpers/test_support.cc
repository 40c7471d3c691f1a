// SPDX-License-Identifier: MIT
#include "tests/helpers/test_support.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace bulkhead::testing {

TempDir::TempDir() {
  Status created = Create("bulkhead-test");
  if (!created.ok()) {
    std::fprintf(stderr, "%s\n", created.message().c_str());
    std::abort();
  }
}

Result<UniqueFd> ListenUnix(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof address.sun_path) {
    return Status::Error("socket path too long: " + path);
  }
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return Status::FromErrno("socket");
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    return Status::FromErrno("bind " + path);
  }
  if (::listen(fd.get(), 128) != 0) return Status::FromErrno("listen " + path);
  return fd;
}

Result<TcpListener> ListenTcpLoopback() {
  TcpListener listener{UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)), ""};
  if (!listener.fd) return Status::FromErrno("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(listener.fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    return Status::FromErrno("bind 127.0.0.1:0");
  }
  if (::listen(listener.fd.get(), 1) != 0) return Status::FromErrno("listen 127.0.0.1");
  socklen_t len = sizeof addr;
  if (::getsockname(listener.fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return Status::FromErrno("getsockname");
  }
  listener.address = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  return listener;
}

Result<UniqueFd> ConnectTcp(std::string_view address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string_view::npos)
    return Status::Error("not HOST:PORT: " + std::string(address));
  std::string host(address.substr(0, colon));
  const int port = std::atoi(std::string(address.substr(colon + 1)).c_str());
  sockaddr_storage addr{};
  socklen_t len = 0;
  if (host.size() >= 2 && host.front() == '[') {
    host = host.substr(1, host.size() - 2);
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&addr);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(static_cast<uint16_t>(port));
    if (inet_pton(AF_INET6, host.c_str(), &in6->sin6_addr) != 1) {
      return Status::Error("not an IPv6 address: " + host);
    }
    len = sizeof *in6;
  } else {
    auto* in4 = reinterpret_cast<sockaddr_in*>(&addr);
    in4->sin_family = AF_INET;
    in4->sin_port = htons(static_cast<uint16_t>(port));
    if (inet_pton(AF_INET, host.c_str(), &in4->sin_addr) != 1) {
      return Status::Error("not an IPv4 address: " + host);
    }
    len = sizeof *in4;
  }
  UniqueFd fd(::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return Status::FromErrno("socket");
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), len) != 0) {
    return Status::FromErrno("connect " + std::string(address));
  }
  return fd;
}

bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    ::poll(nullptr, 0, 2);
  }
}

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream content;
  content << in.rdbuf();
  return content.str();
}

Status WriteFileAtomically(const std::string& path, std::string_view content) {
  std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) return Status::FromErrno("open " + temporary);
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    if (!out) return Status::FromErrno("write " + temporary);
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) return Status::FromErrno("rename " + path);
  return Status::Ok();
}

void CreateFlag(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
  if (!fd) {
    std::fprintf(stderr, "CreateFlag: cannot create %s: %s\n", path.c_str(), std::strerror(errno));
    std::abort();
  }
}

std::optional<int> ChildGuard::WaitExit(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return std::nullopt;
  int wait_status = 0;
  bool exited = WaitFor(
      [&] {
        pid_t reaped = ::waitpid(pid_, &wait_status, WNOHANG);
        return reaped == pid_ || (reaped < 0 && errno == ECHILD);
      },
      timeout);
  if (!exited) return std::nullopt;
  pid_ = -1;
  return wait_status;
}

std::optional<int> ChildGuard::Kill() {
  if (pid_ <= 0) return std::nullopt;
  ::kill(-pid_, SIGKILL);
  ::kill(pid_, SIGKILL);
  int wait_status = 0;
  pid_t reaped;
  do {
    reaped = ::waitpid(pid_, &wait_status, 0);
  } while (reaped < 0 && errno == EINTR);
  pid_ = -1;
  if (reaped < 0) return std::nullopt;
  return wait_status;
}

ScopedFdSlot::ScopedFdSlot(int fd) : fd_(fd) {
  int flags = ::fcntl(fd, F_GETFD);
  if (flags < 0) return;
  parked_flags_ = flags;
  parked_ = ::fcntl(fd, F_DUPFD_CLOEXEC, fd + 1);
  if (parked_ < 0) {
    std::perror("fcntl(F_DUPFD_CLOEXEC)");
    std::abort();
  }
  ::close(fd);
}

ScopedFdSlot::~ScopedFdSlot() {
  if (parked_ < 0) {
    ::close(fd_);
    return;
  }
  ::dup3(parked_, fd_, (parked_flags_ & FD_CLOEXEC) != 0 ? O_CLOEXEC : 0);
  ::close(parked_);
}

bool BecomeSubreaper() { return ::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0; }

bool ProcessExists(pid_t pid) { return pid > 0 && ::kill(pid, 0) == 0; }

std::optional<ProcStat> ReadProcStat(pid_t pid) {
  std::optional<std::string> stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return std::nullopt;
  // "pid (comm) S ppid ...": comm may hold spaces and parentheses, so parse after the last ") ".
  size_t after_comm = stat->rfind(") ");
  if (after_comm == std::string::npos) return std::nullopt;
  std::istringstream fields(stat->substr(after_comm + 2));
  ProcStat out;
  if (!(fields >> out.state >> out.ppid)) return std::nullopt;
  return out;
}

std::vector<pid_t> ZombieChildrenOf(pid_t parent) {
  std::vector<pid_t> zombies;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", error)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(name));
    std::optional<ProcStat> stat = ReadProcStat(pid);
    if (stat && stat->ppid == parent && stat->state == 'Z') zombies.push_back(pid);
  }
  return zombies;
}

}  // namespace bulkhead::testing
