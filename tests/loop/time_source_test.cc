// SPDX-License-Identifier: MIT
// TimeSource: the real source's timers on a libuv loop, and the simulated source the tests drive
// (tests/helpers/simulated_time_source.h): deadline order, NowMs() at each deadline, re-arming and
// destruction from inside a callback.
#include "loop/time_source.h"

#include <gtest/gtest.h>
#include <uv.h>

#include <memory>
#include <string>
#include <vector>

#include "tests/helpers/simulated_time_source.h"

namespace bulkhead::loop {
namespace {

using testing::SimulatedTimeSource;

TEST(LoopTimeSource, ATimerRunsOnTheLoopAndADestroyedOneNever) {
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  {
    LoopTimeSource source(&loop);
    int fired = 0;
    int never = 0;
    std::unique_ptr<Timer> timer = source.CreateTimer([&] { ++fired; });
    std::unique_ptr<Timer> dropped = source.CreateTimer([&] { ++never; });
    EXPECT_FALSE(timer->armed());
    timer->Start(0);
    dropped->Start(0);
    EXPECT_TRUE(timer->armed());
    dropped.reset();
    uv_run(&loop, UV_RUN_DEFAULT);
    EXPECT_EQ(fired, 1);
    EXPECT_EQ(never, 0);
    EXPECT_FALSE(timer->armed());
    EXPECT_GT(source.NowNs(), 0u);
  }
  // The destroyed timers' handles closed on the loop: nothing is left open.
  uv_run(&loop, UV_RUN_DEFAULT);
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

TEST(SimulatedTimeSource, TimersRunInDeadlineOrderWithTheClockAtTheirDeadline) {
  SimulatedTimeSource time(1000);
  std::vector<std::string> seen;
  auto a = time.CreateTimer([&] { seen.push_back("a@" + std::to_string(time.NowMs())); });
  auto b = time.CreateTimer([&] { seen.push_back("b@" + std::to_string(time.NowMs())); });
  auto c = time.CreateTimer([&] { seen.push_back("c@" + std::to_string(time.NowMs())); });
  a->Start(300);
  b->Start(100);
  c->Start(100);  // the same deadline as b, armed after it
  time.Advance(99);
  EXPECT_TRUE(seen.empty());
  EXPECT_EQ(time.NowMs(), 1099u);
  time.Advance(500);
  EXPECT_EQ(seen, (std::vector<std::string>{"b@1100", "c@1100", "a@1300"}));
  EXPECT_EQ(time.NowMs(), 1599u);
  EXPECT_EQ(time.armed_timers(), 0u);
}

TEST(SimulatedTimeSource, ACallbackMayRearmItselfOrDestroyItsTimer) {
  SimulatedTimeSource time;
  int ticks = 0;
  std::unique_ptr<Timer> tick;
  tick = time.CreateTimer([&] {
    if (++ticks < 3) {
      tick->Start(10);
    } else {
      tick.reset();
    }
  });
  tick->Start(10);
  time.Advance(1000);
  EXPECT_EQ(ticks, 3);
  EXPECT_EQ(tick, nullptr);
}

TEST(SimulatedTimeSource, RestartingMovesTheDeadlineAndStopDisarms) {
  SimulatedTimeSource time;
  int fired = 0;
  auto timer = time.CreateTimer([&] { ++fired; });
  timer->Start(100);
  time.Advance(60);
  timer->Start(100);  // now due 100 ms from here, not 40
  ASSERT_EQ(time.NextDeadline(), time.NowMs() + 100);
  time.Advance(60);
  EXPECT_EQ(fired, 0);
  time.Advance(40);
  EXPECT_EQ(fired, 1);
  timer->Start(0);
  timer->Stop();
  time.RunDue();
  EXPECT_EQ(fired, 1);
  EXPECT_FALSE(time.NextDeadline().has_value());
}

}  // namespace
}  // namespace bulkhead::loop
