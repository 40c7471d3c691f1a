// SPDX-License-Identifier: MIT
// ListenAddress: where a supervisor endpoint listens (`[supervisor] metrics_listen`,
// docs/config.md): a TCP address "HOST:PORT" with a numeric IPv4 or bracketed IPv6 host
// ("127.0.0.1:9464", "[::1]:9464", "0.0.0.0:0" for any free port), or an absolute Unix socket path.
// Pure; thread-safe.
#pragma once

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
  // "127.0.0.1:9464", "[::1]:9464", or the path.
  std::string ToString() const;

  bool operator==(const ListenAddress&) const = default;
};

// Parses `text`. Names are not resolved (no DNS at startup): the host must be a numeric address.
// Errors say what is wrong: "expected HOST:PORT or an absolute Unix socket path, got \"x\"",
// "port must be 0 to 65535, got \"99999\"", "host must be a numeric IPv4 or [IPv6] address, got
// \"localhost\"".
Result<ListenAddress> ParseListenAddress(std::string_view text);

}  // namespace bulkhead::config
