// SPDX-License-Identifier: MIT
// RequestParser: http-parser (2.9) driven one event at a time. The parser is paused in
// on_headers_complete and on_message_complete (http_parser_pause), so http_parser_execute returns
// there and the caller sees the head, then the message, before anything of the next request.
#include "http/request_parser.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "http/syntax.h"

namespace bulkhead::http {
namespace {

RequestParser* Self(http_parser* parser) { return static_cast<RequestParser*>(parser->data); }

std::string_view TrimWhitespace(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

// True when an Upgrade field's value (RFC 9110 section 7.8: a list of protocol["/"version]) offers
// WebSocket (RFC 6455 section 4.1). Any other offer (h2c, TLS/1.2, ...) is ignored, as section 7.8
// lets a server do: the request is served on HTTP/1.1, Upgrade and the fields its Connection
// names dropped as hop-by-hop. A WebSocket client instead waits for a 101 that never comes, so it
// is told at once.
bool OffersWebSocket(std::string_view value) {
  while (!value.empty()) {
    const size_t comma = value.find(',');
    std::string_view offer = TrimWhitespace(value.substr(0, comma));
    offer = offer.substr(0, offer.find('/'));
    if (EqualsIgnoreCase(TrimWhitespace(offer), "websocket")) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

// Methods whose content has no defined semantics (RequestHead::body_on_bodiless_method).
bool IsBodilessMethod(unsigned method) {
  switch (static_cast<http_method>(method)) {
    case HTTP_GET:
    case HTTP_HEAD:
    case HTTP_DELETE:
    case HTTP_OPTIONS:
    case HTTP_TRACE:
      return true;
    default:
      return false;
  }
}

// TrimWhitespace without a copy: the string keeps its memory.
void TrimWhitespaceInPlace(std::string* text) {
  const std::string_view kept = TrimWhitespace(*text);
  const size_t start = static_cast<size_t>(kept.data() - text->data());
  text->erase(start + kept.size());
  text->erase(0, start);
}

// http-parser's own refusals, with the status a front proxy answers.
Error ErrorOf(http_errno error) {
  switch (error) {
    case HPE_HEADER_OVERFLOW:
      return {431, "request head too large"};
    case HPE_UNEXPECTED_CONTENT_LENGTH:
      return {400, "Content-Length with Transfer-Encoding, or more than one Content-Length"};
    case HPE_INVALID_CONTENT_LENGTH:
      return {400, "bad Content-Length"};
    case HPE_INVALID_CHUNK_SIZE:
      return {400, "bad chunk size"};
    case HPE_INVALID_TRANSFER_ENCODING:
      return {501, "Transfer-Encoding other than chunked"};
    case HPE_INVALID_METHOD:
      return {400, "bad method"};
    case HPE_INVALID_VERSION:
      return {400, "bad HTTP version"};
    default:
      return {400, std::string("malformed request: ") + http_errno_description(error)};
  }
}

// RFC 9110 section 15.6.6: 505 for `version` ("HTTP/2.0"), its body saying which versions we speak.
Error VersionNotSupported(std::string_view version) {
  return {505, std::string(version) + " is not supported (HTTP/1.0 and HTTP/1.1 are)"};
}

// The longest HTTP-version http-parser takes: "HTTP/" and 1 to 3 digits each side of the dot.
constexpr size_t kVersionBytes = 12;

// The major version of `word` when it is an HTTP-version ("HTTP/2.0": 2), else nullopt.
std::optional<unsigned> MajorVersion(std::string_view word) {
  if (!word.starts_with("HTTP/")) return std::nullopt;
  word.remove_prefix(5);
  const size_t dot = word.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  const std::string_view major = word.substr(0, dot);
  const std::string_view minor = word.substr(dot + 1);
  auto digits = [](std::string_view part) {
    return !part.empty() && part.size() <= 3 &&
           part.find_first_not_of("0123456789") == std::string_view::npos;
  };
  if (!digits(major) || !digits(minor)) return std::nullopt;
  unsigned value = 0;
  for (char c : major) value = value * 10 + static_cast<unsigned>(c - '0');
  return value;
}

}  // namespace

std::optional<std::string_view> RequestHead::Find(std::string_view name) const {
  for (const Header& header : headers) {
    if (EqualsIgnoreCase(header.name, name)) return header.value;
  }
  return std::nullopt;
}

RequestParser::RequestParser(const Limits& limits) : limits_(limits) {
  http_parser_init(&parser_, HTTP_REQUEST);
  parser_.data = this;
  http_parser_settings_init(&settings_);
  settings_.on_message_begin = &RequestParser::OnMessageBegin;
  settings_.on_url = &RequestParser::OnUrl;
  settings_.on_header_field = &RequestParser::OnHeaderField;
  settings_.on_header_value = &RequestParser::OnHeaderValue;
  settings_.on_headers_complete = &RequestParser::OnHeadersComplete;
  settings_.on_body = &RequestParser::OnBody;
  settings_.on_message_complete = &RequestParser::OnMessageComplete;
}

RequestParser::Event RequestParser::JudgeUnknownMethod(std::string_view data, size_t* consumed) {
  // A method http-parser does not know ("BREW", "get") is a request this gateway cannot carry:
  // 501, as RFC 9110 section 9.1 has it for an unrecognised method (400 would say its syntax is
  // wrong, and it is not). Bytes that are no method ("G@T", "{GET", "BAD\r\n": no token followed
  // by SP) are 400. A version of another major than 1 outranks the method: "PRI * HTTP/2.0", the
  // preface of an HTTP/2 client with prior knowledge, is refused for its version (505), as
  // "GET / HTTP/2.0" is, so the 501 waits for the line's LF. Judged byte by byte, so that the
  // answer is the same however the bytes were split across reads.
  constexpr size_t kLongestMethod = 64;
  for (size_t i = 0; i < data.size(); ++i) {
    const char c = data[i];
    if (unknown_method_ == UnknownMethod::kToken) {
      if (c != ' ' && IsToken(std::string_view(&c, 1)) && ++method_tail_ <= kLongestMethod) {
        continue;
      }
      if (c == ' ' && method_tail_ > 0) {
        unknown_method_ = UnknownMethod::kLine;
        continue;
      }
      *consumed += i;
      unknown_method_ = UnknownMethod::kNone;
      failed_ = true;
      error_ = Error{400, "bad method"};
      return Event::kError;
    }
    // kLine: the version is the last word, before CRLF (or a bare LF, as a head may end lines).
    if (c == '\n' || ++line_bytes_ > limits_.max_head_bytes) {
      std::string_view word = last_word_;
      if (word.ends_with('\r')) word.remove_suffix(1);
      const std::optional<unsigned> major = c == '\n' ? MajorVersion(word) : std::nullopt;
      *consumed += i;
      unknown_method_ = UnknownMethod::kNone;
      failed_ = true;
      error_ =
          major && *major != 1 ? VersionNotSupported(word) : Error{501, "method not implemented"};
      return Event::kError;
    }
    if (c == ' ') {
      last_word_.clear();
    } else if (last_word_.size() <= kVersionBytes) {
      last_word_ += c;  // one byte more than a version has: no version
    }
  }
  *consumed += data.size();
  return Event::kNeedMore;
}

RequestParser::Event RequestParser::Parse(std::string_view data, size_t* consumed) {
  *consumed = 0;
  if (unknown_method_ != UnknownMethod::kNone) return JudgeUnknownMethod(data, consumed);
  if (failed_) return Event::kError;
  if (message_done_) {
    // The previous request was handed out whole: the next one starts here.
    ResetHead();
    body_.clear();
    message_done_ = false;
    in_head_ = true;
    last_was_value_ = false;
    body_bytes_ = 0;
    after_target_ = '\0';
    framing_.StartMessage();
  }
  http_parser_pause(&parser_, 0);
  data_end_ = data.data() + data.size();
  framing_mark_ = data.data();
  if (head_end_checked_ && !data.empty()) {
    head_end_checked_ = false;
    ++framing_mark_;
  }
  const size_t n = http_parser_execute(&parser_, &settings_, data.data(), data.size());
  *consumed = n;
  if (failed_) return Event::kError;
  if (!ScanFraming(data.data() + n)) return Event::kError;
  const http_errno error = HTTP_PARSER_ERRNO(&parser_);
  if (error == HPE_PAUSED) {
    if (message_done_) return Event::kMessage;
    // Paused at the end of the head, on its last byte (the LF of the empty line, which http-parser
    // consumes on the next call): checked now, so that the head handed out is checked whole.
    if (n < data.size()) {
      if (!ScanFraming(data.data() + n + 1)) return Event::kError;
      head_end_checked_ = true;
    }
    framing_.StartBody(head_.chunked);
    return Event::kHead;
  }
  if (error != HPE_OK) {
    // http-parser reports a chunk size past 2^64 - 1 as HPE_INVALID_CONTENT_LENGTH.
    error_ = error == HPE_INVALID_CONTENT_LENGTH && !in_head_ ? Error{400, "chunk size too large"}
             : error == HPE_HEADER_OVERFLOW && in_head_       ? HeadOverLimit()
                                                              : ErrorOf(error);
    if (error == HPE_INVALID_METHOD) {
      // http-parser stopped at the first byte no method it knows has there, every byte before it
      // a method's (upper-case letters): the rest of the method decides.
      unknown_method_ = UnknownMethod::kToken;
      method_tail_ = 0;
      line_bytes_ = 0;
      last_word_.clear();
      return JudgeUnknownMethod(data.substr(n), consumed);
    }
    failed_ = true;
    return Event::kError;
  }
  return Event::kNeedMore;
}

void RequestParser::ResetHead() {
  RecycleHeaders(&head_.headers, &spare_headers_);
  std::vector<Header> headers = std::move(head_.headers);
  std::string method = std::move(head_.method);
  std::string target = std::move(head_.target);
  head_ = RequestHead();
  method.clear();
  target.clear();
  head_.headers = std::move(headers);
  head_.method = std::move(method);
  head_.target = std::move(target);
}

RequestParser::Event RequestParser::Finish() {
  if (failed_) return Event::kError;
  if (in_message_) {
    Fail(400, "connection closed in the middle of a request");
    return Event::kError;
  }
  return Event::kNeedMore;
}

Error RequestParser::HeadOverLimit() const {
  // The request line is what is too long when no field has begun yet (every byte of the head so
  // far is the line's, whether the limit came in its target or in its version), or when the line
  // alone, judged after the fact (a read that brought fields too), is longer than a head may be:
  // method SP target SP "HTTP/1.1" CRLF.
  const size_t line_bytes = std::strlen(http_method_str(static_cast<http_method>(parser_.method))) +
                            head_.target.size() + std::strlen(" HTTP/1.1\r\n") + 1;
  if (line_bytes > limits_.max_head_bytes || head_.headers.empty()) {
    return {414, "request-target over " + std::to_string(limits_.max_head_bytes) +
                     " bytes (the request line must fit in a head)"};
  }
  return {431, "request head over " + std::to_string(limits_.max_head_bytes) + " bytes"};
}

int RequestParser::Fail(int status, std::string reason) {
  if (!failed_) error_ = Error{status, std::move(reason)};
  failed_ = true;
  return -1;
}

bool RequestParser::ScanFraming(const char* end) {
  if (end <= framing_mark_) return true;
  const char* wrong = framing_.Scan({framing_mark_, static_cast<size_t>(end - framing_mark_)});
  framing_mark_ = end;
  if (wrong != nullptr) {
    Fail(400, wrong);
    return false;
  }
  if (framing_.head_bytes() > limits_.max_head_bytes) {
    const Error over = HeadOverLimit();
    Fail(over.status, over.reason);
    return false;
  }
  if (framing_.trailer_bytes() > limits_.max_head_bytes) {
    Fail(431, "trailer section over " + std::to_string(limits_.max_head_bytes) + " bytes");
    return false;
  }
  return true;
}

int RequestParser::OnMessageBegin(http_parser* parser) {
  Self(parser)->in_message_ = true;
  return 0;
}

int RequestParser::OnUrl(http_parser* parser, const char* at, size_t length) {
  RequestParser* self = Self(parser);
  self->head_.target.append(at, length);
  // http-parser hands over the last piece of the target when it meets the byte that ends it, which
  // is then the next byte of the data given (a piece cut by the end of the data is followed by
  // another, possibly empty, piece).
  if (at + length < self->data_end_) self->after_target_ = at[length];
  // http-parser, built without HTTP_PARSER_STRICT, takes a TAB, a form feed and bytes above 0x7f
  // in the target; an origin server behind may split the target there (RFC 9112 section 3.2).
  if (!IsTargetText({at, length})) {
    return self->Fail(400,
                      "forbidden byte in the request-target (a control character, a byte "
                      "above 0x7f or '#')");
  }
  // Refused as soon as the line ends: an HTTP/0.9 client sends that one line and waits.
  return self->RefuseVersionless() ? -1 : 0;
}

bool RequestParser::RefuseVersionless() {
  // http-parser reads a request line without a version ("GET /x", HTTP/0.9's form) as HTTP/0.9;
  // the target then ended at the line's end instead of a space.
  if (after_target_ != '\r' && after_target_ != '\n') return false;
  Fail(400, "no HTTP version in the request line (HTTP/0.9 is not supported)");
  return true;
}

void AppendFieldNamePiece(std::vector<Header>* headers, bool* last_was_value,
                          std::string_view piece, std::vector<Header>* spare) {
  if (headers->empty() || *last_was_value) {
    if (spare != nullptr && !spare->empty()) {
      headers->push_back(std::move(spare->back()));
      spare->pop_back();
    } else {
      headers->emplace_back();
    }
  }
  headers->back().name.append(piece);
  *last_was_value = false;
}

void AppendFieldValuePiece(std::vector<Header>* headers, bool* last_was_value,
                           std::string_view piece) {
  headers->back().value.append(piece);
  *last_was_value = true;
}

void RecycleHeaders(std::vector<Header>* headers, std::vector<Header>* spare) {
  for (Header& header : *headers) {
    header.name.clear();
    header.value.clear();
    spare->push_back(std::move(header));
  }
  headers->clear();
}

int RequestParser::OnHeaderField(http_parser* parser, const char* at, size_t length) {
  RequestParser* self = Self(parser);
  // A trailer field (after a chunked body): dropped, never merged into the head (RFC 9110 section
  // 6.5.1); the trailer section's size is bounded in ScanFraming.
  if (!self->in_head_) return 0;
  const bool starts_field = self->head_.headers.empty() || self->last_was_value_;
  if (starts_field && self->head_.headers.size() >= self->limits_.max_headers) {
    return self->Fail(431,
                      "more than " + std::to_string(self->limits_.max_headers) + " header fields");
  }
  AppendFieldNamePiece(&self->head_.headers, &self->last_was_value_, {at, length},
                       &self->spare_headers_);
  return 0;
}

int RequestParser::OnHeaderValue(http_parser* parser, const char* at, size_t length) {
  RequestParser* self = Self(parser);
  if (!self->in_head_) return 0;  // a trailer field's value: dropped with its name
  AppendFieldValuePiece(&self->head_.headers, &self->last_was_value_, {at, length});
  return 0;
}

int RequestParser::OnHeadersComplete(http_parser* parser) {
  RequestParser* self = Self(parser);
  RequestHead& head = self->head_;
  head.method = http_method_str(static_cast<http_method>(parser->method));
  if (!self->AcceptVersion(parser)) return -1;
  for (Header& header : head.headers) TrimWhitespaceInPlace(&header.value);
  head.keep_alive = http_should_keep_alive(parser) != 0;
  head.chunked = (parser->flags & F_CHUNKED) != 0;
  head.content_length = (parser->flags & F_CONTENTLENGTH) != 0 ? parser->content_length : 0;
  if (!self->ValidateHead()) return -1;
  head.body_on_bodiless_method =
      (head.chunked || head.content_length > 0) && IsBodilessMethod(parser->method);
  self->in_head_ = false;
  http_parser_pause(parser, 1);
  return 0;
}

bool RequestParser::AcceptVersion(http_parser* parser) {
  if (RefuseVersionless()) return false;
  if (parser->http_major != 1) {
    Error refusal = VersionNotSupported("HTTP/" + std::to_string(parser->http_major) + "." +
                                        std::to_string(parser->http_minor));
    Fail(refusal.status, std::move(refusal.reason));
    return false;
  }
  head_.version_major = 1;
  // RFC 9110 section 2.5: a higher minor version than ours is processed as the highest we
  // implement, HTTP/1.1.
  head_.version_minor = std::min<uint16_t>(parser->http_minor, 1);
  return true;
}

bool RequestParser::ValidateHead() {
  RequestHead& head = head_;
  if (head.method == "CONNECT") {
    Fail(501, "CONNECT is not supported");
    return false;
  }
  for (const Header& header : head.headers) {
    // "Bad Name: 1" or "Name : 1": whitespace before the colon is refused (RFC 9112 section 5.1).
    if (!IsToken(header.name)) {
      Fail(400, "bad header field name \"" + header.name + "\"");
      return false;
    }
    if (!IsFieldValue(header.value)) {
      Fail(400, "control character in the value of " + header.name);
      return false;
    }
  }
  int hosts = 0;
  int content_lengths = 0;
  int transfer_encodings = 0;
  std::string transfer_encoding;
  for (const Header& header : head.headers) {
    if (EqualsIgnoreCase(header.name, "Host")) ++hosts;
    if (EqualsIgnoreCase(header.name, "Content-Length")) ++content_lengths;
    if (EqualsIgnoreCase(header.name, "Transfer-Encoding")) {
      ++transfer_encodings;
      if (!transfer_encoding.empty()) transfer_encoding += ",";
      transfer_encoding += header.value;
    }
    if (EqualsIgnoreCase(header.name, "Upgrade") && OffersWebSocket(header.value)) {
      Fail(501, "Upgrade to WebSocket is not supported");
      return false;
    }
  }
  const bool http11 = head.version_major == 1 && head.version_minor >= 1;
  // RFC 9112 section 3.2: 400 for an HTTP/1.1 request without Host, and for any request with
  // more than one or an invalid one.
  if ((http11 && hosts == 0) || hosts > 1) {
    Fail(400, hosts == 0 ? "no Host header" : "more than one Host header");
    return false;
  }
  Header* host = nullptr;
  for (Header& header : head.headers) {
    if (EqualsIgnoreCase(header.name, "Host")) host = &header;
  }
  if (host != nullptr && !IsHostAuthority(host->value)) {
    Fail(400, host->value.empty() ? "empty Host header"
                                  : "bad Host header (not host[:port], RFC 9110 section 7.2)");
    return false;
  }
  if (!TakeTargetAuthority(host)) return false;
  if (content_lengths > 1) {
    Fail(400, "more than one Content-Length");
    return false;
  }
  if (transfer_encodings > 0) {
    if (!http11) {
      Fail(400, "Transfer-Encoding in an HTTP/1.0 request");
      return false;
    }
    if (content_lengths > 0) {
      Fail(400, "Content-Length with Transfer-Encoding");
      return false;
    }
    if (!EqualsIgnoreCase(TrimWhitespace(transfer_encoding), "chunked")) {
      // Every coding chunked ("chunked, chunked", or two fields): a framing error, not a coding
      // this gateway lacks (RFC 9112 section 6.1: chunked MUST NOT be applied more than once).
      bool all_chunked = true;
      for (size_t at = 0; at <= transfer_encoding.size() && all_chunked;) {
        size_t comma = transfer_encoding.find(',', at);
        if (comma == std::string::npos) comma = transfer_encoding.size();
        all_chunked = EqualsIgnoreCase(
            TrimWhitespace(std::string_view(transfer_encoding).substr(at, comma - at)), "chunked");
        at = comma + 1;
      }
      if (all_chunked) {
        Fail(400, "Transfer-Encoding applies chunked more than once (RFC 9112 section 6.1)");
      } else {
        Fail(501, "Transfer-Encoding other than chunked");
      }
      return false;
    }
  }
  if (std::optional<std::string_view> expect = head.Find("Expect")) {
    if (!EqualsIgnoreCase(*expect, "100-continue")) {
      Fail(417, "Expect other than 100-continue");
      return false;
    }
    head.expect_continue = http11;
  }
  if (head.content_length > limits_.max_body_bytes) {
    Fail(413, "body of " + std::to_string(head.content_length) + " bytes over " +
                  std::to_string(limits_.max_body_bytes));
    return false;
  }
  return true;
}

bool RequestParser::TakeTargetAuthority(Header* host) {
  RequestHead& head = head_;
  if (head.target.empty() || head.target.front() == '/' || head.target == "*") return true;
  // absolute-form: scheme "://" authority path-abempty [ "?" query ] (RFC 9112 section 3.2.2).
  const std::string_view target = head.target;
  const size_t scheme_end = target.find("://");
  const std::string_view scheme = target.substr(0, scheme_end);
  if (scheme_end == std::string_view::npos ||
      !(EqualsIgnoreCase(scheme, "http") || EqualsIgnoreCase(scheme, "https"))) {
    Fail(400, "request-target in absolute-form that is not an http or https URI");
    return false;
  }
  const std::string_view rest = target.substr(scheme_end + 3);
  const std::string_view authority = rest.substr(0, rest.find_first_of("/?"));
  if (!IsHostAuthority(authority)) {
    Fail(400, "bad authority in the request-target (not host[:port], RFC 9110 section 4.2.3)");
    return false;
  }
  // RFC 9112 section 3.2.2: the target's authority wins over Host; the worker gets the one.
  if (host != nullptr) {
    host->value.assign(authority);
  } else {
    head.headers.push_back(Header{"Host", std::string(authority)});
  }
  return true;
}

int RequestParser::OnBody(http_parser* parser, const char* at, size_t length) {
  RequestParser* self = Self(parser);
  // The bytes before the data (chunk lines, the CRLF after the previous chunk's data) are framing.
  if (!self->ScanFraming(at)) return -1;
  self->framing_mark_ = at + length;
  if (self->body_bytes_ + length > self->limits_.max_body_bytes) {
    return self->Fail(413, "body over " + std::to_string(self->limits_.max_body_bytes) + " bytes");
  }
  self->body_bytes_ += length;
  self->body_.append(at, length);
  return 0;
}

int RequestParser::OnMessageComplete(http_parser* parser) {
  RequestParser* self = Self(parser);
  self->message_done_ = true;
  self->in_message_ = false;
  http_parser_pause(parser, 1);
  return 0;
}

}  // namespace bulkhead::http
