// SPDX-License-Identifier: MIT
// StallWindow (the share of the last window a cgroup's tasks stalled, from cumulative PSI totals)
// and JudgeCpuNeighbours (whose CPU, at one cell's cpu.pressure event). Times are given, not read.
#include "admission/stall_window.h"

#include <gtest/gtest.h>

#include <optional>
#include <vector>

namespace bulkhead::admission {
namespace {

constexpr uint64_t kWindowMs = 1000;

// Readings every 250 ms from t = 0, the total growing by `stall_us_per_poll` each time.
StallWindow Steady(int polls, uint64_t stall_us_per_poll) {
  StallWindow w;
  for (int i = 0; i < polls; ++i) {
    w.Record(static_cast<uint64_t>(i) * 250, static_cast<uint64_t>(i) * stall_us_per_poll);
  }
  return w;
}

TEST(StallWindow, TheShareIsTheStallOverTheLastWindow) {
  // 50 ms of stall per 250 ms: a fifth of the time.
  const StallWindow w = Steady(8, 50'000);
  ASSERT_TRUE(w.Share(1750, kWindowMs).has_value());
  EXPECT_DOUBLE_EQ(*w.Share(1750, kWindowMs), 0.2);
}

TEST(StallWindow, OnlyTheLastWindowCountsNotWhatCameBefore) {
  // A second of full stall, then a second of none: the last window says none.
  StallWindow w;
  uint64_t total = 0;
  for (uint64_t t = 0; t <= 2000; t += 250) {
    w.Record(t, total);
    if (t < 1000) total += 250'000;
  }
  EXPECT_DOUBLE_EQ(*w.Share(2000, kWindowMs), 0.0);
  // Over 1.5 s the end of the stalled second shows again: 500 ms of 1500.
  EXPECT_DOUBLE_EQ(*w.Share(2000, 1500), 1.0 / 3.0);
}

TEST(StallWindow, TooFewOrTooOldReadingsCannotBeJudged) {
  StallWindow w;
  EXPECT_EQ(w.Share(0, kWindowMs), std::nullopt);
  w.Record(0, 0);
  EXPECT_EQ(w.Share(0, kWindowMs), std::nullopt);  // one reading
  w.Record(250, 100'000);
  EXPECT_EQ(w.Share(250, kWindowMs), std::nullopt);  // spans a quarter of the window
  w.Record(500, 200'000);
  EXPECT_DOUBLE_EQ(*w.Share(500, kWindowMs), 0.4);  // spans half of it: judged
  EXPECT_DOUBLE_EQ(*w.Share(1500, kWindowMs), 0.4);
  EXPECT_EQ(w.Share(1501, kWindowMs), std::nullopt);  // the newest is older than the window
  w.Clear();
  EXPECT_EQ(w.readings(), 0u);
  EXPECT_EQ(w.Share(500, kWindowMs), std::nullopt);
}

TEST(StallWindow, ATotalThatWentBackStartsTheReadingsAnew) {
  StallWindow w = Steady(4, 200'000);  // a worker generation's cgroup...
  w.Record(1000, 10);                  // ...and a new one, its total from 0
  EXPECT_EQ(w.readings(), 1u);
  EXPECT_EQ(w.Share(1000, kWindowMs), std::nullopt);
  w.Record(1500, 100'010);
  EXPECT_DOUBLE_EQ(*w.Share(1500, kWindowMs), 0.2);
}

TEST(StallWindow, TheShareIsAtMostTheWholeTime) {
  // Totals count per cgroup, not per task, but a reading taken late can still over-run the span.
  StallWindow w;
  w.Record(0, 0);
  w.Record(1000, 1'200'000);
  EXPECT_DOUBLE_EQ(*w.Share(1000, kWindowMs), 1.0);
}

TEST(JudgeCpuNeighbours, AWaitingCellCutsAnUnjudgedOneCutsAndOnlyIdleOnesSpare) {
  using Shares = std::vector<std::optional<double>>;
  constexpr double kShare = 0.10;
  EXPECT_EQ(JudgeCpuNeighbours(Shares{}, kShare), CpuNeighbours::kNoneWaiting);
  EXPECT_EQ(JudgeCpuNeighbours(Shares{0.0, 0.09}, kShare), CpuNeighbours::kNoneWaiting);
  EXPECT_EQ(JudgeCpuNeighbours(Shares{0.0, 0.10}, kShare), CpuNeighbours::kWaiting);
  EXPECT_EQ(JudgeCpuNeighbours(Shares{std::nullopt, 0.02}, kShare), CpuNeighbours::kUnknown);
  EXPECT_EQ(JudgeCpuNeighbours(Shares{std::nullopt, 0.5}, kShare), CpuNeighbours::kWaiting);
}

}  // namespace
}  // namespace bulkhead::admission
