// SPDX-License-Identifier: MIT
// WorkerLink: one connection from the supervisor to its cell's worker, carrying at most one request
// at a time (so a worker written as a plain blocking accept loop works). Connected to the listening
// socket the supervisor created and passed to the worker as fd 3: the connection completes in the
// socket's backlog even while the worker is still starting. Owns itself: deleted in its handle's
// close callback. REQUIRES: loop thread only.
#pragma once

#include <uv.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "ipc/frame.h"
#include "supervisor/stream_writer.h"

namespace bulkhead::supervisor {

class Cell;
struct Request;

class WorkerLink {
 public:
  // Connects (non-blocking) to the worker socket at `path`. Fails when the socket is missing or its
  // backlog is full (EAGAIN).
  static Result<WorkerLink*> Connect(Cell* cell, uv_loop_t* loop, const std::string& path,
                                     uint32_t max_payload);

  // REQUIRES: !busy(). Sends `request` with `payload` to the worker; the link carries it until the
  // worker replies or the link breaks.
  void Send(Request* request, std::string_view payload);

  bool busy() const { return inflight_ != nullptr; }
  Request* inflight() const { return inflight_; }
  // Detaches and returns the in-flight request (or nullptr), e.g. to fail it.
  Request* TakeInflight();

  // Closes the connection. REQUIRES: nothing in flight (take it first).
  void Close();

  // The link's position in its Cell's list of busy links, kept by the Cell so that a reply finds
  // its link in O(1).
  size_t busy_index = 0;

 private:
  WorkerLink(Cell* cell, uint32_t max_payload);
  ~WorkerLink() = default;

  static void OnAlloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf);
  static void OnRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);
  static void OnClosed(uv_handle_t* handle);
  // `worker_at_fault`: the worker broke the protocol (not an EOF or a socket error).
  void Broken(const std::string& why, bool worker_at_fault = false);

  Cell* cell_;
  uv_pipe_t pipe_{};
  ipc::FrameDecoder decoder_;
  StreamWriter writer_;
  Request* inflight_ = nullptr;
  uint64_t inflight_id_ = 0;
  uint64_t next_id_ = 1;
  bool closing_ = false;
};

}  // namespace bulkhead::supervisor
