// SPDX-License-Identifier: MIT
#include "proxy/http_front_connection.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>
#include <random>
#include <utility>

#include "base/check.h"
#include "base/log.h"
#include "http/forward.h"
#include "http/local_reply.h"

namespace bulkhead::proxy {

namespace {

// Bytes asked of the kernel per read.
constexpr size_t kReadChunk = size_t{64} * 1024;
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

// An X-Request-Id for a request that came without one: this process's random prefix and a count,
// unique among the requests of one bulkheadd run ("5f3a9c1e-000000000001"), written into `id`
// (21 characters). Allocates nothing.
std::string_view NewRequestId(char (&id)[32]) {
  static const uint32_t prefix = std::random_device{}();
  static uint64_t count = 0;
  // Hex digits written by hand: snprintf showed in the HTTP path's profile (issue 23).
  static constexpr std::string_view kDigits = "0123456789abcdef";
  auto put = [&id](size_t at, uint64_t value, size_t digits) {
    for (size_t i = digits; i-- > 0; value >>= 4) id[at + i] = kDigits[value & 0xf];
  };
  put(0, prefix, 8);
  id[8] = '-';
  ++count;
  // 12 digits while the count fits (2^48 requests); more after, as "%012llx" would print.
  size_t digits = 12;
  while (digits < 16 && (count >> (4 * digits)) != 0) ++digits;
  put(9, count, digits);
  return std::string_view(id, 9 + digits);
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

// bulkheadd's own answer for a Rejected or Failed outcome (http/local_reply.h).
http::LocalReply LocalReplyFor(const Outcome& outcome, std::string_view cell) {
  if (outcome.kind == Outcome::Kind::kRejected) {
    ipc::RejectDetail detail;
    detail.cell = std::string(cell);
    detail.running = outcome.running;
    detail.queued = outcome.queued;
    detail.retry_after_ms = outcome.retry_after_ms;
    return http::RejectionReply(outcome.reason, detail,
                                outcome.next_start != admission::Availability::NextStart::kNone);
  }
  return http::FailureReply(outcome.reason, cell, outcome.text);
}

}  // namespace

HttpFrontConnection::HttpFrontConnection(ClientOwner* owner, const ClientSettings& settings)
    : Client(owner, &handle_.stream,
             2 * static_cast<size_t>(settings.max_payload) + kReadChunk + Exchange::kHighWatermark),
      settings_(settings),
      parser_(http::Limits{.max_body_bytes = settings.max_payload}),
      timer_(owner->time()->CreateTimer([this] { OnTimer(); })) {}

void HttpFrontConnection::Accept(ClientOwner* owner, uv_stream_t* server,
                                 const ClientSettings& settings) {
  Start(owner, ClientSource::Pending(server), settings);
}

void HttpFrontConnection::Adopt(ClientOwner* owner, uv_loop_t* loop, int fd, bool tcp,
                                const ClientSettings& settings) {
  Start(owner, ClientSource::HandedOver(loop, fd, tcp), settings);
}

void HttpFrontConnection::Start(ClientOwner* owner, const ClientSource& source,
                                const ClientSettings& settings) {
  auto* conn = new HttpFrontConnection(owner, settings);
  const bool tcp = source.is_tcp();
  int rc = AttachClient(source, &conn->handle_);
  conn->handle_.handle.data = conn;
  if (rc != 0) {
    Log(LogLevel::kWarning, owner->name(), 0, std::string("accept failed: ") + uv_strerror(rc));
    conn->phase_ = Phase::kClosed;
    conn->closing_ = true;
    conn->writer_.Abandon();
    uv_close(&conn->handle_.handle, &HttpFrontConnection::OnClosed);
    return;
  }
  if (tcp) {
    // Answers are written whole at once: Nagle would only delay them.
    uv_tcp_nodelay(&conn->handle_.tcp, 1);
    conn->client_address_ = PeerAddress(&conn->handle_.tcp);
  }
  owner->OnClientConnected(conn);
  conn->Enter(Phase::kHead);
  conn->Update();
}

void HttpFrontConnection::AppendRefusal(std::string* out, std::string_view cell,
                                        const Outcome& outcome) {
  out->append(http::FormatLocalReply(LocalReplyFor(outcome, cell)));
}

// --- The phase, and what follows from it. ---

void HttpFrontConnection::Enter(Phase phase) {
  phase_ = phase;
  phase_since_ms_ = owner_->time()->NowMs();
}

bool HttpFrontConnection::Parsing() const {
  switch (phase_) {
    case Phase::kHead:
    case Phase::kDrainBody:
      return true;
    case Phase::kBody:
      return exchanges_ != nullptr && exchanges_->body_pipe == Exchange::BodyPipe::kFlowing;
    case Phase::kAwaitingAnswer:
    case Phase::kClosing:
    case Phase::kClosed:
      return false;
  }
  return false;
}

bool HttpFrontConnection::IdleInHead() const {
  return phase_ == Phase::kHead && in_pos_ == in_end_ && !parser_.in_message();
}

std::optional<uint64_t> HttpFrontConnection::TimerDeadline() const {
  // Idle (nothing of a request yet): the lower of header_timeout and idle_timeout.
  if (IdleInHead() && settings_.idle_timeout_ms > 0 &&
      (settings_.header_timeout_ms == 0 ||
       settings_.idle_timeout_ms < settings_.header_timeout_ms)) {
    return phase_since_ms_ + settings_.idle_timeout_ms;
  }
  const uint64_t timeout = settings_.header_timeout_ms;
  if (timeout == 0) return std::nullopt;
  switch (phase_) {
    case Phase::kHead:
    case Phase::kDrainBody:
      return phase_since_ms_ + timeout;
    case Phase::kBody:
      if (exchanges_ == nullptr || exchanges_->body_pipe != Exchange::BodyPipe::kFlowing) {
        return std::nullopt;
      }
      return body_progress_ms_ + timeout;
    case Phase::kAwaitingAnswer:
    case Phase::kClosing:
    case Phase::kClosed:
      return std::nullopt;
  }
  return std::nullopt;
}

void HttpFrontConnection::Update() {
  if (phase_ == Phase::kClosed) return;
  // Pipelined requests wait in in_ while one is answered: no more than one more head's worth is
  // read. A body is parsed as it is read, so it never fills in_.
  const bool room = in_end_ - in_pos_ <= parser_.limits().max_head_bytes;
  // A re-exec's drain: nothing of a next request is read (it waits in the socket for HandOver).
  const bool at_boundary = reads_paused_ && phase_ == Phase::kHead && in_pos_ == in_end_ &&
                           !parser_.in_message() && !head_ready_;
  const bool want =
      room && !read_closed_ && !at_boundary && (phase_ == Phase::kAwaitingAnswer || Parsing());
  if (reading_ && !want) {
    uv_read_stop(&handle_.stream);
    reading_ = false;
  } else if (!reading_ && want) {
    reading_ = true;
    uv_read_start(&handle_.stream, &HttpFrontConnection::OnAlloc, &HttpFrontConnection::OnRead);
  }
  const std::optional<uint64_t> deadline = TimerDeadline();
  if (!deadline) {
    if (timer_->armed()) timer_->Stop();
    return;
  }
  if (timer_->armed() && armed_deadline_ms_ == *deadline) return;
  armed_deadline_ms_ = *deadline;
  const uint64_t now = owner_->time()->NowMs();
  timer_->Start(*deadline > now ? *deadline - now : 0);
}

void HttpFrontConnection::OnTimer() {
  const std::optional<uint64_t> deadline = TimerDeadline();
  if (!deadline || *deadline > owner_->time()->NowMs()) {
    Update();
    return;
  }
  const std::string within =
      " within header_timeout (" + std::to_string(settings_.header_timeout_ms) + " ms)";
  switch (phase_) {
    case Phase::kHead:
      if (IdleInHead()) {
        // An idle keep-alive connection: closed without a word, as HAProxy and nginx do.
        owner_->CountIdleClosed();
        Close();
      } else {
        RefuseRequest(http::Error{408, "no complete request head" + within});
      }
      return;
    case Phase::kBody:
      // A running request whose client stopped sending its body (nginx's client_body_timeout,
      // HAProxy's timeout client): it holds a slot, so it is cut as a client that left.
      CutBody(http::Error{408, "no request body bytes" + within});
      return;
    case Phase::kDrainBody:
      // The answer went out already: a second one would read as an unasked-for response.
      Close();
      return;
    case Phase::kAwaitingAnswer:
    case Phase::kClosing:
    case Phase::kClosed:
      return;
  }
}

// --- Reading and parsing. ---

void HttpFrontConnection::OnAlloc(uv_handle_t* handle, size_t, uv_buf_t* buf) {
  auto* self = static_cast<HttpFrontConnection*>(handle->data);
  // What was parsed already goes: the buffer holds only unparsed bytes (at most a head's worth
  // and a read) however long the connection lives.
  if (self->in_pos_ > 0) {
    std::memmove(self->in_.data(), self->in_.data() + self->in_pos_, self->in_end_ - self->in_pos_);
    self->in_end_ -= self->in_pos_;
    self->in_pos_ = 0;
  }
  // Grown only when a read's room is missing (zero-filled then, once): a warm connection reads
  // into the same bytes every time, without touching more memory than the read brings.
  if (self->in_.size() < self->in_end_ + kReadChunk) self->in_.resize(self->in_end_ + kReadChunk);
  *buf = uv_buf_init(self->in_.data() + self->in_end_, static_cast<unsigned>(kReadChunk));
}

void HttpFrontConnection::OnRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
  auto* self = static_cast<HttpFrontConnection*>(stream->data);
  // What OnAlloc added beyond the bytes read is not input.
  if (buf != nullptr && buf->base != nullptr) {
    self->in_end_ = static_cast<size_t>(buf->base - self->in_.data()) +
                    (nread > 0 ? static_cast<size_t>(nread) : 0);
  }
  if (self->phase_ == Phase::kClosed) return;
  if (nread == UV_EOF) {
    // An HTTP client closes its connection only once it has read the last response it waits for
    // (RFC 9112 section 9.6), so an end of input while a request waits for its answer is a client
    // that left, as nginx ("client prematurely closed connection") and Envoy take it: its request
    // is cancelled in the queue, or dropped as it runs. Over TCP this is the only sign of it, since
    // a FIN reads the same as a shutdown of the sending side.
    const bool waiting = self->phase_ == Phase::kBody || self->phase_ == Phase::kAwaitingAnswer;
    if (waiting || PeerClosedBothWays(stream)) {
      self->Close();
      return;
    }
    // The client only shut down its sending side: it still reads. Answer what it sent, then close.
    self->read_closed_ = true;
    self->ProcessInput();
    // A body it was sending will never be whole: the worker's request ends (if it still runs);
    // an answer already queued is written first.
    if (self->phase_ == Phase::kBody) {
      self->Close();
    } else if (self->phase_ == Phase::kDrainBody) {
      self->CloseWhenDrained();
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
  while (in_pos_ < in_end_ && Parsing()) {
    size_t consumed = 0;
    const http::RequestParser::Event event =
        parser_.Parse(std::string_view(in_.data() + in_pos_, in_end_ - in_pos_), &consumed);
    in_pos_ += consumed;
    if (event == http::RequestParser::Event::kError) {
      if (phase_ == Phase::kHead) {
        RefuseRequest(parser_.error());
      } else {
        CutBody(parser_.error());
      }
      break;
    }
    if (event == http::RequestParser::Event::kHead) {
      head_ready_ = true;
      continue;  // its body, or the part of it read with the head, follows
    }
    const bool whole = event == http::RequestParser::Event::kMessage;
    if (phase_ != Phase::kHead) {
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
  if (phase_ == Phase::kClosed) return;
  CloseIfDone();
  Update();
}

void HttpFrontConnection::StartExchange(bool streaming) {
  const http::RequestHead& head = parser_.head();
  head_ready_ = false;
  RequestInfo info;
  info.body = streaming ? RequestInfo::Body::kStreamed : RequestInfo::Body::kWhole;
  info.head = head.method == "HEAD";
  info.idempotent = http::IsIdempotentMethod(head.method);
  info.keep_alive = head.keep_alive;
  info.http11 = head.version_major == 1 && head.version_minor >= 1;
  info.close_link_after = head.body_on_bodiless_method;
  close_after_answer_ = !head.keep_alive;
  response_started_ = false;
  char request_id[32];
  http::ForwardOptions options;
  options.client_address = client_address_;
  options.request_id = NewRequestId(request_id);
  info.method = head.method;
  info.target = head.target;
  info.request_id = head.Find("X-Request-Id").value_or(options.request_id);
  options.host = owner_->name();  // for an HTTP/1.0 request without Host (docs/http.md)
  scratch_.clear();
  if (streaming) {
    body_chunked_ = head.chunked;
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
    continue_pending_ = false;
    http::AppendForwardRequest(&scratch_, head, parser_.body(), options);
  }
  Enter(streaming ? Phase::kBody : Phase::kAwaitingAnswer);
  body_progress_ms_ = phase_since_ms_;
  // The answer may come before this returns (a rejection): OnOutcome then moves the phase on.
  owner_->OnRequest(this, info, scratch_);
}

void HttpFrontConnection::OnBodyFlow(Exchange* exchange) {
  if (phase_ != Phase::kBody || exchange != exchanges_) return;
  if (exchange->body_pipe == Exchange::BodyPipe::kFlowing) {
    if (continue_pending_) {
      continue_pending_ = false;
      writer_.AppendBytes(kContinue);
      writer_.Flush();
    }
    // The client's silence in the body counts from here (TimerDeadline).
    body_progress_ms_ = owner_->time()->NowMs();
  }
  // Everything read was parsed when the request was handed on or paused: the body comes with the
  // next read.
  if (!processing_) Update();
}

void HttpFrontConnection::PassBody(bool last) {
  std::string& body = parser_.body();
  if (phase_ == Phase::kBody && exchanges_ != nullptr) {
    std::string_view bytes = body;
    if (body_chunked_) {
      scratch_.clear();
      http::AppendChunk(&scratch_, body);
      if (last) scratch_.append(http::kLastChunk);
      bytes = scratch_;
    }
    body_progress_ms_ = owner_->time()->NowMs();
    // May pause the body (kFull), or break the worker end under the write (kClosed).
    exchanges_->SendBody(bytes, last);
  }
  // In kDrainBody the request was answered: its body is dropped.
  body.clear();
  if (!last) return;
  if (phase_ == Phase::kBody) {
    Enter(Phase::kAwaitingAnswer);
  } else if (phase_ == Phase::kDrainBody) {
    Enter(Phase::kHead);
  }
}

void HttpFrontConnection::CutBody(const http::Error& error) {
  if (phase_ != Phase::kBody) {
    // Answered already, the rest of its body was being dropped.
    CloseWhenDrained();
    return;
  }
  // The request is given up as by a client that left (dropped), then its worker end ends it.
  if (Exchange* exchange = exchanges_) {
    const bool on_link = exchange->link != nullptr;
    Detach(exchange);
    // A queued exchange is cancelled (and recycled) here; a running one keeps its slot.
    owner_->OnClientGone(exchange);
    if (on_link) {
      exchange->AbortBody("request body cut: " + std::to_string(error.status) + " " + error.reason);
    }
  }
  if (phase_ == Phase::kClosed) return;
  if (response_started_) {
    Close();
    return;
  }
  RefuseRequest(error);
}

// --- Answers. ---

size_t HttpFrontConnection::OnResponseBytes(Exchange*, std::string_view bytes, bool must_close) {
  if (phase_ == Phase::kClosed) return 0;
  if (must_close) close_after_answer_ = true;
  if (bytes.empty()) return unsent_bytes();
  response_started_ = true;
  writer_.AppendBytes(bytes);
  writer_.Flush();
  WatchBacklog();
  return phase_ == Phase::kClosed ? 0 : unsent_bytes();
}

void HttpFrontConnection::OnOutcome(Exchange* exchange, const Outcome& outcome, uint64_t* counter) {
  if (phase_ == Phase::kClosed) {
    owner_->CountUndelivered(1);
    return;
  }
  // Answered before its body was read whole (a rejection, request_timeout, a worker that answered
  // early): the rest of the body is read and dropped, unless the client still waits for
  // "100 Continue" and never sends it: the connection then closes.
  const bool body_unread = phase_ == Phase::kBody;
  const bool body_unsent = body_unread && continue_pending_;
  // Copied first: the exchange may be recycled by what follows.
  const RequestInfo info = exchange->info;
  // A worker end still taking the body (request_timeout answered it) ends the worker's request:
  // its connection is closed, and the exchange, answered now, is recycled.
  if (exchange->body_open()) exchange->AbortBody("answered before the request body was whole");
  if (phase_ == Phase::kClosed) {
    owner_->CountUndelivered(1);
    return;
  }
  if (outcome.kind == Outcome::Kind::kOk || response_started_) {
    // Ok: the worker's response, streamed already, is whole. Anything else after part of it went
    // out: the client can only learn of the failure by the connection closing.
    const bool close = close_after_answer_ || outcome.kind != Outcome::Kind::kOk || body_unsent;
    QueueAnswer(counter, /*defer_flush=*/false);
    if (phase_ != Phase::kClosed) EndExchange(close, body_unread);
    return;
  }
  http::LocalReply reply = LocalReplyFor(outcome, owner_->name());
  reply.head_request = info.head;
  reply.http10_keep_alive = !info.http11 && info.keep_alive;
  if (body_unsent) reply.close = true;
  writer_.AppendBytes(http::FormatLocalReply(reply));
  QueueAnswer(counter, /*defer_flush=*/false);
  if (phase_ != Phase::kClosed) EndExchange(reply.close || close_after_answer_, body_unread);
}

void HttpFrontConnection::EndExchange(bool close, bool body_unread) {
  response_started_ = false;
  if (close) {
    CloseWhenDrained();
    return;
  }
  Enter(body_unread ? Phase::kDrainBody : Phase::kHead);
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
  if (phase_ == Phase::kClosed) return;
  Enter(Phase::kClosing);
  Update();
  if (writer_.idle() && !processing_) Close();
}

void HttpFrontConnection::OnDrained() {
  if (phase_ == Phase::kClosing) {
    if (!processing_) Close();
    return;
  }
  // The worker end relaying the current response may read again.
  if (exchanges_ != nullptr) exchanges_->ResponseDrained();
  CloseIfDone();
}

void HttpFrontConnection::CloseIfDone() {
  if (processing_ || !writer_.idle()) return;
  if (phase_ == Phase::kClosing || (read_closed_ && phase_ == Phase::kHead)) Close();
}

bool HttpFrontConnection::HandOver(int* fd, bool* tcp) {
  if (phase_ != Phase::kHead || processing_ || read_closed_ || head_ready_ ||
      exchanges_ != nullptr || !writer_.idle() || in_pos_ != in_end_ || parser_.in_message()) {
    return false;
  }
  const int own = DuplicateSocket();
  if (own < 0) return false;
  *fd = own;
  *tcp = handle_.handle.type == UV_TCP;
  Close();
  return true;
}

void HttpFrontConnection::PauseReads(bool paused) {
  reads_paused_ = paused;
  Update();
}

void HttpFrontConnection::Close() {
  if (phase_ == Phase::kClosed) return;
  phase_ = Phase::kClosed;
  closing_ = true;
  timer_->Stop();
  Exchange* current = exchanges_;
  // A worker end that stopped reading for this client reads on (and drops the rest). The worker
  // must not take the part of the body it got for a whole request: its connection is closed (the
  // exchange, its client gone, counts dropped); a running exchange is not recycled by
  // OnClientGone, so it is still there for that.
  Exchange* cut = nullptr;
  if (current != nullptr) {
    current->ResponseDrained();
    if (current->link != nullptr && current->body_open()) cut = current;
  }
  CloseAnswers();
  if (cut != nullptr) cut->AbortBody("client left in the middle of the request body");
  owner_->OnClientDisconnected(this);
  uv_close(&handle_.handle, &HttpFrontConnection::OnClosed);
}

void HttpFrontConnection::OnClosed(uv_handle_t* handle) {
  delete static_cast<HttpFrontConnection*>(handle->data);
}

}  // namespace bulkhead::proxy
