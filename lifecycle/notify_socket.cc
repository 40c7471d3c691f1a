// SPDX-License-Identifier: MIT
#include "lifecycle/notify_socket.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/log.h"

namespace bulkhead::lifecycle {

NotifySocket::NotifySocket(uv_loop_t* loop, Handler handler)
    : loop_(loop), handler_(std::move(handler)) {}

Status NotifySocket::Bind(const std::string& path, const std::optional<ipc::SocketAccess>& access) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return Status::FromErrno("socket");
  int on = 1;
  if (::setsockopt(fd.get(), SOL_SOCKET, SO_PASSCRED, &on, sizeof on) != 0) {
    return Status::FromErrno("setsockopt SO_PASSCRED");
  }
  Result<ipc::SocketFile> file = ipc::BindSocketFile(fd.get(), path, access);
  if (!file.ok()) return file.status();
  Status status = Serve(std::move(fd), path, std::move(file).value());
  if (!status.ok()) file_.Remove();
  return status;
}

Status NotifySocket::Adopt(UniqueFd fd, const std::string& path) {
  Result<ipc::SocketFile> file = ipc::SocketFile::Record(path);
  if (!file.ok()) return Status::Error(path + ": " + file.status().message());
  return Serve(std::move(fd), path, std::move(file).value());
}

Status NotifySocket::Serve(UniqueFd fd, const std::string& path, ipc::SocketFile file) {
  file_ = std::move(file);
  Result<uv_poll_t*> poll = handles_.TryOpen(uv_poll_init, loop_, fd.get());
  if (!poll.ok()) return Status::Error("uv_poll_init: " + poll.status().message());
  poll_ = *poll;
  poll_->data = this;
  uv_poll_start(poll_, UV_READABLE, &NotifySocket::OnReadable);
  path_ = path;
  fd_ = std::move(fd);
  return Status::Ok();
}

void NotifySocket::OnReadable(uv_poll_t* handle, int status, int) {
  auto* self = static_cast<NotifySocket*>(handle->data);
  if (status < 0) return;
  // On the stack, not in the socket: a cell's worker sends a few datagrams in its life, and an
  // idle cell should not hold 4 KiB for them (issue 25 section 8).
  char buffer[cell::kMaxNotifyMessageBytes + 1];
  for (;;) {
    iovec iov{buffer, sizeof buffer};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(ucred))];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t n = ::recvmsg(self->fd_.get(), &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC | MSG_TRUNC);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // EAGAIN: drained
    }
    pid_t sender = 0;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
        ucred cred;
        std::memcpy(&cred, CMSG_DATA(c), sizeof cred);
        sender = cred.pid;
      }
    }
    if (sender <= 0 || static_cast<size_t>(n) > cell::kMaxNotifyMessageBytes) continue;
    Result<cell::NotifyMessage> parsed =
        cell::ParseNotifyMessage(std::string_view(buffer, static_cast<size_t>(n)));
    if (!parsed.ok()) {
      Log(LogLevel::kDebug, {}, sender, "notify message ignored: " + parsed.status().message());
      continue;
    }
    self->handler_(sender, *parsed);
  }
}

void NotifySocket::Close(std::function<void()> on_closed) {
  file_.Remove();
  // The descriptor is closed once libuv no longer polls it.
  handles_.Close([this, on_closed = std::move(on_closed)] {
    fd_.Reset();
    if (on_closed) on_closed();
  });
}

}  // namespace bulkhead::lifecycle
