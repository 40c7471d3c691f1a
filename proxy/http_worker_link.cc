// SPDX-License-Identifier: MIT
#include "proxy/http_worker_link.h"

#include <sys/socket.h>

#include <cerrno>
#include <utility>

#include "base/check.h"
#include "http/forward.h"
#include "proxy/client.h"
#include "proxy/http_front_connection.h"
#include "proxy/request.h"

namespace bulkhead::proxy {

namespace {
constexpr size_t kReadChunk = size_t{64} * 1024;
// A kept request buffer larger than this is freed once its response starts rather than kept.
constexpr size_t kMaxRetainedPayload = size_t{64} * 1024;
}  // namespace

HttpWorkerLink::HttpWorkerLink(Owner* owner)
    : owner_(owner),
      writer_(
          reinterpret_cast<uv_stream_t*>(&pipe_),
          [this](int status) {
            write_failed_ = true;
            write_error_ = std::string("write to worker failed: ") + uv_strerror(status);
            // A worker that answers before it reads the whole request (an early 413 or 401 to an
            // upload) and closes makes the write fail, its answer perhaps still unread here: keep
            // reading, and let the end of the connection decide (WorkerClosed), as Go's
            // net/http client does. The rest of the body has nowhere to go (SendBody drops it).
            if (inflight_ == nullptr) Broken(write_error_);
          },
          [this] {
            if (body_source_ != nullptr) body_source_->OnBodyDrained();
          }) {
  pipe_.data = this;
}

Result<HttpWorkerLink*> HttpWorkerLink::Connect(Owner* owner, uv_loop_t* loop,
                                                const std::string& path) {
  auto* link = new HttpWorkerLink(owner);
  // Read while idle too: a worker that closes an idle connection is seen at once.
  Status opened = link->Open(loop, path, &HttpWorkerLink::OnAlloc, &HttpWorkerLink::OnRead,
                             &HttpWorkerLink::OnClosed);
  if (!opened.ok()) return opened;
  return link;
}

void HttpWorkerLink::Send(Request* request, std::string_view payload) {
  BH_CHECK(inflight_ == nullptr && !closing_);
  inflight_ = request;
  request->link = this;
  payload_.assign(payload);
  response_started_ = false;
  inflight_on_reused_ = carried_request_;
  carried_request_ = true;
  inflight_idempotent_ = http::IsIdempotentRequest(payload);
  // A HEAD response has no body whatever its fields say; the method is the payload's first word.
  const bool head_request = payload.starts_with("HEAD ");
  HttpFrontConnection* client = request->client != nullptr ? request->client->AsHttp() : nullptr;
  relay_.Begin(head_request, client == nullptr || client->keep_alive(),
               client == nullptr || client->http11());
  body_streamed_ = client != nullptr && client->body_streaming();
  // Unknown once the client is gone (a resend): the connection is not reused then either.
  close_after_ = client == nullptr || client->close_worker_after();
  writer_.AppendBytes(payload);
  writer_.Flush();
  // Last: the client may start sending the rest of the body from here on.
  if (body_streamed_ && client != nullptr && inflight_ == request && !closing_) {
    body_source_ = client;
    client->OnBodyLink(this);
  }
}

bool HttpWorkerLink::SendBody(std::string_view bytes) {
  if (closing_ || inflight_ == nullptr || write_failed_) return false;
  writer_.AppendBytes(bytes);
  writer_.Flush();
  return writer_.backlog_bytes() > kBodyBufferBytes;
}

void HttpWorkerLink::AbortBody(const std::string& why) {
  body_source_ = nullptr;
  if (closing_ || inflight_ == nullptr) return;
  owner_->OnRequestAborted(this, why);
}

Request* HttpWorkerLink::TakeInflight(bool* unread, std::string_view* payload) {
  Request* request = inflight_;
  if (unread != nullptr) {
    *unread = request != nullptr && !response_started_ && inflight_on_reused_ && !body_streamed_ &&
              (write_failed_ || left_unread_ || (ended_ && inflight_idempotent_));
    if (payload != nullptr) *payload = payload_;
  }
  if (request != nullptr) request->link = nullptr;
  inflight_ = nullptr;
  // A client still streaming the body stops: the rest has nowhere to go.
  if (body_source_ != nullptr) std::exchange(body_source_, nullptr)->BodyLinkGone();
  return request;
}

void HttpWorkerLink::OnAlloc(uv_handle_t* handle, size_t, uv_buf_t* buf) {
  auto* self = static_cast<HttpWorkerLink*>(handle->data);
  self->read_buffer_.resize(kReadChunk);
  *buf = uv_buf_init(self->read_buffer_.data(), static_cast<unsigned>(kReadChunk));
}

void HttpWorkerLink::OnRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
  auto* self = static_cast<HttpWorkerLink*>(stream->data);
  if (self->closing_) return;
  if (nread < 0) {
    self->ended_ = true;
    self->left_unread_ = nread == UV_ECONNRESET || (nread == UV_EOF && self->InflightUnread());
    self->WorkerClosed(nread == UV_EOF ? "worker closed the connection"
                                       : std::string("read from worker failed: ") +
                                             uv_strerror(static_cast<int>(nread)));
    return;
  }
  if (nread == 0) return;
  if (self->inflight_ == nullptr) {
    self->Broken("worker sent bytes on an idle connection, with no request to answer", true);
    return;
  }
  self->Relay(std::string_view(buf->base, static_cast<size_t>(nread)));
}

