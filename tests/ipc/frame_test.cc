// SPDX-License-Identifier: MIT
// Unit tests for the frame codec (ipc/frame.h) against docs/protocol.md.
#include "ipc/frame.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace bulkhead::ipc {
namespace {

// A header written field by field, independent of EncodeHeader, so malformed ones can be built.
std::string RawHeader(uint32_t length, uint8_t version, uint8_t type, uint8_t status,
                      uint8_t reason, uint64_t request_id) {
  std::string out;
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>(length >> shift));
  out.push_back(static_cast<char>(version));
  out.push_back(static_cast<char>(type));
  out.push_back(static_cast<char>(status));
  out.push_back(static_cast<char>(reason));
  for (int shift = 56; shift >= 0; shift -= 8) {
    out.push_back(static_cast<char>(request_id >> shift));
  }
  return out;
}

std::string Request(uint64_t id, std::string_view payload) {
  std::string out;
  AppendFrame(&out, FrameHeader{.type = FrameType::kRequest, .request_id = id}, payload);
  return out;
}

// Drains every complete frame; returns their payloads. Fails the test on kError.
std::vector<std::string> DrainPayloads(FrameDecoder* decoder) {
  std::vector<std::string> payloads;
  FrameView frame;
  DecodeResult result;
  while ((result = decoder->Next(&frame)) == DecodeResult::kFrame) {
    payloads.emplace_back(frame.payload);
  }
  EXPECT_EQ(result, DecodeResult::kNeedMore) << decoder->error_message();
  return payloads;
}

// The two examples of docs/protocol.md, "Example", byte for byte.
TEST(FrameHeader, EncodesDocumentedRequestExample) {
  std::string out;
  AppendFrame(&out, FrameHeader{.type = FrameType::kRequest, .request_id = 1}, "hello");
  const std::string expected(
      "\x00\x00\x00\x11\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01"
      "hello",
      21);
  EXPECT_EQ(out, expected);
}

TEST(FrameHeader, EncodesDocumentedRejectExample) {
  std::string payload;
  AppendRejectDetail(&payload, RejectDetail{.cell = "api", .running = 4, .queued = 16});
  std::string out;
  AppendFrame(&out,
              FrameHeader{.type = FrameType::kReply,
                          .status = ReplyStatus::kRejected,
                          .reason = Reason::kFull,
                          .request_id = 1},
              payload);
  const std::string expected(
      "\x00\x00\x00\x1b\x01\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x01"
      "\x00\x00\x00\x04\x00\x00\x00\x10\x00\x00\x00\x00"
      "api",
      31);
  EXPECT_EQ(out, expected);
}

TEST(FrameHeader, EncodeHeaderWritesEveryField) {
  FrameHeader header{.type = FrameType::kReply,
                     .status = ReplyStatus::kFailed,
                     .reason = Reason::kOomKilled,
                     .request_id = 0x0102030405060708,
                     .payload_size = 0x01000000};
  char out[kHeaderSize];
  EncodeHeader(header, out);
  EXPECT_EQ(std::string(out, kHeaderSize),
            RawHeader(12 + 0x01000000, 1, 2, 2, 20, 0x0102030405060708));
}

TEST(FrameHeader, AppendFrameTakesSizeFromPayload) {
  std::string out = "prefix";
  AppendFrame(&out, FrameHeader{.request_id = 9, .payload_size = 1234}, "abc");
  ASSERT_EQ(out.size(), 6 + kHeaderSize + 3);
  EXPECT_EQ(out.substr(6, kHeaderSize), RawHeader(15, 1, 1, 0, 0, 9));
  EXPECT_EQ(out.substr(6 + kHeaderSize), "abc");
}

