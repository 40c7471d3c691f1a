// SPDX-License-Identifier: MIT
// LatencySummary: percentiles of a set of latency samples (nearest-rank method), in microseconds;
// and Median, the middle of a handful of figures (one per run or round) that the benches print.
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

// The median of `values`: the middle one for an odd count, the mean of the middle two for an even
// count; 0 for none. Any unit (the caller's).
double Median(std::vector<double> values);

}  // namespace bulkhead::bench
