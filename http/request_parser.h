// SPDX-License-Identifier: MIT
// RequestParser: HTTP/1.1 requests from a client connection (RFC 9112), strictly, through the
// http-parser library. One parser per connection; it stops after each head and after each
// complete message so the caller answers pipelined requests in order. Pure: no I/O, no libuv.
// Thread-compatible.
//
// Refused with the connection closed after the answer (Error), as a front proxy must (RFC 9112
// section 6.3, "Message Body Length", and 11.2, "Request Smuggling"):
//   400  malformed request line or header, a request line without an HTTP version (HTTP/0.9,
//        RFC 9112 section 3), a request-target byte http/syntax.h's IsTargetText refuses (a TAB,
//        any control character, a byte above 0x7f, '#': RFC 9112 section 3.2), Content-Length
//        together with Transfer-Encoding, more than one Content-Length, a bad chunk size, a bare CR
//        anywhere in the head or chunked framing, obs-fold (a header line starting with whitespace,
//        RFC 9112 section 5.2), a chunk or trailer line not ended by CRLF, chunk data not followed
//        by CRLF (http/framing_check.h), Transfer-Encoding in an HTTP/1.0 request, a missing Host
//        in HTTP/1.1, a repeated Host, a Host that is not host[:port] (empty, "a b", "a@b": http/
//        syntax.h's IsHostAuthority; RFC 9112 section 3.2, RFC 9110 section 7.2), an absolute-form
//        target that is not an http(s) URI with such an authority
// An absolute-form target's authority replaces the Host field's value (or is added as Host to an
// HTTP/1.0 request without one): RFC 9112 section 3.2.2 has the server ignore Host then.
//   413  a body over Limits::max_body_bytes (known from Content-Length before the body is read)
//   414  a head over Limits::max_head_bytes while its request line is not over yet (no field
//        begun), or whose request line alone is longer than that (RFC 9110 section 15.5.15, URI
//        Too Long: the request-target is what makes a line long)
//   417  an Expect other than 100-continue (RFC 9110 section 10.1.1)
//   431  a head (its request line ended, within the limit), or a chunked body's trailer section,
//        over Limits::max_head_bytes, or a head with
//        more than Limits::max_headers fields
// Trailer fields of a chunked body are read and dropped: never merged into head().headers (RFC
// 9110 section 6.5.1), whatever their name and whichever read brought them.
//   501  a Transfer-Encoding other than "chunked" (RFC 9112 section 6.1), CONNECT, an Upgrade
//        that offers websocket (any other offer, h2c among them, is ignored: RFC 9110 section
//        7.8; the field is hop-by-hop and never forwarded), a
//        method that is a token but not one http-parser knows ("BREW", "get": RFC 9110 section
//        9.1), judged at the end of its request line; a method that is no token ("{GET",
//        "G\x01T") is 400
//   505  an HTTP major version other than 1 ("HTTP/2.0", RFC 9110 section 15.6.6), whatever the
//        method: HTTP/2's prior-knowledge preface "PRI * HTTP/2.0" too
// HTTP/1.0 and HTTP/1.1 are taken; HTTP/1.2 and above are taken as HTTP/1.1 (RFC 9110 section 2.5).
#pragma once

#include <http_parser.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http/framing_check.h"
#include "http/syntax.h"  // EqualsIgnoreCase: field names compare case-insensitively

