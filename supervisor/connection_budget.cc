// SPDX-License-Identifier: MIT
#include "supervisor/connection_budget.h"

#include <dirent.h>
#include <sys/resource.h>

#include <algorithm>

namespace bulkhead::supervisor {

uint64_t WorkerLinksOf(const config::CellConfig& cell) {
  return cell.worker_connections == config::WorkerConnections::kMultiplex ? 1 : cell.max_concurrent;
}

uint64_t ClientConnectionBudget(uint64_t nofile, uint64_t open_now, uint64_t worker_links) {
  const uint64_t kept = open_now + worker_links + kDescriptorHeadroom;
  return nofile > kept ? nofile - kept : 0;
}

std::vector<uint32_t> ShareConnectionBudget(uint64_t budget,
                                            const std::vector<uint32_t>& max_connections) {
  uint64_t wanted = 0;
  for (uint32_t m : max_connections) wanted += m;
  if (wanted <= budget) return max_connections;
  std::vector<uint32_t> shares;
  shares.reserve(max_connections.size());
  for (uint32_t m : max_connections) {
    // budget < wanted <= 2^20 * cells, so the product fits in 64 bits.
    uint64_t share = budget * m / wanted;
    shares.push_back(static_cast<uint32_t>(std::clamp<uint64_t>(share, 1, m)));
  }
  return shares;
}

Result<uint64_t> NofileSoftLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return Status::FromErrno("getrlimit RLIMIT_NOFILE");
  if (limit.rlim_cur == RLIM_INFINITY) return UINT64_MAX;
  return static_cast<uint64_t>(limit.rlim_cur);
}

Result<size_t> OpenDescriptorCount() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return Status::FromErrno("opendir /proc/self/fd");
  size_t count = 0;
  while (dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] != '.') ++count;
  }
  ::closedir(dir);
  return count > 0 ? count - 1 : 0;  // not the directory's own descriptor
}

}  // namespace bulkhead::supervisor
