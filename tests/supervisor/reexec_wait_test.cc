// SPDX-License-Identifier: MIT
// ReexecWait (supervisor/reexec_wait.h): a waiting re-exec looks again when told of an event, after
// the loop's next poll, with no timer run; its one timer runs only at the bound. Simulated time:
// the clock never moves unless the test moves it, and nothing sleeps.
#include "supervisor/reexec_wait.h"

#include <gtest/gtest.h>
#include <uv.h>

#include <optional>

#include "tests/helpers/simulated_time_source.h"

namespace bulkhead::supervisor {
namespace {

class ReexecWaitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(uv_loop_init(&loop_), 0);
    wait_.emplace(&loop_, &time_, [this] { ++looks_; });
  }
  void TearDown() override {
    bool closed = false;
    wait_->Close([&] { closed = true; });
    uv_run(&loop_, UV_RUN_DEFAULT);
    EXPECT_TRUE(closed);
    wait_.reset();
    EXPECT_EQ(uv_loop_close(&loop_), 0) << "a handle was left open";
  }
  // One turn of the loop: its poll (not blocking: a look is due) and its check phase.
  void Turn() { uv_run(&loop_, UV_RUN_NOWAIT); }

  uv_loop_t loop_{};
  bulkhead::testing::SimulatedTimeSource time_;
  std::optional<ReexecWait> wait_;
  int looks_ = 0;
};

TEST_F(ReexecWaitTest, AnEventMakesItLookAfterTheNextPollWithNoTimerRun) {
  const uint64_t bound = time_.NowMs() + 5'000;
  wait_->SetBound(bound);
  EXPECT_EQ(looks_, 0);
  wait_->Notify();
  EXPECT_EQ(looks_, 0) << "never inside the caller";
  Turn();
  EXPECT_EQ(looks_, 1);
  EXPECT_EQ(wait_->bound_fires(), 0u);
  EXPECT_EQ(time_.NowMs(), bound - 5'000) << "no time passed";
  // The bound stays armed for the phase's deadline, the one timer.
  EXPECT_EQ(time_.armed_timers(), 1u);
  EXPECT_EQ(time_.NextDeadline(), bound);
}

TEST_F(ReexecWaitTest, ManyEventsInOneTurnMakeOneLook) {
  wait_->SetBound(time_.NowMs() + 5'000);
  for (int i = 0; i < 10; ++i) wait_->Notify();
  EXPECT_TRUE(wait_->notified());
  Turn();
  Turn();
  EXPECT_EQ(looks_, 1);
  EXPECT_FALSE(wait_->notified());
}

TEST_F(ReexecWaitTest, WithNoEventItLooksOnceAtTheBoundAndNotBefore) {
  wait_->SetBound(time_.NowMs() + 5'000);
  time_.Advance(4'999);
  Turn();
  EXPECT_EQ(looks_, 0);
  time_.Advance(1);
  EXPECT_EQ(looks_, 1);
  EXPECT_EQ(wait_->bound_fires(), 1u);
  time_.Advance(60'000);
  EXPECT_EQ(looks_, 1) << "a bound runs once";
}

TEST_F(ReexecWaitTest, ANewBoundReplacesTheOldAndNoBoundDisarmsIt) {
  const uint64_t start = time_.NowMs();
  wait_->SetBound(start + 5'000);
  wait_->SetBound(start + 1'000);  // the phase changed: its own deadline
  EXPECT_EQ(time_.NextDeadline(), start + 1'000);
  wait_->SetBound(std::nullopt);
  EXPECT_EQ(time_.armed_timers(), 0u);
  time_.Advance(10'000);
  EXPECT_EQ(looks_, 0);
  // A deadline passed already looks at the next turn.
  wait_->SetBound(start);
  time_.RunDue();
  EXPECT_EQ(looks_, 1);
}

}  // namespace
}  // namespace bulkhead::supervisor
