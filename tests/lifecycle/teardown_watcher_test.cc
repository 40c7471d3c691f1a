// SPDX-License-Identifier: MIT
// TeardownWatcher in simulated time with a fake generation: what is left of a worker generation
// is killed (at once, or from a stop's SIGKILL deadline on), looked at every kPollMs and killed
// again until it is empty, and only then does the lifecycle hear of the end; a generation that
// will not empty is reported once.
#include "lifecycle/teardown_watcher.h"

#include <gtest/gtest.h>

#include <deque>
#include <string>

#include "tests/helpers/captured_log.h"
#include "tests/helpers/simulated_time_source.h"

namespace bulkhead::lifecycle {
namespace {

using bulkhead::testing::CapturedLog;
using bulkhead::testing::SimulatedTimeSource;

// A generation that is empty from the look after `non_empty_looks` looks.
class FakeGeneration : public TeardownWatcher::Generation {
 public:
  explicit FakeGeneration(int non_empty_looks) : non_empty_looks_(non_empty_looks) {}
  Result<bool> IsEmpty() override {
    ++looks;
    if (fail_looks > 0) {
      --fail_looks;
      return Status::Error("cgroup.events: No such device");
    }
    return looks > non_empty_looks_;
  }
  void KillAll() override { ++kills; }
  std::string Describe() const override { return "cgroup /sys/fs/cgroup/cells/payments"; }

  int looks = 0;
  int kills = 0;
  int fail_looks = 0;

 private:
  int non_empty_looks_;
};

class TeardownWatcherTest : public ::testing::Test {
 protected:
  SimulatedTimeSource time_;
  std::string cell_ = "payments";
  TeardownWatcher watcher_{&time_, &cell_};
  int ended_ = 0;
  std::function<void()> Then() {
    return [this] { ++ended_; };
  }
};

TEST_F(TeardownWatcherTest, KillsAtOnceAndEndsFromATimerOnceEmpty) {
  FakeGeneration generation(0);
  watcher_.Start(&generation, /*kill_from_ms=*/0, Then());
  EXPECT_EQ(generation.kills, 1);
  EXPECT_EQ(generation.looks, 0);
  EXPECT_EQ(ended_, 0) << "never from inside Start";
  EXPECT_TRUE(watcher_.watching());
  time_.RunDue();
  EXPECT_EQ(generation.looks, 1);
  EXPECT_EQ(ended_, 1);
  EXPECT_FALSE(watcher_.watching());
  EXPECT_EQ(time_.armed_timers(), 0u);
}

TEST_F(TeardownWatcherTest, LooksEveryPollAndKillsAgainUntilEmpty) {
  FakeGeneration generation(2);
  watcher_.Start(&generation, 0, Then());
  time_.RunDue();  // not empty: killed again
  EXPECT_EQ(generation.looks, 1);
  EXPECT_EQ(generation.kills, 2);
  time_.Advance(TeardownWatcher::kPollMs - 1);
  EXPECT_EQ(generation.looks, 1);
  time_.Advance(1);
  EXPECT_EQ(generation.looks, 2);
  EXPECT_EQ(generation.kills, 3);
  EXPECT_EQ(ended_, 0);
  // A look that fails counts as not empty.
  generation.fail_looks = 1;
  time_.Advance(TeardownWatcher::kPollMs);
  EXPECT_EQ(ended_, 0);
  time_.Advance(TeardownWatcher::kPollMs);
  EXPECT_EQ(generation.looks, 4);
  EXPECT_EQ(ended_, 1);
}

// kill_mode = "control-group": the cell's other processes had stop_signal and may end by
// themselves until the stop's deadline; only then SIGKILL.
TEST_F(TeardownWatcherTest, NothingIsKilledBeforeTheStopsDeadline) {
  FakeGeneration generation(1000);
  const uint64_t deadline = time_.NowMs() + 300;
  watcher_.Start(&generation, deadline, Then());
  EXPECT_EQ(generation.kills, 0);
  time_.Advance(299);
  EXPECT_GT(generation.looks, 50);
  EXPECT_EQ(generation.kills, 0);
  time_.Advance(1);
  EXPECT_EQ(generation.kills, 1);
  time_.Advance(TeardownWatcher::kPollMs);
  EXPECT_EQ(generation.kills, 2);
  EXPECT_EQ(ended_, 0);
}

TEST_F(TeardownWatcherTest, AGenerationThatWillNotEmptyIsReportedOnce) {
  CapturedLog log;
  FakeGeneration generation(1'000'000);
  watcher_.Start(&generation, 0, Then());
  time_.Advance(TeardownWatcher::kWarnAfterMs);
  EXPECT_EQ(log.Count("still has processes"), 0u) << log.Text();
  time_.Advance(TeardownWatcher::kPollMs);
  ASSERT_EQ(log.Count("still has processes"), 1u) << log.Text();
  const CapturedLog::Line* line = log.Find("still has processes");
  EXPECT_EQ(line->level, LogLevel::kError);
  EXPECT_EQ(line->cell, "payments");
  EXPECT_EQ(line->message,
            "cgroup /sys/fs/cgroup/cells/payments still has processes 5 s after cgroup.kill");
  time_.Advance(10'000);
  EXPECT_EQ(log.Count("still has processes"), 1u);
  EXPECT_EQ(ended_, 0);
}

TEST_F(TeardownWatcherTest, ACancelledWatchNeverEnds) {
  FakeGeneration generation(1);
  watcher_.Start(&generation, 0, Then());
  watcher_.Cancel();
  time_.Advance(100);
  EXPECT_EQ(generation.looks, 0);
  EXPECT_EQ(ended_, 0);
  EXPECT_FALSE(watcher_.watching());
}

TEST_F(TeardownWatcherTest, TheEndMayStartTheNextWatch) {
  FakeGeneration first(0);
  FakeGeneration second(0);
  watcher_.Start(&first, 0, [&] {
    ++ended_;
    watcher_.Start(&second, 0, Then());
  });
  time_.RunDue();
  EXPECT_EQ(ended_, 2);
  EXPECT_EQ(second.kills, 1);
  EXPECT_EQ(second.looks, 1);
}

}  // namespace
}  // namespace bulkhead::lifecycle
