// SPDX-License-Identifier: MIT
#include "config/listen_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <charconv>

#include "base/lexical_path.h"

namespace bulkhead::config {

namespace {

std::string Quote(std::string_view text) { return "\"" + std::string(text) + "\""; }

}  // namespace

std::string ListenAddress::ToString() const {
  if (!is_tcp()) return path;
  bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Result<ListenAddress> ParseListenAddress(std::string_view text) {
  ListenAddress address;
  if (!text.empty() && text.front() == '/') {
    address.kind = ListenAddress::Kind::kUnix;
    address.path = NormalizePath(text);
    return address;
  }
  size_t colon = text.rfind(':');
  if (text.empty() || colon == std::string_view::npos || colon == 0) {
    return Status::Error("expected HOST:PORT or an absolute Unix socket path, got " + Quote(text));
  }
  std::string_view host = text.substr(0, colon);
  std::string_view port = text.substr(colon + 1);
  unsigned value = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value > 65535) {
    return Status::Error("port must be 0 to 65535, got " + Quote(port));
  }
  address.port = static_cast<uint16_t>(value);
  bool bracketed = host.size() >= 2 && host.front() == '[' && host.back() == ']';
  if (bracketed) host = host.substr(1, host.size() - 2);
  address.host = std::string(host);
  unsigned char buf[sizeof(in6_addr)];
  bool ok = bracketed ? inet_pton(AF_INET6, address.host.c_str(), buf) == 1
                      : inet_pton(AF_INET, address.host.c_str(), buf) == 1;
  if (!ok) {
    return Status::Error("host must be a numeric IPv4 or [IPv6] address, got " + Quote(host));
  }
  return address;
}

}  // namespace bulkhead::config
