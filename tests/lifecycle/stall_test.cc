// SPDX-License-Identifier: MIT
// stall_timeout (issue 4): a worker with requests in flight that sends no reply for that long is
// killed and replaced and its requests get FAILED/stalled: a `hang`, or a worker stopped with
// SIGSTOP mid-stream. A busy worker that keeps answering is never stalled, even while one of its
// requests runs longer than stall_timeout.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <thread>

#include "tests/lifecycle/lifecycle_fixture.h"

namespace bulkhead::lifecycle_test {
namespace {

using e2e::kQuickStop;
using ::testing::HasSubstr;
using ::testing::StartsWith;

const std::string kStall = std::string("stall_timeout = \"500ms\"\n") + kQuickStop;

TEST(Stall, HangingWorkerIsKilledAndReplaced) {
  Harness h(TestOptions({CellSpec{.name = "stuck",
                                  .max_concurrent = 1,
                                  .max_queue = 1,
                                  .queue_timeout = "10s",
                                  .extra_toml = kStall}}));
  ASSERT_STARTED(h);
  Tally tally;
  const int old_pid = WorkerPid(h, "stuck");

  Result<ipc::Client> hanging = SendThenWaitFor(h, "stuck", 1, "hang", "running", 1);
  ASSERT_TRUE(hanging.ok()) << hanging.status().message();
  // Queued behind it: served by the next worker.
  Result<ipc::Client> queued = SendOn(h, "stuck", 2, "pid");
  ASSERT_TRUE(queued.ok()) << queued.status().message();
  Result<ipc::Client::Reply> stalled = hanging->Receive();
  tally.Count(stalled);
  ASSERT_TRUE(IsReply(stalled, ReplyStatus::kFailed, Reason::kStalled)) << Describe(stalled);
  EXPECT_THAT(stalled->payload, StartsWith("stalled: no reply for "));

  ASSERT_TRUE(NewWorkerRuns(h, "stuck", old_pid));
  EXPECT_FALSE(bulkhead::testing::ProcessExists(old_pid));
  Result<ipc::Client::Reply> next = queued->Receive();
  tally.Count(next);
  EXPECT_OK_REPLY(next, std::to_string(WorkerPid(h, "stuck")));
  EXPECT_TRUE(Served(h, "stuck", "echo fresh", "fresh", tally));

  nlohmann::json c = h.Cell("stuck");
  ASSERT_TRUE(c["last_exit"].is_string()) << c.dump();
  EXPECT_THAT(c["last_exit"].get<std::string>(), StartsWith("stalled: no reply for "));
  EXPECT_THAT(c["last_exit"].get<std::string>(), HasSubstr("(signal 9)"));
  EXPECT_EQ(c["failed_by_reason"]["stalled"], 1) << c.dump();
  EXPECT_EQ(c["restarts"], 1) << c.dump();
  EXPECT_THAT(h.Log(), HasSubstr("killing worker"));
  ExpectCountersMatch(h, "stuck", tally);
}

TEST(Stall, BusyWorkerThatKeepsAnsweringIsNeverKilled) {
  // A stall_timeout of its own, wall-clock time: wide enough that the stream's next answer (this
  // test's thread sending the next request, the worker's 100 ms) never loses a race with it on a
  // loaded machine.
  Harness h(TestOptions({CellSpec{.name = "busy",
                                  .max_concurrent = 2,
                                  .extra_toml = std::string("stall_timeout = \"2s\"\n") +
                                                kQuickStop}}));
  ASSERT_STARTED(h);
  Tally tally;
  const int pid = WorkerPid(h, "busy");

  // One request runs three times stall_timeout while a stream of short ones keeps the worker
  // answering on the other slot: the worker shows progress, so nothing is stalled.
  std::atomic<bool> long_done{false};
  std::thread long_request([&] {
    Result<ipc::Client::Reply> reply = h.Call("busy", "sleep 6000");
    tally.Count(reply);
    EXPECT_OK_REPLY(reply, "slept 6000");
    long_done = true;
  });
  int streamed = 0;
  while (!long_done) {
    Result<ipc::Client::Reply> reply = h.Call("busy", "sleep 100");
    tally.Count(reply);
    EXPECT_OK_REPLY(reply, "slept 100");
    if (!reply.ok() || reply->header.status != ReplyStatus::kOk) break;
    ++streamed;
  }
  long_request.join();
  // The stream ran beside the whole long request: at least one answer per stall_timeout of its
  // 6000 ms (how many more depends on the machine's pace, not on bulkheadd).
  EXPECT_GE(streamed, 3);

  nlohmann::json c = h.Cell("busy");
  EXPECT_EQ(c["pid"], pid) << c.dump();
  EXPECT_EQ(c["starts"], 1) << c.dump();
  EXPECT_EQ(c["failed"], 0) << c.dump();
  EXPECT_TRUE(c["last_exit"].is_null()) << c.dump();
  ExpectCountersMatch(h, "busy", tally);
}

TEST(Stall, SigstoppedWorkerIsFound) {
  Harness h(TestOptions({CellSpec{.name = "frozen", .max_concurrent = 1, .extra_toml = kStall}}));
  ASSERT_STARTED(h);
  Tally tally;
  const int old_pid = WorkerPid(h, "frozen");
  // A stream of short requests, each answered well within stall_timeout, until one is not.
  Result<ipc::Client::Reply> last = bulkhead::Status::Error("nothing sent");
  std::atomic<bool> quit{false};
  std::thread stream([&] {
    while (!quit) {
      Result<ipc::Client::Reply> reply = h.Call("frozen", "sleep 50");
      tally.Count(reply);
      if (!reply.ok() || reply->header.status != ReplyStatus::kOk) {
        last = std::move(reply);
        return;
      }
    }
  });
  // On every path out of the test: the worker is let go on (should the test fail before the
  // supervisor killed it) and the stream ends.
  struct Cleanup {
    pid_t pid;
    std::atomic<bool>* quit;
    std::thread* thread;
    ~Cleanup() {
      if (bulkhead::testing::ProcessExists(pid)) ::kill(pid, SIGCONT);
      *quit = true;
      if (thread->joinable()) thread->join();
    }
  } cleanup{old_pid, &quit, &stream};
  ASSERT_TRUE(h.WaitForCell("frozen", [](const nlohmann::json& c) { return c["ok"] >= 4; }))
      << h.Status().dump();
  ASSERT_EQ(::kill(old_pid, SIGSTOP), 0);
  stream.join();
  EXPECT_TRUE(IsReply(last, ReplyStatus::kFailed, Reason::kStalled)) << Describe(last);

  ASSERT_TRUE(NewWorkerRuns(h, "frozen", old_pid));
  EXPECT_FALSE(bulkhead::testing::ProcessExists(old_pid));
  EXPECT_TRUE(Served(h, "frozen", "echo thawed", "thawed", tally));
  nlohmann::json c = h.Cell("frozen");
  EXPECT_EQ(c["failed_by_reason"]["stalled"], 1) << c.dump();
  ExpectCountersMatch(h, "frozen", tally);
}

}  // namespace
}  // namespace bulkhead::lifecycle_test
