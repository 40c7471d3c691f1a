// SPDX-License-Identifier: MIT
// ResponseRelay: http-parser (2.9) in response mode, paused at the end of each head and of each
// message, so that a head is checked whole before it goes to the client, and the bytes after a
// response stay with the caller.
#include "http/response_relay.h"

#include <charconv>

#include "http/forward.h"
#include "http/local_reply.h"
#include "http/syntax.h"

namespace bulkhead::http {
namespace {

ResponseRelay* Self(http_parser* parser) { return static_cast<ResponseRelay*>(parser->data); }

// "Content-Length: N\r\n", appended in pieces: nothing allocated beyond `out`'s growth.
void AppendContentLength(std::string* out, uint64_t length) {
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof digits, length).ptr;
  out->append("Content-Length: ");
  out->append(digits, static_cast<size_t>(end - digits));
  out->append("\r\n");
}

}  // namespace

ResponseRelay::ResponseRelay() {
  http_parser_settings_init(&settings_);
  settings_.on_status = &ResponseRelay::OnStatus;
  settings_.on_header_field = &ResponseRelay::OnHeaderField;
  settings_.on_header_value = &ResponseRelay::OnHeaderValue;
  settings_.on_headers_complete = &ResponseRelay::OnHeadersComplete;
  settings_.on_body = &ResponseRelay::OnBody;
  settings_.on_message_complete = &ResponseRelay::OnMessageComplete;
  Begin(false, true, true);
}

void ResponseRelay::Begin(bool head_request, bool client_keep_alive, bool client_http11) {
  http_parser_init(&parser_, HTTP_RESPONSE);
  parser_.data = this;
  head_request_ = head_request;
  client_keep_alive_ = client_keep_alive;
  client_http11_ = client_http11;
  status_code_ = 0;
  reason_phrase_.clear();
  RecycleHeaders(&headers_, &spare_headers_);
  last_was_value_ = false;
  in_head_ = true;
  client_framing_ = Framing::kNone;
  worker_chunked_ = false;
  framing_conflict_ = false;
  framing_.StartMessage();
  head_end_checked_ = false;
  interim_done_ = false;
  head_sent_ = false;
  complete_ = false;
  failed_ = false;
  worker_keep_alive_ = false;
  client_must_close_ = false;
  error_.clear();
}

ResponseRelay::Event ResponseRelay::Feed(std::string_view data, size_t* consumed,
                                         std::string* out) {
  *consumed = 0;
  if (failed_) return Event::kError;
  if (complete_) return Event::kComplete;
  out_ = out;
  size_t used = 0;
  Event event = Event::kNeedMore;
  // One round per pause: a head's end, an interim response's end, the final response's end.
  while (true) {
    const std::string_view rest = data.substr(used);
    if (rest.empty()) break;  // (an empty call to http-parser would mean the end of input)
    framing_mark_ = rest.data();
    if (head_end_checked_) {
      head_end_checked_ = false;
      ++framing_mark_;
    }
    http_parser_pause(&parser_, 0);
    const size_t n = http_parser_execute(&parser_, &settings_, rest.data(), rest.size());
    used += n;
    if (failed_ || !ScanFraming(rest.data() + n)) {
      event = Event::kError;
      break;
    }
    const http_errno error = HTTP_PARSER_ERRNO(&parser_);
    if (error == HPE_OK) break;  // every byte given was used
    if (error != HPE_PAUSED) {
      Fail(std::string("malformed response from the worker: ") + http_errno_description(error));
      event = Event::kError;
      break;
    }
    if (complete_) {
      event = Event::kComplete;
      break;
    }
    if (interim_done_) {
      // An interim response (100 Continue, 103 Early Hints) ended: the final one follows.
      interim_done_ = false;
      framing_.StartMessage();
      continue;
    }
    // Paused at a head's end, on its last byte (the LF that http-parser consumes in the next
    // round): checked now, then the head goes to the client.
    if (n < rest.size()) {
      if (!ScanFraming(rest.data() + n + 1)) {
        event = Event::kError;
        break;
      }
      head_end_checked_ = true;
    }
    framing_.StartBody(worker_chunked_);
    in_head_ = false;
    if (status_code_ >= 200) AppendHead();
  }
  out_ = nullptr;
  *consumed = used;
  return event;
}

ResponseRelay::Event ResponseRelay::WorkerClosed(std::string* out) {
  if (failed_) return Event::kError;
  if (!complete_) {
    // End of input: http-parser completes a body delimited by the close.
    out_ = out;
    http_parser_execute(&parser_, &settings_, nullptr, 0);
    out_ = nullptr;
  }
  worker_keep_alive_ = false;
  if (complete_) return Event::kComplete;
  Fail("the worker closed the connection before its response was complete");
  return Event::kError;
}

int ResponseRelay::Fail(std::string reason) {
  if (!failed_) error_ = std::move(reason);
  failed_ = true;
  return -1;
}

bool ResponseRelay::ScanFraming(const char* end) {
  if (end <= framing_mark_) return true;
  const char* wrong = framing_.Scan({framing_mark_, static_cast<size_t>(end - framing_mark_)});
  framing_mark_ = end;
  if (wrong == nullptr) return true;
  Fail(std::string("malformed response from the worker: ") + wrong);
  return false;
}

int ResponseRelay::OnStatus(http_parser* parser, const char* at, size_t length) {
  Self(parser)->reason_phrase_.append(at, length);
  return 0;
}

int ResponseRelay::OnHeaderField(http_parser* parser, const char* at, size_t length) {
  ResponseRelay* self = Self(parser);
  if (!self->in_head_) return 0;  // a trailer field: dropped
  AppendFieldNamePiece(&self->headers_, &self->last_was_value_, {at, length},
                       &self->spare_headers_);
  return 0;
}

