// SPDX-License-Identifier: MIT
// The bulkhead frame protocol, version 1 (docs/protocol.md): a 16-byte big-endian header and a
// payload, spoken client <-> supervisor and supervisor <-> worker. Pure codec, no I/O.
// Thread-compatible: a FrameDecoder belongs to one connection and one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace bulkhead::ipc {

inline constexpr uint8_t kProtocolVersion = 1;
inline constexpr size_t kHeaderSize = 16;
// Default for `max_payload_bytes`: 4 MiB.
inline constexpr uint32_t kDefaultMaxPayload = 4 * 1024 * 1024;
// Bytes of the header counted by its length field (version, type, status, reason, request_id).
inline constexpr uint32_t kLengthCoveredHeader = 12;
// The largest payload the length field can describe.
inline constexpr uint32_t kMaxEncodablePayload = UINT32_MAX - kLengthCoveredHeader;

enum class FrameType : uint8_t { kRequest = 1, kReply = 2 };

enum class ReplyStatus : uint8_t { kOk = 0, kRejected = 1, kFailed = 2, kBadRequest = 3 };

// Why a reply is not OK. Ranges: 1-15 REJECTED, 16-31 FAILED, 32-47 BAD_REQUEST.
enum class Reason : uint8_t {
  kNone = 0,
  // REJECTED: the request never reached a worker.
  kFull = 1,          // concurrency slots and queue both full
  kQueueTimeout = 2,  // waited in the queue longer than the cell allows
  kUnavailable = 3,   // the cell has no live worker (starting, backing off, stopped)
  // The connection itself was refused (the cell's max_connections, or the supervisor's descriptor
  // budget): sent once, with request_id 0, right after accept; then the connection is closed.
  kTooManyConnections = 4,
  // FAILED: the request was admitted and did not complete.
  kWorkerError = 16,  // the worker answered with an error; payload = its message
  kWorkerDied = 17,   // payload = "exit 3" / "signal 9"
  kTimeout = 18,
  kStalled = 19,
  kOomKilled = 20,
  // BAD_REQUEST: the frame itself was refused.
  kMalformed = 32,
  kTooLarge = 33,
};

// "OK", "REJECTED", "FAILED", "BAD_REQUEST"; "unknown" for other values.
const char* StatusName(ReplyStatus s);
// "none", "full", "queue_timeout", "unavailable", "too_many_connections", "worker_error",
// "worker_died", "timeout", "stalled", "oom_killed", "malformed", "too_large"; "unknown" for other
// values.
const char* ReasonName(Reason r);

struct FrameHeader {
  FrameType type = FrameType::kRequest;
  ReplyStatus status = ReplyStatus::kOk;
  Reason reason = Reason::kNone;
  uint64_t request_id = 0;
  uint32_t payload_size = 0;  // bytes after the 16-byte header
};

// Writes the 16 header bytes (length = 12 + payload_size, version = kProtocolVersion). Pure.
// REQUIRES: header.payload_size <= kMaxEncodablePayload.
void EncodeHeader(const FrameHeader& header, char out[kHeaderSize]);

// Appends header (payload_size taken from payload.size()) and payload to *out.
// REQUIRES: payload.size() <= kMaxEncodablePayload.
void AppendFrame(std::string* out, FrameHeader header, std::string_view payload);

// True for the supervisor's refusal of a whole connection (docs/protocol.md, "Connection limits"):
// a REPLY REJECTED/too_many_connections with request_id 0, sent before any request was read. It
// answers every request the client sent on that connection: none of them was admitted.
bool IsConnectionRefusal(const FrameHeader& header);

// Whether a worker may send `header` (docs/protocol.md, "Supervisor -> worker"): a REPLY with
// status OK and reason none, or status FAILED and reason worker_error. Checks no request id.
bool IsValidWorkerReply(const FrameHeader& header);

struct FrameView {
  FrameHeader header;
  std::string_view payload;
};

enum class DecodeResult { kFrame, kNeedMore, kError };

