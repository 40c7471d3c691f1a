// SPDX-License-Identifier: MIT
// LatencySummary: percentiles of a set of latency samples (nearest-rank method), in microseconds.
// Pure; thread-compatible.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace bulkhead::bench {

struct LatencySummary {
  size_t count = 0;
  double p50_us = 0;
  double p99_us = 0;
  double p999_us = 0;
};

// Sorts `samples_ns` (nanoseconds) in place and reads p50, p99 and p99.9 off it: the smallest
// sample with at least that fraction of samples at or below it. All zero for no samples.
LatencySummary Summarize(std::vector<uint32_t>& samples_ns);

}  // namespace bulkhead::bench