bool HttpWorkerLink::InflightUnread() {
  if (inflight_ == nullptr || response_started_) return false;
  if (writer_.written_bytes() < writer_.appended_bytes()) return true;  // not all of it went out
  if (BytesUnreadByPeer(reinterpret_cast<uv_stream_t*>(&pipe_)) > 0) return true;
  uv_os_fd_t fd;
  if (uv_fileno(reinterpret_cast<uv_handle_t*>(&pipe_), &fd) != 0) return false;
  // A peer that closes with bytes unread makes the kernel set ECONNRESET on this end.
  int error = 0;
  socklen_t length = sizeof error;
  return ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 && error == ECONNRESET;
}

void HttpWorkerLink::Relay(std::string_view data) {
  if (!response_started_) {
    response_started_ = true;
    if (payload_.capacity() > kMaxRetainedPayload) {
      std::string().swap(payload_);
    } else {
      payload_.clear();
    }
  }
  owner_->OnWorkerProgress();
  size_t consumed = 0;
  out_.clear();
  const http::ResponseRelay::Event event = relay_.Feed(data, &consumed, &out_);
  Deliver();
  if (closing_) return;
  if (event == http::ResponseRelay::Event::kError) {
    Broken("worker sent a malformed response: " + relay_.error(), true);
    return;
  }
  // Bytes after a whole response, unasked for: the worker broke HTTP/1.1, the connection is not
  // reused (its response was whole and goes through).
  if (event == http::ResponseRelay::Event::kComplete) {
    Finish(relay_.worker_keep_alive() && consumed == data.size());
  }
}

void HttpWorkerLink::Deliver() {
  if (inflight_ == nullptr || inflight_->client == nullptr) return;
  HttpFrontConnection* client = inflight_->client->AsHttp();
  BH_CHECK(client != nullptr);
  if (relay_.client_must_close()) client->CloseAfterResponse();
  if (!out_.empty() && client->AppendResponse(out_) && !paused_) {
    paused_ = true;
    uv_read_stop(reinterpret_cast<uv_stream_t*>(&pipe_));
  }
}

void HttpWorkerLink::ResumeReading() {
  if (!paused_ || closing_) return;
  paused_ = false;
  uv_read_start(reinterpret_cast<uv_stream_t*>(&pipe_), &HttpWorkerLink::OnAlloc,
                &HttpWorkerLink::OnRead);
}

void HttpWorkerLink::WorkerClosed(const std::string& why) {
  if (inflight_ != nullptr && response_started_) {
    out_.clear();
    const http::ResponseRelay::Event event = relay_.WorkerClosed(&out_);
    Deliver();
    if (closing_) return;
    if (event == http::ResponseRelay::Event::kComplete) {
      Finish(/*reusable=*/false);
      return;
    }
    Broken(why + " before its response was complete");
    return;
  }
  Broken(write_failed_ ? write_error_ : why);
}

void HttpWorkerLink::Finish(bool reusable) {
  // The worker answered before the streamed body was whole: the rest of it would be read as the
  // next request on this connection.
  const bool body_cut = body_source_ != nullptr;
  Request* request = TakeInflight();
  owner_->OnHttpResponse(this, request, reusable && !ended_ && !body_cut && !close_after_);
}

void HttpWorkerLink::Broken(const std::string& why, bool worker_at_fault) {
  if (closing_) return;
  owner_->OnLinkBroken(this, why, worker_at_fault);
}

void HttpWorkerLink::Close() {
  BH_CHECK(inflight_ == nullptr);
  if (closing_) return;
  closing_ = true;
  writer_.Abandon();
  uv_close(reinterpret_cast<uv_handle_t*>(&pipe_), &HttpWorkerLink::OnClosed);
}

void HttpWorkerLink::OnClosed(uv_handle_t* handle) {
  delete static_cast<HttpWorkerLink*>(handle->data);
}

}  // namespace bulkhead::proxy
