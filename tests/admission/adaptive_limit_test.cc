// SPDX-License-Identifier: MIT
// AdaptiveLimit: every (starting point, input) entry of the table, as the lifecycle table is
// tested, then the stories told as signal sequences on a FakeClock: probe backoff, the base rising
// only from windows no busier than its own, a stale base measured anew, holds that expire, the
// memory cut interval, cpu.stat evaluation, the change ring. The settling of the limit on a model
// workload is in adaptive_limit_simulation_test.cc.
#include "admission/adaptive_limit.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tests/admission/allocation_counter.h"

namespace bulkhead::admission {
namespace {

using Phase = AdaptiveLimit::Phase;

constexpr uint64_t kBaseUs = 10'000;
constexpr uint64_t kStartMs = 1'000'000;

class AdaptiveLimitTest : public ::testing::Test {
 protected:
  void Make() { limit_ = std::make_unique<AdaptiveLimit>(&clock_, options_); }
  // Starts at `limit` without a base: made with that floor, which is then lowered to `floor`.
  void StartAt(uint32_t limit, uint32_t floor) {
    const uint32_t ceiling = options_.ceiling;
    options_.floor = limit;
    options_.ceiling = std::max(ceiling, limit);
    Make();
    lim().SetBounds(floor, options_.ceiling);
    options_.floor = floor;
  }
  // The base: clean windows of 50 requests at 10 ms with `running` at the worker; the last one is
  // judged.
  void MeasureBase(uint32_t running = 1) {
    for (int i = 0; i < 5; ++i) Window(1.0, running);
  }
  // The base (floor 1), then slow start up to `limit` (a power of two), held for a window.
  void GrowTo(uint32_t limit) {
    Make();
    MeasureBase();
    while (lim().limit() < limit) Busy(1.0);
    Busy(1.4);  // the last doubling holds: no probe is pending
  }
  AdaptiveLimit& lim() { return *limit_; }

  // One whole window: the clock moves window_ms, then window_samples samples of `ratio` x kBaseUs
  // with `running` at the worker end (each dispatched within the window: ratio < 10); the last
  // one closes it.
  uint32_t Window(double ratio, uint32_t running) {
    const auto service_us = static_cast<uint64_t>(static_cast<double>(kBaseUs) * ratio);
    clock_.AdvanceMs(options_.window_ms);
    for (uint32_t i = 0; i + 1 < options_.window_samples; ++i) lim().OnSample(service_us, running);
    return lim().OnSample(service_us, running);
  }
  // A window that reached the limit: every sample saw the whole limit running.
  uint32_t Busy(double ratio) { return Window(ratio, lim().limit()); }
  // cpu.stat: `throttled` of 10 periods throttled since the last call.
  void Throttled(uint64_t throttled) {
    periods_ += 10;
    throttled_ += throttled;
    lim().OnCpuStat(periods_, throttled_);
  }
  std::optional<LimitCause> LastCause(size_t count_before) const {
    if (limit_->change_count() == count_before && count_before < AdaptiveLimit::kRecentChanges)
      return std::nullopt;
    return limit_->change(0).cause;
  }

  FakeClock clock_{kStartMs};
  AdaptiveLimit::Options options_;
  std::unique_ptr<AdaptiveLimit> limit_;
  uint64_t periods_ = 0;
  uint64_t throttled_ = 0;
};

// ---------------------------------------------------------------------------------------------
// The table. Defaults: tolerance 0.5 (cut above R = 1.5, grow at R <= 1.25), pressure and memory
// cuts x0.75, memory hold at 750 per mille and cut at 850, throttle hold at half the periods.

enum class From {
  kSlowStart,  // limit 8 by slow start from the floor, 1; base 10 ms
  kAvoidance,  // limit 8 after a latency cut from 16; base 10 ms
  kFloor,      // floor 2, limit 2, slow start; base 10 ms. Windows at 2 running are clean here.
  kCeiling,    // ceiling 8, limit 8 by slow start; base 10 ms
};

enum class Input {
  kAtMinimumReached,     // window: R = 1.0, the limit reached
  kAtMinimumNotReached,  // window: R = 1.0, half the limit running
  kGrowEdge,             // window: R = 1.25, reached: still grows
  kInBand,               // window: R = 1.4, reached: unchanged
  kCutEdge,              // window: R = 1.5, reached: not yet a cut
  kTwiceTheMinimum,      // window: R = 2.0, reached: to C x 1.25 / 2
  kFiveTimes,            // window: R = 5.0, reached: halved at most
  kSlowAtTwoRunning,     // window: R = 2.0 with only 2 running: to 2 x 1.25 / 2, halved at most
  kCpuPressure,          // cpu.pressure trigger, whose CPU not judged (kUnknown)
  kCpuNeighbourWaits,    // cpu.pressure trigger, another cell waiting for a CPU
  kCpuNoneWaiting,       // cpu.pressure trigger, no other cell waiting: spared
  kCpuWaitsThrottled,    // 6 of 10 periods throttled, then a cpu.pressure trigger with another
                         // cell waiting: spared (the cell's own quota holds it)
  kMemoryPressure,       // memory.pressure trigger
  kMemoryAtCut,          // working set 900 per mille of memory.max
  kMemoryAtHold,         // 800 per mille
  kMemoryLow,            // 500 per mille
  // With the requests running: 800 per mille at 10 running (80 each: 850 fits 10), then a
  // window at the minimum that reached the limit; the fit, not the 750 hold, stops growth.
  kMemoryFitsTenThenGrows,
  kMemoryFitsEight,      // 700 per mille at 7 running (100 each: 850 fits 8)
  kThrottled,            // 6 of 10 periods throttled
  kBarelyThrottled,      // 1 of 10
  kFloorRaised,          // SetBounds(10, 64)
  kCeilingLowered,       // SetBounds(1, 4)
};

struct Entry {
  From from;
  Input input;
  uint32_t limit;
  std::optional<LimitCause> cause;
  Phase phase;
  GrowthHold hold = GrowthHold::kNone;
};

class AdaptiveLimitTableTest : public AdaptiveLimitTest {
 protected:
  void Arrange(From from) {
    options_ = AdaptiveLimit::Options{};
    switch (from) {
      case From::kSlowStart:
        GrowTo(8);
        break;
      case From::kAvoidance:
        GrowTo(16);
        Busy(2.5);  // 16 x 1.25 / 2.5 = 8
        break;
      case From::kFloor:
        options_.floor = 2;
        Make();
        MeasureBase();
        break;
      case From::kCeiling:
        options_.ceiling = 8;
        GrowTo(8);
        break;
    }
  }