namespace bulkhead::http {

// Bounds on what one request may hold. The defaults are those of common front proxies: HAProxy
// and Envoy refuse heads over 16 KiB by default (tune.bufsize, max_request_headers_kb is 60 but
// 16 KiB is the usual buffer), nginx and Go allow 100 header fields.
struct Limits {
  uint32_t max_head_bytes = 16 * 1024;  // request line and header fields, CRLFs included
  uint32_t max_headers = 100;           // header field lines
  uint64_t max_body_bytes = 1 << 20;    // the decoded body (max_payload_bytes of the cell)
};

struct Header {
  std::string name;   // as sent (field names are case-insensitive: compare with EqualsIgnoreCase)
  std::string value;  // leading and trailing whitespace removed (RFC 9110 section 5.5)
};

// The head of one request, once its header section is complete.
struct RequestHead {
  std::string method;           // "GET", "POST", ...
  std::string target;           // the request-target as sent: "/charge?x=1"
  uint16_t version_major = 1;   // always 1 in a head handed out
  uint16_t version_minor = 1;   // 0 or 1 (a higher one sent is taken as 1)
  std::vector<Header> headers;  // in order, repeated names kept
  // Framing: a chunked body, else Content-Length bytes (0 without either).
  bool chunked = false;
  uint64_t content_length = 0;
  // Expect: 100-continue was sent: the client waits for "100 Continue" (or a final answer)
  // before it sends the body.
  bool expect_continue = false;
  // The connection stays open after this request's answer (HTTP/1.1 without "Connection: close",
  // HTTP/1.0 with "Connection: keep-alive").
  bool keep_alive = true;
  // The request carries a body (chunked, or a Content-Length above 0) though its method's content
  // has no defined semantics: GET, HEAD, DELETE, OPTIONS, TRACE (RFC 9110 sections 9.3.1, 9.3.2,
  // 9.3.5, 9.3.7, 9.3.8). A server that never reads such a body takes it as the next request on
  // its connection; the connection that carries it must carry nothing after it (http/forward.h
  // asks the worker to close it).
  bool body_on_bodiless_method = false;

  // The value of the first header field named `name` (case-insensitive), if any.
  std::optional<std::string_view> Find(std::string_view name) const;
};

// Why a request was refused: the status code to answer with and a short reason for the body and
// the log ("duplicate Content-Length").
struct Error {
  int status = 400;
  std::string reason;
};

// http-parser hands over a field name or value in pieces (one per read it spans): these append one
// piece to `headers`. A name piece after a value starts a new field, taken from `spare` when it has
// one (RecycleHeaders); `last_was_value` carries that between calls.
void AppendFieldNamePiece(std::vector<Header>* headers, bool* last_was_value,
                          std::string_view piece, std::vector<Header>* spare = nullptr);
void AppendFieldValuePiece(std::vector<Header>* headers, bool* last_was_value,
                           std::string_view piece);
// Empties `headers` for the next message of a connection, its fields (emptied, their memory kept)
// moved to `spare`, so that a warm connection parses a head like the last one without allocating.
void RecycleHeaders(std::vector<Header>* headers, std::vector<Header>* spare);

class RequestParser {
 public:
  explicit RequestParser(const Limits& limits);
  RequestParser(const RequestParser&) = delete;
  RequestParser& operator=(const RequestParser&) = delete;

  enum class Event {
    kNeedMore,  // every byte given was consumed: feed more
    kHead,      // head() is complete (the body, if any, follows): the request may be admitted
    kMessage,   // the whole request is in: head() and body()
    kError,     // error() says why; the connection is to be answered and closed
  };

  // Parses from the start of `data` and stops at the first event; *consumed is how many bytes of
  // `data` were used (the rest belongs to what follows: feed it again). After kMessage the next
  // call starts the next request of the connection (pipelining). After kError every call returns
  // kError and consumes nothing.
  Event Parse(std::string_view data, size_t* consumed);

  // The connection ended. Returns kError (400, "connection closed in the middle of a request")
  // when a request was begun and not complete, else kNeedMore.
  Event Finish();

  const RequestHead& head() const { return head_; }
  // The decoded body (chunked framing removed) of the request just completed (kMessage), or the
  // part of it that came so far (after kHead, kNeedMore). The caller may move it out, or take
  // bytes out of it as they come (a streamed body): Limits::max_body_bytes counts every byte of
  // the body, taken or not (413 mid-body for a chunked one). Cleared when the next request begins.
  std::string& body() { return body_; }
  const Error& error() const { return error_; }
  const Limits& limits() const { return limits_; }
  // A request has begun (some of it arrived) and is not complete.
  bool in_message() const { return in_message_; }

