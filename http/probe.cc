// SPDX-License-Identifier: MIT
// The health probe's request and response (http/probe.h): http-parser (2.9) in response mode,
// paused at the end of the first final response (or when its body reaches kProbeMaxBodyBytes).
#include "http/probe.h"

namespace bulkhead::http {

std::string ProbeRequest(std::string_view path) {
  std::string request = "GET ";
  request.append(path);
  request +=
      " HTTP/1.1\r\nHost: localhost\r\nUser-Agent: bulkheadd-probe\r\nAccept: */*\r\n"
      "Connection: close\r\n\r\n";
  return request;
}

ProbeResponse::ProbeResponse() {
  http_parser_settings_init(&settings_);
  settings_.on_headers_complete = &ProbeResponse::OnHeadersComplete;
  settings_.on_body = &ProbeResponse::OnBody;
  settings_.on_message_complete = &ProbeResponse::OnMessageComplete;
  http_parser_init(&parser_, HTTP_RESPONSE);
  parser_.data = this;
}

int ProbeResponse::OnHeadersComplete(http_parser* parser) {
  auto* self = static_cast<ProbeResponse*>(parser->data);
  const int code = static_cast<int>(parser->status_code);
  // An interim response (100 Continue, 102, 103): the final one follows on the same connection.
  if (code >= 100 && code <= 199 && code != 101) return 0;
  self->status_code_ = code;
  return 0;
}

int ProbeResponse::OnBody(http_parser* parser, const char*, size_t length) {
  auto* self = static_cast<ProbeResponse*>(parser->data);
  self->body_bytes_ += length;
  if (self->body_bytes_ >= kProbeMaxBodyBytes) {
    self->ended_ = true;
    http_parser_pause(parser, 1);
  }
  return 0;
}

int ProbeResponse::OnMessageComplete(http_parser* parser) {
  auto* self = static_cast<ProbeResponse*>(parser->data);
  // The end of an interim response: the final one follows.
  if (self->status_code_ == 0) return 0;
  self->ended_ = true;
  http_parser_pause(parser, 1);
  return 0;
}

ProbeResponse::Result ProbeResponse::Feed(std::string_view data) {
  if (ended_) return Result::kStatus;
  if (!error_.empty()) return Result::kError;
  if (data.empty()) return Result::kNeedMore;
  started_ = true;
  http_parser_execute(&parser_, &settings_, data.data(), data.size());
  if (ended_) return Result::kStatus;
  const http_errno error = HTTP_PARSER_ERRNO(&parser_);
  if (error != HPE_OK && status_code_ != 0) {
    ended_ = true;  // a malformed body after a whole head: judged on the status, as a cut one
    return Result::kStatus;
  }
  if (error != HPE_OK) {
    error_ = std::string("not an HTTP/1.x response: ") + http_errno_description(error);
    return Result::kError;
  }
  return Result::kNeedMore;
}

ProbeResponse::Result ProbeResponse::Closed() {
  if (ended_) return Result::kStatus;
  if (status_code_ != 0 && error_.empty()) {
    ended_ = true;
    return Result::kStatus;
  }
  if (error_.empty()) {
    error_ = started_ ? "connection closed inside the response head"
                      : "connection closed before the status line";
  }
  return Result::kError;
}

}  // namespace bulkhead::http
