// SPDX-License-Identifier: MIT
#include "proxy/front_connection.h"

#include <linux/sockios.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <string>

#include "base/check.h"
#include "base/log.h"
#include "proxy/request.h"

namespace bulkhead::proxy {

namespace {
// Bytes asked of the kernel per read; the decoder grows beyond it only for large frames.
constexpr size_t kReadChunk = size_t{64} * 1024;
// True when the peer closed its socket rather than only shutting down its writing side: a Unix
// stream socket then reports POLLHUP (both directions shut down), a half-close only POLLRDHUP.
// TCP sends the same FIN for close(2) and shutdown(SHUT_WR), so a TCP client's EOF reads as a
// half-close (HAProxy without `option abortonclose` does likewise): what it sent is answered, and
// a client that is really gone shows once a reply meets its RST (the write fails, the connection
// closes), unless it reset the connection at once (POLLHUP | POLLERR here).
bool PeerClosedBothWays(uv_stream_t* stream) {
  uv_os_fd_t fd;
  if (uv_fileno(reinterpret_cast<uv_handle_t*>(stream), &fd) != 0) return true;
  pollfd p{fd, POLLOUT, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR)) != 0;
}

}  // namespace

FrontConnection::FrontConnection(Owner* owner, uint32_t max_payload)
    : owner_(owner),
      max_backlog_(2 * static_cast<size_t>(max_payload) + kReadChunk),
      decoder_(ipc::FrameType::kRequest, max_payload),
      writer_(
          reinterpret_cast<uv_stream_t*>(&handle_), [this](int) { Close(); },
          [this] { OnDrained(); }) {
  writer_.SetOnWritten([this] { CountWritten(); });
}

namespace {

// Initialises `client` as the handle type that accepts from `server`: a uv_tcp_t for a TCP
// listener, else a uv_pipe_t. Without flags the inits only fill in the handle: they cannot fail.
template <typename Handle>
bool InitLike(uv_stream_t* server, Handle* client) {
  if (server->type == UV_TCP) {
    uv_tcp_init(server->loop, &client->tcp);
    return true;
  }
  uv_pipe_init(server->loop, &client->pipe, 0);
  return false;
}

}  // namespace

void FrontConnection::Accept(Owner* owner, uv_stream_t* server, uint32_t max_payload) {
  auto* conn = new FrontConnection(owner, max_payload);
  conn->tcp_ = InitLike(server, &conn->handle_);
  conn->handle()->data = conn;
  int rc = uv_accept(server, conn->stream());
  if (rc == 0 && conn->tcp_) {
    // Replies are written whole at once (one writev per read): Nagle would only delay them.
    rc = uv_tcp_nodelay(&conn->handle_.tcp, 1);
    int len = sizeof conn->peer_;
    if (rc == 0) {
      rc = uv_tcp_getpeername(&conn->handle_.tcp, reinterpret_cast<sockaddr*>(&conn->peer_), &len);
    }
  }
  if (rc != 0) {
    Log(LogLevel::kWarning, owner->name(), 0, std::string("accept failed: ") + uv_strerror(rc));
    conn->closing_ = true;
    uv_close(conn->handle(), &FrontConnection::OnClosed);
    return;
  }
  owner->OnClientConnected(conn);
  uv_read_start(conn->stream(), &FrontConnection::OnAlloc, &FrontConnection::OnRead);
}

void FrontConnection::Refuse(uv_stream_t* server, std::string_view frame) {
  union Client {
    uv_pipe_t pipe;
    uv_tcp_t tcp;
  };
  auto* client = new Client{};
  InitLike(server, client);
  auto* handle = reinterpret_cast<uv_handle_t*>(client);
  if (uv_accept(server, reinterpret_cast<uv_stream_t*>(client)) == 0) {
    uv_os_fd_t fd;
    if (uv_fileno(handle, &fd) == 0) {
      ssize_t sent = ::send(fd, frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      (void)sent;  // a client that left already needs no answer
    }
  }
  uv_close(handle, [](uv_handle_t* closed) { delete reinterpret_cast<Client*>(closed); });
}

void FrontConnection::OnAlloc(uv_handle_t* handle, size_t, uv_buf_t* buf) {
  auto* self = static_cast<FrontConnection*>(handle->data);
  std::span<char> space = self->decoder_.PrepareWrite(kReadChunk);
  *buf = uv_buf_init(space.data(), static_cast<unsigned>(space.size()));
}

void FrontConnection::OnRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t*) {
  auto* self = static_cast<FrontConnection*>(stream->data);
  if (nread == UV_EOF) {
    if (PeerClosedBothWays(stream)) {
      self->Close();  // gone for good: its queued requests are cancelled at once
      return;
    }
    // The client only shut down its sending side (shutdown(SHUT_WR)): it still reads. Answer what
    // it sent, then close.
    uv_read_stop(stream);
    self->read_closed_ = true;
    self->CloseIfDone();
    return;
  }
  if (nread < 0) {  // an error: the client is gone
    self->Close();
    return;
  }
  if (nread == 0) return;
  self->decoder_.Commit(static_cast<size_t>(nread));
  self->ProcessFrames();
}