int ResponseRelay::OnHeaderValue(http_parser* parser, const char* at, size_t length) {
  ResponseRelay* self = Self(parser);
  if (!self->in_head_) return 0;
  AppendFieldValuePiece(&self->headers_, &self->last_was_value_, {at, length});
  return 0;
}

int ResponseRelay::OnHeadersComplete(http_parser* parser) {
  ResponseRelay* self = Self(parser);
  self->status_code_ = parser->status_code;
  if (self->status_code_ < 100) {
    // http-parser reads "HTTP/1.1 20 OK" as status 20 (RFC 9112 section 4: three digits).
    return self->Fail("malformed response from the worker: status code " +
                      std::to_string(self->status_code_));
  }
  if (self->status_code_ == 101) {
    return self->Fail("101 Switching Protocols without an Upgrade request");
  }
  for (const Header& header : self->headers_) {
    // http-parser takes a space in a field name ("Content-Length : 2"): the client would get the
    // field beside the framing bulkheadd chose (RFC 9112 section 5.1).
    if (!IsToken(header.name)) {
      return self->Fail("malformed response from the worker: bad header field name \"" +
                        header.name + "\"");
    }
  }
  if (!IsFieldValue(self->reason_phrase_)) {
    return self->Fail("malformed response from the worker: control character in the reason phrase");
  }
  // RFC 9112 section 6.3, rule 1: these end at the empty line whatever their fields say.
  const int status = self->status_code_;
  const bool no_body = self->head_request_ || status < 200 || status == 204 || status == 304;
  const bool chunked = (parser->flags & F_CHUNKED) != 0;
  const bool has_length = (parser->flags & F_CONTENTLENGTH) != 0;
  if (no_body && (chunked || (has_length && parser->content_length > 0))) {
    self->framing_conflict_ = true;
  }
  self->worker_chunked_ = !no_body && chunked;
  if (status >= 200) {
    if (no_body) {
      self->client_framing_ = Framing::kNone;
    } else if (!chunked && has_length) {
      self->client_framing_ = Framing::kLength;
    } else {
      // Chunked, or delimited by the worker's close: chunked for the client when it can take it.
      self->client_framing_ = self->client_http11_ ? Framing::kChunked : Framing::kUntilClose;
    }
    self->client_must_close_ =
        !self->client_keep_alive_ || self->client_framing_ == Framing::kUntilClose;
  }
  // Feed checks the head's last byte and sends the head on (AppendHead).
  http_parser_pause(parser, 1);
  // 1: no body follows, whatever the fields say (http-parser's contract for HEAD responses).
  return no_body ? 1 : 0;
}

void ResponseRelay::AppendHead() {
  std::string& out = *out_;
  out.append("HTTP/1.1 ");
  out.append(std::to_string(status_code_));
  out.push_back(' ');
  out.append(reason_phrase_);
  out.append("\r\n");
  for (const Header& header : headers_) {
    if (IsHopByHop(header.name, headers_)) continue;
    // Marks bulkheadd's own answers only (docs/http.md, "Outcomes"): a worker cannot forge one, as
    // Envoy drops a backend's x-envoy-* fields (suppress_envoy_headers).
    if (EqualsIgnoreCase(header.name, kOutcomeField)) continue;
    out.append(header.name);
    out.append(": ");
    out.append(header.value);
    out.append("\r\n");
  }
  const bool declared_length = (parser_.flags & F_CONTENTLENGTH) != 0;
  switch (client_framing_) {
    case Framing::kLength:
      AppendContentLength(&out, parser_.content_length);
      break;
    case Framing::kChunked:
      out.append("Transfer-Encoding: chunked\r\n");
      break;
    case Framing::kNone:
      // HEAD and 304 tell the length the body would have (RFC 9110 sections 8.6, 15.4.5).
      if (declared_length && status_code_ != 204) {
        AppendContentLength(&out, parser_.content_length);
      }
      break;
    case Framing::kUntilClose:
      break;
  }
  if (client_must_close_) {
    out.append("Connection: close\r\n");
  } else if (!client_http11_) {
    out.append("Connection: keep-alive\r\n");
  }
  out.append("\r\n");
  head_sent_ = true;
}

int ResponseRelay::OnBody(http_parser* parser, const char* at, size_t length) {
  ResponseRelay* self = Self(parser);
  // The bytes before the data (chunk lines, the CRLF after the previous chunk's data) are framing.
  if (!self->ScanFraming(at)) return -1;
  self->framing_mark_ = at + length;
  std::string& out = *self->out_;
  if (self->client_framing_ == Framing::kChunked) {
    AppendHex(&out, length);
    out.append("\r\n");
    out.append(at, length);
    out.append("\r\n");
  } else {
    out.append(at, length);
  }
  return 0;
}

int ResponseRelay::OnMessageComplete(http_parser* parser) {
  ResponseRelay* self = Self(parser);
  http_parser_pause(parser, 1);
  if (self->status_code_ < 200) {
    // An interim response: dropped; Feed goes on with the final one.
    self->status_code_ = 0;
    self->reason_phrase_.clear();
    RecycleHeaders(&self->headers_, &self->spare_headers_);
    self->last_was_value_ = false;
    self->in_head_ = true;
    self->interim_done_ = true;
    return 0;
  }
  if (self->client_framing_ == Framing::kChunked) self->out_->append("0\r\n\r\n");
  self->complete_ = true;
  self->worker_keep_alive_ = http_should_keep_alive(parser) != 0 && !self->framing_conflict_;
  return 0;
}

}  // namespace bulkhead::http
