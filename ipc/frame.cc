// SPDX-License-Identifier: MIT
// Frame codec, protocol version 1 (docs/protocol.md).
#include "ipc/frame.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>

#include "base/check.h"

namespace bulkhead::ipc {
namespace {

// Header field offsets (docs/protocol.md, "Frame layout").
constexpr size_t kOffsetLength = 0;
constexpr size_t kOffsetVersion = 4;
constexpr size_t kOffsetType = 5;
constexpr size_t kOffsetStatus = 6;
constexpr size_t kOffsetReason = 7;
constexpr size_t kOffsetRequestId = 8;

// Smallest buffer the decoder allocates: one header plus a small payload.
constexpr size_t kMinBufferSize = 4096;

void PutU32(char* out, uint32_t v) {
  for (int i = 3; i >= 0; --i) {
    out[i] = static_cast<char>(v & 0xff);
    v >>= 8;
  }
}

void PutU64(char* out, uint64_t v) {
  for (int i = 7; i >= 0; --i) {
    out[i] = static_cast<char>(v & 0xff);
    v >>= 8;
  }
}

uint32_t GetU32(const char* in) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<uint8_t>(in[i]);
  return v;
}

uint64_t GetU64(const char* in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(in[i]);
  return v;
}

const char* TypeName(uint8_t type) {
  switch (static_cast<FrameType>(type)) {
    case FrameType::kRequest:
      return "REQUEST";
    case FrameType::kReply:
      return "REPLY";
  }
  return "unknown";
}

}  // namespace

const char* StatusName(ReplyStatus s) {
  switch (s) {
    case ReplyStatus::kOk:
      return "OK";
    case ReplyStatus::kRejected:
      return "REJECTED";
    case ReplyStatus::kFailed:
      return "FAILED";
    case ReplyStatus::kBadRequest:
      return "BAD_REQUEST";
  }
  return "unknown";
}

const char* ReasonName(Reason r) {
  switch (r) {
    case Reason::kNone:
      return "none";
    case Reason::kFull:
      return "full";
    case Reason::kQueueTimeout:
      return "queue_timeout";
    case Reason::kUnavailable:
      return "unavailable";
    case Reason::kTooManyConnections:
      return "too_many_connections";
    case Reason::kWorkerError:
      return "worker_error";
    case Reason::kWorkerDied:
      return "worker_died";
    case Reason::kTimeout:
      return "timeout";
    case Reason::kStalled:
      return "stalled";
    case Reason::kOomKilled:
      return "oom_killed";
    case Reason::kMalformed:
      return "malformed";
    case Reason::kTooLarge:
      return "too_large";
  }
  return "unknown";
}

void EncodeHeader(const FrameHeader& header, char out[kHeaderSize]) {
  BH_CHECK(header.payload_size <= kMaxEncodablePayload);
  PutU32(out + kOffsetLength, kLengthCoveredHeader + header.payload_size);
  out[kOffsetVersion] = static_cast<char>(kProtocolVersion);
  out[kOffsetType] = static_cast<char>(header.type);
  out[kOffsetStatus] = static_cast<char>(header.status);
  out[kOffsetReason] = static_cast<char>(header.reason);
  PutU64(out + kOffsetRequestId, header.request_id);
}

void AppendFrame(std::string* out, FrameHeader header, std::string_view payload) {
  BH_CHECK(payload.size() <= kMaxEncodablePayload);
  header.payload_size = static_cast<uint32_t>(payload.size());
  char encoded[kHeaderSize];
  EncodeHeader(header, encoded);
  out->reserve(out->size() + kHeaderSize + payload.size());
  out->append(encoded, kHeaderSize);
  out->append(payload);
}

bool IsConnectionRefusal(const FrameHeader& header) {
  return header.type == FrameType::kReply && header.status == ReplyStatus::kRejected &&
         header.reason == Reason::kTooManyConnections && header.request_id == 0;
}

bool IsValidWorkerReply(const FrameHeader& header) {
  if (header.type != FrameType::kReply) return false;
  return (header.status == ReplyStatus::kOk && header.reason == Reason::kNone) ||
         (header.status == ReplyStatus::kFailed && header.reason == Reason::kWorkerError);
}

FrameDecoder::FrameDecoder(FrameType accepted, uint32_t max_payload)
    : accepted_(accepted), max_payload_(max_payload) {
  BH_CHECK(max_payload <= kMaxEncodablePayload);
}