void FrontConnection::ProcessFrames() {
  in_read_ = true;
  ipc::FrameView frame;
  for (;;) {
    ipc::DecodeResult result = decoder_.Next(&frame);
    if (result == ipc::DecodeResult::kNeedMore) break;
    if (result == ipc::DecodeResult::kError) {
      ipc::FrameHeader reply;
      reply.type = ipc::FrameType::kReply;
      reply.status = ipc::ReplyStatus::kBadRequest;
      reply.reason = decoder_.error_reason();
      reply.request_id = decoder_.error_request_id();
      writer_.AppendFrame(reply, decoder_.error_message());
      owner_->OnBadRequest(decoder_.error_message());
      uv_read_stop(stream());
      close_when_drained_ = true;
      break;
    }
    owner_->OnRequest(this, frame);
    if (closing_) break;
  }
  in_read_ = false;
  if (!closing_) {
    writer_.Flush();
    // The replies of this read (rejections, at once) are looked at once, after their one write.
    if (!closing_) WatchUnsent();
  }
  if (close_when_drained_ && writer_.idle()) Close();
}

void FrontConnection::SendReply(const ipc::FrameHeader& header, std::string_view payload,
                                uint64_t* outcome) {
  if (closing_) {
    owner_->CountUndelivered(1);
    return;
  }
  writer_.AppendFrame(header, payload);
  unwritten_.push_back(UnwrittenReply{writer_.appended_bytes(), outcome});
  // Inside a read, the write and the look at what waits come after the read (ProcessFrames).
  if (in_read_) return;
  writer_.Flush();
  if (!closing_) WatchUnsent();
}

void FrontConnection::WatchUnsent() {
  const size_t unsent = writer_.backlog_bytes();
  if (unsent == 0) return;
  // A client that does not read its replies is dropped rather than buffered for without bound.
  if (unsent > max_backlog_) {
    CloseUnread("over 2 x max_payload_bytes + 64 KiB for one connection");
    return;
  }
  if (!waiting_) {
    waiting_ = true;
    stalled_since_ms_ = uv_now(handle()->loop);
    seen_written_ = writer_.written_bytes();
    seen_unconsumed_ = UnconsumedBytes();
  }
  // May close this connection, or others, to keep the cell within max_unsent_bytes.
  owner_->OnRepliesWaiting(this);
}

void FrontConnection::CountWritten() {
  const uint64_t written = writer_.written_bytes();
  while (!unwritten_.empty() && unwritten_.front().end <= written) {
    owner_->CountDelivered(unwritten_.front().outcome);
    unwritten_.pop_front();
  }
}

uint64_t FrontConnection::UnconsumedBytes() {
  uv_os_fd_t fd;
  if (uv_fileno(handle(), &fd) != 0) return 0;
  int queued = 0;
  if (::ioctl(fd, SIOCOUTQ, &queued) != 0 || queued < 0) return 0;
  return static_cast<uint64_t>(queued);
}

size_t FrontConnection::CheckProgress(uint64_t now_ms) {
  CountWritten();
  const uint64_t written = writer_.written_bytes();
  const uint64_t unconsumed = UnconsumedBytes();
  if (written != seen_written_ || unconsumed < seen_unconsumed_) stalled_since_ms_ = now_ms;
  seen_written_ = written;
  seen_unconsumed_ = unconsumed;
  const size_t unsent = writer_.backlog_bytes();
  if (unsent == 0) waiting_ = false;
  return unsent;
}

void FrontConnection::CloseUnread(const std::string& why) {
  Log(LogLevel::kWarning, owner_->name(), 0,
      "client does not read its replies (" + std::to_string(writer_.backlog_bytes()) +
          " bytes unsent, " + why + "): closing its connection");
  Close();
}

void FrontConnection::OnDrained() {
  if (close_when_drained_ && !in_read_) Close();
  CloseIfDone();
}

void FrontConnection::CloseIfDone() {
  if (read_closed_ && !in_read_ && requests_ == nullptr && writer_.idle()) Close();
}

void FrontConnection::LinkRequest(Request* request) {
  BH_CHECK(request->client == nullptr);
  request->client = this;
  request->client_prev = nullptr;
  request->client_next = requests_;
  if (requests_ != nullptr) requests_->client_prev = request;
  requests_ = request;
}

void FrontConnection::UnlinkRequest(Request* request) {
  BH_CHECK(request->client == this);
  if (request->client_prev != nullptr) {
    request->client_prev->client_next = request->client_next;
  } else {
    requests_ = request->client_next;
  }
  if (request->client_next != nullptr) request->client_next->client_prev = request->client_prev;
  request->client_prev = request->client_next = nullptr;
  request->client = nullptr;
}

void FrontConnection::Close() {
  if (closing_) return;
  closing_ = true;
  // Replies not written whole by now are never delivered.
  CountWritten();
  if (!unwritten_.empty()) {
    owner_->CountUndelivered(unwritten_.size());
    unwritten_.clear();
  }
  writer_.Abandon();
  while (requests_ != nullptr) {
    Request* request = requests_;
    UnlinkRequest(request);
    owner_->OnClientGone(request);
  }
  owner_->OnClientDisconnected(this);
  uv_close(handle(), &FrontConnection::OnClosed);
}

void FrontConnection::OnClosed(uv_handle_t* handle) {
  delete static_cast<FrontConnection*>(handle->data);
}

}  // namespace bulkhead::proxy
