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

sockaddr_storage ListenAddress::ToSockaddr() const {
  sockaddr_storage addr{};
  if (is_v6()) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&addr);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(port);
    inet_pton(AF_INET6, host.c_str(), &in6->sin6_addr);
  } else {
    auto* in4 = reinterpret_cast<sockaddr_in*>(&addr);
    in4->sin_family = AF_INET;
    in4->sin_port = htons(port);
    inet_pton(AF_INET, host.c_str(), &in4->sin_addr);
  }
  return addr;
}

bool ListenAddress::Overlaps(const ListenAddress& other) const {
  if (!is_tcp() || !other.is_tcp() || port == 0 || port != other.port) return false;
  if (is_v6() != other.is_v6()) return false;
  // Compared as bound, so that "::1" and "0:0::1" are one address.
  const sockaddr_storage a = ToSockaddr();
  const sockaddr_storage b = other.ToSockaddr();
  if (is_v6()) {
    const in6_addr& x = reinterpret_cast<const sockaddr_in6*>(&a)->sin6_addr;
    const in6_addr& y = reinterpret_cast<const sockaddr_in6*>(&b)->sin6_addr;
    return IN6_ARE_ADDR_EQUAL(&x, &y) || IN6_IS_ADDR_UNSPECIFIED(&x) || IN6_IS_ADDR_UNSPECIFIED(&y);
  }
  const in_addr_t x = reinterpret_cast<const sockaddr_in*>(&a)->sin_addr.s_addr;
  const in_addr_t y = reinterpret_cast<const sockaddr_in*>(&b)->sin_addr.s_addr;
  return x == y || x == htonl(INADDR_ANY) || y == htonl(INADDR_ANY);
}

Result<ListenAddress> ListenAddressFromSockaddr(const sockaddr* addr) {
  ListenAddress address;
  char host[INET6_ADDRSTRLEN] = {};
  if (addr->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(addr);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    address.port = ntohs(in6->sin6_port);
  } else if (addr->sa_family == AF_INET) {
    const auto* in4 = reinterpret_cast<const sockaddr_in*>(addr);
    inet_ntop(AF_INET, &in4->sin_addr, host, sizeof host);
    address.port = ntohs(in4->sin_port);
  } else {
    return Status::Error("not an IPv4 or IPv6 address (family " + std::to_string(addr->sa_family) +
                         ")");
  }
  address.host = host;
  return address;
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
