// SPDX-License-Identifier: MIT
// ListenAddress: where a supervisor endpoint listens (`[supervisor] metrics_listen`,
// docs/config.md): a TCP address "HOST:PORT" with a numeric IPv4 or bracketed IPv6 host
// ("127.0.0.1:9464", "[::1]:9464", "0.0.0.0:0" for any free port), or an absolute Unix socket path.
// A cell's `listen` list holds TCP addresses of this form. Pure; thread-safe.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace bulkhead::config {

struct ListenAddress {
  enum class Kind { kTcp, kUnix };
  Kind kind = Kind::kTcp;
  std::string host;   // kTcp: the numeric address, without brackets ("127.0.0.1", "::1")
  uint16_t port = 0;  // kTcp: 0 lets the kernel pick a free port
  std::string path;   // kUnix: absolute, lexically normalised

  bool is_tcp() const { return kind == Kind::kTcp; }
  // kTcp with an IPv6 host.
  bool is_v6() const { return is_tcp() && host.find(':') != std::string::npos; }
  // "127.0.0.1:9464", "[::1]:9464", or the path.
  std::string ToString() const;
  // The sockaddr_in (IPv4) or sockaddr_in6 (IPv6) to bind(2). REQUIRES: is_tcp() and a host as
  // ParseListenAddress accepts it.
  sockaddr_storage ToSockaddr() const;
  // Whether two TCP addresses cannot both be bound: the same port (not 0, which the kernel picks
  // anew for each) and the same host, or one host the wildcard of the other's family (0.0.0.0,
  // [::]), which takes the port on every address of that family (bind(2) EADDRINUSE, even with
  // SO_REUSEADDR). IPv4 and IPv6 do not overlap: IPv6 listeners are bound IPV6_V6ONLY.
  bool Overlaps(const ListenAddress& other) const;

  bool operator==(const ListenAddress&) const = default;
};

// Parses `text`. Names are not resolved (no DNS at startup): the host must be a numeric address.
// Errors say what is wrong: "expected HOST:PORT or an absolute Unix socket path, got \"x\"",
// "port must be 0 to 65535, got \"99999\"", "host must be a numeric IPv4 or [IPv6] address, got
// \"localhost\"".
Result<ListenAddress> ParseListenAddress(std::string_view text);

// The numeric host and port of an AF_INET or AF_INET6 socket address (what getsockname(2) or
// getpeername(2) returned), as a kTcp ListenAddress; an error for another family.
Result<ListenAddress> ListenAddressFromSockaddr(const sockaddr* addr);

}  // namespace bulkhead::config
