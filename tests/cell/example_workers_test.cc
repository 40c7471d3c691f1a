// SPDX-License-Identifier: MIT
// The example workers (examples/echo.cc, examples/gateway.cc) spawned as bulkheadd would.
#include <gtest/gtest.h>
#include <poll.h>

#include <string>

#include "ipc/frame.h"
#include "tests/cell/worker_fixture.h"
#include "tests/helpers/test_support.h"

namespace bulkhead::cell {
namespace {

using ::bulkhead::testing::ExamplePath;
using ::bulkhead::testing::RunningWorker;
using ::bulkhead::testing::TempDir;
using ::bulkhead::testing::WriteFileAtomically;

TEST(Echo, AnswersWithPrefixAndPayload) {
  RunningWorker worker({ExamplePath("bulkhead-echo"), "--prefix", "item "});
  ASSERT_TRUE(worker.ok()) << worker.error();
  Result<ipc::Client::Reply> reply = worker.Connect().Call("list");
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  EXPECT_EQ(reply->header.status, ipc::ReplyStatus::kOk);
  EXPECT_EQ(reply->payload, "item list");
}

// True if a reply (or EOF) is readable on `fd` within `ms` milliseconds.
bool Readable(int fd, int ms) {
  pollfd entry{fd, POLLIN, 0};
  return ::poll(&entry, 1, ms) > 0;
}

class GatewayTest : public ::testing::Test {
 protected:
  GatewayTest()
      : gates_(gates_dir_.path()), worker_({ExamplePath("bulkhead-gateway"), "--gates", gates_}) {}

  TempDir gates_dir_;
  std::string gates_;
  RunningWorker worker_;
};

TEST_F(GatewayTest, GatesOpenedWithOkAndErrorAnswerOkAndFailed) {
  ASSERT_TRUE(worker_.ok()) << worker_.error();
  ipc::Client paid = worker_.Connect();
  ipc::Client declined = worker_.Connect();
  ASSERT_TRUE(paid.Send(1, "gate p1").ok());
  ASSERT_TRUE(declined.Send(2, "gate p2").ok());

  // While both calls wait on their gates, the healthy path answers at once.
  Result<ipc::Client::Reply> healthy = worker_.Connect().Call("status");
  ASSERT_TRUE(healthy.ok()) << healthy.status().message();
  EXPECT_EQ(healthy->header.status, ipc::ReplyStatus::kOk);
  EXPECT_EQ(healthy->payload, "status");
  // A closed gate holds its call (bounded check: no answer within 100 ms).
  EXPECT_FALSE(Readable(paid.fd(), 100)) << "gate p1 answered before it was opened";

  ASSERT_TRUE(WriteFileAtomically(gates_ + "/p1", "ok paid\n").ok());
  Result<ipc::Client::Reply> ok = paid.Receive();
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->header.request_id, 1u);
  EXPECT_EQ(ok->header.status, ipc::ReplyStatus::kOk);
  EXPECT_EQ(ok->payload, "paid");

  ASSERT_TRUE(WriteFileAtomically(gates_ + "/p2", "error card declined\nignored line\n").ok());
  Result<ipc::Client::Reply> failed = declined.Receive();
  ASSERT_TRUE(failed.ok()) << failed.status().message();
  EXPECT_EQ(failed->header.request_id, 2u);
  EXPECT_EQ(failed->header.status, ipc::ReplyStatus::kFailed);
  EXPECT_EQ(failed->header.reason, ipc::Reason::kWorkerError);
  EXPECT_EQ(failed->payload, "card declined");

  // Gates stay open.
  Result<ipc::Client::Reply> again = paid.Call("gate p1");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->payload, "paid");
}

TEST_F(GatewayTest, SeveralCallsWaitOnOneGate) {
  ASSERT_TRUE(worker_.ok()) << worker_.error();
  std::vector<ipc::Client> waiting;
  for (uint64_t id = 1; id <= 3; ++id) {
    waiting.push_back(worker_.Connect());
    ASSERT_TRUE(waiting.back().Send(id, "gate shared").ok());
  }
  ASSERT_TRUE(WriteFileAtomically(gates_ + "/shared", "ok done\n").ok());
  for (ipc::Client& client : waiting) {
    Result<ipc::Client::Reply> reply = client.Receive();
    ASSERT_TRUE(reply.ok()) << reply.status().message();
    EXPECT_EQ(reply->payload, "done");
  }
}

TEST_F(GatewayTest, BadGateNameAndBadGateFileFail) {
  ASSERT_TRUE(worker_.ok()) << worker_.error();
  ipc::Client client = worker_.Connect();
  Result<ipc::Client::Reply> escape = client.Call("gate ../etc");
  ASSERT_TRUE(escape.ok()) << escape.status().message();
  EXPECT_EQ(escape->header.status, ipc::ReplyStatus::kFailed);
  EXPECT_EQ(escape->payload, "bad gate name \"../etc\"");

  ASSERT_TRUE(WriteFileAtomically(gates_ + "/odd", "maybe\n").ok());
  Result<ipc::Client::Reply> odd = client.Call("gate odd");
  ASSERT_TRUE(odd.ok()) << odd.status().message();
  EXPECT_EQ(odd->header.status, ipc::ReplyStatus::kFailed);
  EXPECT_NE(odd->payload.find("bad gate file"), std::string::npos) << odd->payload;
}

}  // namespace
}  // namespace bulkhead::cell
