// SPDX-License-Identifier: MIT
#include "proxy/http_worker_link.h"

#include <sys/socket.h>

#include <cerrno>
#include <utility>

#include "base/check.h"
#include "loop/time_source.h"
#include "proxy/exchange.h"
#include "proxy/stream_peer.h"

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
            // net/http client does. The rest of the body has nowhere to go (OnBodyBytes drops it).
            if (inflight_ == nullptr) Broken(write_error_);
          },
          [this] {
            // Below the low watermark: a body that waits for room flows again.
            if (inflight_ != nullptr) inflight_->WantBody();
          }) {
  pipe_.data = this;
}

Result<HttpWorkerLink*> HttpWorkerLink::Connect(Owner* owner, uv_loop_t* loop,
                                                const std::string& path,
                                                loop::WriteBatch* write_batch) {
  auto* link = new HttpWorkerLink(owner);
  link->writer_.SetBatch(write_batch);
  // Read while idle too: a worker that closes an idle connection is seen at once.
  Status opened = link->Open(loop, path, &HttpWorkerLink::OnAlloc, &HttpWorkerLink::OnRead,
                             &HttpWorkerLink::OnClosed);
  if (!opened.ok()) return opened;
  return link;
}

void HttpWorkerLink::Send(Exchange* exchange, std::string_view payload) {
  BH_CHECK(inflight_ == nullptr && !closing_);
  inflight_ = exchange;
  exchange->link = this;
  payload_.assign(payload);
  response_started_ = false;
  inflight_on_reused_ = carried_request_;
  carried_request_ = true;
  const RequestInfo& info = exchange->info;
  relay_.Begin(info.head, info.keep_alive, info.http11);
  // Written now, or with the loop iteration's batch: a worker that closes the connection before
  // it went out finds it unwritten (InflightUnread), and it is resent.
  writer_.AppendBytes(payload);
  writer_.Flush();
  // Last: the client may send the rest of the body from here on (the write may have broken the
  // link, which then took the exchange off).
  if (info.body == RequestInfo::Body::kStreamed && inflight_ == exchange && !closing_) {
    exchange->WantBody();
  }
}

size_t HttpWorkerLink::OnBodyBytes(Exchange* exchange, std::string_view bytes, bool last) {
  BH_CHECK(exchange == inflight_);
  if (last) exchange->body_whole_at_ns = owner_->time()->NowNs();
  // After a failed write the rest of the body has nowhere to go: dropped, the end of the
  // connection decides (WorkerClosed).
  if (closing_ || write_failed_) return 0;
  writer_.AppendBytes(bytes);
  writer_.Flush();
  return writer_.backlog_bytes();
}

void HttpWorkerLink::OnBodyAborted(Exchange* exchange, const std::string& why) {
  if (closing_ || exchange != inflight_) return;
  owner_->OnExchangeAborted(this, why);
}

Exchange* HttpWorkerLink::TakeInflight(bool* unread, std::string_view* payload) {
  Exchange* exchange = inflight_;
  if (unread != nullptr) {
    *unread = exchange != nullptr && !response_started_ && inflight_on_reused_ &&
              exchange->info.body != RequestInfo::Body::kStreamed &&
              (write_failed_ || left_unread_ || (ended_ && exchange->info.idempotent));
    if (payload != nullptr) *payload = payload_;
  }
  inflight_ = nullptr;
  if (exchange != nullptr) {
    exchange->link = nullptr;
    // A client still streaming the body stops: the rest has nowhere to go.
    exchange->DropBody();
  }
  return exchange;
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
  if (inflight_ == nullptr || (out_.empty() && !relay_.client_must_close())) return;
  inflight_->http_status = relay_.status_code();
  if (!inflight_->SendResponse(out_, relay_.client_must_close()) && !paused_ && !closing_) {
    paused_ = true;
    paused_at_ns_ = owner_->time()->NowNs();
    uv_read_stop(reinterpret_cast<uv_stream_t*>(&pipe_));
  }
}

void HttpWorkerLink::ResumeReading() {
  if (!paused_ || closing_) return;
  paused_ = false;
  if (inflight_ != nullptr) inflight_->client_paused_ns += owner_->time()->NowNs() - paused_at_ns_;
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
  const bool body_cut = inflight_->body_open();
  const bool close_after = inflight_->info.close_link_after;
  // The response came before the request was all written: the worker answered without reading
  // it whole, and would read the rest as the next request.
  const bool request_unwritten = !writer_.idle();
  Exchange* exchange = TakeInflight();
  // The response's last bytes may have put its client over the high watermark (Deliver paused
  // reading), and no client will call for the rest now: an idle connection reads, so the next
  // response on it, or the worker closing it, is seen.
  ResumeReading();
  owner_->OnWorkerAnswer(this, exchange, Outcome::Ok({}),
                         reusable && !ended_ && !body_cut && !close_after && !request_unwritten);
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
