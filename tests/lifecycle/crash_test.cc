// SPDX-License-Identifier: MIT
// Requests across a worker's death (issue 4): what runs gets FAILED/worker_died with the exit
// ("exit 3", "signal 11"); what waits in the queue stays there and is served by the next worker
// when its queue_timeout allows, and is refused as queue_timeout when the backoff outlasts it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include "tests/lifecycle/lifecycle_fixture.h"

namespace bulkhead::lifecycle_test {
namespace {

// In an AddressSanitizer build a SIGSEGV would become "exit 1" without handle_segv=0.
const std::vector<std::pair<std::string, std::string>> kPlainSegv = {
    {"ASAN_OPTIONS", "handle_segv=0"}};

// Cell "crashy": one slot, `max_queue` places waiting up to `queue_timeout`, a worker whose
// SIGSEGV is a plain signal death, restarted after `restart_delay`.
CellSpec SegfaultingCell(uint32_t max_queue, std::string queue_timeout, std::string restart_delay) {
  return CellSpec{.name = "crashy",
                  .max_concurrent = 1,
                  .max_queue = max_queue,
                  .queue_timeout = std::move(queue_timeout),
                  .restart_delay = std::move(restart_delay),
                  .environment = kPlainSegv};
}

TEST(Crash, ExitMidRequestFailsEveryRequestInFlightWithTheExit) {
  Harness h(TestOptions({CellSpec{.name = "crashy", .max_concurrent = 3}}));
  ASSERT_STARTED(h);
  Tally tally;
  const int old_pid = WorkerPid(h, "crashy");

  Result<ipc::Client> waiting = SendThenWaitFor(h, "crashy", 1, "hang", "running", 1);
  ASSERT_TRUE(waiting.ok()) << waiting.status().message();
  // A running request whose client hangs up: its outcome, the death, is dropped.
  Result<ipc::Client> gone = SendThenWaitFor(h, "crashy", 3, "hang", "running", 2);
  ASSERT_TRUE(gone.ok()) << gone.status().message();
  gone->Close();
  tally.CountAbandoned();
  ASSERT_TRUE(h.WaitForCell("crashy", [](const nlohmann::json& c) { return c["clients"] == 1; }));
  Result<ipc::Client> exiting = SendOn(h, "crashy", 2, "exit 3");
  ASSERT_TRUE(exiting.ok()) << exiting.status().message();

  for (ipc::Client* client : {&*waiting, &*exiting}) {
    Result<ipc::Client::Reply> reply = client->Receive();
    tally.Count(reply);
    EXPECT_TRUE(IsReply(reply, ReplyStatus::kFailed, Reason::kWorkerDied)) << Describe(reply);
    EXPECT_EQ(reply.ok() ? reply->payload : "", "exit 3");
  }
  ASSERT_TRUE(NewWorkerRuns(h, "crashy", old_pid));
  EXPECT_TRUE(Served(h, "crashy", "echo next", "next", tally));

  nlohmann::json c = h.Cell("crashy");
  EXPECT_EQ(c["last_exit"], "exit 3") << c.dump();
  EXPECT_EQ(c["failed_by_reason"]["worker_died"], 2) << c.dump();
  EXPECT_EQ(c["dropped"], 1) << c.dump();
  EXPECT_EQ(c["restarts"], 1) << c.dump();
  ExpectCountersMatch(h, "crashy", tally);
}

TEST(Crash, SegfaultKeepsTheQueueForTheNextWorker) {
  // The backoff (400 to 500 ms) is shorter than queue_timeout: requests wait for the next worker.
  Harness h(TestOptions({SegfaultingCell(8, "10s", "500ms")}));
  ASSERT_STARTED(h);
  Tally tally;
  const int old_pid = WorkerPid(h, "crashy");

  // One request running, three queued behind it, then the worker segfaults.
  Result<ipc::Client> running = SendThenWaitFor(h, "crashy", 1, "hang", "running", 1);
  ASSERT_TRUE(running.ok()) << running.status().message();
  std::vector<ipc::Client> queued;
  auto enqueue = [&](uint64_t id) {
    Result<ipc::Client> client = SendOn(h, "crashy", id, "echo queued " + std::to_string(id));
    ASSERT_TRUE(client.ok()) << client.status().message();
    queued.push_back(std::move(client).value());
    const int expected = static_cast<int>(queued.size());
    ASSERT_TRUE(h.WaitForCell("crashy", [&](const nlohmann::json& c) {
      return c["queued"] == expected;
    })) << h.Cell("crashy").dump();
  };
  for (uint64_t id = 2; id <= 4; ++id) ASSERT_NO_FATAL_FAILURE(enqueue(id));
  ASSERT_EQ(::kill(old_pid, SIGSEGV), 0);

  Result<ipc::Client::Reply> died = running->Receive();
  tally.Count(died);
  EXPECT_TRUE(IsReply(died, ReplyStatus::kFailed, Reason::kWorkerDied)) << Describe(died);
  EXPECT_EQ(died.ok() ? died->payload : "", "signal 11");

  // During the backoff: what was queued is still queued, a new request queues behind it, and a
  // queued request whose client hangs up is cancelled.
  nlohmann::json c = h.Cell("crashy");
  if (c["state"] == "backoff" && c["next_start_in_ms"] > 150) {
    EXPECT_EQ(c["queued"], 3) << c.dump();
    ASSERT_NO_FATAL_FAILURE(enqueue(5));
    Result<ipc::Client> gone = SendOn(h, "crashy", 6, "echo gone");
    ASSERT_TRUE(gone.ok()) << gone.status().message();
    ASSERT_TRUE(h.WaitForCell("crashy", [](const nlohmann::json& c) {
      return c["queued"] == 5 || c["state"] != "backoff";
    }));
    gone->Close();
    tally.CountAbandoned();
  } else {
    ADD_FAILURE() << "the test was too slow to see the backoff: " << c.dump();
  }

  for (size_t i = 0; i < queued.size(); ++i) {
    const uint64_t id = i + 2;
    Result<ipc::Client::Reply> reply = queued[i].Receive();
    tally.Count(reply);
    EXPECT_OK_REPLY(reply, "queued " + std::to_string(id));
    EXPECT_EQ(reply.ok() ? reply->header.request_id : 0, id);
  }
  c = h.Cell("crashy");
  EXPECT_NE(c["pid"], old_pid) << c.dump();
  EXPECT_EQ(c["last_exit"], "signal 11") << c.dump();
  EXPECT_EQ(c["restarts"], 1) << c.dump();
  EXPECT_EQ(c["rejected"], 0) << c.dump();
  ASSERT_TRUE(h.WaitForCell("crashy", [](const nlohmann::json& c) {
    return c["cancelled"].get<int>() + c["dropped"].get<int>() == 1;
  })) << h.Cell("crashy").dump();
  ExpectCountersMatch(h, "crashy", tally);
}

TEST(Crash, QueuedRequestsThatOutwaitTheBackoffAreRefusedAsQueueTimeout) {
  // The first backoff (800 to 1000 ms) is longer than queue_timeout (300 ms).
  Harness h(TestOptions({SegfaultingCell(2, "300ms", "1s")}));
  ASSERT_STARTED(h);
  Tally tally;
  const int old_pid = WorkerPid(h, "crashy");

  Result<ipc::Client> running = SendThenWaitFor(h, "crashy", 1, "hang", "running", 1);
  ASSERT_TRUE(running.ok()) << running.status().message();
  Result<ipc::Client> queued = SendThenWaitFor(h, "crashy", 2, "echo too late", "queued", 1);
  ASSERT_TRUE(queued.ok()) << queued.status().message();
  ASSERT_EQ(::kill(old_pid, SIGSEGV), 0);

  Result<ipc::Client::Reply> died = running->Receive();
  tally.Count(died);
  EXPECT_TRUE(IsReply(died, ReplyStatus::kFailed, Reason::kWorkerDied)) << Describe(died);
  EXPECT_EQ(died.ok() ? died->payload : "", "signal 11");
  Result<ipc::Client::Reply> expired = queued->Receive();
  tally.Count(expired);
  EXPECT_TRUE(IsReply(expired, ReplyStatus::kRejected, Reason::kQueueTimeout)) << Describe(expired);

  // New requests during that backoff are refused at once, with retry-after.
  ASSERT_TRUE(h.WaitForCell("crashy", [](const nlohmann::json& c) {
    return c["state"] == "backoff" && c["next_start_in_ms"] > 400;
  })) << h.Status().dump();
  Result<ipc::Client::Reply> refused = h.Call("crashy", "echo now");
  tally.Count(refused);
  ASSERT_TRUE(IsReply(refused, ReplyStatus::kRejected, Reason::kUnavailable)) << Describe(refused);
  std::optional<ipc::RejectDetail> detail = ipc::DecodeRejectDetail(refused->payload);
  ASSERT_TRUE(detail.has_value());
  EXPECT_GT(detail->retry_after_ms, 300u);
  EXPECT_LE(detail->retry_after_ms, 1000u);

  ASSERT_TRUE(NewWorkerRuns(h, "crashy", old_pid));
  EXPECT_TRUE(Served(h, "crashy", "echo again", "again", tally));
  nlohmann::json c = h.Cell("crashy");
  EXPECT_EQ(c["rejected_by_reason"]["queue_timeout"], 1) << c.dump();
  EXPECT_EQ(c["rejected_by_reason"]["unavailable"], 1) << c.dump();
  EXPECT_EQ(c["rejected_by_reason"]["full"], 0) << c.dump();
  ExpectCountersMatch(h, "crashy", tally);
}

}  // namespace
}  // namespace bulkhead::lifecycle_test