 private:
  // From the byte http-parser refused as a method's: 400 unless a token then SP; then, at the
  // request line's LF, 505 for a version of another major than 1 (AcceptVersion's), else 501
  // (kError). kNeedMore, every byte consumed, while `data` ends before that.
  Event JudgeUnknownMethod(std::string_view data, size_t* consumed);
  static int OnMessageBegin(http_parser* parser);
  static int OnUrl(http_parser* parser, const char* at, size_t length);
  static int OnHeaderField(http_parser* parser, const char* at, size_t length);
  static int OnHeaderValue(http_parser* parser, const char* at, size_t length);
  static int OnHeadersComplete(http_parser* parser);
  static int OnBody(http_parser* parser, const char* at, size_t length);
  static int OnMessageComplete(http_parser* parser);

  // Fails the request with `status` and `reason`; returns the value a callback returns to make
  // http-parser stop.
  int Fail(int status, std::string reason);
  // The error for a head over max_head_bytes: 414 when the request line is what is too long, else
  // 431.
  Error HeadOverLimit() const;
  // A request line without a version ended (the target ended at CR or LF): fails with 400 and
  // returns true.
  bool RefuseVersionless();
  // Checks the request line's HTTP version and fills head_'s: 400 without one (HTTP/0.9), 505 for
  // a major version other than 1 (VersionNotSupported); HTTP/1.x above 1.1 is taken as HTTP/1.1.
  bool AcceptVersion(http_parser* parser);
  // Checks the head once complete: framing, Host, Expect, Upgrade; fills the framing fields.
  bool ValidateHead();
  // An absolute-form target (not "/..." nor "*"): 400 unless an http(s) URI with a valid
  // authority, which then replaces `host`'s value (null: added as a Host field). True otherwise.
  bool TakeTargetAuthority(Header* host);
  // Checks the bytes from framing_mark_ to `end` (not body data: head, chunk lines, trailers)
  // with framing_ and against max_head_bytes, and moves the mark to `end`.
  bool ScanFraming(const char* end);

  // Empties head_ for the next request, keeping the memory of its method, target and fields.
  void ResetHead();

  Limits limits_;
  http_parser parser_{};
  http_parser_settings settings_{};
  RequestHead head_;
  std::vector<Header> spare_headers_;  // fields of earlier heads, for reuse (RecycleHeaders)
  std::string body_;
  Error error_;
  bool failed_ = false;
  // http-parser refused the method at a token byte: the rest of the request line decides between
  // 400, 501 and 505 (JudgeUnknownMethod), across reads.
  enum class UnknownMethod : uint8_t {
    kNone,   // http-parser reads the bytes
    kToken,  // in the method; `method_tail_`: its bytes seen from the one refused
    kLine,   // past the method's SP, before the line's LF; `line_bytes_`: the bytes seen since,
             // `last_word_`: those after the last SP (up to kVersionBytes: the version, if any)
  };
  UnknownMethod unknown_method_ = UnknownMethod::kNone;
  size_t method_tail_ = 0;
  size_t line_bytes_ = 0;
  std::string last_word_;
  bool in_message_ = false;
  bool in_head_ = true;  // the bytes being parsed belong to a head (else: body, trailers)
  bool message_done_ = false;
  bool last_was_value_ = false;  // header callbacks: a field name starts a new header
  uint64_t body_bytes_ = 0;      // of the current request's decoded body, taken out of body_ or not
  FramingCheck framing_;
  // The running Parse call's bytes from here on are not checked by framing_ yet.
  const char* framing_mark_ = nullptr;
  // The head's last byte was checked when the head was handed out (kHead), before http-parser
  // consumed it: the next Parse call, which starts with it, does not check it again.
  bool head_end_checked_ = false;
  const char* data_end_ = nullptr;  // the end of the data given to the running Parse call
  char after_target_ = '\0';        // the byte that ended the request-target: ' ', CR or LF
};

}  // namespace bulkhead::http
