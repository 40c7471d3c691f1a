// SPDX-License-Identifier: MIT
#include "admission/latency_histogram.h"

#include <algorithm>

namespace bulkhead::admission {

void LatencyHistogram::Counts::Add(const Counts& other) {
  for (size_t i = 0; i < kBuckets; ++i) buckets[i] += other.buckets[i];
  count += other.count;
  sum_ns += other.sum_ns;
}

size_t LatencyHistogram::BucketOf(uint64_t value_ns) {
  return static_cast<size_t>(std::lower_bound(kBoundsNs.begin(), kBoundsNs.end(), value_ns) -
                             kBoundsNs.begin());
}

void LatencyHistogram::Record(uint64_t value_ns) {
  ++counts_.buckets[BucketOf(value_ns)];
  ++counts_.count;
  counts_.sum_ns += value_ns;
}

std::optional<double> LatencyHistogram::QuantileSeconds(const Counts& counts, double q) {
  if (counts.count == 0) return std::nullopt;
  q = std::clamp(q, 0.0, 1.0);
  const double rank = q * static_cast<double>(counts.count);
  uint64_t below = 0;  // values in the buckets before i
  for (size_t i = 0; i < kBuckets; ++i) {
    const uint64_t in_bucket = counts.buckets[i];
    if (in_bucket == 0 || static_cast<double>(below + in_bucket) < rank) {
      below += in_bucket;
      continue;
    }
    if (i == kBuckets - 1) return static_cast<double>(kBoundsNs.back()) / 1e9;
    const double lower = i == 0 ? 0.0 : static_cast<double>(kBoundsNs[i - 1]);
    const double upper = static_cast<double>(kBoundsNs[i]);
    const double fraction = (rank - static_cast<double>(below)) / static_cast<double>(in_bucket);
    return (lower + (upper - lower) * fraction) / 1e9;
  }
  return static_cast<double>(kBoundsNs.back()) / 1e9;  // unreachable: counts add up to count
}

void WindowedLatency::Record(uint64_t now_ns, uint64_t value_ns) {
  if (histograms_ == nullptr) histograms_ = std::make_unique<Histograms>();
  histograms_->total.Record(value_ns);
  const uint64_t epoch = now_ns / kSliceNs;
  Slice& slice = histograms_->slices[epoch % kSlices];
  if (slice.epoch != epoch) {
    slice.epoch = epoch;
    slice.histogram = LatencyHistogram();
  }
  slice.histogram.Record(value_ns);
}

void WindowedLatency::RestoreTotal(const LatencyHistogram::Counts& total) {
  if (total.count == 0 && histograms_ == nullptr) return;
  if (histograms_ == nullptr) histograms_ = std::make_unique<Histograms>();
  histograms_->total.Restore(total);
}

const LatencyHistogram::Counts& WindowedLatency::total() const {
  static const LatencyHistogram::Counts kNothing{};
  return histograms_ == nullptr ? kNothing : histograms_->total.counts();
}

LatencyHistogram::Counts WindowedLatency::Recent(uint64_t now_ns) const {
  LatencyHistogram::Counts sum;
  if (histograms_ == nullptr) return sum;
  const uint64_t epoch = now_ns / kSliceNs;
  for (const Slice& slice : histograms_->slices) {
    if (slice.epoch == UINT64_MAX || slice.epoch > epoch || epoch - slice.epoch >= kSlices) {
      continue;
    }
    sum.Add(slice.histogram.counts());
  }
  return sum;
}

}  // namespace bulkhead::admission
