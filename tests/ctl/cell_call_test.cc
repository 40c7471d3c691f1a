// SPDX-License-Identifier: MIT
// DescribeReply: the text and exit code of every reply kind (docs/control.md). CallCell against
// fake cells: one request with id 1, the deadline, a hang-up, and no listener.
#include "ctl/cell_call.h"

#include <gtest/gtest.h>

#include "base/exit_status.h"
#include "ipc/frame.h"
#include "tests/ctl/fake_server.h"

namespace bulkhead::ctl {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

ipc::Client::Reply MakeReply(ipc::ReplyStatus status, ipc::Reason reason, std::string payload) {
  ipc::Client::Reply reply;
  reply.header.type = ipc::FrameType::kReply;
  reply.header.status = status;
  reply.header.reason = reason;
  reply.header.request_id = 1;
  reply.header.payload_size = static_cast<uint32_t>(payload.size());
  reply.payload = std::move(payload);
  return reply;
}

std::string Detail(std::string cell, uint32_t running, uint32_t queued, uint32_t retry_after_ms) {
  std::string payload;
  ipc::AppendRejectDetail(&payload,
                          ipc::RejectDetail{std::move(cell), running, queued, retry_after_ms});
  return payload;
}

TEST(DescribeReply, OkAddsANewlineOnlyWhenMissing) {
  using ipc::Reason;
  using ipc::ReplyStatus;
  CallOutcome plain =
      DescribeReply(MakeReply(ReplyStatus::kOk, Reason::kNone, "hello"), "c", false);
  EXPECT_EQ(plain.exit_code, kExitOk);
  EXPECT_EQ(plain.out, "hello\n");
  EXPECT_EQ(plain.err, "");
  EXPECT_EQ(DescribeReply(MakeReply(ReplyStatus::kOk, Reason::kNone, "hello\n"), "c", false).out,
            "hello\n");
  EXPECT_EQ(DescribeReply(MakeReply(ReplyStatus::kOk, Reason::kNone, ""), "c", false).out, "\n");
  EXPECT_EQ(DescribeReply(MakeReply(ReplyStatus::kOk, Reason::kNone, "hello"), "c", true).out,
            "hello");
  EXPECT_EQ(DescribeReply(MakeReply(ReplyStatus::kOk, Reason::kNone, ""), "c", true).out, "");
}

TEST(DescribeReply, Rejections) {
  using ipc::Reason;
  using ipc::ReplyStatus;
  CallOutcome full = DescribeReply(
      MakeReply(ReplyStatus::kRejected, Reason::kFull, Detail("payments", 2, 1, 0)), "x", false);
  EXPECT_EQ(full.exit_code, kExitRejected);
  EXPECT_EQ(full.err, "rejected: payments full (running 2, queued 1)\n");
  EXPECT_EQ(full.out, "");

  EXPECT_EQ(DescribeReply(MakeReply(ReplyStatus::kRejected, Reason::kQueueTimeout,
                                    Detail("payments", 2, 1, 0)),
                          "x", false)
                .err,
            "rejected: queue timeout\n");
  EXPECT_EQ(DescribeReply(MakeReply(ReplyStatus::kRejected, Reason::kUnavailable,
                                    Detail("payments", 0, 0, 950)),
                          "x", false)
                .err,
            "rejected: unavailable (retry after 950 ms)\n");
  EXPECT_EQ(DescribeReply(MakeReply(ReplyStatus::kRejected, Reason::kUnavailable,
                                    Detail("payments", 0, 0, 0)),
                          "x", false)
                .err,
            "rejected: unavailable\n");
  // A payload too short to be a RejectDetail: the name asked for.
  EXPECT_EQ(
      DescribeReply(MakeReply(ReplyStatus::kRejected, Reason::kFull, "ab"), "asked", false).err,
      "rejected: asked full\n");
  // A reason of a later protocol version: its status still decides.
  CallOutcome future = DescribeReply(
      MakeReply(ReplyStatus::kRejected, static_cast<Reason>(9), Detail("p", 0, 0, 0)), "p", false);
  EXPECT_EQ(future.exit_code, kExitRejected);
  EXPECT_EQ(future.err, "rejected: unknown\n");
}

TEST(DescribeReply, FailuresAndBadRequests) {
  using ipc::Reason;
  using ipc::ReplyStatus;
  CallOutcome died =
      DescribeReply(MakeReply(ReplyStatus::kFailed, Reason::kWorkerDied, "exit 3"), "c", false);
  EXPECT_EQ(died.exit_code, kExitFailed);
  EXPECT_EQ(died.err, "failed: worker_died: exit 3\n");
  EXPECT_EQ(died.out, "");
  EXPECT_EQ(
      DescribeReply(MakeReply(ReplyStatus::kFailed, Reason::kWorkerError, "boom"), "c", false).err,
      "failed: worker_error: boom\n");
  CallOutcome bad = DescribeReply(
      MakeReply(ReplyStatus::kBadRequest, Reason::kTooLarge, "payload of 9 bytes exceeds"), "c",
      false);
  EXPECT_EQ(bad.exit_code, kExitBadRequest);
  EXPECT_EQ(bad.err, "bad request: too_large: payload of 9 bytes exceeds\n");
}

// Reads one whole REQUEST frame from `fd`.
std::optional<ipc::FrameHeader> ReadRequest(int fd, std::string* payload) {
  ipc::FrameDecoder decoder(ipc::FrameType::kRequest);
  while (true) {
    ipc::FrameView frame;
    ipc::DecodeResult result = decoder.Next(&frame);
    if (result == ipc::DecodeResult::kFrame) {
      *payload = std::string(frame.payload);
      return frame.header;
    }
    if (result == ipc::DecodeResult::kError) return std::nullopt;
    decoder.Feed(FakeServer::Read(fd, 1));
    if (decoder.buffered_bytes() == 0) return std::nullopt;
  }
}

TEST(CallCell, SendsOneRequestAndReturnsItsReply) {
  std::optional<ipc::FrameHeader> seen;
  std::string seen_payload;
  {
    FakeServer server([&](int fd) {
      seen = ReadRequest(fd, &seen_payload);
      std::string reply;
      ipc::FrameHeader header{.type = ipc::FrameType::kReply, .request_id = 1};
      ipc::AppendFrame(&reply, header, "pong");
      // In two writes, split inside the header.
      FakeServer::Write(fd, std::string_view(reply).substr(0, 5));
      FakeServer::Write(fd, std::string_view(reply).substr(5));
      FakeServer::ReadToEnd(fd);
    });
    CallResult result = CallCell(server.path(), "ping", Clock::now() + milliseconds(5000));
    ASSERT_TRUE(result.reply.has_value()) << result.error;
    EXPECT_EQ(result.reply->header.status, ipc::ReplyStatus::kOk);
    EXPECT_EQ(result.reply->payload, "pong");
  }
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(seen->request_id, 1u);
  EXPECT_EQ(seen_payload, "ping");
}

TEST(CallCell, DeadlineBoundsTheWholeExchange) {
  FakeServer server([](int fd) { FakeServer::ReadToEnd(fd); });
  auto start = Clock::now();
  CallResult result = CallCell(server.path(), "ping", Clock::now() + milliseconds(200));
  auto elapsed = Clock::now() - start;
  EXPECT_FALSE(result.reply.has_value());
  EXPECT_FALSE(result.unreachable);
  EXPECT_NE(result.error.find("timed out waiting for the reply"), std::string::npos)
      << result.error;
  EXPECT_GE(elapsed, milliseconds(200));  // never gives up early
}

TEST(CallCell, HangUpIsAnErrorNotAReply) {
  FakeServer server([](int fd) {
    std::string payload;
    ReadRequest(fd, &payload);
  });
  CallResult result = CallCell(server.path(), "ping", std::nullopt);
  EXPECT_FALSE(result.reply.has_value());
  EXPECT_FALSE(result.unreachable);
  EXPECT_NE(result.error.find("connection closed before the reply"), std::string::npos)
      << result.error;
}

TEST(CallCell, WrongRequestIdIsRefused) {
  FakeServer server([](int fd) {
    std::string payload;
    ReadRequest(fd, &payload);
    std::string reply;
    ipc::AppendFrame(&reply, ipc::FrameHeader{.type = ipc::FrameType::kReply, .request_id = 2},
                     "x");
    FakeServer::Write(fd, reply);
    FakeServer::ReadToEnd(fd);
  });
  CallResult result = CallCell(server.path(), "ping", Clock::now() + milliseconds(5000));
  EXPECT_FALSE(result.reply.has_value());
  EXPECT_NE(result.error.find("request id 2, expected 1"), std::string::npos) << result.error;
}

TEST(CallCell, NoListenerIsUnreachable) {
  testing::TempDir dir;
  CallResult result = CallCell(dir.Join("cell.sock"), "ping", std::nullopt);
  EXPECT_FALSE(result.reply.has_value());
  EXPECT_TRUE(result.unreachable);
  EXPECT_NE(result.error.find("No such file or directory"), std::string::npos) << result.error;
}

}  // namespace
}  // namespace bulkhead::ctl
