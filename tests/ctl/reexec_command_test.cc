// SPDX-License-Identifier: MIT
// `bulkheadctl reexec` judging the status answers that follow its request (ctl/reexec_command.h):
// done once the count passed, failed once the old image is idle again with a reason, waiting
// otherwise; and `reexec --join` judging its first status (JudgeJoin).
#include "ctl/reexec_command.h"

#include <gtest/gtest.h>

namespace bulkhead::ctl {
namespace {

nlohmann::json StatusWith(uint64_t count, const std::string& phase, nlohmann::json last_error) {
  return {{"ok", true},
          {"supervisor",
           {{"pid", 4242},
            {"version", "0.1.0"},
            {"reexec", {{"phase", phase}, {"count", count}, {"last_error", last_error}}}}},
          {"cells", nlohmann::json::array()}};
}

TEST(JudgeReexec, IsDoneOnceTheNewImageCountsTheReexec) {
  const ReexecVerdict verdict = JudgeReexec(StatusWith(3, "idle", nullptr), 2);
  EXPECT_EQ(verdict.kind, ReexecVerdict::Kind::kDone);
  EXPECT_EQ(verdict.text, "re-executed: bulkheadd 0.1.0, pid 4242, re-exec 3");
}

// The binary the new image ran: the path executed, and the file a symlink led to when it differs.
TEST(JudgeReexec, NamesTheBinaryItRanAndTheFileASymlinkLedTo) {
  nlohmann::json status = StatusWith(1, "idle", nullptr);
  nlohmann::json& reexec = status["supervisor"]["reexec"];
  reexec["binary"] = "/usr/sbin/bulkheadd";
  reexec["binary_file"] = "/usr/sbin/bulkheadd";
  EXPECT_EQ(JudgeReexec(status, 0).text,
            "re-executed: bulkheadd 0.1.0, pid 4242, re-exec 1, binary /usr/sbin/bulkheadd");
  reexec["binary"] = "/opt/bulkhead/current/bulkheadd";
  reexec["binary_file"] = "/opt/bulkhead/v2/bulkheadd";
  EXPECT_EQ(JudgeReexec(status, 0).text,
            "re-executed: bulkheadd 0.1.0, pid 4242, re-exec 1, binary "
            "/opt/bulkhead/current/bulkheadd -> /opt/bulkhead/v2/bulkheadd");
}

TEST(JudgeReexec, HasFailedWhenTheOldImageIsIdleAgainWithAReason) {
  const ReexecVerdict verdict =
      JudgeReexec(StatusWith(2, "idle", "execve /usr/sbin/bulkheadd: Exec format error"), 2);
  EXPECT_EQ(verdict.kind, ReexecVerdict::Kind::kFailed);
  EXPECT_EQ(verdict.text, "execve /usr/sbin/bulkheadd: Exec format error");
}

// Failure 5 of docs/reexec.md: the count passed, but the image that counts it is the previous
// binary run again, and says why.
TEST(JudgeReexec, HasFailedWhenThePreviousBinaryRunsAgainAfterTheNewOneCouldNotReadTheState) {
  const ReexecVerdict verdict = JudgeReexec(
      StatusWith(3, "idle", "the new binary could not take the state over, ...: bad state"), 2);
  EXPECT_EQ(verdict.kind, ReexecVerdict::Kind::kFailed);
  EXPECT_EQ(verdict.text, "the new binary could not take the state over, ...: bad state");
}

TEST(JudgeReexec, WaitsWhileDrainingOrWithoutTheFields) {
  EXPECT_EQ(JudgeReexec(StatusWith(2, "draining", nullptr), 2).kind, ReexecVerdict::Kind::kWaiting);
  EXPECT_EQ(JudgeReexec(StatusWith(2, "idle", nullptr), 2).kind, ReexecVerdict::Kind::kWaiting);
  EXPECT_EQ(JudgeReexec({{"ok", true}, {"supervisor", {{"pid", 1}}}}, 0).kind,
            ReexecVerdict::Kind::kWaiting);
  EXPECT_EQ(JudgeReexec(nlohmann::json::array(), 0).kind, ReexecVerdict::Kind::kWaiting);
}

// What `bulkheadctl reexec` says when its --timeout ends first (kExitReexecUnderWay): the phase
// and, while settling, what it waits for.
TEST(JudgeReexec, SaysWhereAReexecUnderWayStandsAndWhatASettlingWaitsFor) {
  nlohmann::json status = StatusWith(2, "settling", nullptr);
  status["supervisor"]["reexec"]["waiting_for"] = {
      "cells.b: it is starting (...)", "cells.c: its start waits for the cells it needs"};
  const ReexecVerdict settling = JudgeReexec(status, 2);
  EXPECT_EQ(settling.kind, ReexecVerdict::Kind::kWaiting);
  EXPECT_EQ(settling.text,
            "settling, waiting for cells.b: it is starting (...); cells.c: its start waits for "
            "the cells it needs");
  EXPECT_EQ(JudgeReexec(StatusWith(2, "draining", nullptr), 2).text, "draining");
  EXPECT_EQ(JudgeReexec(StatusWith(2, "idle", nullptr), 2).text, "");
}

// `bulkheadctl reexec --join` (postinst, after a `reexec` that exited 75): a re-exec under way is
// waited for from the count it shows now, as long as bulkheadd says it may still last.
TEST(JudgeJoin, WaitsForTheReexecUnderWayFromItsCountForAsLongAsBulkheaddSays) {
  nlohmann::json status = StatusWith(2, "draining", nullptr);
  // As parsed from the wire: a non-negative number is unsigned.
  status["supervisor"]["reexec"]["ends_within_ms"] = uint64_t{31'000};
  const ReexecJoin join = JudgeJoin(status);
  EXPECT_EQ(join.verdict.kind, ReexecVerdict::Kind::kWaiting);
  EXPECT_EQ(join.verdict.text, "draining");
  EXPECT_EQ(join.count_before, 2u);
  EXPECT_EQ(join.ends_within_ms, 31'000u);
  // A bulkheadd that does not say its bound: the caller picks one.
  EXPECT_EQ(JudgeJoin(StatusWith(2, "settling", nullptr)).ends_within_ms, std::nullopt);
  // Then judged as a reexec's own wait: done once the new image counts it.
  EXPECT_EQ(JudgeReexec(StatusWith(3, "idle", nullptr), join.count_before).kind,
            ReexecVerdict::Kind::kDone);
}

// The re-exec may have ended before --join looked: status keeps how.
TEST(JudgeJoin, SaysHowTheLastReexecEndedWhenNoneIsUnderWay) {
  const ReexecJoin done = JudgeJoin(StatusWith(3, "idle", nullptr));
  EXPECT_EQ(done.verdict.kind, ReexecVerdict::Kind::kDone);
  EXPECT_EQ(done.verdict.text, "re-executed: bulkheadd 0.1.0, pid 4242, re-exec 3");
  const ReexecJoin refused =
      JudgeJoin(StatusWith(0, "idle", "cells.b: it is starting (...); still so after 1000 ms"));
  EXPECT_EQ(refused.verdict.kind, ReexecVerdict::Kind::kFailed);
  EXPECT_EQ(refused.verdict.text, "cells.b: it is starting (...); still so after 1000 ms");
  const ReexecJoin fell_back = JudgeJoin(StatusWith(1, "idle", "the new binary could not ..."));
  EXPECT_EQ(fell_back.verdict.kind, ReexecVerdict::Kind::kFailed);
  EXPECT_EQ(fell_back.verdict.text, "the new binary could not ...");
}

TEST(JudgeJoin, FailsWithNoReexecEverOrNoReexecFields) {
  const ReexecJoin none = JudgeJoin(StatusWith(0, "idle", nullptr));
  EXPECT_EQ(none.verdict.kind, ReexecVerdict::Kind::kFailed);
  EXPECT_EQ(none.verdict.text,
            "no re-exec is under way, and this bulkheadd has not re-executed since it started");
  EXPECT_EQ(JudgeJoin({{"ok", true}, {"supervisor", {{"pid", 1}}}}).verdict.kind,
            ReexecVerdict::Kind::kFailed);
  EXPECT_EQ(JudgeJoin(nlohmann::json::array()).verdict.kind, ReexecVerdict::Kind::kFailed);
}

}  // namespace
}  // namespace bulkhead::ctl
