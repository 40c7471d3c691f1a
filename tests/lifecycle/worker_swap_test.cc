// SPDX-License-Identifier: MIT
// WorkerSwap alone: each phase's deadline and what each event does, with the caller's ms.
#include "lifecycle/worker_swap.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace bulkhead::lifecycle {
namespace {

using Phase = WorkerSwap::Phase;
using Type = WorkerSwap::Action::Type;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

WorkerSwap::Action Of(Type type, int signal = 0) {
  return WorkerSwap::Action{.type = type, .signal = signal};
}

WorkerSwap Swap() {
  return WorkerSwap(WorkerSwap::Options{
      .start_timeout_ms = 1000, .stop_timeout_ms = 5000, .stop_signal = SIGINT});
}

TEST(WorkerSwap, EachPhaseHasItsDeadline) {
  WorkerSwap swap = Swap();
  EXPECT_EQ(swap.Deadline(), 0u);
  EXPECT_THAT(swap.Begin(100), IsEmpty());
  EXPECT_EQ(swap.phase(), Phase::kStarting);
  EXPECT_EQ(swap.Deadline(), 1100u) << "start_timeout after the spawn";
  EXPECT_THAT(swap.NextReady(300), ElementsAre(Of(Type::kHandover)));
  EXPECT_EQ(swap.Deadline(), 5300u) << "stop_timeout after the handover";
  EXPECT_THAT(swap.PreviousDrained(), ElementsAre(Of(Type::kSignalPrevious, SIGINT)));
  EXPECT_EQ(swap.Deadline(), 5300u) << "the drain and the stop share stop_timeout";
  EXPECT_THAT(swap.OnTimer(5299), IsEmpty());
  EXPECT_THAT(swap.OnTimer(5300), ElementsAre(Of(Type::kKillPrevious)));
  EXPECT_EQ(swap.phase(), Phase::kKilled);
  EXPECT_EQ(swap.Deadline(), 0u);
  swap.PreviousExited();
  EXPECT_EQ(swap.phase(), Phase::kIdle);
  EXPECT_TRUE(swap.failure().empty());
}

TEST(WorkerSwap, AStartTimeoutOfZeroWaitsForever) {
  WorkerSwap swap(
      WorkerSwap::Options{.start_timeout_ms = 0, .stop_timeout_ms = 10, .stop_signal = SIGTERM});
  swap.Begin(0);
  EXPECT_EQ(swap.Deadline(), 0u);
  EXPECT_THAT(swap.OnTimer(1'000'000), IsEmpty());
}

TEST(WorkerSwap, ADrainThatUsesAllOfStopTimeoutEndsInSigkillWithoutStopSignal) {
  WorkerSwap swap = Swap();
  swap.Begin(0);
  swap.NextReady(0);
  EXPECT_THAT(swap.OnTimer(5000), ElementsAre(Of(Type::kKillPrevious)));
  EXPECT_THAT(swap.PreviousDrained(), IsEmpty()) << "too late: it was killed";
}

TEST(WorkerSwap, ANextWorkerThatFailsIsKilledAndSaysWhy) {
  WorkerSwap swap = Swap();
  swap.Begin(0);
  EXPECT_THAT(swap.OnTimer(1000), ElementsAre(Of(Type::kKillNext)));
  EXPECT_EQ(swap.phase(), Phase::kAbandoning);
  EXPECT_THAT(swap.NextReady(1001), IsEmpty()) << "a late READY=1 changes nothing";
  EXPECT_THAT(swap.NextExited("signal 9"), IsEmpty());
  EXPECT_EQ(swap.phase(), Phase::kIdle);
  EXPECT_EQ(swap.failure(),
            "the next worker was not ready within start_timeout (1000 ms); the previous worker "
            "serves on");
  swap.Begin(2000);
  EXPECT_TRUE(swap.failure().empty()) << "kept until the next swap";
}

TEST(WorkerSwap, CancelBeforeTheHandoverKillsTheNextOneAndIsIgnoredAfter) {
  WorkerSwap swap = Swap();
  swap.Begin(0);
  EXPECT_THAT(swap.Cancel("the serving worker is stopping"), ElementsAre(Of(Type::kKillNext)));
  swap.NextExited("signal 9");
  swap.Begin(10);
  swap.NextReady(20);
  EXPECT_THAT(swap.Cancel("x"), IsEmpty());
  EXPECT_EQ(swap.phase(), Phase::kDraining);
}

TEST(WorkerSwap, ACancelledSwapIsNoFailureAndAFailedOneSaysWhy) {
  WorkerSwap swap = Swap();
  swap.Begin(0);
  EXPECT_THAT(swap.Cancel("the cell restarts without overlap"), ElementsAre(Of(Type::kKillNext)));
  EXPECT_EQ(swap.phase(), Phase::kAbandoning);
  EXPECT_TRUE(swap.failure().empty()) << "superseded, not failed: " << swap.failure();
  EXPECT_EQ(swap.dropped(), "the cell restarts without overlap");
  EXPECT_EQ(swap.Detail(),
            "restart cancelled: the cell restarts without overlap; waiting for the next worker's "
            "end");
  swap.NextExited("signal 9");
  EXPECT_TRUE(swap.failure().empty());

  swap.Begin(10);
  EXPECT_TRUE(swap.dropped().empty()) << "kept until the next swap";
  EXPECT_THAT(swap.Fail("cannot hand the worker socket over: rename: EACCES"),
              ElementsAre(Of(Type::kKillNext)));
  EXPECT_EQ(swap.failure(),
            "cannot hand the worker socket over: rename: EACCES; the previous worker serves on");
  swap.NextExited("signal 9");
  swap.ForgetFailure();
  EXPECT_TRUE(swap.failure().empty());
}

}  // namespace
}  // namespace bulkhead::lifecycle
