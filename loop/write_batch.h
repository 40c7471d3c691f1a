// SPDX-License-Identifier: MIT
// WriteBatch: the socket writes of one loop iteration, handed to the kernel together. A
// StreamWriter given a WriteBatch (StreamWriter::SetBatch) does not write at Flush(); it joins the
// batch, and the batch sends every member's pending bytes in one io_uring_enter(2) (liburing,
// io_uring_prep_send with MSG_DONTWAIT | MSG_NOSIGNAL: each send completes at once, whole, in part,
// or with EAGAIN; none waits). It runs in the loop's check phase, after the poll's callbacks have
// produced their answers, and in its prepare phase, before the loop can block, so no byte waits
// across a poll. What a send leaves (EAGAIN, a short write) goes on as before, by uv_write.
//
// Why: on the client hop of a cell every answer is one write(2) to its own socket, and on an HTTP
// cell's worker hop every request one write(2) to its worker connection; a loop iteration that
// answers k clients and forwards m requests pays k + m system calls for them, one io_uring_enter
// with a batch (docs/benchmarks.md, "client hop", "HTTP with wrk"). Without io_uring (a kernel
// before 5.6, io_uring disabled by kernel.io_uring_disabled or a seccomp profile, as Docker's
// default is), or with BULKHEAD_IO_URING=off (or 0, false, no) in the environment, enabled() is
// false and writers write at once; how() says which. REQUIRES: the loop thread only.
#pragma once

#include <uv.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "loop/handle_group.h"

namespace bulkhead::loop {

class StreamWriter;

// The value of BULKHEAD_IO_URING: true for on, 1, true, yes; false for off, 0, false, no (any
// case, as systemd's booleans); nullopt for anything else (the caller warns and keeps io_uring).
// Unset (nullptr) is on.
std::optional<bool> IoUringWanted(const char* value);

class WriteBatch {
 public:
  // Starts the loop's prepare and check handles (unreferenced: they do not keep it alive) and sets
  // up the ring when io_uring is available.
  explicit WriteBatch(uv_loop_t* loop);
  ~WriteBatch();
  WriteBatch(const WriteBatch&) = delete;
  WriteBatch& operator=(const WriteBatch&) = delete;

  // Whether writers given this batch wait for it (io_uring is there), or write at once.
  bool enabled() const { return ring_ != nullptr; }
  // For the startup log: "the socket writes of a loop iteration (...) are sent together
  // (io_uring)", or why they are not ("... one by one: BULKHEAD_IO_URING=off", "...:
  // io_uring_setup: Operation not permitted"), with a warning first for a BULKHEAD_IO_URING value
  // it does not know.
  const std::string& how() const { return how_; }
  // BULKHEAD_IO_URING held a value IoUringWanted does not know: how() is worth a warning.
  bool setting_unknown() const { return setting_unknown_; }

  // Sends what every member has pending now; for tests and for Close.
  void Submit();

  // Closes the handles; `on_closed` runs from the last close callback. Members still pending are
  // sent first.
  void Close(std::function<void()> on_closed);

 private:
  friend class StreamWriter;
  struct Ring;

  // `writer` has bytes to send: it joins the next Submit (once).
  void Join(StreamWriter* writer);
  // `writer` leaves before its bytes were sent (StreamWriter::Abandon, its destructor).
  void Leave(StreamWriter* writer);

  static void OnPrepare(uv_prepare_t* handle);
  static void OnCheck(uv_check_t* handle);

  std::unique_ptr<Ring> ring_;
  std::string how_;
  bool setting_unknown_ = false;
  std::vector<StreamWriter*> members_;  // joined since the last Submit; nullptr: left
  std::vector<StreamWriter*> sending_;  // the members of the Submit under way; nullptr: left
  std::vector<int> results_;            // send results of sending_, by index
  HandleGroup handles_;
  uv_prepare_t* prepare_ = nullptr;
  uv_check_t* check_ = nullptr;
};

}  // namespace bulkhead::loop
