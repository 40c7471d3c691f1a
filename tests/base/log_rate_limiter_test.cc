// SPDX-License-Identifier: MIT
#include "base/log_rate_limiter.h"

#include <gtest/gtest.h>

namespace bulkhead {
namespace {

TEST(LogRateLimiter, LogsBurstThenDropsUntilTheWindowEnds) {
  LogRateLimiter limiter(3, 1000);
  for (int i = 0; i < 3; ++i) {
    LogRateLimiter::Decision d = limiter.Admit(100);
    EXPECT_TRUE(d.log);
    EXPECT_EQ(d.suppressed_before, 0u);
  }
  EXPECT_EQ(limiter.SuppressionEndsAt(), std::nullopt);
  EXPECT_FALSE(limiter.Admit(500).log);
  EXPECT_FALSE(limiter.Admit(1099).log);
  EXPECT_EQ(limiter.suppressed(), 2u);
  EXPECT_EQ(limiter.SuppressionEndsAt(), 1100u);
  // The window opened at 100 (its first line) and lasts 1000 ms.
  LogRateLimiter::Decision next = limiter.Admit(1100);
  EXPECT_TRUE(next.log);
  EXPECT_EQ(next.suppressed_before, 2u);
  EXPECT_EQ(limiter.suppressed(), 0u);
}

TEST(LogRateLimiter, EndWindowReportsDropsOnceWhenTheWindowIsOver) {
  LogRateLimiter limiter(1, 50);
  EXPECT_TRUE(limiter.Admit(0).log);
  EXPECT_FALSE(limiter.Admit(10).log);
  EXPECT_EQ(limiter.EndWindow(49), 0u);  // not over yet
  EXPECT_EQ(limiter.EndWindow(50), 1u);
  EXPECT_EQ(limiter.EndWindow(60), 0u);
  EXPECT_EQ(limiter.SuppressionEndsAt(), std::nullopt);
  // A new window opens with the next line.
  LogRateLimiter::Decision d = limiter.Admit(70);
  EXPECT_TRUE(d.log);
  EXPECT_EQ(d.suppressed_before, 0u);
}

TEST(LogRateLimiter, ForcedEndReportsDropsAtOnce) {
  LogRateLimiter limiter(1, 10000);
  limiter.Admit(0);
  limiter.Admit(1);
  limiter.Admit(2);
  EXPECT_EQ(limiter.EndWindow(3, /*force=*/true), 2u);
  EXPECT_TRUE(limiter.Admit(4).log);
}

TEST(LogRateLimiter, ZeroBurstOrIntervalMeansNoLimit) {
  LogRateLimiter no_burst(0, 1000);
  LogRateLimiter no_interval(5, 0);
  for (int i = 0; i < 100; ++i) {
    EXPECT_TRUE(no_burst.Admit(1).log);
    EXPECT_TRUE(no_interval.Admit(1).log);
  }
  EXPECT_EQ(no_burst.SuppressionEndsAt(), std::nullopt);
}

}  // namespace
}  // namespace bulkhead