TEST(FrameDecoder, RoundTripsEveryReplyStatus) {
  const std::vector<std::pair<ReplyStatus, Reason>> cases = {
      {ReplyStatus::kOk, Reason::kNone},
      {ReplyStatus::kRejected, Reason::kFull},
      {ReplyStatus::kRejected, Reason::kQueueTimeout},
      {ReplyStatus::kRejected, Reason::kUnavailable},
      {ReplyStatus::kFailed, Reason::kWorkerError},
      {ReplyStatus::kFailed, Reason::kWorkerDied},
      {ReplyStatus::kFailed, Reason::kTimeout},
      {ReplyStatus::kFailed, Reason::kStalled},
      {ReplyStatus::kFailed, Reason::kOomKilled},
      {ReplyStatus::kBadRequest, Reason::kMalformed},
      {ReplyStatus::kBadRequest, Reason::kTooLarge},
  };
  uint64_t id = 0xfedcba9876543210;
  for (const auto& [status, reason] : cases) {
    SCOPED_TRACE(std::string(StatusName(status)) + "/" + ReasonName(reason));
    std::string payload = std::string("payload for ") + ReasonName(reason);
    std::string bytes;
    AppendFrame(
        &bytes,
        FrameHeader{
            .type = FrameType::kReply, .status = status, .reason = reason, .request_id = id},
        payload);
    FrameDecoder decoder(FrameType::kReply);
    decoder.Feed(bytes);
    FrameView frame;
    ASSERT_EQ(decoder.Next(&frame), DecodeResult::kFrame) << decoder.error_message();
    EXPECT_EQ(frame.header.type, FrameType::kReply);
    EXPECT_EQ(frame.header.status, status);
    EXPECT_EQ(frame.header.reason, reason);
    EXPECT_EQ(frame.header.request_id, id);
    EXPECT_EQ(frame.header.payload_size, payload.size());
    EXPECT_EQ(frame.payload, payload);
    EXPECT_EQ(decoder.Next(&frame), DecodeResult::kNeedMore);
    EXPECT_EQ(decoder.buffered_bytes(), 0u);
    ++id;
  }
}

TEST(FrameDecoder, RoundTripsRequestWithEmptyPayload) {
  FrameDecoder decoder(FrameType::kRequest);
  decoder.Feed(Request(0, ""));
  FrameView frame;
  ASSERT_EQ(decoder.Next(&frame), DecodeResult::kFrame);
  EXPECT_EQ(frame.header.type, FrameType::kRequest);
  EXPECT_EQ(frame.header.request_id, 0u);
  EXPECT_TRUE(frame.payload.empty());
}

TEST(FrameDecoder, PassesUnknownReplyReasonThrough) {
  FrameDecoder decoder(FrameType::kReply);
  decoder.Feed(RawHeader(12, 1, 2, 2, 99, 5));
  FrameView frame;
  ASSERT_EQ(decoder.Next(&frame), DecodeResult::kFrame) << decoder.error_message();
  EXPECT_EQ(static_cast<uint8_t>(frame.header.reason), 99);
  EXPECT_STREQ(ReasonName(frame.header.reason), "unknown");
}

TEST(FrameDecoder, HandlesSplitAtEveryByteBoundary) {
  const std::string stream = Request(1, "alpha") + Request(2, "") + Request(3, "gamma-gamma");
  const std::vector<std::string> expected = {"alpha", "", "gamma-gamma"};
  for (size_t split = 0; split <= stream.size(); ++split) {
    SCOPED_TRACE("split at " + std::to_string(split));
    FrameDecoder decoder(FrameType::kRequest);
    decoder.Feed(std::string_view(stream).substr(0, split));
    std::vector<std::string> payloads = DrainPayloads(&decoder);
    decoder.Feed(std::string_view(stream).substr(split));
    for (std::string& p : DrainPayloads(&decoder)) payloads.push_back(std::move(p));
    EXPECT_EQ(payloads, expected);
    EXPECT_EQ(decoder.buffered_bytes(), 0u);
  }
}

TEST(FrameDecoder, HandlesOneByteAtATime) {
  const std::string stream = Request(1, "alpha") + Request(2, "beta");
  FrameDecoder decoder(FrameType::kRequest);
  std::vector<std::string> payloads;
  for (char c : stream) {
    decoder.Feed(std::string_view(&c, 1));
    for (std::string& p : DrainPayloads(&decoder)) payloads.push_back(std::move(p));
  }
  EXPECT_EQ(payloads, (std::vector<std::string>{"alpha", "beta"}));
}

