// SPDX-License-Identifier: MIT
// Wire: what of a cell's wire format (config::Protocol: frames, docs/protocol.md; HTTP/1.1,
// docs/http.md) the front listener and the data path need, one entry per protocol, so that nothing
// else in proxy/ branches on it: how a client connection is accepted, how a connection refused
// before it was accepted is answered, and how a connection to the worker is made. The rest of the
// path speaks Exchange (proxy/exchange.h) whatever the wire. REQUIRES: loop thread only.
#pragma once

#include <uv.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "config/config.h"
#include "proxy/client.h"
#include "proxy/exchange.h"
#include "proxy/link.h"

namespace bulkhead::proxy {

struct Wire {
  // Accepts one pending connection on `server` (a listening uv_pipe_t or uv_tcp_t) as a client of
  // `owner`. Errors are logged; the client owns itself from here.
  void (*accept)(ClientOwner* owner, uv_stream_t* server, const ClientSettings& settings);
  // Takes `fd`, a client's connected socket (TCP when `tcp`) handed over by a re-exec between two
  // requests (docs/reexec.md), as a client of `owner`, as `accept` does a pending one.
  void (*adopt)(ClientOwner* owner, uv_loop_t* loop, int fd, bool tcp,
                const ClientSettings& settings);
  // Appends to `out` the whole answer to a connection refused before it was read (REJECTED
  // too_many_connections: a REPLY frame with request_id 0; an HTTP 503 that closes).
  void (*append_refusal)(std::string* out, std::string_view cell, const Outcome& outcome);
  // Connects (non-blocking) to the worker socket at `path`. Fails when the socket is missing or
  // its backlog is full (EAGAIN).
  Result<Link*> (*connect)(LinkOwner* owner, uv_loop_t* loop, const std::string& path,
                           const LinkSettings& settings);
  // The status code of bulkheadd's own answer to a Rejected or Failed `outcome` (HTTP: 503, 502,
  // 504, http/local_reply.h), 0 for a wire without status codes (frames). For the access log.
  int (*local_status)(const Outcome& outcome);
};

const Wire& WireFor(config::Protocol protocol);

}  // namespace bulkhead::proxy
