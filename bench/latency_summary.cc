// SPDX-License-Identifier: MIT
#include "bench/latency_summary.h"

#include <algorithm>
#include <cmath>

namespace bulkhead::bench {

namespace {

// Nearest rank: the ceil(q * n)-th smallest sample (1-based), in µs. REQUIRES: sorted, not empty.
double PercentileUs(const std::vector<uint32_t>& sorted, double q, SampleUnit unit) {
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  rank = std::clamp<size_t>(rank, 1, sorted.size());
  const double sample = static_cast<double>(sorted[rank - 1]);
  return unit == SampleUnit::kNs ? sample / 1000.0 : sample;
}

}  // namespace

LatencySummary Summarize(std::vector<uint32_t>& samples, SampleUnit unit) {
  LatencySummary summary;
  summary.count = samples.size();
  if (samples.empty()) return summary;
  std::sort(samples.begin(), samples.end());
  summary.p50_us = PercentileUs(samples, 0.50, unit);
  summary.p99_us = PercentileUs(samples, 0.99, unit);
  summary.p999_us = PercentileUs(samples, 0.999, unit);
  return summary;
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

}  // namespace bulkhead::bench
