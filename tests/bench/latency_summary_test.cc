// SPDX-License-Identifier: MIT
#include "bench/latency_summary.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace bulkhead::bench {
namespace {

TEST(Median, IsTheMiddleFigureOfAnOddCountInAnyOrder) {
  EXPECT_EQ(Median({9.0, 1.0, 5.0}), 5.0);
  EXPECT_EQ(Median({4.0}), 4.0);
}

TEST(Median, IsTheMeanOfTheMiddleTwoOfAnEvenCount) {
  EXPECT_EQ(Median({7.0, 1.0, 3.0, 100.0}), 5.0);
}

TEST(Median, IsZeroForNoFigures) { EXPECT_EQ(Median({}), 0.0); }

TEST(LatencySummary, ReadsNearestRankPercentilesInMicroseconds) {
  std::vector<uint32_t> samples_ns;
  for (uint32_t i = 1000; i >= 1; --i) samples_ns.push_back(i * 1000);  // 1..1000 us, reversed
  const LatencySummary summary = Summarize(samples_ns);
  EXPECT_EQ(summary.count, 1000u);
  EXPECT_EQ(summary.p50_us, 500.0);
  EXPECT_EQ(summary.p99_us, 990.0);
  EXPECT_EQ(summary.p999_us, 999.0);
}

TEST(LatencySummary, ReadsSamplesInMicrosecondsPastWhatNanosecondsHold) {
  // Answers of up to 10 s (a uint32_t of ns holds 4.29 s): 10 ms .. 10 s.
  std::vector<uint32_t> samples_us;
  for (uint32_t i = 1; i <= 1000; ++i) samples_us.push_back(i * 10'000);
  const LatencySummary summary = Summarize(samples_us, SampleUnit::kUs);
  EXPECT_EQ(summary.p50_us, 5'000'000.0);
  EXPECT_EQ(summary.p99_us, 9'900'000.0);
  EXPECT_EQ(summary.p999_us, 9'990'000.0);
}

TEST(LatencySummary, IsAllZeroForNoSamples) {
  std::vector<uint32_t> none;
  const LatencySummary summary = Summarize(none);
  EXPECT_EQ(summary.count, 0u);
  EXPECT_EQ(summary.p99_us, 0.0);
}

}  // namespace
}  // namespace bulkhead::bench
