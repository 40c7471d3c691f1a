// SPDX-License-Identifier: MIT
#include "proxy/link.h"

#include <sys/socket.h>
#include <sys/un.h>

#include <cstring>

#include "base/check.h"
#include "base/unique_fd.h"

namespace bulkhead::proxy {

namespace {

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

}  // namespace

size_t Link::OnBodyBytes(Exchange*, std::string_view, bool) {
  BH_CHECK(false && "this link carries no streamed body");
  return 0;
}

void Link::OnBodyAborted(Exchange*, const std::string&) {
  BH_CHECK(false && "this link carries no streamed body");
}

Status Link::Open(uv_loop_t* loop, const std::string& path, uv_alloc_cb alloc, uv_read_cb read,
                  uv_close_cb closed) {
  uv_pipe_init(loop, &pipe_, 0);
  Result<UniqueFd> connected = ConnectWorkerSocket(path);
  Status status = connected.status();
  if (connected.ok()) {
    int rc = uv_pipe_open(&pipe_, connected->get());
    if (rc == 0) {
      connected->Release();
      uv_read_start(reinterpret_cast<uv_stream_t*>(&pipe_), alloc, read);
      return status;
    }
    status = Status::Error(std::string("uv_pipe_open: ") + uv_strerror(rc));
  }
  closing_ = true;
  uv_close(reinterpret_cast<uv_handle_t*>(&pipe_), closed);
  return status;
}

}  // namespace bulkhead::proxy
