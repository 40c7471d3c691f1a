// SPDX-License-Identifier: MIT
// A re-exec's settling (supervisor/reexec_settle.h), in simulated time: its bound comes from the
// cells' start and stop timeouts, it waits while a cell is unsettled and the deadline is ahead,
// goes on once none is, and past the deadline is refused naming the cell and how long it waited.
#include "supervisor/reexec_settle.h"

#include <gtest/gtest.h>

#include <vector>

namespace bulkhead::supervisor {
namespace {

TEST(ReexecSettleBound, IsTheLongestStartTimeoutPlusStopTimeoutOfTheCells) {
  const std::vector<SettleTimeouts> cells = {{.start_timeout_ms = 90'000, .stop_timeout_ms = 5'000},
                                             {.start_timeout_ms = 2'000, .stop_timeout_ms = 30'000}};
  EXPECT_EQ(ReexecSettleBoundMs(cells), 95'000u);
  EXPECT_EQ(ReexecSettleBoundMs({}), 0u);
}

TEST(ReexecSettleBound, AStartWithNoBoundCountsAsTheMaximumAndNothingExceedsIt) {
  const std::vector<SettleTimeouts> forever = {{.start_timeout_ms = 0, .stop_timeout_ms = 5'000}};
  EXPECT_EQ(ReexecSettleBoundMs(forever), kReexecSettleMaxMs);
  const std::vector<SettleTimeouts> long_ones = {
      {.start_timeout_ms = 100'000, .stop_timeout_ms = 100'000}};
  EXPECT_EQ(ReexecSettleBoundMs(long_ones), kReexecSettleMaxMs);
}

// The settling asked at t = 1000 with a bound of 95 s: a starting cell is waited for; the moment
// it runs, the re-exec goes on.
TEST(JudgeSettle, WaitsWhileACellIsUnsettledThenGoesOnOnceNoneIs) {
  constexpr uint64_t kStarted = 1'000;
  constexpr uint64_t kDeadline = kStarted + 95'000;
  const std::string starting = "cells.b: it is starting (...)";
  for (uint64_t now : {kStarted, kStarted + 5, kStarted + 60'000, kDeadline - 1}) {
    EXPECT_EQ(JudgeSettle(starting, now, kStarted, kDeadline).kind, SettleStep::Kind::kWait)
        << now;
  }
  EXPECT_EQ(JudgeSettle("", kStarted + 30'000, kStarted, kDeadline).kind,
            SettleStep::Kind::kGoOn);
  // Settled at the deadline itself: it goes on, it is not refused.
  EXPECT_EQ(JudgeSettle("", kDeadline + 10, kStarted, kDeadline).kind, SettleStep::Kind::kGoOn);
}

TEST(JudgeSettle, PastTheDeadlineRefusesNamingTheCellItsStateAndTheWait) {
  const SettleStep step = JudgeSettle("cells.b: it is stopping (...)", 96'000, 1'000, 96'000);
  EXPECT_EQ(step.kind, SettleStep::Kind::kRefuse);
  EXPECT_EQ(step.refusal,
            "cells.b: it is stopping (...); still so after 95000 ms of waiting for the cells to "
            "settle");
}

// A re-exec asked at t = 1000 with a settling bound of 95 s, a 5 s check, a 30 s drain and a 1 s
// grace: what status says it may still last (reexec.ends_within_ms), at each phase.
TEST(ReexecEndsWithin, IsTheSettlingsTimeLeftThenTheCheckTheDrainAndTheGrace) {
  ReexecBounds bounds{.settle_deadline_ms = 96'000,
                      .checked = false,
                      .check_ms = 5'000,
                      .drain_ms = 30'000,
                      .grace_ms = 1'000,
                      .drain_deadline_ms = std::nullopt,
                      .abandoned = false};
  EXPECT_EQ(ReexecEndsWithinMs(bounds, 1'000), 95'000u + 5'000 + 30'000 + 1'000);
  EXPECT_EQ(ReexecEndsWithinMs(bounds, 96'000), 36'000u);
  // A check that passed is not run again when a cell sends the re-exec back to settling.
  bounds.checked = true;
  EXPECT_EQ(ReexecEndsWithinMs(bounds, 46'000), 50'000u + 30'000 + 1'000);
}

TEST(ReexecEndsWithin, ADrainUnderWayCountsItsOwnTimeLeftAndTheGrace) {
  // Draining from t = 50000, before the settling's deadline (96000): a cell unsettled at the
  // drain's end may send the re-exec back to settling, and a drain starts again.
  ReexecBounds bounds{.settle_deadline_ms = 96'000,
                      .checked = true,
                      .check_ms = 5'000,
                      .drain_ms = 30'000,
                      .grace_ms = 1'000,
                      .drain_deadline_ms = 80'000,
                      .abandoned = false};
  EXPECT_EQ(ReexecEndsWithinMs(bounds, 50'000), 46'000u + 30'000 + 1'000);
  // Past the settling's deadline: only this drain's time left and the grace.
  bounds.drain_deadline_ms = 230'000;
  EXPECT_EQ(ReexecEndsWithinMs(bounds, 200'000), 31'000u);
  // Past the drain's deadline, what was left was answered: only the grace's time left.
  bounds.drain_deadline_ms = 231'000;
  bounds.abandoned = true;
  EXPECT_EQ(ReexecEndsWithinMs(bounds, 230'500), 500u);
}

}  // namespace
}  // namespace bulkhead::supervisor
