// SPDX-License-Identifier: MIT
// JudgeLifecycle: when `bulkheadctl start|stop|restart` stops waiting, and with which outcome, for
// each state a cell can be in after the command was accepted.
#include "ctl/lifecycle_wait.h"

#include <gtest/gtest.h>

namespace bulkhead::ctl {
namespace {

nlohmann::json CellIn(const std::string& state, uint64_t starts) {
  return {{"name", "a"},       {"state", state},       {"starts", starts},
          {"reason", nullptr}, {"last_exit", nullptr}, {"next_start_in_ms", 0}};
}

TEST(JudgeLifecycle, StopIsReachedWithoutAWorker) {
  EXPECT_EQ(JudgeLifecycle("stop", 1, CellIn("stopping", 1)).verdict, LifecycleVerdict::kPending);
  EXPECT_EQ(JudgeLifecycle("stop", 1, CellIn("running", 1)).verdict, LifecycleVerdict::kPending);
  EXPECT_EQ(JudgeLifecycle("stop", 1, CellIn("stopped", 1)).verdict, LifecycleVerdict::kReached);
  EXPECT_EQ(JudgeLifecycle("stop", 1, CellIn("failed", 1)).verdict, LifecycleVerdict::kReached);
}

TEST(JudgeLifecycle, AStopIsReachedOnceAStartQueuedBehindItStartedAWorker) {
  // `restart` or `start` during a stop is queued behind it: the cell may never show "stopped" to a
  // status read, yet the stop is done once a worker started after it was sent.
  EXPECT_EQ(JudgeLifecycle("stop", 1, CellIn("starting", 2)).verdict, LifecycleVerdict::kReached);
  EXPECT_EQ(JudgeLifecycle("stop", 1, CellIn("running", 2)).verdict, LifecycleVerdict::kReached);
  EXPECT_EQ(JudgeLifecycle("stop", 1, CellIn("backoff", 2)).verdict, LifecycleVerdict::kReached);
}

// A worker that exits at once is restarted by the cell after restart_delay; a status read may
// catch its successor running, but the command's worker ended: the command fails.
TEST(JudgeLifecycle, AStartWhoseWorkerTheCellRestartedByItselfSinceFails) {
  nlohmann::json cell = CellIn("running", 3);
  cell["last_exit"] = "exit 2";
  cell["restarts_by_reason"] = {{"crash", 1}, {"exit", 0}, {"operator", 4}};
  EXPECT_EQ(AutomaticRestarts(cell), 1u);
  LifecycleProgress progress = JudgeLifecycle("start", 1, cell, std::nullopt, 0);
  EXPECT_EQ(progress.verdict, LifecycleVerdict::kFailed);
  EXPECT_EQ(progress.detail,
            "worker did not start: exit 2 (the cell restarted it by itself since; state running)");
  EXPECT_EQ(JudgeLifecycle("restart", 1, cell, std::nullopt, 0).verdict, LifecycleVerdict::kFailed);
  // No restart of its own since (operator restarts are the commands'): reached.
  EXPECT_EQ(JudgeLifecycle("start", 1, cell, std::nullopt, 1).verdict, LifecycleVerdict::kReached);
  // Not known (a reload's wait): not judged.
  EXPECT_EQ(JudgeLifecycle("start", 1, cell).verdict, LifecycleVerdict::kReached);
}

TEST(JudgeLifecycle, RestartWaitsForANewWorkerRunning) {
  // The old worker still runs, or drains: not yet.
  EXPECT_EQ(JudgeLifecycle("restart", 1, CellIn("running", 1)).verdict, LifecycleVerdict::kPending);
  EXPECT_EQ(JudgeLifecycle("restart", 1, CellIn("stopping", 1)).verdict,
            LifecycleVerdict::kPending);
  // The new one waits for READY=1.
  EXPECT_EQ(JudgeLifecycle("restart", 1, CellIn("starting", 2)).verdict,
            LifecycleVerdict::kPending);
  EXPECT_EQ(JudgeLifecycle("restart", 1, CellIn("running", 2)).verdict, LifecycleVerdict::kReached);
  EXPECT_EQ(JudgeLifecycle("start", 0, CellIn("running", 1)).verdict, LifecycleVerdict::kReached);
}

TEST(JudgeLifecycle, ANewWorkerThatEndsFailsTheCommand) {
  nlohmann::json crashed = CellIn("backoff", 2);
  crashed["last_exit"] = "exit 3";
  crashed["next_start_in_ms"] = 1500;
  LifecycleProgress progress = JudgeLifecycle("restart", 1, crashed);
  EXPECT_EQ(progress.verdict, LifecycleVerdict::kFailed);
  EXPECT_EQ(progress.detail, "worker did not start: exit 3 (state backoff, next start in 1.5s)");
  // A backoff of the old generation (before the command took effect) is not the answer yet.
  EXPECT_EQ(JudgeLifecycle("restart", 2, crashed).verdict, LifecycleVerdict::kPending);
  crashed["crash_looping"] = true;
  EXPECT_EQ(JudgeLifecycle("restart", 1, crashed).detail,
            "worker did not start: exit 3 (state backoff, crash-looping, next start in 1.5s)");

  nlohmann::json gave_up = CellIn("failed", 5);
  gave_up["reason"] = "gave up: 5 starts in 10s";
  progress = JudgeLifecycle("start", 4, gave_up);
  EXPECT_EQ(progress.verdict, LifecycleVerdict::kFailed);
  EXPECT_EQ(progress.detail, "cell failed: gave up: 5 starts in 10s");
  progress = JudgeLifecycle("restart", 1, CellIn("stopped", 1));
  EXPECT_EQ(progress.verdict, LifecycleVerdict::kFailed);
  EXPECT_EQ(progress.detail, "cell is stopped");
}

TEST(JudgeLifecycle, AMalformedCellFails) {
  LifecycleProgress progress = JudgeLifecycle("stop", 0, nlohmann::json{{"state", "stopped"}});
  EXPECT_EQ(progress.verdict, LifecycleVerdict::kFailed);
  EXPECT_NE(progress.detail.find("\"starts\""), std::string::npos) << progress.detail;
}

TEST(IsActiveState, OnlyRunningIsActiveAndOnlyFailedIsFailed) {
  for (const char* state : {"starting", "stopping", "backoff", "stopped", "failed"}) {
    EXPECT_FALSE(IsActiveState(state)) << state;
  }
  EXPECT_TRUE(IsActiveState("running"));
  for (const char* state : {"starting", "running", "stopping", "backoff", "stopped"}) {
    EXPECT_FALSE(IsFailedState(state)) << state;
  }
  EXPECT_TRUE(IsFailedState("failed"));
}

TEST(JudgeLifecycle, AnOverlappingRestartIsReachedAtTheHandoverAndFailsWithItsReason) {
  nlohmann::json swapping = CellIn("running", 1);
  swapping["swap"] = {{"phase", "starting"}, {"pid", 7}, {"detail", "..."}};
  swapping["restart_failed"] = nullptr;
  EXPECT_EQ(JudgeLifecycle("restart", 1, swapping).verdict, LifecycleVerdict::kPending);
  nlohmann::json handed_over = swapping;
  handed_over["starts"] = 2;
  handed_over["swap"]["phase"] = "draining";
  EXPECT_EQ(JudgeLifecycle("restart", 1, handed_over).verdict, LifecycleVerdict::kReached);
  nlohmann::json failed = CellIn("running", 1);
  failed["swap"] = nullptr;
  failed["restart_failed"] =
      "the next worker exited before it was ready (exit 7); the previous worker serves on";
  LifecycleProgress progress = JudgeLifecycle("restart", 1, failed);
  EXPECT_EQ(progress.verdict, LifecycleVerdict::kFailed);
  EXPECT_EQ(progress.detail,
            "restart failed: the next worker exited before it was ready (exit 7); the previous "
            "worker serves on");
  // Still abandoning (the next one not reaped yet): not over.
  failed["swap"] = {{"phase", "abandoning"}, {"pid", 7}, {"detail", "..."}};
  EXPECT_EQ(JudgeLifecycle("restart", 1, failed).verdict, LifecycleVerdict::kPending);
}

// A start held for the cells it needs (state "waiting"): pending, saying for what, while each is on
// its way; held at once when one is stopped or failed, which no timer of the supervisor changes.
nlohmann::json WaitingFor(const std::vector<std::pair<std::string, std::string>>& needs) {
  nlohmann::json cell = CellIn("waiting", 0);
  nlohmann::json list = nlohmann::json::array();
  std::string text;
  for (const auto& [name, state] : needs) {
    list.push_back({{"cell", name}, {"state", state}});
    text += (text.empty() ? "" : ", ") + name + " (" + state + ")";
  }
  cell["waiting_for"] = list;
  cell["state_detail"] = "waiting for " + text;
  return cell;
}

TEST(JudgeLifecycle, AStartHeldForANeedOnItsWayIsPendingAndSaysForWhat) {
  for (const char* state : {"starting", "backoff", "waiting", "running", "stopping"}) {
    LifecycleProgress progress = JudgeLifecycle("start", 0, WaitingFor({{"catalog", state}}));
    EXPECT_EQ(progress.verdict, LifecycleVerdict::kPending) << state;
    EXPECT_EQ(progress.detail, std::string("waiting for catalog (") + state + ")");
  }
}

TEST(JudgeLifecycle, AStartHeldForAStoppedOrFailedNeedStopsWaitingAndNamesIt) {
  for (const char* command : {"start", "restart"}) {
    for (const char* state : {"stopped", "failed"}) {
      LifecycleProgress progress = JudgeLifecycle(command, 0, WaitingFor({{"catalog", state}}));
      EXPECT_EQ(progress.verdict, LifecycleVerdict::kHeld) << command << " " << state;
      EXPECT_EQ(progress.detail, std::string("waiting for catalog (") + state +
                                     "); catalog does not start by itself, and this start goes on "
                                     "once it runs (bulkheadctl start catalog)");
    }
  }
  LifecycleProgress two = JudgeLifecycle(
      "start", 0, WaitingFor({{"search", "starting"}, {"catalog", "stopped"}, {"db", "failed"}}));
  EXPECT_EQ(two.verdict, LifecycleVerdict::kHeld);
  EXPECT_EQ(two.detail,
            "waiting for search (starting), catalog (stopped), db (failed); catalog and db do not "
            "start by themselves, and this start goes on once they run (bulkheadctl start "
            "catalog)");
  // A stop of a held cell is reached as soon as the held start is withdrawn (state "stopped").
  EXPECT_EQ(JudgeLifecycle("stop", 0, WaitingFor({{"catalog", "stopped"}})).verdict,
            LifecycleVerdict::kPending);
}

// A chain: edge waits for front, whose own start is held for db, which is stopped. The supervisor
// names db in front's entry (held_by); the wait ends at once naming db, as for a direct need, where
// it used to wait for front until its timeout.
TEST(JudgeLifecycle, AStartHeldBehindAChainEndingInAStoppedCellStopsWaitingAndNamesIt) {
  nlohmann::json cell = WaitingFor({{"front", "waiting"}});
  LifecycleProgress on_its_way = JudgeLifecycle("start", 0, cell);
  EXPECT_EQ(on_its_way.verdict, LifecycleVerdict::kPending) << "front's chain is on its way";
  cell["waiting_for"][0]["held_by"] = "db";
  LifecycleProgress held = JudgeLifecycle("start", 0, cell);
  EXPECT_EQ(held.verdict, LifecycleVerdict::kHeld);
  EXPECT_EQ(held.detail,
            "waiting for front (waiting); db does not start by itself, and this start goes on "
            "once it runs (bulkheadctl start db)");
}

// A need in a long backoff: the held start says when the need starts next, and prints it once (the
// detail's key has no countdown); when that start comes after the wait ends, it stops waiting.
TEST(JudgeLifecycle, AStartHeldForANeedInBackoffSaysItsNextStartAndGivesUpWhenItIsTooLate) {
  nlohmann::json cell = WaitingFor({{"catalog", "backoff"}});
  cell["waiting_for"][0]["next_start_in_ms"] = 45'000;
  LifecycleProgress soon = JudgeLifecycle("start", 0, cell, 90'000);
  EXPECT_EQ(soon.verdict, LifecycleVerdict::kPending);
  EXPECT_EQ(soon.detail, "waiting for catalog (backoff); catalog's next start in 45s");
  EXPECT_EQ(soon.detail_key, "waiting for catalog (backoff)");
  EXPECT_EQ(JudgeLifecycle("start", 0, cell).verdict, LifecycleVerdict::kPending);

  LifecycleProgress late = JudgeLifecycle("start", 0, cell, 30'000);
  EXPECT_EQ(late.verdict, LifecycleVerdict::kHeld);
  EXPECT_EQ(late.detail,
            "waiting for catalog (backoff); catalog's next start in 45s comes after this wait ends "
            "(--timeout sets it), and this start goes on once it runs (bulkheadctl status "
            "catalog)");
}

// `is-active Web` names the cell it does not know as every other command does, with the closest.
TEST(JudgeIsState, AnUnknownCellIsNamedWithTheClosestOne) {
  const nlohmann::json response = {
      {"ok", true},
      {"cells", {{{"name", "web"}, {"state", "running"}}, {{"name", "db"}, {"state", "failed"}}}}};
  IsStateOutcome active = JudgeIsState(response, {"Web", "web", "queue"}, IsActiveState);
  EXPECT_EQ(active.out, "unknown\nrunning\nunknown\n");
  EXPECT_EQ(active.errors, (std::vector<std::string>{"no cell named Web; did you mean \"web\"?",
                                                     "no cell named queue"}));
  EXPECT_TRUE(active.any);
  IsStateOutcome failed = JudgeIsState(response, {"Web"}, IsFailedState);
  EXPECT_FALSE(failed.any);
  EXPECT_EQ(JudgeIsState(response, {"db"}, IsFailedState).errors, std::vector<std::string>{});
  EXPECT_TRUE(JudgeIsState(response, {"db"}, IsFailedState).any);
}

}  // namespace
}  // namespace bulkhead::ctl
