// SPDX-License-Identifier: MIT
// WorkerLink: one persistent connection from the supervisor to its cell's worker (docs/protocol.md,
// "Supervisor -> worker"). One-per-request: at most one request at a time, written at once.
// Multiplexed: any number at a time, each tagged with a request_id of the link's own that names
// its slot, answered in any order; Send appends and Flush writes what was appended (one write for
// the requests of one loop iteration). Connected to the listening socket the supervisor created
// and passed to the worker as fd 3: the connection completes in the socket's backlog even while
// the worker is still starting. Owns itself: deleted in its handle's close callback.
// REQUIRES: loop thread only.
#pragma once

#include <uv.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "ipc/frame.h"
#include "loop/stream_writer.h"
#include "proxy/link.h"

namespace bulkhead::proxy {

class WorkerLink final : public Link {
 public:
  using Owner = LinkOwner;

  // Connects (non-blocking) to the worker socket at `path`. Fails when the socket is missing or its
  // backlog is full (EAGAIN). `multiplexed`: the link carries many requests at a time.
  static Result<WorkerLink*> Connect(Owner* owner, uv_loop_t* loop, const std::string& path,
                                     uint32_t max_payload, bool multiplexed);

  // Link. A reply answers its exchange (LinkOwner::OnWorkerAnswer): OK/none as Outcome::Ok with
  // the reply's payload, FAILED/worker_error as Outcome::Failed (docs/protocol.md, "Supervisor ->
  // worker"); any other status or reason fails that exchange as a protocol error, the link
  // staying usable. One-per-request: REQUIRES !busy(), written at once. Multiplexed: appended to
  // the link's output, written at the next Flush(); no limit here (the cell's Bulkhead keeps
  // max_concurrent). O(1), and without allocating once the link's slots are warm.
  void Send(Exchange* exchange, std::string_view payload) override;
  // Link.
  void Flush() override { writer_.Flush(); }

  bool multiplexed() const { return multiplexed_; }
  bool busy() const override { return in_flight_ != 0; }
  size_t in_flight() const { return in_flight_; }

  // Link. Unread, one-per-request: its write failed (EPIPE: the worker had closed the connection),
  // or the worker closed the connection with bytes of it unread (ECONNRESET on a Unix stream
  // socket), before any byte of a reply came. Multiplexed: no byte of its frame was handed to the
  // kernel (the link broke before Flush wrote it).
  Exchange* TakeInflight(bool* unread, std::string_view* payload) override;
  using Link::TakeInflight;

  // Closes the connection. REQUIRES: nothing in flight (take it first).
  void Close() override;

  // request_id on the wire: the slot index in the high 32 bits, the slot's generation (from 1,
  // raised when the slot is freed) in the low 32, so a reply finds its request in O(1) and a reply
  // to a request already answered (a stale or repeated id) is told apart. One-per-request links
  // use slot 0 only: their ids count 1, 2, 3, ...
  static uint64_t RequestIdOf(uint32_t slot, uint32_t generation) {
    return (uint64_t{slot} << 32) | generation;
  }

 private:
  // One exchange in flight, or a free place for one.
  struct Slot {
    Exchange* exchange = nullptr;
    uint32_t generation = 1;
    uint32_t payload_size = 0;
    // Multiplexed: where its frame starts in the stream of bytes sent (StreamWriter offsets).
    uint64_t frame_offset = 0;
  };

  WorkerLink(Owner* owner, uint32_t max_payload, bool multiplexed);
  ~WorkerLink() override = default;

  static void OnAlloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf);
  static void OnRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);
  static void OnClosed(uv_handle_t* handle);
  // Hands `exchange`'s reply `frame` to the owner as its Outcome.
  void Answer(Exchange* exchange, const ipc::FrameView& frame);
  // `worker_at_fault`: the worker broke the protocol (not an EOF or a socket error).
  void Broken(const std::string& why, bool worker_at_fault = false);
  // The exchange the reply `request_id` answers, taken off its slot; nullptr when none in flight
  // has that id.
  Exchange* TakeReplied(uint64_t request_id);
  void FreeSlot(uint32_t index);

  Owner* owner_;
  const bool multiplexed_;
  ipc::FrameDecoder decoder_;
  loop::StreamWriter writer_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_slots_;  // indexes into slots_ with no request
  size_t in_flight_ = 0;
  // TakeInflight looks for occupied slots from here on (reset by Send): taking them all is
  // O(slots).
  size_t take_from_ = 0;
  // One-per-request: the in-flight request's payload, kept until the first byte of its reply (for
  // a resend).
  std::string payload_;
  bool reply_started_ = false;  // a byte of the in-flight request's reply came
  bool write_failed_ = false;
  bool reset_ = false;   // a read failed with ECONNRESET
  std::string scratch_;  // a protocol error's message
};

}  // namespace bulkhead::proxy
