// SPDX-License-Identifier: MIT
// ResponseRelay: one worker's HTTP/1.1 response, parsed as it arrives (http-parser) and turned
// into the bytes its client gets, piece by piece, so a large body never sits whole in memory
// (RFC 9112 section 6, "Message Body"; RFC 9110 section 7.6, "Message Forwarding"). Pure: no I/O.
// Thread-compatible. One relay per worker connection, reused for each response on it.
//
// What the client gets: the worker's status line (as HTTP/1.1) and end-to-end fields (hop-by-hop
// ones removed, http/forward.h; so is any Bulkhead-Outcome field, which only bulkheadd's own
// answers carry, http/local_reply.h), then the body framed for the client: the worker's
// Content-Length kept; a chunked or close-delimited body sent chunked to an HTTP/1.1 client,
// close-delimited to an HTTP/1.0 one. Interim 1xx responses from the worker are dropped (bulkheadd
// answers 100-continue itself); 101 is refused, as Upgrade is. Trailer fields are dropped.
//
// A response to HEAD, and any 1xx, 204 or 304, ends at the empty line whatever its
// Content-Length or Transfer-Encoding say (RFC 9112 section 6.3, rule 1): what follows is the next
// response (after a 1xx) or bytes the worker should not have sent, never relayed as a body. One
// whose fields announce a body all the same (Transfer-Encoding, or a Content-Length above 0) leaves
// the worker connection out of step as far as this end can tell: worker_keep_alive() is false.
//
// Malformed (kError, a 502 when nothing went to the client yet), besides what http-parser refuses:
// a field name that is not a token ("Content-Length : 2", RFC 9112 section 5.1: a proxy must
// reject or fix it, else the client would get it beside bulkheadd's own framing field), a control
// character in the reason phrase, a bare CR, obs-fold or broken chunked framing
// (http/framing_check.h). The head goes to the client only once all of it was checked.
#pragma once

#include <http_parser.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "http/framing_check.h"
#include "http/request_parser.h"

namespace bulkhead::http {

class ResponseRelay {
 public:
  ResponseRelay();
  ResponseRelay(const ResponseRelay&) = delete;
  ResponseRelay& operator=(const ResponseRelay&) = delete;

  // Starts relaying the response to one request. `head_request`: the request was HEAD (the
  // response has no body whatever its fields say). `client_keep_alive`: the client's connection
  // stays open after this response (else "Connection: close" is sent). `client_http11`: the client
  // takes chunked bodies.
  void Begin(bool head_request, bool client_keep_alive, bool client_http11);

  enum class Event {
    kNeedMore,  // every byte given was used: feed more
    kComplete,  // the response is whole; bytes after it (*consumed < size) are the worker's fault
    kError,     // error() says why; see head_sent()
  };

  // Parses worker bytes from the start of `data`, appending what the client gets to `out`.
  // *consumed is how many bytes were used.
  Event Feed(std::string_view data, size_t* consumed, std::string* out);

  // The worker closed the connection: a close-delimited body ends there (kComplete); any other
  // response that is not whole is kError.
  Event WorkerClosed(std::string* out);

  // Something of the response has been appended to `out`: a failure can then only be reported to
  // the client by closing its connection, not with a 502.
  bool head_sent() const { return head_sent_; }
  // The worker's status code, once the head is in (0 before).
  int status_code() const { return status_code_; }
  // The worker's connection may carry another request (kComplete, the worker keeps it alive, and
  // no response on it announced a body it may not have: see above).
  bool worker_keep_alive() const { return worker_keep_alive_; }
  // The client's connection must close after this response: it asked to, or its body is
  // close-delimited (an HTTP/1.0 client and a body of unknown length).
  bool client_must_close() const { return client_must_close_; }
  const std::string& error() const { return error_; }

 private:
  enum class Framing { kNone, kLength, kChunked, kUntilClose };

  static int OnStatus(http_parser* parser, const char* at, size_t length);
  static int OnHeaderField(http_parser* parser, const char* at, size_t length);
  static int OnHeaderValue(http_parser* parser, const char* at, size_t length);
  static int OnHeadersComplete(http_parser* parser);
  static int OnBody(http_parser* parser, const char* at, size_t length);
  static int OnMessageComplete(http_parser* parser);

  int Fail(std::string reason);
  // Checks the bytes from framing_mark_ to `end` (not body data) with framing_; moves the mark.
  bool ScanFraming(const char* end);
  // Appends the client's head: status line, end-to-end fields, framing, Connection.
  void AppendHead();

  http_parser parser_{};
  http_parser_settings settings_{};
  std::string* out_ = nullptr;  // where Feed appends, during Feed only
  bool head_request_ = false;
  bool client_keep_alive_ = true;
  bool client_http11_ = true;
  int status_code_ = 0;
  std::string reason_phrase_;
  std::vector<Header> headers_;
  std::vector<Header> spare_headers_;  // fields of earlier responses, for reuse (RecycleHeaders)
  bool last_was_value_ = false;
  bool in_head_ = true;  // the field callbacks belong to a head (else to trailers: dropped)
  Framing client_framing_ = Framing::kNone;
  bool worker_chunked_ = false;  // the worker's body is chunked (its framing goes to framing_)
  // A response on this connection had no body and announced one (Transfer-Encoding, or a
  // Content-Length above 0): the worker may send it anyway, so the connection is not reused.
  bool framing_conflict_ = false;
  FramingCheck framing_;
  const char* framing_mark_ = nullptr;  // during Feed: framing_ checked the bytes before it
  // Feed paused at a head's end and checked its last byte (the LF) before http-parser consumed
  // it: the next round, which starts on that byte, does not check it again.
  bool head_end_checked_ = false;
  bool interim_done_ = false;  // paused after an interim 1xx response
  bool head_sent_ = false;
  bool complete_ = false;
  bool failed_ = false;
  bool worker_keep_alive_ = false;
  bool client_must_close_ = false;
  std::string error_;
};

}  // namespace bulkhead::http
