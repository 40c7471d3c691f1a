// SPDX-License-Identifier: MIT
#include "bench/sockets.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

namespace bulkhead::bench {

namespace {

sockaddr_in LoopbackAddress(uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  return addr;
}

}  // namespace

Result<UniqueFd> ListenUnix(const std::string& path, int backlog) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return Status::Error("socket path too long: " + path);
  path.copy(addr.sun_path, path.size());
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return Status::FromErrno("socket");
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    return Status::FromErrno("bind " + path);
  }
  if (::listen(fd.get(), backlog) != 0) return Status::FromErrno("listen " + path);
  return fd;
}

Result<UniqueFd> ListenLoopback(uint16_t port, int backlog) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return Status::FromErrno("socket");
  const int on = 1;
  if (::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0) {
    return Status::FromErrno("setsockopt SO_REUSEADDR");
  }
  const sockaddr_in addr = LoopbackAddress(port);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    return Status::FromErrno("bind 127.0.0.1:" + std::to_string(port));
  }
  if (::listen(fd.get(), backlog) != 0) return Status::FromErrno("listen");
  return fd;
}

Result<uint16_t> LocalPort(int fd) {
  sockaddr_in addr{};
  socklen_t length = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length) != 0) {
    return Status::FromErrno("getsockname");
  }
  return static_cast<uint16_t>(ntohs(addr.sin_port));
}

Result<uint16_t> FreeLoopbackPort() {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return Status::FromErrno("socket");
  const sockaddr_in addr = LoopbackAddress(0);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    return Status::FromErrno("bind 127.0.0.1:0");
  }
  return LocalPort(fd.get());
}

bool AcceptsOnLoopback(uint16_t port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return false;
  const sockaddr_in addr = LoopbackAddress(port);
  return ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
}

}  // namespace bulkhead::bench
