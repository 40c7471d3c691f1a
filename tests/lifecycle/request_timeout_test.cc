// SPDX-License-Identifier: MIT
// request_timeout (issue 4): a request that runs too long is answered FAILED/timeout at once, but
// its slot stays taken (running = 1, the next request finds the cell full) until the worker
// really answers; that late answer is dropped, so the client gets exactly one reply.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tests/lifecycle/lifecycle_fixture.h"

namespace bulkhead::lifecycle_test {
namespace {

TEST(RequestTimeout, FailsTheClientFastButKeepsTheSlotUntilTheWorkerAnswers) {
  Harness h(TestOptions({CellSpec{.name = "slowpoke",
                                  .max_concurrent = 1,
                                  .max_queue = 0,
                                  .extra_toml = "request_timeout = \"200ms\"\n"}}));
  ASSERT_STARTED(h);
  Tally tally;
  const int pid = WorkerPid(h, "slowpoke");
  // The worker answers only once the test creates `answer`.
  const std::string answer = h.dir() + "/answer.flag";

  Result<ipc::Client> slow = SendOn(h, "slowpoke", 7, "wait-file " + answer);
  ASSERT_TRUE(slow.ok()) << slow.status().message();
  Result<ipc::Client::Reply> timed_out = slow->Receive();
  tally.Count(timed_out);
  // Answered while the worker could not have answered yet: the timeout did not wait for it.
  ASSERT_TRUE(IsReply(timed_out, ReplyStatus::kFailed, Reason::kTimeout)) << Describe(timed_out);
  EXPECT_EQ(timed_out->header.request_id, 7u);
  EXPECT_EQ(timed_out->payload, "request_timeout of 200 ms passed");

  // The worker is still busy with it: the slot stays taken, so the cell is full.
  nlohmann::json c = h.Cell("slowpoke");
  EXPECT_EQ(c["running"], 1) << c.dump();
  EXPECT_EQ(c["failed_by_reason"]["timeout"], 1) << c.dump();
  Result<ipc::Client::Reply> full = h.Call("slowpoke", "echo squeezed");
  tally.Count(full);
  EXPECT_TRUE(IsReply(full, ReplyStatus::kRejected, Reason::kFull)) << Describe(full);

  // The slot is freed when the worker answers, not before.
  CreateFlag(answer);
  ASSERT_TRUE(CellShows(h, "slowpoke", "running", 0));

  // Exactly one reply: the worker's late answer was dropped. Had it been sent, it would be in the
  // socket already (written in the loop iteration that freed the slot, before the status that
  // showed it), so a read that waits a millisecond finds it.
  ASSERT_TRUE(slow->SetTimeout(std::chrono::milliseconds(1)).ok());
  Result<ipc::Client::Reply> second = slow->Receive();
  EXPECT_FALSE(second.ok()) << "a second reply: " << Describe(second);

  EXPECT_TRUE(Served(h, "slowpoke", "echo free again", "free again", tally));
  c = h.Cell("slowpoke");
  EXPECT_EQ(c["pid"], pid) << "a timeout does not replace the worker: " << c.dump();
  EXPECT_EQ(c["failed_by_reason"]["timeout"], 1) << c.dump();
  EXPECT_EQ(c["dropped"], 0) << c.dump();
  ExpectCountersMatch(h, "slowpoke", tally);
}

// A request whose worker connection cannot be made fails at once; it was never on the running
// list, and taking it off must not drop the requests that are (they would never time out).
TEST(RequestTimeout, AFailedWorkerConnectionLeavesTheOthersOnTheTimeoutList) {
  Harness h(TestOptions({CellSpec{.name = "flaky",
                                  .max_concurrent = 2,
                                  .max_queue = 0,
                                  .extra_toml = "request_timeout = \"300ms\"\n"}}));
  ASSERT_STARTED(h);
  Result<ipc::Client> slow = SendThenWaitFor(h, "flaky", 1, "sleep 4000", "running", 1);
  ASSERT_TRUE(slow.ok()) << slow.status().message();

  // The next request needs a second worker connection; with the socket file gone, connect(2)
  // fails (ENOENT) while the supervisor's listening socket itself stays open.
  ASSERT_EQ(::unlink(h.WorkerSocket("flaky").c_str()), 0) << std::strerror(errno);
  Result<ipc::Client::Reply> refused = h.Call("flaky", "echo second");
  ASSERT_TRUE(IsReply(refused, ReplyStatus::kFailed, Reason::kWorkerError)) << Describe(refused);
  EXPECT_THAT(refused->payload, ::testing::HasSubstr("cannot connect to worker"));

  // The first request is still on the list: request_timeout answers it, not the worker's reply
  // 4 s later (with the list emptied it was answered OK "slept ...").
  Result<ipc::Client::Reply> first = slow->Receive();
  EXPECT_TRUE(IsReply(first, ReplyStatus::kFailed, Reason::kTimeout)) << Describe(first);
  EXPECT_EQ(h.Cell("flaky")["failed_by_reason"]["timeout"], 1);
}

// Issue 11, item 2: with max_concurrent = 2, the first request times out but keeps its slot (its
// worker is still busy with it, here for good); a second request dispatched then must time out
// too. It used to get no deadline (the timer was armed only for a request at the head of the
// running list) and came back OK "slept 2500" once the worker answered.
TEST(RequestTimeout, ARequestDispatchedAfterAnotherTimedOutStillTimesOut) {
  Harness h(TestOptions(
      {CellSpec{.name = "pair",
                .max_concurrent = 2,
                .max_queue = 0,
                .extra_toml = std::string("request_timeout = \"500ms\"\n") + e2e::kQuickStop}}));
  ASSERT_STARTED(h);
  Result<ipc::Client> first = SendOn(h, "pair", 1, "hang");
  ASSERT_TRUE(first.ok()) << first.status().message();
  Result<ipc::Client::Reply> first_reply = first->Receive();
  ASSERT_TRUE(IsReply(first_reply, ReplyStatus::kFailed, Reason::kTimeout))
      << Describe(first_reply);

  Result<ipc::Client> second = SendOn(h, "pair", 2, "sleep 2500");
  ASSERT_TRUE(second.ok()) << second.status().message();
  Result<ipc::Client::Reply> second_reply = second->Receive();
  EXPECT_TRUE(IsReply(second_reply, ReplyStatus::kFailed, Reason::kTimeout))
      << Describe(second_reply);

  // Both answered: nothing in flight, though the hung one holds its slot for good.
  nlohmann::json c = h.Cell("pair");
  EXPECT_EQ(c["failed_by_reason"]["timeout"], 2) << c.dump();
  EXPECT_EQ(c["failed"], 2) << c.dump();
  EXPECT_EQ(c["ok"], 0) << c.dump();
  EXPECT_EQ(c["in_flight"], 0) << c.dump();
}

// A running request whose client left is `dropped` (docs/control.md), also when request_timeout
// passes before the worker answers: no one is there to be told it failed. It was counted
// failed/timeout.
TEST(RequestTimeout, ARequestWhoseClientLeftIsDroppedNotFailedWhenItTimesOut) {
  Harness h(TestOptions(
      {CellSpec{.name = "left",
                .max_concurrent = 1,
                .max_queue = 0,
                .extra_toml = std::string("request_timeout = \"3s\"\n") + e2e::kQuickStop}}));
  ASSERT_STARTED(h);
  {
    Result<ipc::Client> gone = SendThenWaitFor(h, "left", 1, "hang", "running", 1);
    ASSERT_TRUE(gone.ok()) << gone.status().message();
  }  // the client closes its connection while its request runs, well before request_timeout
  ASSERT_TRUE(CellShows(h, "left", "dropped", 1));
  nlohmann::json c = h.Cell("left");
  EXPECT_EQ(c["failed"], 0) << c.dump();
  EXPECT_EQ(c["failed_by_reason"]["timeout"], 0) << c.dump();
  EXPECT_EQ(c["running"], 1) << "the worker still holds the slot: " << c.dump();
  EXPECT_EQ(c["in_flight"], 0) << c.dump();
}

}  // namespace
}  // namespace bulkhead::lifecycle_test
