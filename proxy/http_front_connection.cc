// SPDX-License-Identifier: MIT
#include "proxy/http_front_connection.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdio>
#include <random>
#include <utility>

#include "base/log.h"
#include "http/forward.h"
#include "http/local_reply.h"
#include "proxy/http_worker_link.h"
#include "proxy/link.h"
#include "proxy/request.h"

namespace bulkhead::proxy {

namespace {

// Bytes asked of the kernel per read.
constexpr size_t kReadChunk = size_t{64} * 1024;
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

// An X-Request-Id for a request that came without one: this process's random prefix and a count,
// unique among the requests of one bulkheadd run ("5f3a9c1e-000000000001").
std::string NewRequestId() {
  static const uint32_t prefix = std::random_device{}();
  static uint64_t count = 0;
  char id[32];
  std::snprintf(id, sizeof id, "%08x-%012llx", prefix, static_cast<unsigned long long>(++count));
  return id;
}

// The numeric address of a TCP client ("203.0.113.7", "2001:db8::1"), empty when unknown.
std::string PeerAddress(const uv_tcp_t* tcp) {
  sockaddr_storage peer{};
  int length = sizeof peer;
  if (uv_tcp_getpeername(tcp, reinterpret_cast<sockaddr*>(&peer), &length) != 0) return {};
  char text[64] = {};
  int rc = -1;
  if (peer.ss_family == AF_INET) {
    rc = uv_ip4_name(reinterpret_cast<const sockaddr_in*>(&peer), text, sizeof text);
  } else if (peer.ss_family == AF_INET6) {
    rc = uv_ip6_name(reinterpret_cast<const sockaddr_in6*>(&peer), text, sizeof text);
  }
  return rc == 0 ? std::string(text) : std::string();
}

}  // namespace

HttpFrontConnection::HttpFrontConnection(ClientOwner* owner, const Settings& settings)
    : Client(owner, &handle_.stream,
             2 * static_cast<size_t>(settings.limits.max_body_bytes) + kReadChunk +
                 kResponseBufferBytes),
      settings_(settings),
      parser_(settings.limits) {}

void HttpFrontConnection::Accept(ClientOwner* owner, uv_stream_t* server,
                                 const Settings& settings) {
  auto* conn = new HttpFrontConnection(owner, settings);
  const bool tcp = InitLike(server, &conn->handle_);
  conn->handle_.handle.data = conn;
  uv_timer_init(server->loop, &conn->header_timer_);
  conn->header_timer_.data = conn;
  conn->open_handles_ = 2;
  int rc = uv_accept(server, &conn->handle_.stream);
  if (rc != 0) {
    Log(LogLevel::kWarning, owner->name(), 0, std::string("accept failed: ") + uv_strerror(rc));
    conn->closing_ = true;
    conn->writer_.Abandon();
    uv_close(&conn->handle_.handle, &HttpFrontConnection::OnClosed);
    uv_close(reinterpret_cast<uv_handle_t*>(&conn->header_timer_), &HttpFrontConnection::OnClosed);
    return;
  }
  if (tcp) {
    // Answers are written whole at once: Nagle would only delay them.
    uv_tcp_nodelay(&conn->handle_.tcp, 1);
    conn->client_address_ = PeerAddress(&conn->handle_.tcp);
  }
  owner->OnClientConnected(conn);
  conn->ArmHeaderTimer();
  conn->reading_ = true;
  uv_read_start(&conn->handle_.stream, &HttpFrontConnection::OnAlloc, &HttpFrontConnection::OnRead);
}

void HttpFrontConnection::OnAlloc(uv_handle_t* handle, size_t, uv_buf_t* buf) {
  auto* self = static_cast<HttpFrontConnection*>(handle->data);
  // What was parsed already goes: the buffer holds only unparsed bytes (at most a head's worth
  // and a read) however long the connection lives.
  if (self->in_pos_ > 0) {
    self->in_.erase(0, self->in_pos_);
    self->in_pos_ = 0;
  }
  const size_t filled = self->in_.size();
  self->in_.resize(filled + kReadChunk);
  *buf = uv_buf_init(self->in_.data() + filled, static_cast<unsigned>(kReadChunk));
}

void HttpFrontConnection::OnRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
  auto* self = static_cast<HttpFrontConnection*>(stream->data);
  // What OnAlloc added beyond the bytes read is not input.
  if (buf != nullptr && buf->base != nullptr) {
    self->in_.resize(static_cast<size_t>(buf->base - self->in_.data()) +
                     (nread > 0 ? static_cast<size_t>(nread) : 0));
  }
  if (self->closing_) return;
  if (nread == UV_EOF) {
    // An HTTP client closes its connection only once it has read the last response it waits for
    // (RFC 9112 section 9.6), so an end of input while a request waits for its answer is a client
    // that left, as nginx ("client prematurely closed connection") and Envoy take it: its request
    // is cancelled in the queue, or dropped as it runs. Over TCP this is the only sign of it, since
    // a FIN reads the same as a shutdown of the sending side.
    if (self->busy_ || PeerClosedBothWays(stream)) {
      self->Close();
      return;
    }
    // The client only shut down its sending side: it still reads. Answer what it sent, then close.
    uv_read_stop(stream);
    self->reading_ = false;
    self->read_closed_ = true;
    self->ProcessInput();
    // The body it was sending will never be whole: the worker's request ends (if it still runs),
    // an answer already queued is written first.
    if (!self->closing_ && self->body_streaming_) {
      if (self->busy_) {
        self->Close();
      } else {
        self->CloseWhenDrained();
      }
    }
    return;
  }
  if (nread < 0) {  // an error: the client is gone
    self->Close();
    return;
  }
  if (nread == 0) return;
  self->ProcessInput();
}

