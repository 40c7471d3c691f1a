// SPDX-License-Identifier: MIT
#include "proxy/front_connection.h"

#include <poll.h>
#include <sys/socket.h>

#include <string>

#include "base/check.h"
#include "base/log.h"

namespace bulkhead::proxy {

namespace {
// Bytes asked of the kernel per read; the decoder grows beyond it only for large frames.
constexpr size_t kReadChunk = size_t{64} * 1024;

ipc::ReplyStatus StatusOf(Outcome::Kind kind) {
  switch (kind) {
    case Outcome::Kind::kOk:
      return ipc::ReplyStatus::kOk;
    case Outcome::Kind::kRejected:
      return ipc::ReplyStatus::kRejected;
    case Outcome::Kind::kFailed:
      return ipc::ReplyStatus::kFailed;
  }
  return ipc::ReplyStatus::kFailed;
}

// The REPLY frame of `outcome` (docs/protocol.md): its header, and its payload, the worker's reply
// or the failure's message, or for a rejection its detail encoded into `scratch`.
std::string_view ReplyOf(uint64_t request_id, std::string_view cell, const Outcome& outcome,
                         ipc::FrameHeader* header, std::string* scratch) {
  header->type = ipc::FrameType::kReply;
  header->status = StatusOf(outcome.kind);
  header->reason = outcome.reason;
  header->request_id = request_id;
  if (outcome.kind != Outcome::Kind::kRejected) return outcome.text;
  ipc::RejectDetail detail;
  detail.cell = std::string(cell);
  detail.running = outcome.running;
  detail.queued = outcome.queued;
  detail.retry_after_ms = outcome.retry_after_ms;
  scratch->clear();
  ipc::AppendRejectDetail(scratch, detail);
  return *scratch;
}

}  // namespace

FrontConnection::FrontConnection(Owner* owner, const ClientSettings& settings)
    : Client(owner, reinterpret_cast<uv_stream_t*>(&handle_),
             2 * static_cast<size_t>(settings.max_payload) + kReadChunk),
      decoder_(ipc::FrameType::kRequest, settings.max_payload),
      idle_timeout_ms_(settings.idle_timeout_ms) {
  if (idle_timeout_ms_ > 0) {
    idle_timer_ = owner->time()->CreateTimer([this] { OnIdleTimer(); });
  }
}

void FrontConnection::Accept(Owner* owner, uv_stream_t* server, const ClientSettings& settings) {
  Start(owner, ClientSource::Pending(server), settings);
}

void FrontConnection::Adopt(Owner* owner, uv_loop_t* loop, int fd, bool tcp,
                            const ClientSettings& settings) {
  Start(owner, ClientSource::HandedOver(loop, fd, tcp), settings);
}

void FrontConnection::Start(Owner* owner, const ClientSource& source,
                            const ClientSettings& settings) {
  auto* conn = new FrontConnection(owner, settings);
  conn->tcp_ = source.is_tcp();
  int rc = AttachClient(source, &conn->handle_);
  conn->handle()->data = conn;
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
  conn->ArmIdleTimer();
  uv_read_start(conn->stream(), &FrontConnection::OnAlloc, &FrontConnection::OnRead);
}

void FrontConnection::AppendRefusal(std::string* out, std::string_view cell,
                                    const Outcome& outcome) {
  ipc::FrameHeader header;
  std::string scratch;
  const std::string_view payload = ReplyOf(0, cell, outcome, &header, &scratch);
  ipc::AppendFrame(out, header, payload);
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
  // A re-exec's drain: a whole frame read is the boundary where reading stops.
  if (self->reads_paused_ && !self->closing_ && self->decoder_.buffered_bytes() == 0) {
    uv_read_stop(stream);
  }
}

void FrontConnection::PauseReads(bool paused) {
  reads_paused_ = paused;
  if (closing_ || read_closed_ || close_when_drained_) return;
  if (!paused) {
    uv_read_start(stream(), &FrontConnection::OnAlloc, &FrontConnection::OnRead);
  } else if (decoder_.buffered_bytes() == 0) {
    uv_read_stop(stream());
  }
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
    RequestInfo info;
    info.client_request_id = frame.header.request_id;
    owner_->OnRequest(this, info, frame.payload);
    if (closing_) break;
  }
  in_read_ = false;
  if (!closing_) {
    writer_.Flush();
    // The replies of this read (rejections, at once) are looked at once, after their one write.
    WatchBacklog();
  }
  if (close_when_drained_ && writer_.idle()) Close();
}

void FrontConnection::OnOutcome(Exchange* exchange, const Outcome& outcome, uint64_t* counter) {
  if (closing_) {
    owner_->CountUndelivered(1);
    return;
  }
  ipc::FrameHeader header;
  const std::string_view payload =
      ReplyOf(exchange->info.client_request_id, owner_->name(), outcome, &header, &scratch_);
  writer_.AppendFrame(header, payload);
  QueueAnswer(counter, /*defer_flush=*/in_read_);
}

void FrontConnection::OnDrained() {
  if (close_when_drained_ && !in_read_) Close();
  CloseIfDone();
  ArmIdleTimer();
}

void FrontConnection::ArmIdleTimer() {
  if (idle_timer_ == nullptr || closing_ || !Idle()) return;
  idle_timer_->Start(idle_timeout_ms_);
}

void FrontConnection::OnIdleTimer() {
  // A request taken since is not idle time: the timer is armed again once it is answered.
  if (closing_ || !Idle()) return;
  uv_os_fd_t fd;
  if (uv_fileno(handle(), &fd) == 0) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0) {
      // Bytes wait unread (the loop was paused or starved): the client spoke in time. The poll of
      // this loop iteration reads them; the idle time counts again from the answer.
      idle_timer_->Start(idle_timeout_ms_);
      return;
    }
  }
  owner_->CountIdleClosed();
  Close();
}

void FrontConnection::CloseIfDone() {
  if (read_closed_ && !in_read_ && exchanges_ == nullptr && writer_.idle()) Close();
}

void FrontConnection::Close() {
  if (closing_) return;
  closing_ = true;
  if (idle_timer_ != nullptr) idle_timer_->Stop();
  CloseAnswers();
  owner_->OnClientDisconnected(this);
  uv_close(handle(), &FrontConnection::OnClosed);
}

bool FrontConnection::HandOver(int* fd, bool* tcp) {
  if (closing_ || !Idle() || read_closed_ || in_read_ || decoder_.buffered_bytes() > 0) {
    return false;
  }
  const int own = DuplicateSocket();
  if (own < 0) return false;
  *fd = own;
  *tcp = tcp_;
  Close();
  return true;
}

void FrontConnection::OnClosed(uv_handle_t* handle) {
  delete static_cast<FrontConnection*>(handle->data);
}

}  // namespace bulkhead::proxy