// Incremental, pure decoder: bytes in, frames out; never blocks, no I/O. Handles a frame split
// across any number of inputs and many frames in one input.
//
// A frame is validated as soon as its 16 header bytes are buffered, before its payload arrives, in
// this order: version == 1; length >= 12; type == `accepted`; in requests status == 0 and
// reason == 0; in replies status <= 3 (reply reasons pass unvalidated, for forward compatibility);
// payload <= max_payload. After kError the decoder stays in error and discards further input.
//
// Buffer reuse: one internal buffer is compacted in place (memmove of the unconsumed tail) and
// grows only when a read or a frame does not fit; once warm there is no per-frame heap allocation.
// The buffer never shrinks: a connection that once carried a 4 MiB frame keeps 4 MiB until the
// decoder is destroyed.
class FrameDecoder {
 public:
  // REQUIRES: max_payload <= kMaxEncodablePayload.
  explicit FrameDecoder(FrameType accepted, uint32_t max_payload = kDefaultMaxPayload);

  // Zero-copy read path: returns a writable region of at least `min_size` bytes after the
  // buffered data; read into it, then Commit(n) with n <= its size. Invalidates views returned by
  // Next.
  std::span<char> PrepareWrite(size_t min_size);
  // Appends the first n bytes of the region returned by the last PrepareWrite.
  // REQUIRES: n <= that region's size, and no Feed or second Commit since that PrepareWrite.
  void Commit(size_t n);

  // Copying path. Invalidates views returned by Next.
  void Feed(std::string_view bytes);

  // kFrame: *out holds the next frame; its payload view stays valid until the next call to Next,
  // PrepareWrite or Feed. kNeedMore: the buffered bytes hold no complete frame. kError: see
  // error_reason(); *out is untouched.
  DecodeResult Next(FrameView* out);

  // After kError: kMalformed or kTooLarge. Reason::kNone before any error.
  Reason error_reason() const { return error_reason_; }
  // After kError: what was wrong, e.g. "payload of 5000000 bytes exceeds the maximum of 4194304",
  // "unsupported protocol version 7". Empty before any error.
  const std::string& error_message() const { return error_message_; }
  // After kError: the offending frame's request_id, or 0 when the header could not be read
  // (an unsupported version, whose layout past the version byte is unknown).
  uint64_t error_request_id() const { return error_request_id_; }
  bool failed() const { return error_reason_ != Reason::kNone; }

  // Bytes received and not yet returned as a frame.
  size_t buffered_bytes() const { return end_ - begin_; }
  // Size of the internal buffer in bytes (for tests and memory accounting).
  size_t buffer_capacity() const { return capacity_; }
  FrameType accepted() const { return accepted_; }
  uint32_t max_payload() const { return max_payload_; }

 private:
  // Validates the header at begin_; on failure enters the error state and returns false.
  bool ParseHeader(FrameHeader* header);
  void Fail(Reason reason, std::string message, uint64_t request_id);

  FrameType accepted_;
  uint32_t max_payload_;
  // capacity_ bytes, never zeroed: only [begin_, end_) is read, and bytes come in only through
  // PrepareWrite's region. A worker link's first read asks for 64 KiB, and a one-per-request
  // cell opens a link per slot at each worker swap: zeroing them was a cost of the handover.
  std::unique_ptr<char[]> buffer_;
  size_t capacity_ = 0;
  size_t begin_ = 0;     // first unconsumed byte
  size_t end_ = 0;       // one past the last buffered byte
  size_t prepared_ = 0;  // size of the region handed out by PrepareWrite, 0 once committed

  Reason error_reason_ = Reason::kNone;
  std::string error_message_;
  uint64_t error_request_id_ = 0;
};

// Payload of a REJECTED reply: u32 running, u32 queued, u32 retry_after_ms (0 = unknown), all
// big-endian, then the cell name (UTF-8, rest of the payload).
struct RejectDetail {
  std::string cell = {};        // the rejecting cell's name
  uint32_t running = 0;         // requests in flight on the cell's workers when rejected
  uint32_t queued = 0;          // requests waiting in the cell's queue when rejected
  uint32_t retry_after_ms = 0;  // hint to the client; 0 = unknown
};

inline constexpr size_t kRejectDetailFixedSize = 12;

void AppendRejectDetail(std::string* out, const RejectDetail& detail);
// nullopt if `payload` is shorter than 12 bytes. The cell name is not checked for valid UTF-8.
std::optional<RejectDetail> DecodeRejectDetail(std::string_view payload);

}  // namespace bulkhead::ipc
