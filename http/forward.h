// SPDX-License-Identifier: MIT
// A request on its way to an HTTP worker (RFC 9110 section 7.6, "Message Forwarding"): the
// hop-by-hop fields removed, the client named for the worker, a request id, the body framed anew:
// with Content-Length when it came whole with its head, else (streamed as it is read) with the
// client's Content-Length or chunked. Pure. Thread-compatible.
//
// Removed: Connection and every field it names, Keep-Alive, Proxy-Connection, TE, Trailer,
// Transfer-Encoding, Upgrade, Proxy-* (RFC 9110 section 7.6.1), Content-Length (set anew) and
// Expect (bulkheadd answers 100-continue itself, when it sends the request to the worker).
// Added: `Host` when the request has none (an HTTP/1.0 request: it goes out as HTTP/1.1, which
// requires Host, RFC 9112 section 3.2); `X-Forwarded-For` (appended to the client's) and
// `Forwarded: for=...` (RFC 7239, appended to the client's) for a TCP client; `X-Request-Id` when
// the client sent none; `Connection: close` when the request carries a body its method gives no
// meaning to (RequestHead::body_on_bodiless_method: a GET with a body), which a worker that never
// reads it would take as its next request.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "http/request_parser.h"

namespace bulkhead::http {

// Whether a field named `name` is hop-by-hop: one of the fixed set above, or named by one of the
// message's Connection fields (a token of the comma-separated value of any field of `headers`
// named Connection; compared case-insensitively). Allocates nothing.
bool IsHopByHop(std::string_view name, const std::vector<Header>& headers);

// Views, valid during the call that takes them.
struct ForwardOptions {
  // The client's IP address ("203.0.113.7", "2001:db8::1") for a TCP client; empty for a client
  // on the Unix socket, which gets no X-Forwarded-For or Forwarded.
  std::string_view client_address = {};
  // The X-Request-Id to add when the client sent none.
  std::string_view request_id = {};
  // The Host to add, as the first field, when the request has none (bulkheadd gives the cell's
  // name). Empty: none is added.
  std::string_view host = {};
};

// The Append functions allocate nothing beyond what `out` needs to grow.
//
// Appends to `out` the request as the worker gets it: "<method> <target> HTTP/1.1", Host when the
// request had none, the end-to-end fields in their order, the other added fields, "Content-Length:
// <body size>" (for a body, or a method that carries one), the blank line and the body.
void AppendForwardRequest(std::string* out, const RequestHead& head, std::string_view body,
                          const ForwardOptions& options);

// Appends the head of a request whose body is still coming and goes to the worker as it is read
// (streamed): as AppendForwardRequest, framed with the client's Content-Length, or for a chunked
// body "Transfer-Encoding: chunked" (its pieces then go out through AppendChunk, its end as
// kLastChunk; trailers are not forwarded), and the blank line.
void AppendForwardHeadStreamed(std::string* out, const RequestHead& head,
                               const ForwardOptions& options);

// Appends `piece` of a streamed chunked body as one chunk (RFC 9112 section 7.1); nothing for an
// empty piece, which would end the body.
void AppendChunk(std::string* out, std::string_view piece);
inline constexpr std::string_view kLastChunk = "0\r\n\r\n";

// True for an idempotent method, GET, HEAD, OPTIONS, TRACE, PUT or DELETE (RFC 9110 section
// 9.2.2): the only ones a proxy may send again on its own. A POST or PATCH the worker may have
// started is never repeated. Methods are case-sensitive (RFC 9110 section 9.1).
bool IsIdempotentMethod(std::string_view method);

}  // namespace bulkhead::http
