// SPDX-License-Identifier: MIT
// The bench's listening sockets: Unix sockets for its own load generator, and TCP on 127.0.0.1 for
// the wrk run (docs/benchmarks.md, "HTTP with wrk"): wrk speaks TCP only, so the targets it drives
// listen on the loopback address, never on a routable one. Thread-compatible.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "base/unique_fd.h"

namespace bulkhead::bench {

// A SOCK_STREAM | SOCK_CLOEXEC Unix socket bound to `path` and listening with `backlog`.
Result<UniqueFd> ListenUnix(const std::string& path, int backlog);

// A SOCK_STREAM | SOCK_CLOEXEC socket bound to 127.0.0.1:`port` (0: the kernel picks one) and
// listening with `backlog`, with SO_REUSEADDR.
Result<UniqueFd> ListenLoopback(uint16_t port, int backlog);

// The port a bound socket `fd` has.
Result<uint16_t> LocalPort(int fd);

// A port of 127.0.0.1 free now, for a peer that binds its own socket (HAProxy, nginx, bulkheadd's
// `listen`): bound to port 0 and closed again. Another process may take it before the peer binds
// it; the peer then fails to start, with its own message.
Result<uint16_t> FreeLoopbackPort();

// Whether a connection to 127.0.0.1:`port` is accepted now (the connection is closed at once).
bool AcceptsOnLoopback(uint16_t port);

}  // namespace bulkhead::bench