TEST(FrameDecoder, DecodesManyFramesFromOneFeed) {
  std::string stream;
  std::vector<std::string> expected;
  for (int i = 0; i < 1000; ++i) {
    expected.push_back("payload-" + std::to_string(i));
    stream += Request(static_cast<uint64_t>(i), expected.back());
  }
  FrameDecoder decoder(FrameType::kRequest);
  decoder.Feed(stream);
  std::vector<uint64_t> ids;
  std::vector<std::string> payloads;
  FrameView frame;
  while (decoder.Next(&frame) == DecodeResult::kFrame) {
    ids.push_back(frame.header.request_id);
    payloads.emplace_back(frame.payload);
  }
  ASSERT_EQ(payloads, expected);
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(ids[i], i);
}

TEST(FrameDecoder, DecodesThroughPrepareWriteAndCommit) {
  const std::string stream = Request(7, std::string(10000, 'x')) + Request(8, "tail");
  FrameDecoder decoder(FrameType::kRequest);
  std::vector<std::string> payloads;
  size_t offset = 0;
  while (offset < stream.size()) {
    std::span<char> region = decoder.PrepareWrite(777);
    ASSERT_GE(region.size(), 777u);
    // Like a short read(2): fill less than offered.
    size_t n = std::min<size_t>(777, stream.size() - offset);
    std::memcpy(region.data(), stream.data() + offset, n);
    decoder.Commit(n);
    offset += n;
    for (std::string& p : DrainPayloads(&decoder)) payloads.push_back(std::move(p));
  }
  EXPECT_EQ(payloads, (std::vector<std::string>{std::string(10000, 'x'), "tail"}));
}

TEST(FrameDecoder, CommitOfZeroAddsNothing) {
  FrameDecoder decoder(FrameType::kRequest);
  decoder.PrepareWrite(64);
  decoder.Commit(0);
  EXPECT_EQ(decoder.buffered_bytes(), 0u);
  FrameView frame;
  EXPECT_EQ(decoder.Next(&frame), DecodeResult::kNeedMore);
}

TEST(FrameDecoderDeathTest, CommitBeyondPreparedRegionCrashes) {
  FrameDecoder decoder(FrameType::kRequest);
  size_t size = decoder.PrepareWrite(16).size();
  EXPECT_DEATH(decoder.Commit(size + 1), "n <= prepared_");
}

TEST(FrameDecoder, AcceptsPayloadOfExactlyTheMaximum) {
  FrameDecoder decoder(FrameType::kRequest, /*max_payload=*/8);
  decoder.Feed(Request(1, "12345678"));
  FrameView frame;
  EXPECT_EQ(decoder.Next(&frame), DecodeResult::kFrame) << decoder.error_message();
}

TEST(FrameDecoder, RejectsOversizedPayloadFromHeaderAlone) {
  FrameDecoder decoder(FrameType::kRequest);
  // Only the header of a 5000000-byte frame: the error must not wait for the payload.
  decoder.Feed(RawHeader(12 + 5000000, 1, 1, 0, 0, 42));
  FrameView frame;
  ASSERT_EQ(decoder.Next(&frame), DecodeResult::kError);
  EXPECT_EQ(decoder.error_reason(), Reason::kTooLarge);
  EXPECT_EQ(decoder.error_request_id(), 42u);
  EXPECT_EQ(decoder.error_message(), "payload of 5000000 bytes exceeds the maximum of 4194304");
}

TEST(FrameDecoder, RejectsPayloadOneOverConfiguredMaximum) {
  FrameDecoder decoder(FrameType::kRequest, /*max_payload=*/8);
  decoder.Feed(Request(3, "123456789"));
  FrameView frame;
  ASSERT_EQ(decoder.Next(&frame), DecodeResult::kError);
  EXPECT_EQ(decoder.error_reason(), Reason::kTooLarge);
  EXPECT_EQ(decoder.error_request_id(), 3u);
}

TEST(FrameDecoder, RejectsLargestEncodableLength) {
  FrameDecoder decoder(FrameType::kRequest, kMaxEncodablePayload - 1);
  decoder.Feed(RawHeader(UINT32_MAX, 1, 1, 0, 0, 1));
  FrameView frame;
  ASSERT_EQ(decoder.Next(&frame), DecodeResult::kError);
  EXPECT_EQ(decoder.error_reason(), Reason::kTooLarge);
}