  void Apply(Input input) {
    switch (input) {
      case Input::kAtMinimumReached:
        Busy(1.0);
        break;
      case Input::kAtMinimumNotReached:
        Window(1.0, lim().limit() / 2);
        break;
      case Input::kGrowEdge:
        Busy(1.25);
        break;
      case Input::kInBand:
        Busy(1.4);
        break;
      case Input::kCutEdge:
        Busy(1.5);
        break;
      case Input::kTwiceTheMinimum:
        Busy(2.0);
        break;
      case Input::kFiveTimes:
        Busy(5.0);
        break;
      case Input::kSlowAtTwoRunning:
        Window(2.0, 2);
        break;
      case Input::kCpuPressure:
        lim().OnPressure(Signal::kCpuPressure);
        break;
      case Input::kCpuNeighbourWaits:
        lim().OnPressure(Signal::kCpuPressure, CpuNeighbours::kWaiting);
        break;
      case Input::kCpuNoneWaiting:
        lim().OnPressure(Signal::kCpuPressure, CpuNeighbours::kNoneWaiting);
        break;
      case Input::kCpuWaitsThrottled:
        Throttled(0);
        Throttled(6);
        lim().OnPressure(Signal::kCpuPressure, CpuNeighbours::kWaiting);
        break;
      case Input::kMemoryPressure:
        lim().OnPressure(Signal::kMemoryPressure);
        break;
      case Input::kMemoryAtCut:
        lim().OnMemoryUsage(900, 1000, 0);
        break;
      case Input::kMemoryAtHold:
        lim().OnMemoryUsage(800, 1000, 0);
        break;
      case Input::kMemoryLow:
        lim().OnMemoryUsage(500, 1000, 0);
        break;
      case Input::kMemoryFitsTenThenGrows:
        lim().OnMemoryUsage(800, 1000, 10);
        Busy(1.0);
        break;
      case Input::kMemoryFitsEight:
        lim().OnMemoryUsage(700, 1000, 7);
        break;
      case Input::kThrottled:
        Throttled(0);  // the first cpu.stat is the baseline
        Throttled(6);
        break;
      case Input::kBarelyThrottled:
        Throttled(0);
        Throttled(1);
        break;
      case Input::kFloorRaised:
        lim().SetBounds(10, 64);
        break;
      case Input::kCeilingLowered:
        lim().SetBounds(1, 4);
        break;
    }
  }
};

constexpr auto kSlow = Phase::kSlowStart;
constexpr auto kAvoid = Phase::kAvoidance;
constexpr auto kNoCause = std::nullopt;

// clang-format off
const std::vector<Entry> kTable = {
    // slow start at 8
    {From::kSlowStart, Input::kAtMinimumReached, 16, LimitCause::kSlowStart, kSlow},
    {From::kSlowStart, Input::kAtMinimumNotReached, 8, kNoCause, kSlow},
    {From::kSlowStart, Input::kGrowEdge, 16, LimitCause::kSlowStart, kSlow},
    {From::kSlowStart, Input::kInBand, 8, kNoCause, kSlow},
    {From::kSlowStart, Input::kCutEdge, 8, kNoCause, kSlow},
    {From::kSlowStart, Input::kTwiceTheMinimum, 5, LimitCause::kLatency, kAvoid},
    {From::kSlowStart, Input::kFiveTimes, 4, LimitCause::kLatency, kAvoid},
    {From::kSlowStart, Input::kSlowAtTwoRunning, 4, LimitCause::kLatency, kAvoid},
    {From::kSlowStart, Input::kCpuPressure, 6, LimitCause::kCpuPressure, kAvoid, GrowthHold::kPressure},
    {From::kSlowStart, Input::kCpuNeighbourWaits, 6, LimitCause::kCpuPressure, kAvoid, GrowthHold::kPressure},
    {From::kSlowStart, Input::kCpuNoneWaiting, 8, kNoCause, kSlow, GrowthHold::kPressure},
    {From::kSlowStart, Input::kCpuWaitsThrottled, 8, kNoCause, kSlow, GrowthHold::kPressure},
    {From::kSlowStart, Input::kMemoryPressure, 6, LimitCause::kMemoryPressure, kAvoid, GrowthHold::kPressure},
    {From::kSlowStart, Input::kMemoryAtCut, 6, LimitCause::kMemoryUsage, kAvoid, GrowthHold::kMemoryUsage},
    {From::kSlowStart, Input::kMemoryAtHold, 8, kNoCause, kSlow, GrowthHold::kMemoryUsage},
    {From::kSlowStart, Input::kMemoryLow, 8, kNoCause, kSlow},
    {From::kSlowStart, Input::kMemoryFitsTenThenGrows, 10, LimitCause::kSlowStart, kSlow, GrowthHold::kMemoryUsage},
    {From::kSlowStart, Input::kMemoryFitsEight, 8, kNoCause, kSlow, GrowthHold::kMemoryUsage},
    {From::kSlowStart, Input::kThrottled, 8, kNoCause, kSlow, GrowthHold::kCpuThrottled},
    {From::kSlowStart, Input::kBarelyThrottled, 8, kNoCause, kSlow},
    {From::kSlowStart, Input::kFloorRaised, 10, LimitCause::kBounds, kSlow},
    {From::kSlowStart, Input::kCeilingLowered, 4, LimitCause::kBounds, kSlow},
    // avoidance at 8
    {From::kAvoidance, Input::kAtMinimumReached, 9, LimitCause::kHeadroom, kAvoid},
    {From::kAvoidance, Input::kAtMinimumNotReached, 8, kNoCause, kAvoid},
    {From::kAvoidance, Input::kGrowEdge, 9, LimitCause::kHeadroom, kAvoid},
    {From::kAvoidance, Input::kInBand, 8, kNoCause, kAvoid},
    {From::kAvoidance, Input::kCutEdge, 8, kNoCause, kAvoid},
    {From::kAvoidance, Input::kTwiceTheMinimum, 5, LimitCause::kLatency, kAvoid},
    {From::kAvoidance, Input::kFiveTimes, 4, LimitCause::kLatency, kAvoid},
    {From::kAvoidance, Input::kSlowAtTwoRunning, 4, LimitCause::kLatency, kAvoid},
    {From::kAvoidance, Input::kCpuPressure, 6, LimitCause::kCpuPressure, kAvoid, GrowthHold::kPressure},
    {From::kAvoidance, Input::kCpuNeighbourWaits, 6, LimitCause::kCpuPressure, kAvoid, GrowthHold::kPressure},
    {From::kAvoidance, Input::kCpuNoneWaiting, 8, kNoCause, kAvoid, GrowthHold::kPressure},
    {From::kAvoidance, Input::kCpuWaitsThrottled, 8, kNoCause, kAvoid, GrowthHold::kPressure},
    {From::kAvoidance, Input::kMemoryPressure, 6, LimitCause::kMemoryPressure, kAvoid, GrowthHold::kPressure},
    {From::kAvoidance, Input::kMemoryAtCut, 6, LimitCause::kMemoryUsage, kAvoid, GrowthHold::kMemoryUsage},
    {From::kAvoidance, Input::kMemoryAtHold, 8, kNoCause, kAvoid, GrowthHold::kMemoryUsage},
    {From::kAvoidance, Input::kMemoryLow, 8, kNoCause, kAvoid},
    {From::kAvoidance, Input::kMemoryFitsTenThenGrows, 9, LimitCause::kHeadroom, kAvoid},
    {From::kAvoidance, Input::kMemoryFitsEight, 8, kNoCause, kAvoid, GrowthHold::kMemoryUsage},
    {From::kAvoidance, Input::kThrottled, 8, kNoCause, kAvoid, GrowthHold::kCpuThrottled},
    {From::kAvoidance, Input::kBarelyThrottled, 8, kNoCause, kAvoid},
    {From::kAvoidance, Input::kFloorRaised, 10, LimitCause::kBounds, kAvoid},
    {From::kAvoidance, Input::kCeilingLowered, 4, LimitCause::kBounds, kAvoid},
    // at the floor (2): nothing goes below it, a cut still leaves slow start and holds growth;
    // a window within the tolerance is clean and joins the base (5 x 10 ms and 12.5: R 1.2)
    {From::kFloor, Input::kAtMinimumReached, 4, LimitCause::kSlowStart, kSlow},
    {From::kFloor, Input::kAtMinimumNotReached, 2, kNoCause, kSlow},
    {From::kFloor, Input::kGrowEdge, 4, LimitCause::kSlowStart, kSlow},
    {From::kFloor, Input::kInBand, 2, kNoCause, kSlow},
    {From::kFloor, Input::kCutEdge, 2, kNoCause, kSlow},
    {From::kFloor, Input::kTwiceTheMinimum, 2, kNoCause, kAvoid},
    {From::kFloor, Input::kFiveTimes, 2, kNoCause, kAvoid},
    {From::kFloor, Input::kSlowAtTwoRunning, 2, kNoCause, kAvoid},
    {From::kFloor, Input::kCpuPressure, 2, kNoCause, kAvoid, GrowthHold::kPressure},
    {From::kFloor, Input::kCpuNeighbourWaits, 2, kNoCause, kAvoid, GrowthHold::kPressure},
    {From::kFloor, Input::kCpuNoneWaiting, 2, kNoCause, kSlow, GrowthHold::kPressure},
    {From::kFloor, Input::kCpuWaitsThrottled, 2, kNoCause, kSlow, GrowthHold::kPressure},
    {From::kFloor, Input::kMemoryPressure, 2, kNoCause, kAvoid, GrowthHold::kPressure},
    {From::kFloor, Input::kMemoryAtCut, 2, kNoCause, kAvoid, GrowthHold::kMemoryUsage},
    {From::kFloor, Input::kMemoryAtHold, 2, kNoCause, kSlow, GrowthHold::kMemoryUsage},
    {From::kFloor, Input::kMemoryLow, 2, kNoCause, kSlow},
    {From::kFloor, Input::kMemoryFitsTenThenGrows, 4, LimitCause::kSlowStart, kSlow},
    {From::kFloor, Input::kMemoryFitsEight, 2, kNoCause, kSlow},
    {From::kFloor, Input::kThrottled, 2, kNoCause, kSlow, GrowthHold::kCpuThrottled},
    {From::kFloor, Input::kBarelyThrottled, 2, kNoCause, kSlow},
    {From::kFloor, Input::kFloorRaised, 10, LimitCause::kBounds, kSlow},
    {From::kFloor, Input::kCeilingLowered, 2, kNoCause, kSlow},
    // at the ceiling (8): nothing goes above it
    {From::kCeiling, Input::kAtMinimumReached, 8, kNoCause, kSlow},
    {From::kCeiling, Input::kAtMinimumNotReached, 8, kNoCause, kSlow},
    {From::kCeiling, Input::kGrowEdge, 8, kNoCause, kSlow},
    {From::kCeiling, Input::kInBand, 8, kNoCause, kSlow},
    {From::kCeiling, Input::kCutEdge, 8, kNoCause, kSlow},
    {From::kCeiling, Input::kTwiceTheMinimum, 5, LimitCause::kLatency, kAvoid},
    {From::kCeiling, Input::kFiveTimes, 4, LimitCause::kLatency, kAvoid},
    {From::kCeiling, Input::kSlowAtTwoRunning, 4, LimitCause::kLatency, kAvoid},
    {From::kCeiling, Input::kCpuPressure, 6, LimitCause::kCpuPressure, kAvoid, GrowthHold::kPressure},
    {From::kCeiling, Input::kCpuNeighbourWaits, 6, LimitCause::kCpuPressure, kAvoid, GrowthHold::kPressure},
    {From::kCeiling, Input::kCpuNoneWaiting, 8, kNoCause, kSlow, GrowthHold::kPressure},
    {From::kCeiling, Input::kCpuWaitsThrottled, 8, kNoCause, kSlow, GrowthHold::kPressure},
    {From::kCeiling, Input::kMemoryPressure, 6, LimitCause::kMemoryPressure, kAvoid, GrowthHold::kPressure},
    {From::kCeiling, Input::kMemoryAtCut, 6, LimitCause::kMemoryUsage, kAvoid, GrowthHold::kMemoryUsage},
    {From::kCeiling, Input::kMemoryAtHold, 8, kNoCause, kSlow, GrowthHold::kMemoryUsage},
    {From::kCeiling, Input::kMemoryLow, 8, kNoCause, kSlow},
    {From::kCeiling, Input::kMemoryFitsTenThenGrows, 8, kNoCause, kSlow},
    {From::kCeiling, Input::kMemoryFitsEight, 8, kNoCause, kSlow, GrowthHold::kMemoryUsage},
    {From::kCeiling, Input::kThrottled, 8, kNoCause, kSlow, GrowthHold::kCpuThrottled},
    {From::kCeiling, Input::kBarelyThrottled, 8, kNoCause, kSlow},
    {From::kCeiling, Input::kFloorRaised, 10, LimitCause::kBounds, kSlow},
    {From::kCeiling, Input::kCeilingLowered, 4, LimitCause::kBounds, kSlow},
};
// clang-format on

constexpr size_t kFromCount = 4;
constexpr size_t kInputCount = 22;

TEST_F(AdaptiveLimitTableTest, EveryEntry) {
  ASSERT_EQ(kTable.size(), kFromCount * kInputCount);
  std::set<std::pair<From, Input>> seen;
  for (const Entry& entry : kTable) {
    SCOPED_TRACE("from " + std::to_string(static_cast<int>(entry.from)) + ", input " +
                 std::to_string(static_cast<int>(entry.input)));
    EXPECT_TRUE(seen.insert({entry.from, entry.input}).second) << "listed twice";
    Arrange(entry.from);
    const uint32_t before = lim().limit();
    const size_t changes_before = lim().change_count();
    Apply(entry.input);
    EXPECT_EQ(lim().limit(), entry.limit);
    EXPECT_EQ(LastCause(changes_before), entry.cause);
    if (entry.cause) {
      EXPECT_EQ(lim().change(0).from, before);
      EXPECT_EQ(lim().change(0).to, entry.limit);
      EXPECT_EQ(lim().change(0).at_ms, clock_.NowMs());
    }
    EXPECT_EQ(lim().phase(), entry.phase) << AdaptiveLimit::PhaseName(lim().phase());
    EXPECT_EQ(lim().growth_hold(), entry.hold) << GrowthHoldName(lim().growth_hold());
  }
}

TEST_F(AdaptiveLimitTableTest, ChangesRecordTheRatioOrTheMemoryShare) {
  Arrange(From::kAvoidance);
  Busy(2.0);
  EXPECT_EQ(lim().change(0).permille, 2000u);
  EXPECT_EQ(lim().last_ratio_permille(), 2000u);
  lim().OnMemoryUsage(930, 1000, 0);
  EXPECT_EQ(lim().change(0).cause, LimitCause::kMemoryUsage);
  EXPECT_EQ(lim().change(0).permille, 930u);
  lim().OnPressure(Signal::kCpuPressure);
  EXPECT_EQ(lim().change(0).permille, 0u);
}

// A request dispatched before the limit fell ran at the concurrency the fall answered: its
// service time is not judged against the lower limit (a window of them would be cut again, and
// again: the cascade that took a limit from 12 to 3 in three windows on a noisy worker). From
// avoidance at 8, each input that lowers the limit, then a window of samples of requests
// dispatched just before it (not taken: no window closes, the limit stays) or just after it
// (taken: R 9.9, halved).
TEST_F(AdaptiveLimitTableTest, RequestsDispatchedBeforeAFallAreNotJudgedAtTheLowerLimit) {
  struct Row {
    Input fall;
    bool dispatched_before;
    uint32_t fallen_to;
    uint32_t limit_after;
  };
  const std::vector<Row> rows = {
      {Input::kTwiceTheMinimum, true, 5, 5}, {Input::kTwiceTheMinimum, false, 5, 2},
      {Input::kCpuPressure, true, 6, 6},     {Input::kCpuPressure, false, 6, 3},
      {Input::kMemoryPressure, true, 6, 6},  {Input::kMemoryPressure, false, 6, 3},
      {Input::kMemoryAtCut, true, 6, 6},     {Input::kMemoryAtCut, false, 6, 3},
      {Input::kCeilingLowered, true, 4, 4},  {Input::kCeilingLowered, false, 4, 2},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE("input " + std::to_string(static_cast<int>(row.fall)) +
                 (row.dispatched_before ? ", dispatched before" : ", dispatched after"));
    Arrange(From::kAvoidance);
    Apply(row.fall);
    ASSERT_EQ(lim().limit(), row.fallen_to);
    const uint64_t windows = lim().windows_closed();
    clock_.AdvanceMs(options_.window_ms);
    const uint64_t service_us =
        (options_.window_ms + (row.dispatched_before ? 1 : -1)) * 1000;  // R 10.1 or 9.9
    for (uint32_t i = 0; i < options_.window_samples; ++i) lim().OnSample(service_us, 8);
    EXPECT_EQ(lim().limit(), row.limit_after);
    EXPECT_EQ(lim().windows_closed(), windows + (row.dispatched_before ? 0 : 1));
  }
}

// ---------------------------------------------------------------------------------------------
// Stories.

TEST_F(AdaptiveLimitTest, StartsAtTheFloorWithoutABase) {
  options_.floor = 3;
  options_.ceiling = 10;
  Make();
  EXPECT_EQ(lim().limit(), 3u);
  EXPECT_EQ(lim().base_us(), std::nullopt);
  EXPECT_EQ(lim().change_count(), 0u);
  EXPECT_EQ(lim().phase(), Phase::kSlowStart);
}

// Until clean windows of 50 requests have measured the base, nothing is judged. A reload from a
// fixed limit leaves more requests running than the floor: their windows are not clean.
TEST_F(AdaptiveLimitTest, NothingIsJudgedBeforeCleanWindowsOfFiftyRequests) {
  Make();
  Window(5.0, 12);
  Window(0.5, 8);
  for (int i = 0; i < 4; ++i) Window(3.0, 1);
  EXPECT_EQ(lim().base_us(), std::nullopt);
  EXPECT_EQ(lim().limit(), 1u);
  EXPECT_EQ(lim().last_ratio_permille(), 0u);
  Window(3.0, 1);
  EXPECT_EQ(lim().base_us(), 3 * kBaseUs);
  EXPECT_EQ(lim().base_measured_at_ms(), clock_.NowMs());
  EXPECT_EQ(lim().last_ratio_permille(), 1000u);
  EXPECT_EQ(lim().limit(), 2u);  // R = 1 at the limit: slow start doubles
}

TEST_F(AdaptiveLimitTest, AWindowClosesOnlyWhenOldAndFullEnough) {
  Make();
  for (int i = 0; i < 30; ++i) lim().OnSample(kBaseUs, 4);  // many samples, no time
  EXPECT_EQ(lim().windows_closed(), 0u);
  clock_.AdvanceMs(options_.window_ms);
  lim().OnSample(kBaseUs, 4);
  EXPECT_EQ(lim().windows_closed(), 1u);
  clock_.AdvanceMs(10 * options_.window_ms);  // much time, too few samples
  for (uint32_t i = 0; i + 1 < options_.window_samples; ++i) lim().OnSample(kBaseUs, 4);
  EXPECT_EQ(lim().windows_closed(), 1u);
  lim().OnSample(kBaseUs, 4);
  EXPECT_EQ(lim().windows_closed(), 2u);
}

// At a knee of one request, each probe to 2 is undone by the window after it; the next probe
// waits 2 windows, then 4, 8, ... up to 64; a probe that holds ends the waiting.
TEST_F(AdaptiveLimitTest, FailedProbesWaitLongerEachTimeAndASuccessfulOneResetsTheWait) {
  Make();
  MeasureBase();  // slow start to 2
  Busy(1.4);      // holds
  Busy(2.0);      // to 2 x 1.25 / 2 = 1.25
  ASSERT_EQ(lim().limit(), 1u);
  std::vector<int> held;
  for (int attempt = 0; attempt < 7; ++attempt) {
    int windows = 0;
    while (Busy(1.0) == 1) {
      ASSERT_EQ(lim().growth_hold(), GrowthHold::kProbeBackoff);
      ++windows;
    }
    ASSERT_EQ(lim().change(0).cause, LimitCause::kHeadroom);
    held.push_back(windows);
    Busy(2.0);  // the probe fails
    ASSERT_EQ(lim().limit(), 1u);
  }
  EXPECT_EQ(held, (std::vector<int>{0, 1, 3, 7, 15, 31, 63}));
  // 64 is the longest wait.
  int windows = 0;
  while (Busy(1.0) == 1) ++windows;
  EXPECT_EQ(windows, 63);
  // This probe holds (R = 1.4, in the band): the wait is over.
  Busy(1.4);
  EXPECT_EQ(lim().limit(), 2u);
  EXPECT_EQ(Busy(1.0), 3u);
  EXPECT_EQ(lim().growth_hold(), GrowthHold::kNone);
}

TEST_F(AdaptiveLimitTest, OnlyCleanWindowsAtTheFloorMoveTheBase) {
  options_.tolerance = 4;  // no cuts: only the base is watched
  options_.floor = 2;
  options_.ceiling = 8;
  Make();
  MeasureBase(2);  // clean at the floor: base 10 ms
  const uint64_t measured_at = clock_.NowMs();
  // Busy windows twice as slow for longer than the horizon: not one of them may raise it, and no
  // faster busy window may lower it.
  const uint64_t until = clock_.NowMs() + 2 * options_.base_horizon_ms;
  while (clock_.NowMs() < until) Window(2.0, 8);
  Window(0.5, 3);
  EXPECT_EQ(lim().base_us(), kBaseUs);
  EXPECT_EQ(lim().base_measured_at_ms(), measured_at);
  // A clean window, 1.3x: with the old one out of the horizon, it is the base.
  Window(1.3, 2);
  EXPECT_EQ(lim().base_us(), 13'000u);
  // Clean windows of one eighth of the horizon are averaged.
  Window(1.1, 1);
  EXPECT_EQ(lim().base_us(), 12'000u);
  EXPECT_EQ(lim().base_measured_at_ms(), clock_.NowMs());
}

TEST_F(AdaptiveLimitTest, TheBaseIsTheLowestAverageWithinTheHorizon) {
  options_.tolerance = 4;
  Make();
  MeasureBase();
  clock_.AdvanceMs(options_.base_horizon_ms / 2);
  for (int i = 0; i < 5; ++i) Window(1.4, 1);
  EXPECT_EQ(lim().base_us(), kBaseUs);
  // Once the first has aged out of the horizon, the second is the lowest.
  clock_.AdvanceMs(options_.base_horizon_ms / 2);
  for (int i = 0; i < 5; ++i) Window(1.5, 1);
  EXPECT_EQ(lim().base_us(), 14'000u);
}

// A slice of the horizon counts as a base of its own only once it holds 50 requests, as the
// first base does: one fast window of 10 would be the base, and every window judged against it
// slower than it is (here a window in the band would be cut).
TEST_F(AdaptiveLimitTest, AFewFastRequestsInASliceDoNotBecomeTheBase) {
  Make();
  MeasureBase();  // 50 requests at 10 ms; slow start to 2
  ASSERT_EQ(lim().limit(), 2u);
  clock_.AdvanceMs(options_.base_horizon_ms / 8);
  Window(0.6, 1);  // a new slice: 10 requests at 6 ms
  EXPECT_EQ(lim().base_us(), kBaseUs);
  EXPECT_EQ(Busy(1.4), 2u);  // R 1.4 against 10 ms: in the band (against 6 ms, 2.33: a cut)
  EXPECT_EQ(lim().last_ratio_permille(), 1400u);
  // With no slice of 50 in the horizon, the slices are pooled.
  clock_.AdvanceMs(options_.base_horizon_ms);
  Window(0.9, 1);
  Window(1.3, 1);
  EXPECT_EQ(lim().base_us(), 11'000u);
  // Once the slice holds 50, its own average is the base.
  for (int i = 0; i < 3; ++i) Window(0.9, 1);
  EXPECT_EQ(lim().base_us(), 9'800u);
}

// The work gets twice as slow (a new worker, say). The base measured before is too low: the limit
// falls to the base's concurrency, where two windows in a row prove it stale; it is measured anew
// and slow start finds the knee again. A worker of 4 parallel units (service time x c/4 past 4).
TEST_F(AdaptiveLimitTest, AStaleBaseIsMeasuredAnewAtItsConcurrencyAndSlowStartResumes) {
  auto slower = [](uint32_t c) { return 2.0 * std::max(1.0, c / 4.0); };
  GrowTo(8);  // base 10 ms
  std::vector<uint32_t> limits;
  for (int i = 0; i < 16; ++i) limits.push_back(Busy(slower(lim().limit())));
  // 8: R 4 -> halved to 4; R 2 -> 2.5; R 2 -> 1.25 (the floor, 1); at 1 the first four stale
  // windows cut (nothing left to cut), the fifth (50 requests) is the new base: 20 ms; slow
  // start 2, 4, 8; R 2 -> 5, a failed probe, so one window waits; +1 to 6 at R 1.25; R 1.5 holds.
  EXPECT_EQ(limits, (std::vector<uint32_t>{4, 2, 1, 1, 1, 1, 1, 2, 4, 8, 5, 5, 6, 6, 6, 6}));
  EXPECT_EQ(lim().base_us(), 2 * kBaseUs);
  EXPECT_EQ(lim().phase(), Phase::kAvoidance);
}

TEST_F(AdaptiveLimitTest, APauseOfTheWorkerDoesNotReplaceTheBase) {
  Make();
  MeasureBase();
  for (int i = 0; i < 4; ++i) Window(3.0, 1);  // four slow clean windows: a pause
  Window(1.0, 1);
  for (int i = 0; i < 4; ++i) Window(3.0, 1);
  EXPECT_EQ(lim().base_us(), kBaseUs);
  Window(3.0, 1);  // the fifth in a row, 50 requests: the base was stale
  EXPECT_EQ(lim().base_us(), 3 * kBaseUs);
  EXPECT_EQ(lim().phase(), Phase::kSlowStart);
}

// A cell its own quota holds (throttled in half its periods or more) is spared at a cpu event,
// whoever waits or whether or not it was judged: its CPU use is its quota at any concurrency that
// keeps the quota busy, and a cut would only leave some of it idle. Once an evaluation finds it
// no longer throttled, events cut again.
TEST_F(AdaptiveLimitTest, ACpuEventSparesACellItsOwnQuotaThrottlesUntilItIsNoLongerThrottled) {
  GrowTo(8);
  Throttled(0);
  Throttled(7);
  EXPECT_EQ(lim().growth_hold(), GrowthHold::kCpuThrottled);
  EXPECT_EQ(lim().OnPressure(Signal::kCpuPressure, CpuNeighbours::kWaiting), 8u);
  EXPECT_EQ(lim().OnPressure(Signal::kCpuPressure, CpuNeighbours::kUnknown), 8u);
  EXPECT_EQ(lim().cpu_pressure_spared(), 2u);
  EXPECT_EQ(lim().changes_by(LimitCause::kCpuPressure), 0u);
  EXPECT_EQ(lim().OnPressure(Signal::kMemoryPressure), 6u) << "memory events cut regardless";
  Throttled(2);  // 2 of 10: no longer held by its quota
  EXPECT_EQ(lim().OnPressure(Signal::kCpuPressure, CpuNeighbours::kWaiting), 4u);
  EXPECT_EQ(lim().changes_by(LimitCause::kCpuPressure), 1u);
}

// Whose CPU: an event no other cell waits behind holds growth for its time and is counted
// spared; one with a waiting neighbour, or unjudged, cuts; memory events cut whatever is said.
TEST_F(AdaptiveLimitTest, ACpuEventCutsOnlyWhenAnotherCellWaitsAndIsCountedSparedOtherwise) {
  GrowTo(8);
  EXPECT_EQ(lim().OnPressure(Signal::kCpuPressure, CpuNeighbours::kNoneWaiting), 8u);
  EXPECT_EQ(lim().OnPressure(Signal::kCpuPressure, CpuNeighbours::kNoneWaiting), 8u);
  EXPECT_EQ(lim().cpu_pressure_spared(), 2u);
  EXPECT_EQ(lim().growth_hold(), GrowthHold::kPressure);
  EXPECT_EQ(lim().changes_by(LimitCause::kCpuPressure), 0u);
  clock_.AdvanceMs(options_.pressure_hold_ms - options_.window_ms - 1);
  EXPECT_EQ(Busy(1.0), 8u);   // still held
  EXPECT_EQ(Busy(1.0), 16u);  // the hold is over; no cut left slow start
  EXPECT_EQ(lim().OnPressure(Signal::kCpuPressure, CpuNeighbours::kWaiting), 12u);
  EXPECT_EQ(lim().OnPressure(Signal::kCpuPressure, CpuNeighbours::kUnknown), 9u);
  EXPECT_EQ(lim().OnPressure(Signal::kMemoryPressure, CpuNeighbours::kNoneWaiting), 6u);
  EXPECT_EQ(lim().changes_by(LimitCause::kCpuPressure), 2u);
  EXPECT_EQ(lim().changes_by(LimitCause::kMemoryPressure), 1u);
  EXPECT_EQ(lim().cpu_pressure_spared(), 2u);
}

TEST_F(AdaptiveLimitTest, APressureHoldEndsAfterItsTime) {
  GrowTo(8);
  lim().OnPressure(Signal::kMemoryPressure);
  ASSERT_EQ(lim().limit(), 6u);
  clock_.AdvanceMs(options_.pressure_hold_ms - options_.window_ms - 1);
  EXPECT_EQ(Busy(1.0), 6u);
  EXPECT_EQ(lim().growth_hold(), GrowthHold::kPressure);
  EXPECT_EQ(Busy(1.0), 7u);  // now past the hold; + 1: a cut ended slow start
  // 7 is the memory ceiling (the memory trigger cut at 8): the hold that remains is its own.
  EXPECT_EQ(lim().growth_hold(), GrowthHold::kMemoryCut);
}

TEST_F(AdaptiveLimitTest, SustainedPressureCutsOnEveryEventDownToTheFloor) {
  StartAt(40, /*floor=*/2);
  std::vector<uint32_t> limits;
  for (int i = 0; i < 11; ++i) {
    limits.push_back(lim().OnPressure(Signal::kCpuPressure));
    clock_.AdvanceMs(1000);  // the kernel's one event per trigger window
  }
  EXPECT_EQ(limits, (std::vector<uint32_t>{30, 22, 16, 12, 9, 7, 5, 4, 3, 2, 2}));
  EXPECT_EQ(lim().changes_by(LimitCause::kCpuPressure), 10u);
}

TEST_F(AdaptiveLimitTest, MemoryNearTheMaxCutsAtMostOncePerInterval) {
  StartAt(40, /*floor=*/1);
  EXPECT_EQ(lim().OnMemoryUsage(870, 1000, 0), 30u);
  clock_.AdvanceMs(options_.memory_cut_interval_ms - 1);
  EXPECT_EQ(lim().OnMemoryUsage(990, 1000, 0), 30u);  // the first cut has not shown yet
  EXPECT_EQ(lim().growth_hold(), GrowthHold::kMemoryUsage);
  clock_.AdvanceMs(1);
  EXPECT_EQ(lim().OnMemoryUsage(870, 1000, 0), 22u);
  EXPECT_EQ(lim().memory_permille(), 870u);
  lim().OnMemoryUsage(600, 1000, 0);
  EXPECT_EQ(lim().growth_hold(), GrowthHold::kNone);
}

// The memory-bound bench cell's shape: the worker's own 5 MiB and 6 MiB per request, memory.max
// 64 MiB. The fit (the cut at 85%: 54.4 MiB) is 8, where 9 would take the working set to 59.
TEST_F(AdaptiveLimitTest, TheMemoryFitTakesTheLargestRecentShareAndForgetsOlderOnes) {
  constexpr uint64_t kMiB = 1 << 20;
  constexpr uint64_t kMax = 64 * kMiB;
  options_.ceiling = 64;
  GrowTo(4);
  EXPECT_FALSE(lim().memory_fit().has_value());
  lim().OnMemoryUsage((5 + 6 * 4) * kMiB, kMax, 4);  // 7.25 MiB a request: 54.4 / 7.25 fits 7
  EXPECT_EQ(lim().memory_fit(), 7u);
  lim().OnMemoryUsage((5 + 6) * kMiB, kMax, 1);  // 11 MiB a request (the worker's own share)
  EXPECT_EQ(lim().memory_fit(), 4u);
  EXPECT_EQ(lim().growth_hold(), GrowthHold::kMemoryUsage);
  lim().OnMemoryUsage(5 * kMiB, kMax, 0);  // nothing running: no share, the fit stays
  EXPECT_EQ(lim().memory_fit(), 4u);
  // Eight samples at 8 running push the share of 11 out of the ring: 53 / 8 = 6.6 MiB fits 8.
  for (int i = 0; i < 8; ++i) lim().OnMemoryUsage((5 + 6 * 8) * kMiB, kMax, 8);
  EXPECT_EQ(lim().memory_fit(), 8u);
  EXPECT_EQ(lim().growth_hold(), GrowthHold::kNone);  // the limit is 4: it may grow to 8
  EXPECT_EQ(lim().memory_permille(), 828u);  // past the 750 that held growth before the fit
}

// The memory-bound bench cell's story: 8 requests fit, the fit lets the limit try 9, and the
// working set passes the cut there. The limit climbs back to 8 and stays for the probe wait.
TEST_F(AdaptiveLimitTest, AMemoryCutHoldsGrowthOneBelowWhereItCameUntilItsWaitEnds) {
  options_.ceiling = 64;
  GrowTo(8);
  Busy(1.0);  // 8 -> 16 by slow start
  ASSERT_EQ(lim().limit(), 16u);
  EXPECT_FALSE(lim().memory_ceiling().has_value());
  lim().OnMemoryUsage(900, 1000, 0);  // cut at 16: 12, the ceiling 15
  ASSERT_EQ(lim().limit(), 12u);
  EXPECT_EQ(lim().memory_ceiling(), 15u);
  EXPECT_EQ(lim().memory_ceiling_left_ms(), 30'000u);
  lim().OnMemoryUsage(500, 1000, 0);  // the requests that held it ended
  for (int i = 0; i < 10; ++i) Busy(1.0);
  EXPECT_EQ(lim().limit(), 15u) << "+1 a window, up to the ceiling and no further";
  EXPECT_EQ(lim().growth_hold(), GrowthHold::kMemoryCut);
  Throttled(10);
  EXPECT_EQ(lim().growth_hold(), GrowthHold::kMemoryCut) << "reported before throttling";
  Throttled(0);
  // The wait ends: growth passes the ceiling (a probe), and a cut there doubles the next wait.
  clock_.AdvanceMs(lim().memory_ceiling_left_ms());
  EXPECT_FALSE(lim().memory_ceiling().has_value());
  EXPECT_EQ(lim().growth_hold(), GrowthHold::kNone);
  EXPECT_EQ(Busy(1.0), 16u);
  lim().OnMemoryUsage(900, 1000, 0);
  EXPECT_EQ(lim().limit(), 12u);
  EXPECT_EQ(lim().memory_ceiling(), 15u);
  EXPECT_EQ(lim().memory_ceiling_left_ms(), 60'000u);
  // Failed again and again: the wait doubles up to its most.
  for (const uint64_t wait : {120'000, 240'000, 480'000, 480'000}) {
    clock_.AdvanceMs(lim().memory_ceiling_left_ms());
    lim().OnMemoryUsage(500, 1000, 0);
    while (lim().limit() < 16) Busy(1.0);
    lim().OnMemoryUsage(900, 1000, 0);
    EXPECT_EQ(lim().memory_ceiling_left_ms(), wait);
  }
}

TEST_F(AdaptiveLimitTest, TheMemoryCeilingMovesOnlyAtACutAtOrAboveItWhileItHolds) {
  options_.ceiling = 64;
  GrowTo(16);
  lim().OnMemoryUsage(900, 1000, 0);  // 16 -> 12, ceiling 15
  ASSERT_EQ(lim().memory_ceiling(), 15u);
  // The overshoot is still clearing: a memory trigger cuts the limit, the ceiling stays.
  clock_.AdvanceMs(500);
  lim().OnPressure(Signal::kMemoryPressure);
  EXPECT_EQ(lim().limit(), 9u);
  EXPECT_EQ(lim().memory_ceiling(), 15u);
  EXPECT_EQ(lim().memory_ceiling_left_ms(), 29'500u) << "nor is its hold renewed";
  // Back at the ceiling, a cut there (the requests grew) lowers it and renews its hold, with the
  // same wait: it was no probe.
  clock_.AdvanceMs(2'000);  // past the pressure hold
  lim().OnMemoryUsage(500, 1000, 0);
  while (lim().limit() < 15) Busy(1.0);
  EXPECT_EQ(lim().growth_hold(), GrowthHold::kMemoryCut);
  lim().OnMemoryUsage(900, 1000, 0);
  EXPECT_EQ(lim().limit(), 11u);
  EXPECT_EQ(lim().memory_ceiling(), 14u);
  EXPECT_EQ(lim().memory_ceiling_left_ms(), 30'000u);
  // Once its wait is over, a cut at or below it (not a probe) keeps the wait as well.
  clock_.AdvanceMs(30'000);
  lim().OnMemoryUsage(900, 1000, 0);
  EXPECT_EQ(lim().limit(), 8u);
  EXPECT_EQ(lim().memory_ceiling(), 10u);
  EXPECT_EQ(lim().memory_ceiling_left_ms(), 30'000u);
  // Other causes leave it alone.
  lim().OnPressure(Signal::kCpuPressure);
  EXPECT_EQ(lim().memory_ceiling(), 10u);
  EXPECT_EQ(lim().memory_ceiling_left_ms(), 30'000u);
}

TEST_F(AdaptiveLimitTest, CpuStatIsJudgedOverEnoughPeriodsAndRestartsWhenItsCountersGoBack) {
  GrowTo(8);
  lim().OnCpuStat(100, 0);  // baseline
  lim().OnCpuStat(103, 3);  // 3 periods: too few to judge
  EXPECT_EQ(lim().growth_hold(), GrowthHold::kNone);
  lim().OnCpuStat(106, 6);  // 6 periods, all throttled
  EXPECT_EQ(lim().growth_hold(), GrowthHold::kCpuThrottled);
  EXPECT_EQ(lim().throttled_permille(), 1000u);
  lim().OnCpuStat(106, 6);  // not runnable since: idle, not throttled
  EXPECT_EQ(lim().growth_hold(), GrowthHold::kNone);
  lim().OnCpuStat(116, 16);  // throttled again
  ASSERT_EQ(lim().growth_hold(), GrowthHold::kCpuThrottled);
  lim().OnCpuStat(5, 5);  // a new cgroup: only a new baseline
  EXPECT_EQ(lim().growth_hold(), GrowthHold::kCpuThrottled);
  lim().OnCpuStat(15, 6);  // 1 of 10
  EXPECT_EQ(lim().growth_hold(), GrowthHold::kNone);
  EXPECT_EQ(lim().throttled_permille(), 100u);
  EXPECT_EQ(lim().limit(), 8u);  // throttling never cuts
}

TEST_F(AdaptiveLimitTest, HoldsAreReportedInOneOrder) {
  GrowTo(8);
  Busy(1.0);  // 16
  Busy(2.0);  // a failed probe: backoff
  ASSERT_EQ(lim().growth_hold(), GrowthHold::kProbeBackoff);
  lim().OnCpuStat(0, 0);
  lim().OnCpuStat(10, 10);
  EXPECT_EQ(lim().growth_hold(), GrowthHold::kCpuThrottled);
  lim().OnMemoryUsage(800, 1000, 0);
  EXPECT_EQ(lim().growth_hold(), GrowthHold::kMemoryUsage);
  lim().OnPressure(Signal::kCpuPressure);
  EXPECT_EQ(lim().growth_hold(), GrowthHold::kPressure);
}

TEST_F(AdaptiveLimitTest, TheRingKeepsTheLastChangesNewestFirstAndTheCountsKeepThemAll) {
  options_.ceiling = 1000;
  StartAt(1000, /*floor=*/1);
  for (int i = 0; i < 20; ++i) {
    clock_.AdvanceMs(1000);
    lim().OnPressure(i % 2 == 0 ? Signal::kCpuPressure : Signal::kMemoryPressure);
  }
  ASSERT_EQ(lim().change_count(), AdaptiveLimit::kRecentChanges);
  for (size_t i = 0; i < AdaptiveLimit::kRecentChanges; ++i) {
    EXPECT_EQ(lim().change(i).at_ms, clock_.NowMs() - 1000 * i);
    if (i > 0) {
      EXPECT_EQ(lim().change(i).to, lim().change(i - 1).from);
    }
  }
  EXPECT_EQ(lim().change(0).to, lim().limit());
  EXPECT_EQ(lim().change(0).cause, LimitCause::kMemoryPressure);
  EXPECT_EQ(lim().changes_by(LimitCause::kCpuPressure), 10u);
  EXPECT_EQ(lim().changes_by(LimitCause::kMemoryPressure), 10u);
}

TEST_F(AdaptiveLimitTest, SamplesNeverAllocate) {
  Make();
  testing::AllocationCounter counter;
  for (int i = 0; i < 5000; ++i) {
    if (i % 10 == 0) clock_.AdvanceMs(50);
    lim().OnSample(kBaseUs * (1 + static_cast<uint64_t>(i % 3)), 1 + static_cast<uint32_t>(i % 8));
  }
  EXPECT_EQ(counter.allocations(), 0u);
  EXPECT_GT(lim().windows_closed(), 100u);
}

TEST_F(AdaptiveLimitTest, ANewToleranceAppliesFromTheNextWindowAndKeepsTheBase) {
  GrowTo(8);
  lim().SetTolerance(1.0);    // cut above R 2, grow at R <= 1.5
  EXPECT_EQ(Busy(1.9), 8u);   // would have been cut at 0.5
  EXPECT_EQ(Busy(1.5), 16u);  // still slow start: doubles
  EXPECT_EQ(lim().base_us(), kBaseUs);
  EXPECT_EQ(lim().options().tolerance, 1.0);
}

TEST_F(AdaptiveLimitTest, LiveSignalsAreWhatTheOwnerSays) {
  Make();
  EXPECT_TRUE(lim().signal_live(Signal::kServiceTime));
  EXPECT_FALSE(lim().signal_live(Signal::kMemoryPressure));
  lim().SetSignalLive(Signal::kMemoryPressure, true);
  lim().SetSignalLive(Signal::kServiceTime, false);
  EXPECT_TRUE(lim().signal_live(Signal::kMemoryPressure));
  EXPECT_FALSE(lim().signal_live(Signal::kServiceTime));
  EXPECT_FALSE(lim().signal_live(Signal::kCpuThrottling));
}

// A re-exec (docs/reexec.md): the next image's controller, on a clock that started afresh, goes
// on from the limit, phase, base and changes of the previous one, and judges as it would have.
TEST_F(AdaptiveLimitTest, ACarriedControllerGoesOnFromItsLimitBaseAndChanges) {
  GrowTo(8);
  Busy(2.0);  // a latency cut: 8 x 1.25 / 2 = 5
  ASSERT_EQ(lim().limit(), 5u);
  clock_.AdvanceMs(300);
  const AdaptiveLimit::Carried carried = lim().Carry();
  EXPECT_EQ(carried.changes.size(), lim().change_count());
  EXPECT_EQ(carried.changes[0].at_ms, 300u) << "an age, not a clock reading";
  EXPECT_EQ(carried.base_age_ms, clock_.NowMs() - lim().base_measured_at_ms());

  FakeClock next_clock{7};  // the next image's clock, below every age
  AdaptiveLimit next(&next_clock, options_);
  next.Restore(carried);
  EXPECT_EQ(next.limit(), 5u);
  EXPECT_EQ(next.phase(), Phase::kAvoidance);
  EXPECT_EQ(next.base_us(), kBaseUs);
  EXPECT_EQ(next.base_measured_at_ms(), 0u);
  ASSERT_EQ(next.change_count(), lim().change_count());
  for (size_t i = 0; i < next.change_count(); ++i) {
    EXPECT_EQ(next.change(i).from, lim().change(i).from) << i;
    EXPECT_EQ(next.change(i).to, lim().change(i).to) << i;
    EXPECT_EQ(next.change(i).cause, lim().change(i).cause) << i;
    EXPECT_EQ(next.change(i).permille, lim().change(i).permille) << i;
  }
  for (size_t i = 0; i < kLimitCauseCount; ++i) {
    const auto cause = static_cast<LimitCause>(i);
    EXPECT_EQ(next.changes_by(cause), lim().changes_by(cause)) << LimitCauseName(cause);
  }
  EXPECT_EQ(next.changes_by(LimitCause::kSlowStart), 3u);
  EXPECT_EQ(next.changes_by(LimitCause::kLatency), 1u);

  // Judged against the carried base at once: no window of 50 clean requests first. A window at
  // the minimum that reached the limit grows it by one (avoidance), as the old one would have.
  next_clock.AdvanceMs(options_.window_ms);
  for (uint32_t i = 0; i < options_.window_samples; ++i) next.OnSample(kBaseUs, 5);
  EXPECT_EQ(next.limit(), 6u);
  EXPECT_EQ(next.change(0).cause, LimitCause::kHeadroom);
  EXPECT_EQ(next.changes_by(LimitCause::kHeadroom), 1u);
}

// A controller that had not measured its base yet carries none: the next image measures it.
TEST_F(AdaptiveLimitTest, ACarriedControllerWithoutABaseStillMeasuresOne) {
  options_.floor = 2;
  Make();
  Window(1.0, 1);
  const AdaptiveLimit::Carried carried = lim().Carry();
  FakeClock next_clock{kStartMs};
  AdaptiveLimit next(&next_clock, options_);
  next.Restore(carried);
  EXPECT_EQ(next.limit(), 2u);
  EXPECT_EQ(next.base_us(), std::nullopt);
  EXPECT_EQ(next.change_count(), 0u);
  EXPECT_EQ(next.phase(), Phase::kSlowStart);
}

TEST(AdaptiveLimitNames, EveryCauseHoldAndSignalHasItsOwnName) {
  std::set<std::string_view> names;
  for (size_t i = 0; i < kLimitCauseCount; ++i) {
    const auto cause = static_cast<LimitCause>(i);
    EXPECT_TRUE(names.insert(LimitCauseName(cause)).second) << LimitCauseName(cause);
    EXPECT_NE(LimitCauseText(cause), "unknown");
  }
  EXPECT_EQ(LimitCauseText(LimitCause::kMemoryPressure), "memory pressure trigger");
  names.clear();
  for (size_t i = 0; i < kSignalCount; ++i) {
    EXPECT_TRUE(names.insert(SignalName(static_cast<Signal>(i))).second);
  }
  EXPECT_EQ(SignalName(static_cast<Signal>(kSignalCount - 1)), "memory_usage");
  EXPECT_EQ(GrowthHoldName(GrowthHold::kProbeBackoff), "probe_backoff");
  EXPECT_EQ(AdaptiveLimit::PhaseName(Phase::kAvoidance), "avoidance");
}

TEST(AdaptiveLimitDecisions, TheCpuTriggerOnlyWhereTheQuotaIsAtLeastOneCpu) {
  EXPECT_TRUE(RegistersCpuTrigger(std::nullopt, 100'000));
  EXPECT_TRUE(RegistersCpuTrigger(100'000, 100'000));
  EXPECT_TRUE(RegistersCpuTrigger(250'000, 100'000));
  EXPECT_FALSE(RegistersCpuTrigger(20'000, 100'000));
  EXPECT_FALSE(RegistersCpuTrigger(99'999, 100'000));
}

TEST(AdaptiveLimitDecisions, MemoryHighIsNinetyPercentOfMemoryMaxInWholePages) {
  EXPECT_EQ(AdaptiveMemoryHigh(256 << 20), 241'590'272u);  // 230.4 MiB, rounded down to pages
  EXPECT_EQ(AdaptiveMemoryHigh(241'590'272u) % 4096, 0u);
  EXPECT_EQ(AdaptiveMemoryHigh(1'000'000), 897'024u);
}

}  // namespace
}  // namespace bulkhead::admission
