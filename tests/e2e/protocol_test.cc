// SPDX-License-Identifier: MIT
// The front socket's frame protocol (docs/protocol.md) end to end: garbage and an oversized header
// get one BAD_REQUEST and a closed connection while another client of the same cell is served,
// and pipelined requests on one connection get their replies matched by request id.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <map>

#include "tests/e2e/e2e_test.h"

namespace bulkhead::e2e {
namespace {

using ipc::Reason;
using ipc::ReplyStatus;
using std::chrono::milliseconds;
using ::testing::HasSubstr;

bool SendRaw(const ipc::Client& client, std::string_view bytes) {
  return ::send(client.fd(), bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
         static_cast<ssize_t>(bytes.size());
}

// `bad_bytes` on one connection must get BAD_REQUEST/`reason` with `request_id` and a message
// containing `message`, then end; a request in flight on another connection is answered.
void ExpectBadRequest(std::string_view bad_bytes, Reason reason, uint64_t request_id,
                      const std::string& message) {
  Harness h(TestOptions({CellSpec{.name = "c", .max_concurrent = 2}}));
  ASSERT_STARTED(h);
  Result<ipc::Client> good = h.Connect("c");
  ASSERT_TRUE(good.ok()) << good.status().message();
  ASSERT_TRUE(good->SetTimeout(std::chrono::seconds(10)).ok());
  // It runs until the test creates `go`.
  const std::string go = h.dir() + "/go.flag";
  ASSERT_TRUE(good->Send(1, "wait-file " + go).ok());
  ASSERT_TRUE(h.WaitForCell("c", [](const nlohmann::json& c) { return c["running"] == 1; }));

  Result<ipc::Client> bad = h.Connect("c");
  ASSERT_TRUE(bad.ok()) << bad.status().message();
  ASSERT_TRUE(bad->SetTimeout(std::chrono::seconds(10)).ok());
  ASSERT_TRUE(SendRaw(*bad, bad_bytes));
  Result<ipc::Client::Reply> refused = bad->Receive();
  ASSERT_TRUE(IsReply(refused, ReplyStatus::kBadRequest, reason)) << Describe(refused);
  EXPECT_EQ(refused->header.request_id, request_id);
  EXPECT_THAT(refused->payload, HasSubstr(message));
  Result<ipc::Client::Reply> after = bad->Receive();
  ASSERT_FALSE(after.ok()) << "connection still open: " << Describe(after);
  EXPECT_THAT(after.status().message(), HasSubstr("connection closed"));

  // The other client is unaffected: its request in flight and a new one.
  testing::CreateFlag(go);
  Result<ipc::Client::Reply> first = good->Receive();
  EXPECT_OK_REPLY(first, "found " + go);
  Result<ipc::Client::Reply> second = good->Call("echo still fine");
  EXPECT_OK_REPLY(second, "still fine");

  nlohmann::json cell = h.Cell("c");
  EXPECT_EQ(cell["bad_request"], 1);
  EXPECT_EQ(cell["ok"], 2);
  EXPECT_TRUE(h.WaitForCell("c", [](const nlohmann::json& c) { return c["clients"] == 1; }))
      << "the bad client's connection was not closed: " << h.Status().dump();
}

TEST(FrontProtocol, GarbageGetsBadRequestAndItsConnectionClosed) {
  // 'G' is 0x47: a length of 0x47415242; 'G' = version 71.
  ExpectBadRequest("GARBAGE GARBAGE GARBAGE!", Reason::kMalformed, 0,
                   "unsupported protocol version");
}

TEST(FrontProtocol, OversizedHeaderGetsBadRequestAndItsConnectionClosed) {
  ipc::FrameHeader header{
      .type = ipc::FrameType::kRequest, .request_id = 77, .payload_size = 5'000'000};
  char bytes[ipc::kHeaderSize];
  ipc::EncodeHeader(header, bytes);
  // Only the header: the supervisor must refuse it without waiting for 5 MB.
  ExpectBadRequest(std::string_view(bytes, sizeof bytes), Reason::kTooLarge, 77,
                   "payload of 5000000 bytes exceeds the maximum of 4194304");
}

TEST(FrontProtocol, PipelinedRepliesAreMatchedById) {
  Harness h(TestOptions({CellSpec{.name = "c", .max_concurrent = 3}}));
  ASSERT_STARTED(h);
  Result<ipc::Client> client = h.Connect("c");
  ASSERT_TRUE(client.ok()) << client.status().message();
  ASSERT_TRUE(client->SetTimeout(std::chrono::seconds(10)).ok());
  ASSERT_TRUE(client->Send(11, "sleep 600").ok());
  ASSERT_TRUE(client->Send(12, "echo two").ok());
  ASSERT_TRUE(client->Send(13, "sleep 100").ok());

  std::map<uint64_t, std::string> replies;
  std::vector<uint64_t> order;
  for (int i = 0; i < 3; ++i) {
    Result<ipc::Client::Reply> reply = client->Receive();
    ASSERT_TRUE(IsReply(reply, ReplyStatus::kOk, Reason::kNone)) << Describe(reply);
    EXPECT_TRUE(replies.emplace(reply->header.request_id, reply->payload).second)
        << "two replies for id " << reply->header.request_id;
    order.push_back(reply->header.request_id);
  }
  EXPECT_EQ(replies,
            (std::map<uint64_t, std::string>{{11, "slept 600"}, {12, "two"}, {13, "slept 100"}}));
  // Completion order, not request order: the three ran side by side.
  EXPECT_EQ(order.back(), 11u) << ::testing::PrintToString(order);

  // Exactly one reply each: nothing else arrives.
  ASSERT_TRUE(client->SetTimeout(milliseconds(300)).ok());
  Result<ipc::Client::Reply> extra = client->Receive();
  EXPECT_FALSE(extra.ok()) << "unexpected " << Describe(extra);
}

// A client that half-closes after its request (shutdown(SHUT_WR), as `nc -N` and `socat` do) has
// said all it will say, not that it stopped listening: it still gets its reply.
TEST(FrontProtocol, HalfClosedClientStillGetsItsReply) {
  Harness h(TestOptions({CellSpec{.name = "c"}}));
  ASSERT_STARTED(h);
  Result<ipc::Client> client = h.Connect("c");
  ASSERT_TRUE(client.ok()) << client.status().message();
  ASSERT_TRUE(client->SetTimeout(std::chrono::seconds(10)).ok());
  ASSERT_TRUE(client->Send(1, "echo after half-close").ok());
  ASSERT_EQ(::shutdown(client->fd(), SHUT_WR), 0);
  EXPECT_OK_REPLY(client->Receive(), "after half-close");
}

}  // namespace
}  // namespace bulkhead::e2e
