// SPDX-License-Identifier: MIT
// Workers that break or stretch the worker protocol (docs/protocol.md, "Supervisor -> worker"),
// run as bulkhead-rogue-worker: a reply with a status and reason no worker may send fails the
// request; a worker that closes each connection after one reply loses no request it never read; a
// worker that serves one connection at a time is named in a warning.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/e2e/e2e_test.h"

namespace bulkhead::e2e {
namespace {

using ipc::Reason;
using ipc::ReplyStatus;

CellSpec RogueCell(const std::string& name, const std::string& mode, uint32_t max_concurrent) {
  return CellSpec{.name = name,
                  .command = {testing::BuildPath("tests/helpers/bulkhead-rogue-worker"), mode},
                  .max_concurrent = max_concurrent,
                  .max_queue = 100,
                  .queue_timeout = "10s",
                  .extra_toml = kQuickStop};
}

// OK with reason 7 (queue_timeout) is not a reply a worker may send: the client gets
// FAILED/worker_error naming what the worker sent, never OK.
TEST(WorkerProtocol, ReplyWithAReasonNoWorkerMaySendFails) {
  Harness h(TestOptions({RogueCell("odd", "bad-reason", 1)}));
  ASSERT_STARTED(h);
  Result<ipc::Client::Reply> reply = h.Call("odd", "hello");
  ASSERT_TRUE(IsReply(reply, ReplyStatus::kFailed, Reason::kWorkerError)) << Describe(reply);
  EXPECT_EQ(reply->payload,
            "worker broke the protocol: it replied with status OK and reason queue_timeout");
  const nlohmann::json cell = h.Cell("odd");
  EXPECT_EQ(cell["ok"], 0);
  EXPECT_EQ(cell["failed_by_reason"]["worker_error"], 1);
}

// The worker closes each connection after its reply. A request the supervisor sent on such a
// connection (EPIPE on the write, or ECONNRESET: the worker closed with it unread) never reached
// the worker: it is sent again on a new connection, never failed as "closed without replying".
TEST(WorkerProtocol, RequestTheWorkerNeverReadIsSentAgain) {
  Harness h(TestOptions({RogueCell("oneshot", "close-after-reply", 4)}));
  ASSERT_STARTED(h);
  constexpr int kThreads = 10;
  constexpr int kCallsPerThread = 5;
  std::vector<std::string> problems(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&h, &problems, t] {
      for (int i = 0; i < kCallsPerThread; ++i) {
        const std::string payload = "call " + std::to_string(t) + "." + std::to_string(i);
        Result<ipc::Client::Reply> reply = h.Call("oneshot", payload);
        if (!IsReply(reply, ReplyStatus::kOk, Reason::kNone) || reply->payload != payload) {
          problems[t] += payload + ": " + Describe(reply) + "\n";
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  std::string all;
  for (const std::string& p : problems) all += p;
  EXPECT_EQ(all, "") << h.Log();
  const nlohmann::json cell = h.Cell("oneshot");
  EXPECT_EQ(cell["ok"], kThreads * kCallsPerThread) << cell.dump();
  EXPECT_EQ(cell["failed"], 0) << cell.dump();
}

// The worker serves one connection at a time, to its end: with two slots, the request on the
// supervisor's second persistent connection is never read. bulkheadd says so, naming the rule.
TEST(WorkerProtocol, WorkerThatNeverAcceptsASecondConnectionIsWarnedAbout) {
  Harness h(TestOptions({RogueCell("serial", "serial", 2)}));
  ASSERT_STARTED(h);
  // Two requests at once: the supervisor sends them on two connections; the worker serves the
  // one it accepted first and then waits on it for more, never accepting the other.
  Result<ipc::Client> first = h.Connect("serial");
  ASSERT_TRUE(first.ok()) << first.status().message();
  ASSERT_TRUE(first->Send(1, "one").ok());
  // "one" runs first; the worker holds its reply until the second connection is pending, so
  // "two" is dispatched on a connection of its own and never on the first one, free again.
  ASSERT_TRUE(h.WaitForCell("serial", [](const nlohmann::json& c) { return c["running"] == 1; }))
      << h.Log();
  Result<ipc::Client> second = h.Connect("serial");
  ASSERT_TRUE(second.ok()) << second.status().message();
  ASSERT_TRUE(second->Send(1, "two").ok());
  ASSERT_TRUE(h.WaitForCell("serial", [](const nlohmann::json& c) { return c["ok"] == 1; }))
      << h.Log();
  EXPECT_TRUE(WaitFor(
      [&] {
        return h.Log().find("worker has not accepted a connection the supervisor opened") !=
               std::string::npos;
      },
      std::chrono::seconds(20)))
      << h.Log();
  EXPECT_NE(h.Log().find("serve its connections concurrently"), std::string::npos) << h.Log();
  EXPECT_EQ(h.Cell("serial")["running"], 1);
}

}  // namespace
}  // namespace bulkhead::e2e
