// SPDX-License-Identifier: MIT
#include "proxy/link.h"

#include <sys/socket.h>
#include <sys/un.h>

#include <cstring>

namespace bulkhead::proxy {

Result<UniqueFd> ConnectWorkerSocket(const std::string& path) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return Status::FromErrno("socket");
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return Status::Error("socket path too long: " + path);
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    return Status::FromErrno("connect " + path);
  }
  return fd;
}

}  // namespace bulkhead::proxy
