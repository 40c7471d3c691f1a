// SPDX-License-Identifier: MIT
// worker_connections = "multiplex" end to end (docs/protocol.md, "Multiplexed worker
// connections"): bulkheadd and the worker SDK's test worker carry every request on one
// connection, run them concurrently, answer them in any order, and a worker that dies fails every
// request in flight on it with its exit reason.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "tests/e2e/e2e_test.h"

namespace bulkhead::e2e {
namespace {

using ipc::Reason;
using ipc::ReplyStatus;

CellSpec Multiplexed(uint32_t max_concurrent) {
  return CellSpec{.name = "m",
                  .max_concurrent = max_concurrent,
                  .max_queue = 4,
                  .queue_timeout = "20s",
                  .worker_connections = "multiplex",
                  .extra_toml = kQuickStop};
}

std::optional<ipc::Client> SendOnNewConnection(Harness& h, uint64_t id,
                                               const std::string& payload) {
  Result<ipc::Client> client = h.Connect("m");
  EXPECT_TRUE(client.ok()) << client.status().message();
  if (!client.ok()) return std::nullopt;
  EXPECT_TRUE(client->SetTimeout(std::chrono::seconds(20)).ok());
  if (!client->Send(id, payload).ok()) return std::nullopt;
  return std::move(client).value();
}

TEST(Multiplex, SdkWorkerServesRequestsOfOneConnectionConcurrentlyAndOutOfOrder) {
  testing::TempDir dir;
  const std::string gate = dir.Join("gate");
  Harness h(TestOptions({Multiplexed(4)}));
  ASSERT_STARTED(h);
  EXPECT_OK_REPLY(h.Call("m", "env BULKHEAD_WORKER_CONNECTIONS"), "multiplex");

  // The first request waits for the gate; the ones sent after it on the same worker connection
  // are answered meanwhile.
  std::optional<ipc::Client> waiting = SendOnNewConnection(h, 7, "wait-file " + gate);
  ASSERT_TRUE(waiting);
  ASSERT_TRUE(h.WaitForCell("m", [](const nlohmann::json& c) { return c["running"] == 1; }));
  EXPECT_OK_REPLY(h.Call("m", "echo later"), "later");
  EXPECT_OK_REPLY(h.Call("m", "peak"), "2");
  EXPECT_EQ(h.Cell("m")["worker_connections"], 1) << "requests went on more than one connection";

  ASSERT_TRUE(testing::WriteFileAtomically(gate, "open\n").ok());
  Result<ipc::Client::Reply> reply = waiting->Receive();
  EXPECT_OK_REPLY(reply, "found " + gate);
  EXPECT_TRUE(reply.ok() && reply->header.request_id == 7u) << Describe(reply);
  EXPECT_EQ(h.Cell("m")["worker_connections"], 1);
}

TEST(Multiplex, WorkerDeathFailsEveryRequestInFlightOnTheConnection) {
  Harness h(TestOptions({Multiplexed(4)}));
  ASSERT_STARTED(h);
  std::vector<ipc::Client> sleepers;
  for (uint64_t id = 1; id <= 3; ++id) {
    std::optional<ipc::Client> client = SendOnNewConnection(h, id, "sleep 20000");
    ASSERT_TRUE(client);
    sleepers.push_back(std::move(*client));
  }
  ASSERT_TRUE(h.WaitForCell("m", [](const nlohmann::json& c) { return c["running"] == 3; }));
  Result<ipc::Client::Reply> exited = h.Call("m", "exit 3");
  EXPECT_TRUE(IsReply(exited, ReplyStatus::kFailed, Reason::kWorkerDied)) << Describe(exited);
  for (ipc::Client& client : sleepers) {
    Result<ipc::Client::Reply> reply = client.Receive();
    EXPECT_TRUE(IsReply(reply, ReplyStatus::kFailed, Reason::kWorkerDied)) << Describe(reply);
    EXPECT_TRUE(reply.ok() && reply->payload == "exit 3") << Describe(reply);
  }
  // The next worker serves the cell on a new multiplexed connection.
  ASSERT_TRUE(h.WaitForCell("m", [](const nlohmann::json& c) {
    return c["state"] == "running" && c["starts"] == 2;
  }));
  EXPECT_OK_REPLY(h.Call("m", "echo again"), "again");
  nlohmann::json m = h.Cell("m");
  EXPECT_EQ(m["failed"], 4);
  EXPECT_EQ(m["running"], 0);
}

// The default mode is what it was: the worker's environment does not name a mode.
TEST(Multiplex, DefaultModeSetsNoVariable) {
  Harness h(TestOptions({CellSpec{.name = "d"}}));
  ASSERT_STARTED(h);
  EXPECT_OK_REPLY(h.Call("d", "env BULKHEAD_WORKER_CONNECTIONS"), "<unset>");
}

}  // namespace
}  // namespace bulkhead::e2e
