// SPDX-License-Identifier: MIT
// WorkerLink: one persistent connection from the supervisor to its cell's worker, carrying at most
// one request at a time (docs/protocol.md, "Supervisor -> worker": the worker serves its
// connections concurrently). Connected to the listening socket the supervisor created and passed
// to the worker as fd 3: the connection completes in the socket's backlog even while the worker is
// still starting. Owns itself: deleted in its handle's close callback. REQUIRES: loop thread only.
#pragma once

#include <uv.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "ipc/frame.h"
#include "loop/stream_writer.h"
#include "proxy/link.h"

namespace bulkhead::proxy {

struct Request;

class WorkerLink final : public Link {
 public:
  // What a link tells its cell's data path (proxy::CellDataPath), on the loop thread.
  class Owner : public virtual LinkOwner {
   public:
    // The worker replied to `request`, already taken off the link; `frame` is valid during the
    // call only. The owner may send the next request on `link` or close it.
    virtual void OnWorkerReply(WorkerLink* link, Request* request, const ipc::FrameView& frame) = 0;
  };

  // Connects (non-blocking) to the worker socket at `path`. Fails when the socket is missing or its
  // backlog is full (EAGAIN).
  static Result<WorkerLink*> Connect(Owner* owner, uv_loop_t* loop, const std::string& path,
                                     uint32_t max_payload);

  // REQUIRES: !busy(). Sends `request` with `payload` to the worker; the link carries it until the
  // worker replies or the link breaks.
  void Send(Request* request, std::string_view payload) override;

  bool busy() const override { return inflight_ != nullptr; }
  Request* inflight() const override { return inflight_; }
  // The in-flight request cannot have reached the worker whole, so it is safe to send again: its
  // write failed (EPIPE: the worker had closed the connection), or the worker closed the
  // connection with bytes of it unread (ECONNRESET on a Unix stream socket), before any byte of a
  // reply came.
  bool inflight_unread() const override {
    return inflight_ != nullptr && !reply_started_ && (write_failed_ || reset_);
  }
  // The in-flight request's payload, kept until the first byte of its reply (for a resend). Valid
  // until the link's close callback runs.
  std::string_view inflight_payload() const override { return payload_; }
  // Detaches and returns the in-flight request (or nullptr), e.g. to fail it.
  Request* TakeInflight() override;

  // Closes the connection. REQUIRES: nothing in flight (take it first).
  void Close() override;

 private:
  WorkerLink(Owner* owner, uint32_t max_payload);
  ~WorkerLink() override = default;

  static void OnAlloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf);
  static void OnRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);
  static void OnClosed(uv_handle_t* handle);
  // `worker_at_fault`: the worker broke the protocol (not an EOF or a socket error).
  void Broken(const std::string& why, bool worker_at_fault = false);

  Owner* owner_;
  uv_pipe_t pipe_{};
  ipc::FrameDecoder decoder_;
  loop::StreamWriter writer_;
  Request* inflight_ = nullptr;
  uint64_t inflight_id_ = 0;
  std::string payload_;         // of the in-flight request, until its reply starts
  bool reply_started_ = false;  // a byte of the in-flight request's reply came
  bool write_failed_ = false;
  bool reset_ = false;  // a read failed with ECONNRESET
  uint64_t next_id_ = 1;
  bool closing_ = false;
};

}  // namespace bulkhead::proxy
