// SPDX-License-Identifier: MIT
#include "admission/request_deadlines.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <random>
#include <vector>

namespace bulkhead::admission {
namespace {

// Finishes whatever a test left started, so every test ends with idle entries.
void FinishAll(RequestDeadlines* d, std::vector<DeadlineEntry>& entries) {
  for (DeadlineEntry& e : entries) d->Finish(&e);
}

// Issue 11, item 2: with max_concurrent >= 2, a request that starts while the only other one has
// already timed out (and still holds its slot) must get a deadline of its own.
TEST(RequestDeadlines, ARequestStartedAfterAnotherTimedOutHasADeadline) {
  RequestDeadlines d(1000);
  std::vector<DeadlineEntry> e(2);
  d.Start(&e[0], 0);
  EXPECT_EQ(d.NextDeadline(), 1000u);
  EXPECT_EQ(d.PopExpired(1000), &e[0]);
  EXPECT_TRUE(e[0].expired());
  EXPECT_EQ(d.NextDeadline(), std::nullopt);

  d.Start(&e[1], 1500);  // e[0] still runs: its worker has not answered
  EXPECT_EQ(d.NextDeadline(), 2500u);
  EXPECT_EQ(d.PopExpired(2499), nullptr);
  EXPECT_EQ(d.PopExpired(2500), &e[1]);
  EXPECT_EQ(d.expired(), 2u);
  FinishAll(&d, e);
  EXPECT_EQ(d.expired(), 0u);
}

TEST(RequestDeadlines, TheEarliestDeadlineIsNextWhicheverFinishesFirst) {
  RequestDeadlines d(100);
  std::vector<DeadlineEntry> e(3);
  d.Start(&e[0], 0);
  d.Start(&e[1], 10);
  d.Start(&e[2], 20);
  d.Finish(&e[1]);  // the middle one first
  EXPECT_EQ(d.NextDeadline(), 100u);
  d.Finish(&e[0]);  // then the oldest
  EXPECT_EQ(d.NextDeadline(), 120u);
  d.Finish(&e[2]);
  EXPECT_EQ(d.NextDeadline(), std::nullopt);
  EXPECT_FALSE(e[2].started());
}

TEST(RequestDeadlines, WithoutATimeoutNothingExpires) {
  RequestDeadlines d(0);
  std::vector<DeadlineEntry> e(1);
  d.Start(&e[0], 0);
  EXPECT_EQ(d.NextDeadline(), std::nullopt);
  EXPECT_EQ(d.PopExpired(UINT64_MAX), nullptr);
  FinishAll(&d, e);
}

TEST(RequestDeadlines, FinishingAnEntryThatNeverStartedChangesNothing) {
  RequestDeadlines d(100);
  std::vector<DeadlineEntry> e(2);
  d.Start(&e[0], 0);
  d.Finish(&e[1]);
  EXPECT_EQ(d.NextDeadline(), 100u);
  FinishAll(&d, e);
}

// Issue 11, item 4 (systemd#9467): a request_timeout added by reload counts from the reload, not
// from the start of a request that has run for longer than the new timeout already.
TEST(RequestDeadlines, ATimeoutAddedWhileRunningCountsFromTheChange) {
  RequestDeadlines d(0);
  std::vector<DeadlineEntry> e(2);
  d.Start(&e[0], 0);
  d.SetTimeout(30000, 60000);
  EXPECT_EQ(d.NextDeadline(), 90000u);
  EXPECT_EQ(d.PopExpired(60003), nullptr);
  d.Start(&e[1], 70000);  // started after the change: from its own start
  EXPECT_EQ(d.PopExpired(90000), &e[0]);
  EXPECT_EQ(d.NextDeadline(), 100000u);
  FinishAll(&d, e);
}

TEST(RequestDeadlines, ALoweredTimeoutCountsFromTheChangeAndTheSameOneChangesNothing) {
  RequestDeadlines d(60000);
  std::vector<DeadlineEntry> e(1);
  d.Start(&e[0], 0);
  d.SetTimeout(60000, 50000);  // not a change: the request keeps its deadline
  EXPECT_EQ(d.NextDeadline(), 60000u);
  d.SetTimeout(30000, 45000);
  EXPECT_EQ(d.NextDeadline(), 75000u);
  d.SetTimeout(0, 46000);
  EXPECT_EQ(d.NextDeadline(), std::nullopt);
  FinishAll(&d, e);
}

TEST(RequestDeadlines, AnExpiredEntryStaysExpiredAcrossATimeoutChange) {
  RequestDeadlines d(100);
  std::vector<DeadlineEntry> e(1);
  d.Start(&e[0], 0);
  ASSERT_EQ(d.PopExpired(100), &e[0]);
  d.SetTimeout(1000, 150);
  EXPECT_TRUE(e[0].expired());
  EXPECT_EQ(d.NextDeadline(), std::nullopt);
  EXPECT_EQ(d.expired(), 1u);
  FinishAll(&d, e);
}

// Random starts, finishes, timeout changes and clock steps against a direct model: every entry
// started and neither finished nor expired has deadline max(start, last change) + timeout;
// NextDeadline is their minimum and PopExpired returns exactly those due, earliest first.
TEST(RequestDeadlines, AgreesWithADirectModelUnderRandomOperations) {
  std::mt19937 rng(11);
  RequestDeadlines d(50);
  uint64_t timeout = 50;
  uint64_t changed_at = 0;
  std::vector<DeadlineEntry> e(8);
  struct Model {
    bool waiting = false;
    bool expired = false;
    uint64_t start = 0;
  };
  std::vector<Model> m(e.size());
  auto deadline = [&](const Model& x) { return std::max(x.start, changed_at) + timeout; };
  uint64_t now = 0;
  for (int step = 0; step < 20000; ++step) {
    size_t i = rng() % e.size();
    switch (rng() % 5) {
      case 0:
      case 1:
        if (!m[i].waiting && !m[i].expired) {
          d.Start(&e[i], now);
          m[i] = Model{true, false, now};
        }
        break;
      case 2:
        d.Finish(&e[i]);
        m[i] = Model{};
        break;
      case 3: {
        uint64_t next = (rng() % 4) * 40;  // 0 (none), 40, 80, 120
        d.SetTimeout(next, now);
        if (next != timeout) {
          timeout = next;
          changed_at = now;
        }
        break;
      }
      case 4:
        now += rng() % 30;
        while (DeadlineEntry* popped = d.PopExpired(now)) {
          size_t k = static_cast<size_t>(popped - e.data());
          ASSERT_LT(k, e.size());
          ASSERT_TRUE(m[k].waiting) << "step " << step;
          ASSERT_LE(deadline(m[k]), now) << "step " << step;
          for (const Model& other : m) {
            if (other.waiting) {
              ASSERT_LE(deadline(m[k]), deadline(other)) << "step " << step;
            }
          }
          m[k].waiting = false;
          m[k].expired = true;
        }
        break;
    }
    std::optional<uint64_t> expected;
    size_t expired = 0;
    for (size_t k = 0; k < e.size(); ++k) {
      if (m[k].expired) ++expired;
      if (!m[k].waiting || timeout == 0) continue;
      expected = std::min(expected.value_or(UINT64_MAX), deadline(m[k]));
      ASSERT_EQ(e[k].started(), true);
    }
    ASSERT_EQ(d.NextDeadline(), expected) << "step " << step;
    ASSERT_EQ(d.expired(), expired) << "step " << step;
  }
  FinishAll(&d, e);
}

}  // namespace
}  // namespace bulkhead::admission