std::span<char> FrameDecoder::PrepareWrite(size_t min_size) {
  if (begin_ == end_) begin_ = end_ = 0;
  if (capacity_ - end_ < min_size) {
    // Compact first: move the unconsumed tail to the front.
    if (begin_ > 0) {
      std::memmove(buffer_.get(), buffer_.get() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    if (capacity_ - end_ < min_size) {
      // Grown without zeroing the new bytes (a vector's resize writes every one of them).
      const size_t grown = std::max({capacity_ * 2, end_ + min_size, kMinBufferSize});
      auto bigger = std::make_unique_for_overwrite<char[]>(grown);
      if (end_ > 0) std::memcpy(bigger.get(), buffer_.get(), end_);
      buffer_ = std::move(bigger);
      capacity_ = grown;
    }
  }
  prepared_ = capacity_ - end_;
  return std::span<char>(buffer_.get() + end_, prepared_);
}

void FrameDecoder::Commit(size_t n) {
  BH_CHECK(n <= prepared_);
  prepared_ = 0;
  // After an error, input is discarded so that a caller draining the socket does not grow memory.
  if (!failed()) end_ += n;
}

void FrameDecoder::Feed(std::string_view bytes) {
  if (failed()) return;
  std::span<char> region = PrepareWrite(bytes.size());
  if (!bytes.empty()) std::memcpy(region.data(), bytes.data(), bytes.size());
  Commit(bytes.size());
}

DecodeResult FrameDecoder::Next(FrameView* out) {
  if (failed()) return DecodeResult::kError;
  if (end_ - begin_ < kHeaderSize) return DecodeResult::kNeedMore;
  FrameHeader header;
  if (!ParseHeader(&header)) return DecodeResult::kError;
  if (end_ - begin_ - kHeaderSize < header.payload_size) return DecodeResult::kNeedMore;
  out->header = header;
  out->payload = std::string_view(buffer_.get() + begin_ + kHeaderSize, header.payload_size);
  begin_ += kHeaderSize + header.payload_size;
  return DecodeResult::kFrame;
}

bool FrameDecoder::ParseHeader(FrameHeader* header) {
  const char* in = buffer_.get() + begin_;
  const uint8_t version = static_cast<uint8_t>(in[kOffsetVersion]);
  if (version != kProtocolVersion) {
    Fail(Reason::kMalformed, "unsupported protocol version " + std::to_string(version), 0);
    return false;
  }
  const uint32_t length = GetU32(in + kOffsetLength);
  const uint8_t type = static_cast<uint8_t>(in[kOffsetType]);
  const uint8_t status = static_cast<uint8_t>(in[kOffsetStatus]);
  const uint8_t reason = static_cast<uint8_t>(in[kOffsetReason]);
  const uint64_t request_id = GetU64(in + kOffsetRequestId);

  if (length < kLengthCoveredHeader) {
    Fail(Reason::kMalformed,
         "frame length " + std::to_string(length) + " is below the minimum of " +
             std::to_string(kLengthCoveredHeader),
         request_id);
    return false;
  }
  if (type != static_cast<uint8_t>(accepted_)) {
    Fail(Reason::kMalformed,
         "frame type " + std::to_string(type) + " (" + TypeName(type) + ") where " +
             TypeName(static_cast<uint8_t>(accepted_)) + " was expected",
         request_id);
    return false;
  }
  if (accepted_ == FrameType::kRequest && (status != 0 || reason != 0)) {
    Fail(Reason::kMalformed,
         "request with status " + std::to_string(status) + " and reason " + std::to_string(reason) +
             " (both must be 0)",
         request_id);
    return false;
  }
  if (accepted_ == FrameType::kReply && status > static_cast<uint8_t>(ReplyStatus::kBadRequest)) {
    Fail(Reason::kMalformed, "unknown reply status " + std::to_string(status), request_id);
    return false;
  }
  const uint32_t payload_size = length - kLengthCoveredHeader;
  if (payload_size > max_payload_) {
    Fail(Reason::kTooLarge,
         "payload of " + std::to_string(payload_size) + " bytes exceeds the maximum of " +
             std::to_string(max_payload_),
         request_id);
    return false;
  }
  header->type = static_cast<FrameType>(type);
  header->status = static_cast<ReplyStatus>(status);
  header->reason = static_cast<Reason>(reason);
  header->request_id = request_id;
  header->payload_size = payload_size;
  return true;
}

void FrameDecoder::Fail(Reason reason, std::string message, uint64_t request_id) {
  error_reason_ = reason;
  error_message_ = std::move(message);
  error_request_id_ = request_id;
  begin_ = end_ = 0;
}

void AppendRejectDetail(std::string* out, const RejectDetail& detail) {
  char fixed[kRejectDetailFixedSize];
  PutU32(fixed, detail.running);
  PutU32(fixed + 4, detail.queued);
  PutU32(fixed + 8, detail.retry_after_ms);
  out->reserve(out->size() + kRejectDetailFixedSize + detail.cell.size());
  out->append(fixed, kRejectDetailFixedSize);
  out->append(detail.cell);
}

std::optional<RejectDetail> DecodeRejectDetail(std::string_view payload) {
  if (payload.size() < kRejectDetailFixedSize) return std::nullopt;
  RejectDetail detail;
  detail.running = GetU32(payload.data());
  detail.queued = GetU32(payload.data() + 4);
  detail.retry_after_ms = GetU32(payload.data() + 8);
  detail.cell = std::string(payload.substr(kRejectDetailFixedSize));
  return detail;
}

}  // namespace bulkhead::ipc
