// SPDX-License-Identifier: MIT
// A worker that dies mid-request (or mid-reply): the client gets FAILED/worker_died naming the exit
// ("exit 3", "signal 11"), the cell restarts with a new pid and serves again, and requests that
// were queued when it died are served by the next worker.
#include <gtest/gtest.h>
#include <signal.h>

#include "tests/e2e/e2e_test.h"

namespace bulkhead::e2e {
namespace {

using ipc::Reason;
using ipc::ReplyStatus;

// Sends `payload`, which kills the worker, to a one-slot cell and checks the reply and the
// restart.
void ExpectDeathAndRestart(const std::string& payload, const std::string& expected_exit) {
  // In an AddressSanitizer build the worker's SIGSEGV would become "exit 1" without handle_segv=0.
  Harness h(TestOptions({CellSpec{.name = "fragile",
                                  .max_concurrent = 1,
                                  .environment = {{"ASAN_OPTIONS", "handle_segv=0"}}}}));
  ASSERT_STARTED(h);
  const nlohmann::json before = h.Cell("fragile");
  const int old_pid = before["pid"].get<int>();
  ASSERT_EQ(before["starts"], 1);

  Result<ipc::Client::Reply> reply = h.Call("fragile", payload);
  ASSERT_TRUE(IsReply(reply, ReplyStatus::kFailed, Reason::kWorkerDied)) << Describe(reply);
  EXPECT_EQ(reply->payload, expected_exit);

  ASSERT_TRUE(h.WaitForCell("fragile",
                            [&](const nlohmann::json& c) {
                              return c["state"] == "running" && c["restarts"] == 1 &&
                                     c["pid"].is_number_integer() && c["pid"] != old_pid;
                            }))
      << h.Status().dump() << "\n"
      << h.Log();
  EXPECT_OK_REPLY(h.Call("fragile", "echo again"), "again");

  const nlohmann::json after = h.Cell("fragile");
  EXPECT_EQ(after["starts"], 2);
  EXPECT_EQ(after["last_exit"], expected_exit);
  EXPECT_EQ(after["failed"], 1);
  EXPECT_EQ(after["failed_by_reason"]["worker_died"], 1);
  EXPECT_EQ(after["ok"], 1);
  EXPECT_EQ(after["running"], 0);
}

TEST(WorkerCrash, ExitMidRequestFailsWithTheExitCodeAndRestarts) {
  ExpectDeathAndRestart("exit 3", "exit 3");
}

TEST(WorkerCrash, SegfaultMidRequestFailsWithTheSignalAndRestarts) {
  ExpectDeathAndRestart("crash", "signal 11");
}

// The worker dies with its reply half written: the client gets the exit, never a truncated OK.
TEST(WorkerCrash, ExitMidReplyFailsWithTheExitCodeAndRestarts) {
  ExpectDeathAndRestart("exit-mid-reply 3000000", "exit 3");
}

TEST(WorkerCrash, QueuedRequestsWaitForTheNextWorker) {
  Harness h(TestOptions({CellSpec{.name = "q",
                                  .max_concurrent = 1,
                                  .max_queue = 1,
                                  .queue_timeout = "10s",
                                  .restart_delay = "100ms"}}));
  ASSERT_STARTED(h);
  const int old_pid = h.Cell("q")["pid"].get<int>();

  Result<ipc::Client> running = h.Connect("q");
  ASSERT_TRUE(running.ok()) << running.status().message();
  ASSERT_TRUE(running->Send(1, "hang").ok());
  ASSERT_TRUE(h.WaitForCell("q", [](const nlohmann::json& c) { return c["running"] == 1; }));
  Result<ipc::Client> queued = h.Connect("q");
  ASSERT_TRUE(queued.ok()) << queued.status().message();
  ASSERT_TRUE(queued->Send(2, "echo survived").ok());
  ASSERT_TRUE(h.WaitForCell("q", [](const nlohmann::json& c) { return c["queued"] == 1; }));

  // The worker is killed from outside, by the pid the supervisor reported.
  ASSERT_EQ(::kill(old_pid, SIGKILL), 0);

  ASSERT_TRUE(running->SetTimeout(std::chrono::seconds(10)).ok());
  Result<ipc::Client::Reply> died = running->Receive();
  ASSERT_TRUE(IsReply(died, ReplyStatus::kFailed, Reason::kWorkerDied)) << Describe(died);
  EXPECT_EQ(died->payload, "signal 9");

  ASSERT_TRUE(queued->SetTimeout(std::chrono::seconds(10)).ok());
  Result<ipc::Client::Reply> served = queued->Receive();
  EXPECT_OK_REPLY(served, "survived");
  EXPECT_EQ(served.ok() ? served->header.request_id : 0, 2u);

  nlohmann::json cell = h.Cell("q");
  EXPECT_NE(cell["pid"], old_pid);
  EXPECT_EQ(cell["restarts"], 1);
  EXPECT_EQ(cell["ok"], 1);
  EXPECT_EQ(cell["failed_by_reason"]["worker_died"], 1);
  EXPECT_EQ(cell["rejected"], 0);
}

}  // namespace
// A worker that breaks the protocol (a reply to a request it was not sent): the client learns why
// at once, not a misleading "closed the connection" after the orphan grace period.
TEST(WorkerCrash, ProtocolViolationIsReportedAsSuch) {
  Harness h(TestOptions({CellSpec{
      .name = "rogue", .command = {testing::BuildPath("tests/helpers/bulkhead-rogue-worker")}}}));
  ASSERT_STARTED(h);
  Result<ipc::Client::Reply> reply = h.Call("rogue", "hello");
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  EXPECT_EQ(reply->header.status, ReplyStatus::kFailed);
  EXPECT_EQ(reply->header.reason, Reason::kWorkerError);
  EXPECT_EQ(reply->payload,
            "worker broke the protocol: worker replied to a request it was not sent");
  EXPECT_TRUE(WaitFor([&] {
    return h.Log().find("worker broke the protocol") != std::string::npos;
  })) << h.Log();
}

}  // namespace bulkhead::e2e
