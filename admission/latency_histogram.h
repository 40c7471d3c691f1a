// SPDX-License-Identifier: MIT
// LatencyHistogram: fixed-bucket latency histograms for the request path. Recording is O(1) (at
// most kBounds comparisons) and never allocates (WindowedLatency's first Record does, once).
// WindowedLatency keeps a cumulative histogram (for Prometheus, docs/metrics.md) and a ring of six
// 10-second histograms (the recent window that `bulkheadctl status` takes p50/p99 from). Values
// and clocks are nanoseconds; buckets follow the Prometheus histogram model (cumulative `le` upper
// bounds, +Inf last). REQUIRES: one thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

namespace bulkhead::admission {

class LatencyHistogram {
 public:
  // Upper bounds (inclusive, "le") in ns: 100 µs to 60 s in 1-2.5-5 steps; a last +Inf bucket
  // catches the rest.
  static constexpr std::array<uint64_t, 18> kBoundsNs = {
      100'000,       250'000,       500'000,       1'000'000,      2'500'000,      5'000'000,
      10'000'000,    25'000'000,    50'000'000,    100'000'000,    250'000'000,    500'000'000,
      1'000'000'000, 2'500'000'000, 5'000'000'000, 10'000'000'000, 25'000'000'000, 60'000'000'000,
  };
  static constexpr size_t kBuckets = kBoundsNs.size() + 1;

  // Per-bucket (not cumulative) counts, their total and the sum of the recorded values.
  struct Counts {
    std::array<uint64_t, kBuckets> buckets{};
    uint64_t count = 0;
    uint64_t sum_ns = 0;

    void Add(const Counts& other);
    void Clear() { *this = Counts{}; }
  };

  // The bucket `value_ns` falls in: the first whose bound is >= value_ns, or kBuckets - 1 (+Inf).
  static size_t BucketOf(uint64_t value_ns);

  void Record(uint64_t value_ns);
  const Counts& counts() const { return counts_; }
  // Replaces the counts with `counts` (a re-exec carries them over, docs/reexec.md).
  void Restore(const Counts& counts) { counts_ = counts; }

  // The q-quantile (0 <= q <= 1) in seconds, estimated as Prometheus' histogram_quantile does:
  // linear interpolation inside the bucket holding rank q * count (the first bucket starts at 0);
  // a rank in the +Inf bucket gives the largest finite bound. nullopt when nothing was recorded.
  static std::optional<double> QuantileSeconds(const Counts& counts, double q);

 private:
  Counts counts_;
};

// A cumulative histogram plus a recent window: a ring of kSlices histograms of kSliceNs each, so
// Recent() covers the last (kSlices - 1) * kSliceNs to kSlices * kSliceNs (50 to 60 s). Its
// histograms (1.2 KiB) are allocated at the first Record: before it, total() and Recent() report
// empty counts as they did, and an idle cell pays a pointer (issue 25 section 8). Every Record
// after the first allocates nothing.
class WindowedLatency {
 public:
  static constexpr uint64_t kSliceNs = 10'000'000'000;
  static constexpr size_t kSlices = 6;

  // `now_ns` is a monotonic clock (uv_hrtime); it never goes back between calls.
  void Record(uint64_t now_ns, uint64_t value_ns);
  // Everything since construction.
  const LatencyHistogram::Counts& total() const;
  // The cumulative counts become `total` (the previous image's, at a re-exec: docs/reexec.md);
  // the recent window starts empty. Allocates the histograms when `total` counted anything.
  void RestoreTotal(const LatencyHistogram::Counts& total);
  // What was recorded in the current slice and the kSlices - 1 before it.
  LatencyHistogram::Counts Recent(uint64_t now_ns) const;
  // Whether the histograms were allocated, that is whether anything was recorded.
  bool allocated() const { return histograms_ != nullptr; }

 private:
  struct Slice {
    uint64_t epoch = UINT64_MAX;  // now_ns / kSliceNs when it was filled; UINT64_MAX: never
    LatencyHistogram histogram;
  };
  struct Histograms {
    LatencyHistogram total;
    std::array<Slice, kSlices> slices;
  };
  std::unique_ptr<Histograms> histograms_;  // null until the first Record
};

}  // namespace bulkhead::admission