struct MalformedCase {
  const char* name;
  FrameType accepted;
  std::string header;
  uint64_t expected_request_id;
  const char* expected_message;
};

TEST(FrameDecoder, RejectsMalformedHeaders) {
  const std::vector<MalformedCase> cases = {
      {"bad version", FrameType::kRequest, RawHeader(12, 7, 1, 0, 0, 11), 0,
       "unsupported protocol version 7"},
      {"version 0", FrameType::kReply, RawHeader(12, 0, 2, 0, 0, 11), 0,
       "unsupported protocol version 0"},
      {"length below 12", FrameType::kRequest, RawHeader(11, 1, 1, 0, 0, 12), 12,
       "frame length 11 is below the minimum of 12"},
      {"length 0", FrameType::kReply, RawHeader(0, 1, 2, 0, 0, 13), 13,
       "frame length 0 is below the minimum of 12"},
      {"reply where request expected", FrameType::kRequest, RawHeader(12, 1, 2, 0, 0, 14), 14,
       "frame type 2 (REPLY) where REQUEST was expected"},
      {"request where reply expected", FrameType::kReply, RawHeader(12, 1, 1, 0, 0, 15), 15,
       "frame type 1 (REQUEST) where REPLY was expected"},
      {"unknown type", FrameType::kRequest, RawHeader(12, 1, 9, 0, 0, 16), 16,
       "frame type 9 (unknown) where REQUEST was expected"},
      {"request with status", FrameType::kRequest, RawHeader(12, 1, 1, 1, 0, 17), 17,
       "request with status 1 and reason 0 (both must be 0)"},
      {"request with reason", FrameType::kRequest, RawHeader(12, 1, 1, 0, 16, 18), 18,
       "request with status 0 and reason 16 (both must be 0)"},
      {"reply status 4", FrameType::kReply, RawHeader(12, 1, 2, 4, 0, 19), 19,
       "unknown reply status 4"},
  };
  for (const MalformedCase& c : cases) {
    SCOPED_TRACE(c.name);
    FrameDecoder decoder(c.accepted);
    decoder.Feed(c.header);
    FrameView frame;
    ASSERT_EQ(decoder.Next(&frame), DecodeResult::kError);
    EXPECT_EQ(decoder.error_reason(), Reason::kMalformed);
    EXPECT_EQ(decoder.error_request_id(), c.expected_request_id);
    EXPECT_EQ(decoder.error_message(), c.expected_message);
  }
}

TEST(FrameDecoder, ReportsNoErrorBeforeOne) {
  FrameDecoder decoder(FrameType::kRequest);
  decoder.Feed(RawHeader(12, 7, 1, 0, 0, 1).substr(0, kHeaderSize - 1));
  FrameView frame;
  EXPECT_EQ(decoder.Next(&frame), DecodeResult::kNeedMore);
  EXPECT_FALSE(decoder.failed());
  EXPECT_EQ(decoder.error_reason(), Reason::kNone);
  EXPECT_EQ(decoder.error_message(), "");
}

TEST(FrameDecoder, ErrorIsSticky) {
  FrameDecoder decoder(FrameType::kRequest);
  decoder.Feed(Request(1, "good"));
  decoder.Feed(RawHeader(12, 1, 1, 3, 0, 2));
  FrameView frame;
  ASSERT_EQ(decoder.Next(&frame), DecodeResult::kFrame);
  EXPECT_EQ(frame.payload, "good");
  ASSERT_EQ(decoder.Next(&frame), DecodeResult::kError);
  // Valid input after the error changes nothing, through either write path.
  decoder.Feed(Request(3, "also good"));
  EXPECT_EQ(decoder.Next(&frame), DecodeResult::kError);
  std::string more = Request(4, "x");
  std::span<char> region = decoder.PrepareWrite(more.size());
  std::memcpy(region.data(), more.data(), more.size());
  decoder.Commit(more.size());
  EXPECT_EQ(decoder.Next(&frame), DecodeResult::kError);
  EXPECT_EQ(decoder.error_request_id(), 2u);
  EXPECT_EQ(decoder.error_reason(), Reason::kMalformed);
  EXPECT_EQ(decoder.buffered_bytes(), 0u);
}

