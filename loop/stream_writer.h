// SPDX-License-Identifier: MIT
// StreamWriter: the output side of one libuv stream. Frames are appended to a reusable buffer and
// written with uv_try_write (one writev) when possible, falling back to uv_write for the rest; the
// two buffers keep their capacity, so a warm connection writes without touching the heap.
// REQUIRES: used on the loop thread only; the owner calls Abandon() before closing the stream.
#pragma once

#include <uv.h>

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "ipc/frame.h"

namespace bulkhead::loop {

class StreamWriter {
 public:
  // `on_error(status)` is called (at most once) when a write fails: the peer is gone.
  // `on_drained()` is called when everything appended so far has been written.
  StreamWriter(uv_stream_t* stream, std::function<void(int)> on_error,
               std::function<void()> on_drained);
  StreamWriter(const StreamWriter&) = delete;
  StreamWriter& operator=(const StreamWriter&) = delete;

  // Appends one frame. Written at the next Flush().
  void AppendFrame(const ipc::FrameHeader& header, std::string_view payload);
  // Appends raw bytes (the control socket's JSON lines).
  void AppendBytes(std::string_view bytes);

  // Writes what it can now; queues the rest with uv_write. Never blocks.
  void Flush();

  // Bytes appended but not yet written (for bounding a slow reader): the memory they hold.
  size_t backlog_bytes() const { return pending_.size() + inflight_.size(); }
  // Bytes appended since construction, and of those, the ones written to the stream (handed to
  // the kernel) so far, partial writes included.
  uint64_t appended_bytes() const { return appended_; }
  uint64_t written_bytes() const;
  // `on_written()` is called after a write wrote something (its bytes are in written_bytes()).
  void SetOnWritten(std::function<void()> on_written) { on_written_ = std::move(on_written); }
  bool idle() const { return pending_.empty() && !writing_; }
  // The newest bytes appended, never handed to libuv or the kernel: the stream's bytes from offset
  // appended_bytes() - never_written().size() on. A failed write leaves them here, so that the
  // owner can tell what its peer cannot have received. Valid until the next call that appends,
  // flushes or writes.
  std::string_view never_written() const { return pending_; }

  // Stops calling back: the owner is closing the stream. A write already handed to libuv completes
  // (with UV_ECANCELED) after this; the StreamWriter must outlive the stream's close callback.
  void Abandon() { abandoned_ = true; }

 private:
  static void OnWrite(uv_write_t* req, int status);

  uv_stream_t* stream_;
  std::function<void(int)> on_error_;
  std::function<void()> on_drained_;
  std::function<void()> on_written_;
  uint64_t appended_ = 0;
  std::string pending_;   // appended, not yet handed to libuv
  std::string inflight_;  // handed to uv_write, not yet completed
  uv_write_t write_req_{};
  bool writing_ = false;
  bool failed_ = false;
  bool abandoned_ = false;
};

}  // namespace bulkhead::loop