void HttpFrontConnection::ProcessInput() {
  if (processing_) return;
  processing_ = true;
  // A request waiting for its answer stops the parse, unless its body is still read (to its
  // worker link, or dropped once it was answered: busy_ is then false).
  while (!closing_ && !close_when_drained_ && in_pos_ < in_.size() &&
         (!busy_ || (body_streaming_ && body_link_ != nullptr))) {
    size_t consumed = 0;
    const http::RequestParser::Event event =
        parser_.Parse(std::string_view(in_).substr(in_pos_), &consumed);
    in_pos_ += consumed;
    if (event == http::RequestParser::Event::kError) {
      if (body_streaming_) {
        CutBody(parser_.error());
      } else {
        RefuseRequest(parser_.error());
      }
      break;
    }
    if (event == http::RequestParser::Event::kHead) {
      uv_timer_stop(&header_timer_);
      head_ready_ = true;
      continue;  // its body, or the part of it read with the head, follows
    }
    const bool whole = event == http::RequestParser::Event::kMessage;
    if (body_streaming_) {
      PassBody(whole);
      if (!whole) break;
      continue;
    }
    if (!whole) {
      // The head is in and the body is not: the request is handed on now, the body follows.
      if (head_ready_) StartExchange(/*streaming=*/true);
      break;
    }
    StartExchange(/*streaming=*/false);
  }
  processing_ = false;
  if (closing_) return;
  CloseIfDone();
  UpdateReading();
}

void HttpFrontConnection::UpdateReading() {
  if (closing_) return;
  // Pipelined requests wait in in_ while one is answered: read no more than one more head's worth.
  const bool room = in_.size() - in_pos_ <= settings_.limits.max_head_bytes;
  // A body handed on with its head is read only while its worker link takes it: while the request
  // is queued it stays in the client's socket, whose filling buffer stops the client.
  const bool body_waits = busy_ && body_streaming_ && (body_link_ == nullptr || body_paused_);
  const bool want = room && !body_waits && !read_closed_ && !close_when_drained_;
  if (reading_ && !want) {
    uv_read_stop(&handle_.stream);
    reading_ = false;
  } else if (!reading_ && want) {
    reading_ = true;
    uv_read_start(&handle_.stream, &HttpFrontConnection::OnAlloc, &HttpFrontConnection::OnRead);
  }
}

void HttpFrontConnection::StartExchange(bool streaming) {
  const http::RequestHead& head = parser_.head();
  busy_ = true;
  head_ready_ = false;
  keep_alive_ = head.keep_alive;
  head_request_ = head.method == "HEAD";
  http11_ = head.version_major == 1 && head.version_minor >= 1;
  close_worker_after_ = head.body_on_bodiless_method;
  response_started_ = false;
  http::ForwardOptions options;
  options.client_address = client_address_;
  options.request_id = NewRequestId();
  options.host = owner_->name();  // for an HTTP/1.0 request without Host (docs/http.md)
  scratch_.clear();
  if (streaming) {
    body_streaming_ = true;
    body_chunked_ = head.chunked;
    body_paused_ = false;
    // RFC 9110 section 10.1.1: the client waits for this before it sends the body.
    continue_pending_ = head.expect_continue;
    http::AppendForwardHeadStreamed(&scratch_, head, options);
    // The part of the body read with the head goes out with it, in the same write.
    std::string& body = parser_.body();
    if (body_chunked_) {
      http::AppendChunk(&scratch_, body);
    } else {
      scratch_.append(body);
    }
    body.clear();
  } else {
    http::AppendForwardRequest(&scratch_, head, parser_.body(), options);
  }
  // The answer may come before this returns (a rejection): EndExchange then continues here.
  owner_->OnRequest(this, 0, scratch_);
}

