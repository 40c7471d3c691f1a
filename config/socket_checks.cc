// SPDX-License-Identifier: MIT
// The socket path checks (config/socket_checks.h).
#include "config/socket_checks.h"

#include <sys/un.h>

#include <algorithm>
#include <map>

namespace bulkhead::config {
namespace {

// sun_path holds the path and its terminating NUL.
constexpr size_t kMaxSocketPathBytes = sizeof(sockaddr_un{}.sun_path) - 1;

}  // namespace

void SocketChecks::Check(ValueReader& reader) {
  auto in_file_order = [](const auto& a, const auto& b) { return Before(a.position, b.position); };
  std::stable_sort(uses_.begin(), uses_.end(), in_file_order);
  std::map<std::string, const SocketUse*> first_use;
  for (const SocketUse& use : uses_) {
    if (use.path.size() > kMaxSocketPathBytes) {
      std::string message = use.kind + " " + use.path + " is " + std::to_string(use.path.size()) +
                            " bytes, over the " + std::to_string(kMaxSocketPathBytes) +
                            "-byte limit of a Unix socket path (sun_path)";
      if (!use.shorten.empty()) message += "; shorten " + use.shorten;
      reader.AddError(use.position, use.key, std::move(message));
    }
    auto [it, inserted] = first_use.emplace(use.path, &use);
    if (!inserted) {
      reader.AddError(use.position, use.key,
                      use.kind + " " + use.path + " is also used by " + it->second->owner);
    }
  }
  std::stable_sort(tcp_uses_.begin(), tcp_uses_.end(), in_file_order);
  for (size_t i = 0; i < tcp_uses_.size(); ++i) {
    const TcpUse& use = tcp_uses_[i];
    for (size_t j = 0; j < i; ++j) {
      const TcpUse& earlier = tcp_uses_[j];
      if (!use.address.Overlaps(earlier.address)) continue;
      const std::string address = use.address.ToString();
      const std::string other = earlier.address.ToString();
      reader.AddError(
          use.position, use.key,
          address == other
              ? address + " is also used by " + earlier.key
              : address + " overlaps " + other + " of " + earlier.key +
                    " (the same port on the same address, or on a wildcard address, which takes "
                    "it on every address of its family)");
      break;
    }
  }
}

}  // namespace bulkhead::config
