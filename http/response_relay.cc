// SPDX-License-Identifier: MIT
// ResponseRelay: http-parser (2.9) in response mode, paused at on_message_complete so the bytes
// after a response stay with the caller.
#include "http/response_relay.h"

#include <charconv>
#include <cstdio>

#include "http/forward.h"

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
  client_framing_ = Framing::kNone;
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
  const size_t n = http_parser_execute(&parser_, &settings_, data.data(), data.size());
  out_ = nullptr;
  *consumed = n;
  if (failed_) return Event::kError;
  const http_errno error = HTTP_PARSER_ERRNO(&parser_);
  if (error == HPE_PAUSED && complete_) return Event::kComplete;
  if (error != HPE_OK) {
    Fail(std::string("malformed response from the worker: ") + http_errno_description(error));
    return Event::kError;
  }
  return Event::kNeedMore;
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

int ResponseRelay::OnStatus(http_parser* parser, const char* at, size_t length) {
  Self(parser)->reason_phrase_.append(at, length);
  return 0;
}

int ResponseRelay::OnHeaderField(http_parser* parser, const char* at, size_t length) {
  ResponseRelay* self = Self(parser);
  AppendFieldNamePiece(&self->headers_, &self->last_was_value_, {at, length},
                       &self->spare_headers_);
  return 0;
}

int ResponseRelay::OnHeaderValue(http_parser* parser, const char* at, size_t length) {
  ResponseRelay* self = Self(parser);
  AppendFieldValuePiece(&self->headers_, &self->last_was_value_, {at, length});
  return 0;
}

int ResponseRelay::OnHeadersComplete(http_parser* parser) {
  ResponseRelay* self = Self(parser);
  self->status_code_ = parser->status_code;
  if (self->status_code_ == 101) {
    return self->Fail("101 Switching Protocols without an Upgrade request");
  }
  if (self->status_code_ < 200) return 0;  // interim: dropped in OnMessageComplete
  const bool no_body =
      self->head_request_ || self->status_code_ == 204 || self->status_code_ == 304;
  if (no_body) {
    self->client_framing_ = Framing::kNone;
  } else if ((parser->flags & F_CHUNKED) == 0 && (parser->flags & F_CONTENTLENGTH) != 0) {
    self->client_framing_ = Framing::kLength;
  } else {
    // Chunked, or delimited by the worker's close: chunked for the client when it can take it.
    self->client_framing_ = self->client_http11_ ? Framing::kChunked : Framing::kUntilClose;
  }
  self->client_must_close_ =
      !self->client_keep_alive_ || self->client_framing_ == Framing::kUntilClose;
  self->AppendHead();
  // 1: no body follows, whatever the fields say (http-parser's contract for HEAD responses).
  return self->head_request_ ? 1 : 0;
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
  std::string& out = *self->out_;
  if (self->client_framing_ == Framing::kChunked) {
    char size[32];
    std::snprintf(size, sizeof size, "%zx\r\n", length);
    out.append(size);
    out.append(at, length);
    out.append("\r\n");
  } else {
    out.append(at, length);
  }
  return 0;
}

int ResponseRelay::OnMessageComplete(http_parser* parser) {
  ResponseRelay* self = Self(parser);
  if (self->status_code_ < 200) {
    // An interim response (100 Continue, 103 Early Hints): the final one follows.
    self->status_code_ = 0;
    self->reason_phrase_.clear();
    RecycleHeaders(&self->headers_, &self->spare_headers_);
    self->last_was_value_ = false;
    return 0;
  }
  if (self->client_framing_ == Framing::kChunked) self->out_->append("0\r\n\r\n");
  self->complete_ = true;
  self->worker_keep_alive_ = http_should_keep_alive(parser) != 0;
  http_parser_pause(parser, 1);
  return 0;
}

}  // namespace bulkhead::http
