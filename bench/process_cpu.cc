// SPDX-License-Identifier: MIT
#include "bench/process_cpu.h"

#include <time.h>

namespace bulkhead::bench {

std::optional<uint64_t> ProcessCpuNs(pid_t pid) {
  clockid_t clock;
  timespec ts{};
  if (pid <= 0 || ::clock_getcpuclockid(pid, &clock) != 0 || ::clock_gettime(clock, &ts) != 0) {
    return std::nullopt;
  }
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace bulkhead::bench