void HttpFrontConnection::OnBodyLink(HttpWorkerLink* link) {
  if (closing_ || !body_streaming_) return;
  body_link_ = link;
  if (continue_pending_) {
    continue_pending_ = false;
    writer_.AppendBytes(kContinue);
    writer_.Flush();
  }
  // Everything read was parsed when the request was handed on: the body comes with the next read.
  ArmHeaderTimer();  // the client's silence in the body is bounded as in the head (OnHeaderTimer)
  UpdateReading();
}

void HttpFrontConnection::PassBody(bool last) {
  std::string& body = parser_.body();
  if (body_link_ != nullptr) {
    bool full = false;
    if (!body_chunked_) {
      full = body_link_->SendBody(body);
    } else {
      scratch_.clear();
      http::AppendChunk(&scratch_, body);
      if (last) scratch_.append(http::kLastChunk);
      full = body_link_->SendBody(scratch_);
    }
    // The link may have broken under the write (BodyLinkGone).
    if (body_link_ != nullptr) {
      body_paused_ = full;
      if (last) std::exchange(body_link_, nullptr)->EndBody();
    }
    // While the request runs, the client is waited for only while the link takes more (not
    // paused, not done); once it was answered, EndExchange's header_timeout bounds the rest.
    if (busy_ && body_link_ != nullptr && !body_paused_) {
      ArmHeaderTimer();
    } else if (busy_) {
      uv_timer_stop(&header_timer_);
    }
  }
  // Without a link the request was answered: its body is dropped.
  body.clear();
  if (last) {
    body_streaming_ = false;
    body_paused_ = false;
  }
}

void HttpFrontConnection::OnBodyDrained() {
  body_paused_ = false;
  if (body_link_ != nullptr && body_streaming_) ArmHeaderTimer();
  if (!processing_) UpdateReading();
}

void HttpFrontConnection::BodyLinkGone() {
  body_link_ = nullptr;
  if (!processing_) UpdateReading();
}

void HttpFrontConnection::CutBody(const http::Error& error) {
  body_streaming_ = false;
  HttpWorkerLink* link = std::exchange(body_link_, nullptr);
  if (!busy_) {
    // Answered already, the rest of its body was being dropped.
    CloseWhenDrained();
    return;
  }
  // The request is given up as by a client that left (dropped), then its worker connection ends.
  busy_ = false;
  if (requests_ != nullptr) {
    Request* request = requests_;
    UnlinkRequest(request);
    owner_->OnClientGone(request);
  }
  if (link != nullptr) {
    link->AbortBody("request body cut: " + std::to_string(error.status) + " " + error.reason);
  }
  if (closing_) return;
  if (response_started_) {
    Close();
    return;
  }
  RefuseRequest(error);
}

bool HttpFrontConnection::AppendResponse(std::string_view bytes) {
  if (closing_ || bytes.empty()) return false;
  response_started_ = true;
  writer_.AppendBytes(bytes);
  writer_.Flush();
  WatchBacklog();
  return !closing_ && unsent_bytes() > kResponseBufferBytes;
}

void HttpFrontConnection::SendReply(const ipc::FrameHeader& header, std::string_view payload,
                                    uint64_t* outcome) {
  if (closing_) {
    owner_->CountUndelivered(1);
    return;
  }
  // Answered before its body was read whole (a rejection, request_timeout, a worker that answered
  // early): the worker's request ends; the rest of the body is read and dropped, unless the client
  // still waits for "100 Continue" and never sends it: the connection then closes.
  const bool body_unsent = body_streaming_ && continue_pending_;
  if (HttpWorkerLink* link = std::exchange(body_link_, nullptr)) {
    link->AbortBody("answered before the request body was whole");
    if (closing_) {
      owner_->CountUndelivered(1);
      return;
    }
  }
  if (header.status == ipc::ReplyStatus::kOk || response_started_) {
    // OK: the worker's response, streamed already, is whole. Anything else after part of it went
    // out: the client can only learn of the failure by the connection closing.
    const bool close = !keep_alive_ || header.status != ipc::ReplyStatus::kOk || body_unsent;
    QueueAnswer(outcome, /*defer_flush=*/false);
    if (!closing_) EndExchange(close);
    return;
  }
  http::LocalReply reply;
  if (header.status == ipc::ReplyStatus::kRejected) {
    ipc::RejectDetail detail = ipc::DecodeRejectDetail(payload).value_or(ipc::RejectDetail{});
    if (detail.cell.empty()) detail.cell = owner_->name();
    reply = http::RejectionReply(header.reason, detail);
  } else if (header.status == ipc::ReplyStatus::kFailed) {
    reply = http::FailureReply(header.reason, owner_->name(), payload);
  } else {
    reply = http::BadRequestReply(http::Error{400, std::string(payload)}, owner_->name());
  }
  reply.head_request = head_request_;
  reply.http10_keep_alive = !http11_ && keep_alive_;
  if (body_unsent) reply.close = true;
  writer_.AppendBytes(http::FormatLocalReply(reply));
  QueueAnswer(outcome, /*defer_flush=*/false);
  if (!closing_) EndExchange(reply.close || !keep_alive_);
}

