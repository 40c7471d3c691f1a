// SPDX-License-Identifier: MIT
// Blocking frame-protocol client (ipc/client.h).
#include "ipc/client.h"

#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>

#include <cerrno>
#include <utility>

#include "ipc/io.h"

namespace bulkhead::ipc {

Result<UniqueFd> ConnectUnix(const std::string& socket_path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.empty() || socket_path.size() >= sizeof(addr.sun_path)) {
    return Status::Error("socket path \"" + socket_path + "\" must be 1 to " +
                         std::to_string(sizeof(addr.sun_path) - 1) + " bytes long");
  }
  socket_path.copy(addr.sun_path, socket_path.size());
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return Status::FromErrno("socket for " + socket_path);
  // A Unix stream connect that was interrupted (while the listen backlog was full) left the
  // socket unconnected, so it is simply retried.
  int rc;
  do {
    rc = ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  } while (rc < 0 && errno == EINTR);
  if (rc < 0) return Status::FromErrno("connect " + socket_path);
  return fd;
}

Result<Client> Client::Connect(const std::string& socket_path, uint32_t max_payload) {
  Result<UniqueFd> fd = ConnectUnix(socket_path);
  if (!fd.ok()) return fd.status();
  return Client(std::move(fd).value(), socket_path, max_payload);
}

Client Client::FromFd(UniqueFd fd, std::string peer, uint32_t max_payload) {
  return Client(std::move(fd), std::move(peer), max_payload);
}

Client::Client(UniqueFd fd, std::string peer, uint32_t max_payload)
    : fd_(std::move(fd)), peer_(std::move(peer)), decoder_(FrameType::kReply, max_payload) {}

Status Client::ClosedError() const { return Status::Error(peer_ + ": client is closed"); }

Status Client::Send(uint64_t request_id, std::string_view payload) {
  if (!fd_) return ClosedError();
  Status status = WriteFrame(
      fd_.get(), FrameHeader{.type = FrameType::kRequest, .request_id = request_id}, payload);
  if (status.ok()) return status;
  if (status.error_number() == EAGAIN || status.error_number() == EWOULDBLOCK) {
    return Status::Error(peer_ + ": timed out after " + std::to_string(timeout_.count()) +
                         " ms sending a request");
  }
  return Status::FromErrno(peer_ + ": send", status.error_number());
}

Result<Client::Reply> Client::Receive() {
  if (!fd_) return ClosedError();
  while (true) {
    FrameView frame;
    switch (decoder_.Next(&frame)) {
      case DecodeResult::kFrame:
        return Reply{frame.header, std::string(frame.payload)};
      case DecodeResult::kError:
        return Status::Error(peer_ + ": malformed reply: " + decoder_.error_message());
      case DecodeResult::kNeedMore:
        break;
    }
    Result<size_t> n = ReadOnce(fd_.get(), &decoder_);
    if (!n.ok()) {
      int err = n.status().error_number();
      if (err == EAGAIN || err == EWOULDBLOCK) {
        return Status::Error(peer_ + ": timed out after " + std::to_string(timeout_.count()) +
                             " ms waiting for a reply");
      }
      return Status::FromErrno(peer_ + ": read", err);
    }
    if (*n == 0) {
      if (decoder_.buffered_bytes() == 0) return Status::Error(peer_ + ": connection closed");
      return Status::Error(peer_ + ": connection closed after " +
                           std::to_string(decoder_.buffered_bytes()) + " bytes of a reply frame");
    }
  }
}

Result<Client::Reply> Client::Call(std::string_view payload) {
  const uint64_t id = next_request_id_++;
  if (Status status = Send(id, payload); !status.ok()) {
    // A refused connection is closed by the supervisor right after its refusal, which may make
    // the send fail; the refusal is still readable and is the answer.
    if (status.error_number() != EPIPE && status.error_number() != ECONNRESET) return status;
    Result<Reply> refusal = Receive();
    if (refusal.ok() && IsConnectionRefusal(refusal->header)) return refusal;
    return status;
  }
  Result<Reply> reply = Receive();
  if (!reply.ok()) return reply;
  if (IsConnectionRefusal(reply->header)) return reply;
  if (reply->header.request_id != id) {
    return Status::Error(peer_ + ": reply carries request id " +
                         std::to_string(reply->header.request_id) + ", expected " +
                         std::to_string(id));
  }
  return reply;
}

Status Client::SetTimeout(std::chrono::milliseconds timeout) {
  if (!fd_) return ClosedError();
  if (timeout.count() < 0) return Status::Error(peer_ + ": negative timeout");
  const auto us = std::chrono::microseconds(timeout).count();
  timeval tv{.tv_sec = static_cast<time_t>(us / 1000000),
             .tv_usec = static_cast<suseconds_t>(us % 1000000)};
  for (int option : {SO_RCVTIMEO, SO_SNDTIMEO}) {
    if (::setsockopt(fd_.get(), SOL_SOCKET, option, &tv, sizeof(tv)) < 0) {
      return Status::FromErrno(peer_ + ": setsockopt timeout");
    }
  }
  timeout_ = timeout;
  return Status::Ok();
}

void Client::Close() { fd_.Reset(); }

}  // namespace bulkhead::ipc
