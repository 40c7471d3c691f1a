// SPDX-License-Identifier: MIT
// The answers bulkheadd makes itself on an HTTP cell (docs/http.md), from the one outcome
// taxonomy of frame cells (ipc/frame.h: ReplyStatus, Reason). A worker's own response, 5xx
// included, is never one of these: it passes through and counts as ok. Pure. Thread-compatible.
//
//   REJECTED full, queue_timeout, unavailable   503, Retry-After (seconds, rounded up; 1 unknown)
//   REJECTED too_many_connections               503, Retry-After, then the connection is closed
//   FAILED worker_died, oom_killed, worker_error  502 (the worker gave no complete response)
//   FAILED timeout, stalled                     504
//   a request refused by the parser             its own status (400, 413, 414, 417, 431, 501)
//   no complete request head in header_timeout 408, then the connection is closed
//
// Every such answer carries `Bulkhead-Outcome: <status>; reason=<reason>; cell=<cell>`, with
// `running=N; queued=M` for a rejection (as Envoy marks its local replies with
// x-envoy-overloaded), `Content-Type: text/plain; charset=utf-8` and a one-line body.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "http/request_parser.h"
#include "ipc/frame.h"

namespace bulkhead::http {

// The field that marks bulkheadd's own answers; ResponseRelay drops it from workers' responses.
inline constexpr std::string_view kOutcomeField = "Bulkhead-Outcome";

// The HTTP status code for an outcome that bulkheadd answers itself: 503, 502, 504, or 400 for
// BAD_REQUEST. REQUIRES: `status` is not kOk.
int StatusCodeFor(ipc::ReplyStatus status, ipc::Reason reason);

// "Service Unavailable" for 503, ...: the reason phrase of the status codes bulkheadd sends.
std::string_view ReasonPhrase(int status_code);

struct LocalReply {
  int status_code = 503;
  // The Bulkhead-Outcome header's first word and reason: "rejected" / "full", "failed" /
  // "timeout", "bad_request" / "obs-fold (a header line starting with whitespace)".
  std::string outcome;
  std::string reason;
  std::string cell;
  // A rejection's figures (ipc::RejectDetail): shown in the header and the body.
  bool rejection = false;
  uint32_t running = 0;
  uint32_t queued = 0;
  uint32_t retry_after_ms = 0;  // 0: unknown (Retry-After: 1)
  // A 503 says when to retry (Retry-After): false when no start is due, so that a client is not
  // invited to retry a cell that stays down until an operator starts it.
  bool retry_after = true;
  // The connection is closed after this answer: "Connection: close" is sent.
  bool close = false;
  // The answer to a HEAD request: the head only, with the Content-Length a GET would get (RFC 9110
  // section 9.3.2: no content in a response to HEAD; a body would be read as the next response).
  bool head_request = false;
  // The answer to an HTTP/1.0 request that asked to keep the connection open (Connection:
  // keep-alive), which stays open: "Connection: keep-alive" is sent, without which an HTTP/1.0
  // client waits for the close (RFC 9112 appendix C.2.2).
  bool http10_keep_alive = false;
  // The body's text after "bulkhead: " (a newline is added): "payments is full".
  std::string text;
};

// A rejection (REJECTED) as an HTTP answer. `start_due` (unavailable only): false when no worker
// comes until an operator starts one (stopped, failed): no Retry-After then, and the text says so.
LocalReply RejectionReply(ipc::Reason reason, const ipc::RejectDetail& detail,
                          bool start_due = true);
// A failure (FAILED) of an admitted request; `detail` is what frame cells carry in the payload
// ("exit 3", "signal 9", "request_timeout of 1000 ms").
LocalReply FailureReply(ipc::Reason reason, std::string_view cell, std::string_view detail);

// A request the parser refused (RequestParser::Error): its status, outcome "bad_request" with a
// token for the reason ("malformed", "too_large", "uri_too_long", "head_too_large",
// "expectation_failed", "not_implemented", "version_not_supported", "header_timeout" for 408), the
// parser's words in the body, and the connection closed after it.
LocalReply BadRequestReply(const Error& error, std::string_view cell);

// The bytes of `reply`: status line, headers, body. HTTP/1.1 whatever the request's version
// (RFC 9110 section 6.2: a server sends its own highest minor version).
std::string FormatLocalReply(const LocalReply& reply);

}  // namespace bulkhead::http
