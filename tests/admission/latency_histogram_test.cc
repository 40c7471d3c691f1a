// SPDX-License-Identifier: MIT
// LatencyHistogram and WindowedLatency: bucket edges, quantiles as histogram_quantile computes
// them, the recent window forgetting what is older than its six 10-second slices, and an idle
// window holding no histograms until its first sample.
#include "admission/latency_histogram.h"

#include <gtest/gtest.h>

#include "tests/admission/allocation_counter.h"

namespace bulkhead::admission {
namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kS = 1'000'000'000;

TEST(LatencyHistogram, BucketBoundsAreInclusive) {
  EXPECT_EQ(LatencyHistogram::BucketOf(0), 0u);
  EXPECT_EQ(LatencyHistogram::BucketOf(100'000), 0u);  // le="0.0001"
  EXPECT_EQ(LatencyHistogram::BucketOf(100'001), 1u);
  EXPECT_EQ(LatencyHistogram::BucketOf(1 * kMs), 3u);
  EXPECT_EQ(LatencyHistogram::BucketOf(60 * kS), LatencyHistogram::kBuckets - 2);
  EXPECT_EQ(LatencyHistogram::BucketOf(60 * kS + 1), LatencyHistogram::kBuckets - 1);  // +Inf
}

TEST(LatencyHistogram, RecordCountsAndSums) {
  LatencyHistogram h;
  h.Record(3 * kMs);
  h.Record(7 * kMs);
  h.Record(2 * kS);
  EXPECT_EQ(h.counts().count, 3u);
  EXPECT_EQ(h.counts().sum_ns, 10 * kMs + 2 * kS);
  EXPECT_EQ(h.counts().buckets[LatencyHistogram::BucketOf(3 * kMs)], 1u);
  EXPECT_EQ(h.counts().buckets[LatencyHistogram::BucketOf(7 * kMs)], 1u);
  EXPECT_EQ(h.counts().buckets[LatencyHistogram::BucketOf(2 * kS)], 1u);
}

TEST(LatencyHistogram, QuantileInterpolatesInsideTheBucket) {
  LatencyHistogram h;
  EXPECT_FALSE(LatencyHistogram::QuantileSeconds(h.counts(), 0.5).has_value());
  // 100 values in (5 ms, 10 ms]: the median sits halfway, p99 at 99% of the bucket.
  for (int i = 0; i < 100; ++i) h.Record(8 * kMs);
  EXPECT_DOUBLE_EQ(*LatencyHistogram::QuantileSeconds(h.counts(), 0.5), 0.0075);
  EXPECT_DOUBLE_EQ(*LatencyHistogram::QuantileSeconds(h.counts(), 0.99), 0.00995);
  // One slow outlier in (1 s, 2.5 s] moves p99 only a little, and p100 into the outlier's bucket.
  h.Record(2 * kS);
  EXPECT_LT(*LatencyHistogram::QuantileSeconds(h.counts(), 0.99), 0.010);
  EXPECT_DOUBLE_EQ(*LatencyHistogram::QuantileSeconds(h.counts(), 1.0), 2.5);
}

TEST(LatencyHistogram, QuantileInTheInfBucketIsTheLargestBound) {
  LatencyHistogram h;
  h.Record(120 * kS);
  EXPECT_DOUBLE_EQ(*LatencyHistogram::QuantileSeconds(h.counts(), 0.5), 60.0);
}

TEST(WindowedLatency, RecentForgetsSlicesOlderThanTheWindow) {
  WindowedLatency w;
  const uint64_t t0 = 1000 * kS;
  w.Record(t0, 1 * kMs);
  w.Record(t0 + 25 * kS, 20 * kMs);
  EXPECT_EQ(w.Recent(t0 + 25 * kS).count, 2u);
  // 60 s after t0's slice began, that slice has left the window; the total keeps it.
  EXPECT_EQ(w.Recent(t0 + 60 * kS).count, 1u);
  EXPECT_EQ(w.Recent(t0 + 90 * kS).count, 0u);
  EXPECT_EQ(w.total().count, 2u);
  // A slot of the ring reused after a full turn starts empty.
  w.Record(t0 + 60 * kS, 5 * kS);
  LatencyHistogram::Counts recent = w.Recent(t0 + 60 * kS);
  EXPECT_EQ(recent.count, 2u);
  EXPECT_EQ(recent.sum_ns, 20 * kMs + 5 * kS);
  EXPECT_EQ(w.total().count, 3u);
}

TEST(WindowedLatency, AnIdleOneHoldsNoHistogramsAndReportsNothingRecorded) {
  // What an idle cell pays for each of its two latency windows: a pointer, not 1.2 KiB (issue 25
  // section 8).
  EXPECT_LE(sizeof(WindowedLatency), sizeof(void*));
  bulkhead::testing::AllocationCounter counter;
  WindowedLatency w;
  EXPECT_FALSE(w.allocated());
  // Reports what an empty histogram did: no count, no sum, every bucket 0, no quantile.
  const LatencyHistogram::Counts& total = w.total();
  EXPECT_EQ(total.count, 0u);
  EXPECT_EQ(total.sum_ns, 0u);
  for (uint64_t bucket : total.buckets) EXPECT_EQ(bucket, 0u);
  EXPECT_FALSE(LatencyHistogram::QuantileSeconds(total, 0.5).has_value());
  EXPECT_EQ(w.Recent(1000 * kS).count, 0u);
  EXPECT_EQ(counter.allocations(), 0u);

  // The first sample allocates the histograms, once; the ones after it nothing.
  w.Record(1000 * kS, 3 * kMs);
  EXPECT_TRUE(w.allocated());
  EXPECT_EQ(counter.allocations(), 1u);
  for (int i = 1; i <= 100; ++i) w.Record(1000 * kS + static_cast<uint64_t>(i) * kS, 3 * kMs);
  EXPECT_EQ(counter.allocations(), 1u);
  EXPECT_EQ(w.total().count, 101u);
  EXPECT_EQ(w.total().buckets[LatencyHistogram::BucketOf(3 * kMs)], 101u);
}

}  // namespace
}  // namespace bulkhead::admission
