// SPDX-License-Identifier: MIT
#include "admission/bulkhead.h"

#include <gtest/gtest.h>

#include <deque>
#include <random>
#include <vector>

namespace bulkhead::admission {
namespace {

using Decision = Bulkhead::Decision;
using State = AdmissionEntry::State;

Bulkhead::Limits MakeLimits(uint32_t slots, uint32_t queue, uint64_t timeout_ms = 500) {
  return Bulkhead::Limits{slots, queue, timeout_ms};
}

// Drains whatever a test left so the destructor's leak check passes only for tidy tests.
void Drain(Bulkhead* b, std::vector<AdmissionEntry>& entries) {
  for (auto& e : entries) {
    if (e.admission_state() == State::kQueued) b->Cancel(&e);
  }
  for (auto& e : entries) {
    if (e.admission_state() == State::kRunning) b->Finish(&e);
  }
}

TEST(Bulkhead, RunsUpToMaxConcurrentThenQueuesThenRejects) {
  Bulkhead b(MakeLimits(2, 1));
  b.SetOpen(true);
  std::vector<AdmissionEntry> e(4);
  EXPECT_EQ(b.Admit(&e[0], 0), Decision::kRun);
  EXPECT_EQ(b.Admit(&e[1], 0), Decision::kRun);
  EXPECT_EQ(b.Admit(&e[2], 0), Decision::kQueued);
  EXPECT_EQ(b.Admit(&e[3], 0), Decision::kRejectedFull);
  EXPECT_EQ(b.running(), 2u);
  EXPECT_EQ(b.queued(), 1u);
  EXPECT_EQ(e[3].admission_state(), State::kIdle);
  Drain(&b, e);
}

TEST(Bulkhead, FinishStartsQueuedEntryInFifoOrder) {
  Bulkhead b(MakeLimits(1, 3));
  b.SetOpen(true);
  std::vector<AdmissionEntry> e(4);
  ASSERT_EQ(b.Admit(&e[0], 0), Decision::kRun);
  for (int i = 1; i < 4; ++i) ASSERT_EQ(b.Admit(&e[i], i), Decision::kQueued);
  EXPECT_EQ(b.StartNext(), nullptr);  // slot still taken
  for (int i = 1; i < 4; ++i) {
    b.Finish(&e[i - 1]);
    EXPECT_EQ(b.StartNext(), &e[i]);
    EXPECT_EQ(b.StartNext(), nullptr);
    EXPECT_EQ(e[i].admission_state(), State::kRunning);
  }
  EXPECT_EQ(b.queued(), 0u);
  Drain(&b, e);
}

TEST(Bulkhead, NewArrivalDoesNotOvertakeQueue) {
  Bulkhead b(MakeLimits(1, 2));
  b.SetOpen(true);
  std::vector<AdmissionEntry> e(3);
  ASSERT_EQ(b.Admit(&e[0], 0), Decision::kRun);
  ASSERT_EQ(b.Admit(&e[1], 0), Decision::kQueued);
  b.Finish(&e[0]);
  // A slot is free but e[1] waits: a newcomer queues behind it instead of running.
  EXPECT_EQ(b.Admit(&e[2], 0), Decision::kQueued);
  EXPECT_EQ(b.StartNext(), &e[1]);
  Drain(&b, e);
}

TEST(Bulkhead, QueueTimeoutCountsFromWhenQueued) {
  Bulkhead b(MakeLimits(1, 2, 500));
  b.SetOpen(true);
  std::vector<AdmissionEntry> e(3);
  ASSERT_EQ(b.Admit(&e[0], 0), Decision::kRun);
  ASSERT_EQ(b.Admit(&e[1], 100), Decision::kQueued);
  ASSERT_EQ(b.Admit(&e[2], 300), Decision::kQueued);
  EXPECT_EQ(b.NextDeadline(), 600u);
  EXPECT_EQ(b.PopExpired(599), nullptr);
  EXPECT_EQ(b.PopExpired(600), &e[1]);
  EXPECT_EQ(e[1].admission_state(), State::kIdle);
  EXPECT_EQ(b.NextDeadline(), 800u);
  EXPECT_EQ(b.PopExpired(799), nullptr);
  EXPECT_EQ(b.PopExpired(10000), &e[2]);
  EXPECT_EQ(b.PopExpired(10000), nullptr);
  EXPECT_EQ(b.NextDeadline(), std::nullopt);
  EXPECT_EQ(b.queued(), 0u);
  Drain(&b, e);
}

TEST(Bulkhead, CancelRemovesFromAnyQueuePosition) {
  Bulkhead b(MakeLimits(1, 3));
  b.SetOpen(true);
  std::vector<AdmissionEntry> e(4);
  ASSERT_EQ(b.Admit(&e[0], 0), Decision::kRun);
  for (int i = 1; i < 4; ++i) ASSERT_EQ(b.Admit(&e[i], 0), Decision::kQueued);
  b.Cancel(&e[2]);  // middle
  b.Cancel(&e[3]);  // tail
  EXPECT_EQ(b.queued(), 1u);
  b.Finish(&e[0]);
  EXPECT_EQ(b.StartNext(), &e[1]);
  EXPECT_EQ(b.StartNext(), nullptr);
  // The freed places are usable again.
  EXPECT_EQ(b.Admit(&e[2], 0), Decision::kQueued);
  Drain(&b, e);
}

TEST(Bulkhead, ClosedQueuesThenReportsUnavailable) {
  Bulkhead b(MakeLimits(2, 1));
  std::vector<AdmissionEntry> e(3);
  EXPECT_EQ(b.Admit(&e[0], 0), Decision::kQueued);
  EXPECT_EQ(b.Admit(&e[1], 0), Decision::kRejectedUnavailable);
  EXPECT_EQ(b.StartNext(), nullptr);
  b.SetOpen(true);
  EXPECT_EQ(b.StartNext(), &e[0]);
  EXPECT_EQ(b.Admit(&e[1], 0), Decision::kRun);
  EXPECT_EQ(b.Admit(&e[2], 0), Decision::kQueued);
  Drain(&b, e);
}

TEST(Bulkhead, WorkerDeathFreesEverySlotOnce) {
  Bulkhead b(MakeLimits(2, 2));
  b.SetOpen(true);
  std::vector<AdmissionEntry> e(4);
  for (auto& x : e) b.Admit(&x, 0);
  // The worker died: the cell closes, fails what ran, keeps what waits.
  b.SetOpen(false);
  b.Finish(&e[0]);
  b.Finish(&e[1]);
  EXPECT_EQ(b.running(), 0u);
  EXPECT_EQ(b.StartNext(), nullptr);
  EXPECT_EQ(b.queued(), 2u);
  b.SetOpen(true);  // the next worker is up
  EXPECT_EQ(b.StartNext(), &e[2]);
  EXPECT_EQ(b.StartNext(), &e[3]);
  Drain(&b, e);
}

TEST(Bulkhead, LoweredLimitsKeepQueuedAndDrainRunning) {
  Bulkhead b(MakeLimits(3, 3));
  b.SetOpen(true);
  std::vector<AdmissionEntry> e(6);
  for (auto& x : e) b.Admit(&x, 0);
  b.SetLimits(MakeLimits(1, 1));
  EXPECT_EQ(b.queued(), 3u);
  AdmissionEntry extra;
  EXPECT_EQ(b.Admit(&extra, 0), Decision::kRejectedFull);
  b.Finish(&e[0]);
  EXPECT_EQ(b.StartNext(), nullptr);  // still 2 running above the new cap of 1
  b.Finish(&e[1]);
  b.Finish(&e[2]);
  EXPECT_EQ(b.StartNext(), &e[3]);
  EXPECT_EQ(b.StartNext(), nullptr);
  Drain(&b, e);
}

TEST(Bulkhead, SetMaxConcurrentChangesOnlyTheSlots) {
  Bulkhead b(MakeLimits(2, 3, 700));
  b.SetMaxConcurrent(5);
  EXPECT_EQ(b.limits().max_concurrent, 5u);
  EXPECT_EQ(b.limits().max_queue, 3u);
  EXPECT_EQ(b.limits().queue_timeout_ms, 700u);
}

// The adaptive mode's promise: a lowered limit stops new starts and never fails or preempts a
// running request; the queue keeps its order and its deadlines.
TEST(Bulkhead, LoweredMaxConcurrentStopsNewStartsAndLetsRunningOnesFinish) {
  Bulkhead b(MakeLimits(4, 2, 500));
  b.SetOpen(true);
  std::vector<AdmissionEntry> e(6);
  for (auto& x : e) b.Admit(&x, 0);
  ASSERT_EQ(b.running(), 4u);
  ASSERT_EQ(b.queued(), 2u);
  b.SetMaxConcurrent(1);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(e[i].admission_state(), State::kRunning);
  EXPECT_EQ(b.NextDeadline(), 500u);
  b.Finish(&e[0]);
  b.Finish(&e[1]);
  b.Finish(&e[2]);
  EXPECT_EQ(b.StartNext(), nullptr);  // one still runs: the new limit is full
  b.Finish(&e[3]);
  EXPECT_EQ(b.StartNext(), &e[4]);
  EXPECT_EQ(b.StartNext(), nullptr);
  AdmissionEntry late;
  EXPECT_EQ(b.Admit(&late, 0), Decision::kQueued);  // behind e[5], not past the limit
  Drain(&b, e);
  b.Cancel(&late);
}

TEST(Bulkhead, RaisedMaxConcurrentStartsTheQueueThroughStartNext) {
  Bulkhead b(MakeLimits(1, 3));
  b.SetOpen(true);
  std::vector<AdmissionEntry> e(4);
  for (auto& x : e) b.Admit(&x, 0);
  ASSERT_EQ(b.queued(), 3u);
  b.SetMaxConcurrent(3);
  EXPECT_EQ(b.queued(), 3u);  // nothing starts by itself
  EXPECT_EQ(b.StartNext(), &e[1]);
  EXPECT_EQ(b.StartNext(), &e[2]);
  EXPECT_EQ(b.StartNext(), nullptr);
  EXPECT_EQ(b.running(), 3u);
  AdmissionEntry late;
  EXPECT_EQ(b.Admit(&late, 0), Decision::kQueued);  // e[3] waits ahead of it
  Drain(&b, e);
  b.Cancel(&late);
}

using BulkheadDeathTest = ::testing::Test;

TEST(BulkheadDeathTest, DoubleFinishCrashes) {
  EXPECT_DEATH(
      {
        Bulkhead b(MakeLimits(1, 0));
        b.SetOpen(true);
        AdmissionEntry e;
        b.Admit(&e, 0);
        b.Finish(&e);
        b.Finish(&e);
      },
      "check failed");
}

TEST(BulkheadDeathTest, CancelOfRunningEntryCrashes) {
  EXPECT_DEATH(
      {
        Bulkhead b(MakeLimits(1, 0));
        b.SetOpen(true);
        AdmissionEntry e;
        b.Admit(&e, 0);
        b.Cancel(&e);
      },
      "check failed");
}

TEST(BulkheadDeathTest, AdmittingLinkedEntryTwiceCrashes) {
  EXPECT_DEATH(
      {
        Bulkhead b(MakeLimits(1, 1));
        AdmissionEntry e;
        b.Admit(&e, 0);
        b.Admit(&e, 0);
      },
      "check failed");
}

TEST(BulkheadDeathTest, DestroyedWithRunningEntryCrashes) {
  EXPECT_DEATH(
      {
        AdmissionEntry e;
        Bulkhead b(MakeLimits(1, 0));
        b.SetOpen(true);
        b.Admit(&e, 0);
      },
      "check failed");
}

// A random walk over every operation, checked against a simple model: counts never exceed limits,
// FIFO order holds, and every entry is in exactly one place. With `moving_limit`, max_concurrent
// also jumps between 1 and 6 as the adaptive mode moves it (SetMaxConcurrent).
void RandomWalk(bool moving_limit) {
  std::mt19937 rng(12345);
  constexpr int kEntries = 64;
  constexpr uint32_t kHighestLimit = 6;
  Bulkhead b(MakeLimits(4, 8, 50));
  std::vector<AdmissionEntry> e(kEntries);
  std::deque<AdmissionEntry*> model_queue;
  int model_running = 0;
  int model_limit = 4;
  uint64_t now = 0;
  bool open = false;
  for (int step = 0; step < 20000; ++step) {
    now += rng() % 5;
    AdmissionEntry* x = &e[rng() % kEntries];
    switch (rng() % (moving_limit ? 7 : 6)) {
      case 0:
        if (x->admission_state() == State::kIdle) {
          bool slot = open && model_running < model_limit && model_queue.empty();
          Decision d = b.Admit(x, now);
          if (slot) {
            ASSERT_EQ(d, Decision::kRun);
            ++model_running;
          } else if (model_queue.size() < 8) {
            ASSERT_EQ(d, Decision::kQueued);
            model_queue.push_back(x);
          } else {
            ASSERT_EQ(d, open ? Decision::kRejectedFull : Decision::kRejectedUnavailable);
          }
        }
        break;
      case 1:
        if (x->admission_state() == State::kRunning) {
          b.Finish(x);
          --model_running;
        }
        break;
      case 2:
        if (x->admission_state() == State::kQueued) {
          b.Cancel(x);
          std::erase(model_queue, x);
        }
        break;
      case 3:
        while (AdmissionEntry* started = b.StartNext()) {
          ASSERT_FALSE(model_queue.empty());
          ASSERT_LT(model_running, model_limit);
          ASSERT_EQ(started, model_queue.front());
          model_queue.pop_front();
          ++model_running;
        }
        // Nothing left that could start: closed, every slot of the limit taken, or no queue.
        ASSERT_TRUE(!open || model_running >= model_limit || model_queue.empty());
        break;
      case 4:
        while (AdmissionEntry* expired = b.PopExpired(now)) {
          ASSERT_EQ(expired, model_queue.front());
          ASSERT_GE(now, expired->queued_at_ms() + 50);
          model_queue.pop_front();
        }
        break;
      case 5:
        open = !open;
        b.SetOpen(open);
        break;
      case 6:
        model_limit = static_cast<int>(rng() % kHighestLimit) + 1;
        b.SetMaxConcurrent(static_cast<uint32_t>(model_limit));
        break;
    }
    ASSERT_EQ(b.running(), static_cast<uint32_t>(model_running));
    ASSERT_EQ(b.queued(), model_queue.size());
    ASSERT_LE(b.running(), moving_limit ? kHighestLimit : 4u);
    ASSERT_LE(b.queued(), 8u);
  }
  Drain(&b, e);
}

TEST(Bulkhead, RandomOperationsMatchModel) { RandomWalk(/*moving_limit=*/false); }

TEST(Bulkhead, RandomOperationsWithAMovingLimitMatchModel) { RandomWalk(/*moving_limit=*/true); }

}  // namespace
}  // namespace bulkhead::admission
