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
  std::stable_sort(uses_.begin(), uses_.end(), [](const SocketUse& a, const SocketUse& b) {
    return Before(a.position, b.position);
  });
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
}

}  // namespace bulkhead::config
