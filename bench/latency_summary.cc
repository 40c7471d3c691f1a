// SPDX-License-Identifier: MIT
#include "bench/latency_summary.h"

#include <algorithm>
#include <cmath>

namespace bulkhead::bench {

namespace {

// Nearest rank: the ceil(q * n)-th smallest sample (1-based). REQUIRES: sorted, not empty.
double PercentileUs(const std::vector<uint32_t>& sorted, double q) {
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  rank = std::clamp<size_t>(rank, 1, sorted.size());
  return static_cast<double>(sorted[rank - 1]) / 1000.0;
}

}  // namespace

LatencySummary Summarize(std::vector<uint32_t>& samples_ns) {
  LatencySummary summary;
  summary.count = samples_ns.size();
  if (samples_ns.empty()) return summary;
  std::sort(samples_ns.begin(), samples_ns.end());
  summary.p50_us = PercentileUs(samples_ns, 0.50);
  summary.p99_us = PercentileUs(samples_ns, 0.99);
  summary.p999_us = PercentileUs(samples_ns, 0.999);
  return summary;
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

}  // namespace bulkhead::bench