TEST(FrameDecoder, ReusesBufferAcrossManySmallFrames) {
  FrameDecoder decoder(FrameType::kRequest);
  const std::string frame_bytes = Request(1, std::string(100, 'p'));
  // Warm up, then check that the buffer is never resized (so never reallocated).
  decoder.Feed(frame_bytes);
  FrameView frame;
  ASSERT_EQ(decoder.Next(&frame), DecodeResult::kFrame);
  const size_t capacity = decoder.buffer_capacity();
  for (int i = 0; i < 10000; ++i) {
    // Three and a half frames per input, so a partial frame is always left to compact.
    std::string input = frame_bytes + frame_bytes + frame_bytes + frame_bytes.substr(0, 50);
    if (i > 0) input = frame_bytes.substr(50) + input;
    decoder.Feed(input);
    int frames = 0;
    while (decoder.Next(&frame) == DecodeResult::kFrame) ++frames;
    ASSERT_EQ(frames, i > 0 ? 4 : 3);
    ASSERT_EQ(decoder.buffer_capacity(), capacity);
  }
}

TEST(FrameDecoder, ReusesBufferOnTheReadPath) {
  FrameDecoder decoder(FrameType::kRequest);
  const std::string stream = Request(1, std::string(300, 'q'));
  size_t capacity = 0;
  for (int i = 0; i < 2000; ++i) {
    // Reads of 64 KiB offered, 101 bytes returned: frames always straddle reads.
    size_t offset = 0;
    while (offset < stream.size()) {
      std::span<char> region = decoder.PrepareWrite(65536);
      size_t n = std::min<size_t>(101, stream.size() - offset);
      std::memcpy(region.data(), stream.data() + offset, n);
      decoder.Commit(n);
      offset += n;
      FrameView frame;
      while (decoder.Next(&frame) == DecodeResult::kFrame) {
      }
    }
    if (i == 0) capacity = decoder.buffer_capacity();
    ASSERT_EQ(decoder.buffer_capacity(), capacity) << "iteration " << i;
  }
  EXPECT_LE(capacity, 2 * 65536u);
}

TEST(IsValidWorkerReply, AllowsOnlyOkAndWorkerError) {
  EXPECT_TRUE(IsValidWorkerReply(FrameHeader{.type = FrameType::kReply}));
  EXPECT_TRUE(IsValidWorkerReply(FrameHeader{
      .type = FrameType::kReply, .status = ReplyStatus::kFailed, .reason = Reason::kWorkerError}));
  EXPECT_FALSE(IsValidWorkerReply(FrameHeader{.type = FrameType::kRequest}));
  EXPECT_FALSE(IsValidWorkerReply(
      FrameHeader{.type = FrameType::kReply, .status = ReplyStatus::kOk, .reason = Reason::kFull}));
  EXPECT_FALSE(IsValidWorkerReply(FrameHeader{
      .type = FrameType::kReply, .status = ReplyStatus::kFailed, .reason = Reason::kWorkerDied}));
  EXPECT_FALSE(IsValidWorkerReply(FrameHeader{
      .type = FrameType::kReply, .status = ReplyStatus::kFailed, .reason = Reason::kNone}));
  EXPECT_FALSE(IsValidWorkerReply(FrameHeader{
      .type = FrameType::kReply, .status = ReplyStatus::kRejected, .reason = Reason::kFull}));
  EXPECT_FALSE(IsValidWorkerReply(FrameHeader{.type = FrameType::kReply,
                                              .status = ReplyStatus::kBadRequest,
                                              .reason = Reason::kMalformed}));
}

TEST(Names, StatusNames) {
  EXPECT_STREQ(StatusName(ReplyStatus::kOk), "OK");
  EXPECT_STREQ(StatusName(ReplyStatus::kRejected), "REJECTED");
  EXPECT_STREQ(StatusName(ReplyStatus::kFailed), "FAILED");
  EXPECT_STREQ(StatusName(ReplyStatus::kBadRequest), "BAD_REQUEST");
  EXPECT_STREQ(StatusName(static_cast<ReplyStatus>(4)), "unknown");
}

