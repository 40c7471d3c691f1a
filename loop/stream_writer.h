// SPDX-License-Identifier: MIT
// StreamWriter: the output side of one libuv stream. Frames are appended to a reusable buffer and
// written with uv_try_write (one writev) when possible, falling back to uv_write for the rest; the
// two buffers keep their capacity, so a warm connection writes without touching the heap. Given a
// WriteBatch (SetBatch), Flush() leaves the first attempt to the batch, later in the same loop
// iteration, and the callbacks run from there.
// REQUIRES: used on the loop thread only; the owner calls Abandon() before closing the stream.
#pragma once

#include <uv.h>

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "ipc/frame.h"

namespace bulkhead::loop {

class WriteBatch;

class StreamWriter {
 public:
  // `on_error(status)` is called (at most once) when a write fails: the peer is gone.
  // `on_drained()` is called when everything appended so far has been written.
  StreamWriter(uv_stream_t* stream, std::function<void(int)> on_error,
               std::function<void()> on_drained);
  StreamWriter(const StreamWriter&) = delete;
  StreamWriter& operator=(const StreamWriter&) = delete;
  ~StreamWriter();

  // Flush() joins `batch` (loop/write_batch.h) instead of writing at once, when it is enabled;
  // nullptr: writes at once. Set before the first Flush.
  void SetBatch(WriteBatch* batch);
  // Bytes wait for the batch: nothing of them was tried yet.
  bool in_batch() const { return in_batch_; }
  // `on_backlog()` is called after a batched send left bytes for uv_write: the peer did not take
  // them all (the owner watches such a peer). After a direct write the caller looks itself.
  void SetOnBacklog(std::function<void()> on_backlog) { on_backlog_ = std::move(on_backlog); }

  // Appends one frame. Written at the next Flush().
  void AppendFrame(const ipc::FrameHeader& header, std::string_view payload);
  // Appends raw bytes (the control socket's JSON lines).
  void AppendBytes(std::string_view bytes);

  // Writes what it can now (or joins the batch); queues the rest with uv_write. Never blocks.
  void Flush();

  // Bytes appended but not yet written (for bounding a slow reader): the memory they hold.
  size_t backlog_bytes() const { return pending_.size() + inflight_.size(); }
  // Bytes appended since construction, and of those, the ones written to the stream (handed to
  // the kernel) so far, partial writes included.
  uint64_t appended_bytes() const { return appended_; }
  uint64_t written_bytes() const;
  // `on_written()` is called after a write wrote something (its bytes are in written_bytes()).
  void SetOnWritten(std::function<void()> on_written) { on_written_ = std::move(on_written); }
  bool idle() const { return pending_.empty() && !writing_ && !in_batch_; }
  // The newest bytes appended, never handed to libuv or the kernel: the stream's bytes from offset
  // appended_bytes() - never_written().size() on. A failed write leaves them here, so that the
  // owner can tell what its peer cannot have received. Valid until the next call that appends,
  // flushes or writes.
  std::string_view never_written() const { return pending_; }

  // Stops calling back: the owner is closing the stream. A write already handed to libuv completes
  // (with UV_ECANCELED) after this; the StreamWriter must outlive the stream's close callback.
  // Bytes still waiting for the batch are not sent: call WriteNow() first to offer them.
  void Abandon();
  // Offers the bytes waiting for the batch to the stream at once (one uv_try_write), without
  // callbacks: for an owner about to close, which would otherwise drop answers that a writer
  // without a batch had written at Flush(). What the stream does not take stays pending.
  void WriteNow();

 private:
  friend class WriteBatch;
  // What a send attempt of all of pending_ asks of the callbacks (RunCallbacks).
  enum class Sent { kNothing, kAll, kSome, kError };

  static void OnWrite(uv_write_t* req, int status);
  // The file descriptor the batch sends on; -1 when there is none.
  int fd() const;
  // Takes the result `n` of a send of all of pending_ (bytes sent, or a negative errno / libuv
  // code): drops what was sent and hands the rest to uv_write. Calls nothing back.
  Sent TakeSendResult(int n);
  // The callbacks `sent` calls for: on_written, on_drained, on_error, and on_backlog after a
  // `batched` send.
  void RunCallbacks(Sent sent, bool batched);

  uv_stream_t* stream_;
  std::function<void(int)> on_error_;
  std::function<void()> on_drained_;
  std::function<void()> on_written_;
  uint64_t appended_ = 0;
  std::string pending_;   // appended, not yet handed to libuv
  std::string inflight_;  // handed to uv_write, not yet completed
  uv_write_t write_req_{};
  std::function<void()> on_backlog_;
  WriteBatch* batch_ = nullptr;
  int error_ = 0;  // the failed write's code, for on_error
  bool writing_ = false;
  bool failed_ = false;
  bool abandoned_ = false;
  bool in_batch_ = false;  // joined batch_, not sent yet
};

}  // namespace bulkhead::loop
