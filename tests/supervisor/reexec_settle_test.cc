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

}  // namespace
}  // namespace bulkhead::supervisor
