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

// The unit of the samples given to Summarize: nanoseconds (a uint32_t holds up to 4.29 s), or
// microseconds for answers that may take longer (an overloaded cell in a VM).
enum class SampleUnit : uint8_t { kNs, kUs };

// Sorts `samples` (in `unit`) in place and reads p50, p99 and p99.9 off it, in µs: the smallest
// sample with at least that fraction of samples at or below it. All zero for no samples.
LatencySummary Summarize(std::vector<uint32_t>& samples, SampleUnit unit = SampleUnit::kNs);

// The median of `values`: the middle one for an odd count, the mean of the middle two for an even
// count; 0 for none. Any unit (the caller's).
double Median(std::vector<double> values);

}  // namespace bulkhead::bench