TEST(Names, ReasonNames) {
  const std::vector<std::pair<Reason, const char*>> cases = {
      {Reason::kNone, "none"},
      {Reason::kFull, "full"},
      {Reason::kQueueTimeout, "queue_timeout"},
      {Reason::kUnavailable, "unavailable"},
      {Reason::kTooManyConnections, "too_many_connections"},
      {Reason::kWorkerError, "worker_error"},
      {Reason::kWorkerDied, "worker_died"},
      {Reason::kTimeout, "timeout"},
      {Reason::kStalled, "stalled"},
      {Reason::kOomKilled, "oom_killed"},
      {Reason::kMalformed, "malformed"},
      {Reason::kTooLarge, "too_large"},
      {static_cast<Reason>(5), "unknown"},
      {static_cast<Reason>(255), "unknown"},
  };
  for (const auto& [reason, name] : cases) {
    EXPECT_STREQ(ReasonName(reason), name) << static_cast<int>(reason);
  }
}

TEST(RejectDetail, RoundTrips) {
  RejectDetail detail{
      .cell = "payments-eu", .running = 8, .queued = 0xfffffffe, .retry_after_ms = 250};
  std::string payload;
  AppendRejectDetail(&payload, detail);
  ASSERT_EQ(payload.size(), kRejectDetailFixedSize + detail.cell.size());
  // Big-endian fields in the documented order.
  EXPECT_EQ(payload.substr(0, 12),
            std::string("\x00\x00\x00\x08\xff\xff\xff\xfe\x00\x00\x00\xfa", 12));
  std::optional<RejectDetail> decoded = DecodeRejectDetail(payload);
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(decoded->cell, "payments-eu");
  EXPECT_EQ(decoded->running, 8u);
  EXPECT_EQ(decoded->queued, 0xfffffffeu);
  EXPECT_EQ(decoded->retry_after_ms, 250u);
}

TEST(RejectDetail, AcceptsEmptyCellName) {
  std::string payload;
  AppendRejectDetail(&payload, RejectDetail{.running = 1});
  ASSERT_EQ(payload.size(), kRejectDetailFixedSize);
  std::optional<RejectDetail> decoded = DecodeRejectDetail(payload);
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(decoded->cell, "");
  EXPECT_EQ(decoded->running, 1u);
}

TEST(RejectDetail, RefusesShortPayload) {
  std::string payload;
  AppendRejectDetail(&payload, RejectDetail{.cell = "c"});
  for (size_t size = 0; size < kRejectDetailFixedSize; ++size) {
    EXPECT_FALSE(DecodeRejectDetail(std::string_view(payload).substr(0, size)).has_value()) << size;
  }
}

// The buffer grows without zeroing (a worker link's first read asks for 64 KiB): a growth after a
// frame was taken compacts first and keeps the part of the next frame already read, byte for byte.
TEST(FrameDecoder, GrowingKeepsThePartOfAFrameAlreadyRead) {
  FrameDecoder decoder(FrameType::kRequest);
  const std::string first = Request(1, "first");
  const std::string second = Request(2, std::string(3000, 'q') + "end");
  decoder.Feed(first + second.substr(0, 40));
  FrameView frame;
  ASSERT_EQ(decoder.Next(&frame), DecodeResult::kFrame);
  EXPECT_EQ(frame.payload, "first");
  ASSERT_EQ(decoder.Next(&frame), DecodeResult::kNeedMore);
  const size_t before = decoder.buffer_capacity();
  std::span<char> region = decoder.PrepareWrite(before * 4);
  ASSERT_GE(region.size(), before * 4);
  EXPECT_GT(decoder.buffer_capacity(), before);
  std::memcpy(region.data(), second.data() + 40, second.size() - 40);
  decoder.Commit(second.size() - 40);
  ASSERT_EQ(decoder.Next(&frame), DecodeResult::kFrame);
  EXPECT_EQ(frame.header.request_id, 2u);
  EXPECT_EQ(frame.payload, std::string(3000, 'q') + "end");
  EXPECT_EQ(decoder.buffered_bytes(), 0u);
}

}  // namespace
}  // namespace bulkhead::ipc