void HttpFrontConnection::EndExchange(bool close) {
  busy_ = false;
  response_started_ = false;
  if (closing_) return;
  if (close) {
    CloseWhenDrained();
    return;
  }
  ArmHeaderTimer();
  ProcessInput();
}

void HttpFrontConnection::RefuseRequest(const http::Error& error) {
  owner_->OnBadRequest(std::to_string(error.status) + " " + error.reason +
                       (client_address_.empty() ? "" : " (client " + client_address_ + ")"));
  writer_.AppendBytes(http::FormatLocalReply(http::BadRequestReply(error, owner_->name())));
  writer_.Flush();
  CloseWhenDrained();
}

void HttpFrontConnection::CloseWhenDrained() {
  close_when_drained_ = true;
  uv_timer_stop(&header_timer_);
  if (reading_) {
    uv_read_stop(&handle_.stream);
    reading_ = false;
  }
  if (writer_.idle() && !processing_) Close();
}

void HttpFrontConnection::OnDrained() {
  if (close_when_drained_) {
    if (!processing_) Close();
    return;
  }
  // The worker link relaying the current response may read again.
  if (requests_ != nullptr && requests_->link != nullptr) requests_->link->ResumeReading();
  CloseIfDone();
}

void HttpFrontConnection::CloseIfDone() {
  if (closing_) return;
  if (close_when_drained_ && writer_.idle() && !processing_) {
    Close();
    return;
  }
  if (read_closed_ && !busy_ && !processing_ && writer_.idle()) Close();
}

void HttpFrontConnection::ArmHeaderTimer() {
  if (settings_.header_timeout_ms == 0) return;
  uv_timer_start(&header_timer_, &HttpFrontConnection::OnHeaderTimer, settings_.header_timeout_ms,
                 0);
}

void HttpFrontConnection::OnHeaderTimer(uv_timer_t* timer) {
  auto* self = static_cast<HttpFrontConnection*>(timer->data);
  if (self->closing_) return;
  if (self->busy_) {
    // A running request whose client stopped sending its body (nginx's client_body_timeout,
    // HAProxy's timeout client): it holds a slot, so it is cut as a client that left.
    if (self->body_streaming_ && self->body_link_ != nullptr && !self->body_paused_) {
      self->CutBody(http::Error{408, "no request body bytes within header_timeout (" +
                                         std::to_string(self->settings_.header_timeout_ms) +
                                         " ms)"});
    }
    return;
  }
  if (!self->parser_.in_message() && self->in_pos_ == self->in_.size()) {
    // An idle keep-alive connection: closed without a word, as HAProxy and nginx do.
    self->Close();
    return;
  }
  self->RefuseRequest(http::Error{408, "no complete request head within header_timeout (" +
                                           std::to_string(self->settings_.header_timeout_ms) +
                                           " ms)"});
}

void HttpFrontConnection::Close() {
  if (closing_) return;
  closing_ = true;
  // A worker link that stopped reading for this client reads on (and drops the rest).
  if (requests_ != nullptr && requests_->link != nullptr) requests_->link->ResumeReading();
  HttpWorkerLink* body_link = std::exchange(body_link_, nullptr);
  CloseAnswers();
  // The worker must not take the part of the body it got for a whole request: its connection is
  // closed (the request, its client gone, counts dropped).
  if (body_link != nullptr) body_link->AbortBody("client left in the middle of the request body");
  owner_->OnClientDisconnected(this);
  uv_close(&handle_.handle, &HttpFrontConnection::OnClosed);
  uv_close(reinterpret_cast<uv_handle_t*>(&header_timer_), &HttpFrontConnection::OnClosed);
}

void HttpFrontConnection::OnClosed(uv_handle_t* handle) {
  auto* self = static_cast<HttpFrontConnection*>(handle->data);
  if (--self->open_handles_ == 0) delete self;
}

}  // namespace bulkhead::proxy
