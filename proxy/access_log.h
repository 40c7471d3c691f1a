// SPDX-License-Identifier: MIT
// AccessLog: one logfmt line per answered request of every cell (docs/access-log.md), formatted on
// the loop thread into a bounded buffer and written by a thread of its own, so that a slow disk
// never blocks the loop: the loop writes the buffer, non-blocking, into a pipe that the writer
// thread copies to the destination (a file opened O_APPEND, or stderr). The loop writes in batches,
// not once per turn: when the buffer holds kFlushBytes, or kFlushDelayMs after its oldest line came
// (a timer armed only while lines wait), so that a busy loop pays a write and a thread wakeup per
// ~100 lines rather than per turn (nginx's `access_log ... buffer= flush=`). When the pipe and the
// buffer are both full a line is dropped and counted (bulkhead_access_log_dropped_total), as
// HAProxy's log ring drops; the writer thread counts what its destination refuses. Neither a
// reopen nor the close waits for the writer thread. A warm request allocates nothing here: the
// line is built in a string whose capacity is kept, and the buffer is reserved whole when the log
// opens.
// REQUIRES: Append, Reopen, Close and the figures on the loop thread only.
#pragma once

#include <sys/types.h>
#include <uv.h>

#include <cstdint>
#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "loop/handle_group.h"
#include "loop/time_source.h"

namespace bulkhead::proxy {

// One request's line, as the data path knows it when the request is answered. Views are valid
// during AccessLog::Append (and FormatAccessLine) only.
struct AccessRecord {
  timespec time{};  // CLOCK_REALTIME when it was answered
  std::string_view cell;
  // " client=... id=... [method=... target=...]" as AppendRequestFields wrote it at admission.
  std::string_view request_fields;
  std::string_view outcome;    // ok, rejected, failed, dropped, cancelled
  std::string_view reason;     // ipc::ReasonName, "" for ok
  int http_status = 0;         // HTTP: the status the client got; 0: none (frames, or no answer)
  uint64_t queue_wait_us = 0;  // admission to dispatch (or to the answer, when never dispatched)
  uint64_t worker_us = 0;      // dispatch to the answer; 0 when never dispatched
  uint64_t bytes_in = 0;       // request bytes sent towards the worker
  uint64_t bytes_out = 0;      // response bytes from the worker towards the client
  pid_t worker_pid = 0;        // the worker it was dispatched to; 0: none
  uint32_t limit = 0;          // concurrency = "adaptive": the limit in force; 0: a fixed cell
};

// Appends the fields a request is known by at admission, each a logfmt value with a leading space,
// to `out`: " client=C id=ID", then " method=M target=T" unless `method` is empty (frames).
// `client`: "203.0.113.7:41234", "[2001:db8::1]:41234", "pid:4123,uid:1000" (a Unix socket's peer
// credentials), "" when unknown. `request_id` and `target` come from the client as it sent them:
// they are quoted and escaped (base/log.h AppendLogfmtValue), so they cannot end the line or forge
// a field.
void AppendRequestFields(std::string* out, std::string_view client, std::string_view request_id,
                         std::string_view method, std::string_view target);

// Appends `record`'s line, '\n' included, to `out` (docs/access-log.md, "Fields"):
//   2026-12-04T00:41:07.123Z cell=api client=10.0.0.7:5123 id=... method=GET target=/x
//   outcome=ok reason= status=200 wait_ms=0.012 worker_ms=3.400 bytes_in=78 bytes_out=512
//   worker_pid=4123 [limit=8]
// (one line). Pure: for tests.
void FormatAccessLine(const AccessRecord& record, std::string* out);

class AccessLog {
 public:
  // Bytes held for the writer when the pipe is full (beyond the pipe's own 1 MiB, or less when the
  // kernel refuses that size).
  static constexpr size_t kDefaultBufferBytes = size_t{256} * 1024;
  // The buffer is written into the pipe as soon as it holds this much (or half the buffer, when
  // the buffer is smaller than twice this): ~100 lines of ~300 bytes per write.
  static constexpr size_t kFlushBytes = size_t{32} * 1024;
  // ... and at the latest this long after the oldest line it holds came, so that a quiet log's
  // lines reach the file within about this delay (plus the writer thread's write).
  static constexpr uint64_t kFlushDelayMs = 100;
  // Dropped lines are logged (a warning with the count since the last one), at most once per
  // this, and once more when the log closes with drops not yet told.
  static constexpr uint64_t kDropWarningMs = 10'000;

  // Opens `destination` ("stderr", or a file path, created 0640 if missing, appended to) and
  // starts the writer thread; `time` arms the flush timer and must outlive the log. Errors: the
  // file cannot be opened, or no pipe or thread.
  static Result<std::unique_ptr<AccessLog>> Open(uv_loop_t* loop, loop::TimeSource* time,
                                                 const std::string& destination,
                                                 size_t buffer_bytes = kDefaultBufferBytes);
  // For tests: lines go to `out_fd` (made non-blocking; the log owns it) with no writer thread.
  AccessLog(uv_loop_t* loop, loop::TimeSource* time, int out_fd, size_t buffer_bytes);
  ~AccessLog();
  AccessLog(const AccessLog&) = delete;
  AccessLog& operator=(const AccessLog&) = delete;

  // Formats `record` and queues it: written into the pipe at once when the buffer then holds
  // flush_bytes(), else when the flush timer fires (see State). Dropped (counted) when the buffer
  // has no room for the whole line. Never blocks.
  void Append(const AccessRecord& record);
  // Writes what the buffer holds into the pipe (as far as the pipe takes it), then has the file
  // opened again (logrotate's `postrotate`: reload bulkheadd); the writer thread writes what
  // follows to the new file, and switches to it at once even when stalled on the old one (a named
  // pipe whose reader stopped reading). Never waits for the writer thread. Stderr: only the write.
  // Errors: the file cannot be opened (the old one stays in use).
  Status Reopen();
  // How long Close lets a destination that takes nothing (a named pipe whose reader stopped
  // reading) hold the shutdown before the lines it has not taken are counted dropped.
  static constexpr uint64_t kCloseGraceMs = 2000;
  // Writes what the pipe takes now, hands the rest to the writer thread and closes the pipe; the
  // thread writes what it holds and ends, giving a destination that takes nothing `grace_ms`;
  // `on_closed` runs once it ended and the log's handles are closed (HandleGroup::Part). Never
  // waits on the loop. In tests (no writer thread): what the pipe does not take is dropped.
  void Close(std::function<void()> on_closed, uint64_t grace_ms = kCloseGraceMs);

  const std::string& destination() const { return destination_; }
  // Lines made (one per Append), the dropped ones included: lines() - dropped() were written or
  // are on their way.
  uint64_t lines() const { return lines_; }
  // Lines not written: dropped on the loop (the buffer full, or Append after Close) and lost by
  // the writer thread (the destination failed, EPIPE: its reader left; or the close's grace
  // passed), counted by their line ends.
  uint64_t dropped() const;
  // Bytes queued and not yet in the pipe.
  size_t buffered() const { return end_ - head_; }
  size_t flush_bytes() const { return flush_bytes_; }

 private:
  class Writer;

  // Where the buffer stands with the pipe; what is armed follows from it alone (Arm).
  enum class State {
    kEmpty,    // nothing buffered; no timer, no poll: an idle log wakes nothing
    kWaiting,  // lines buffered, fewer than flush_bytes_; the flush timer armed, deadline set
               // when the first of them came; no poll
    kBlocked,  // the pipe took less than the buffer held (full); polling for writable, no timer:
               // the poll writes the rest, lines still queue (or drop) meanwhile
    kClosed,   // Close ran; nothing armed, Append drops
  };

  static void OnWritable(uv_poll_t* poll, int status, int events);
  // The writer thread ended (after Close): joins it and closes the handles.
  static void OnWriterDone(uv_async_t* async);
  // Writes the buffer into out_fd_ until done or EAGAIN, then moves to kEmpty or kBlocked.
  void Flush();
  // Enters `next`, starting and stopping the timer and the poll as it requires.
  void Enter(State next);
  // Logs the lines dropped since the last warning, unless one came within kDropWarningMs
  // (`closing`: whatever the time).
  void WarnOfDrops(bool closing);

  uv_loop_t* loop_;
  loop::TimeSource* time_;
  std::string destination_;
  int out_fd_ = -1;
  std::unique_ptr<Writer> writer_;  // null in tests
  loop::HandleGroup handles_;
  uv_poll_t* poll_ = nullptr;
  std::unique_ptr<loop::Timer> flush_timer_;
  State state_ = State::kEmpty;
  // The buffer: [head_, end_) waits for the pipe; capacity fixed at construction.
  std::string buffer_;
  size_t flush_bytes_;
  size_t head_ = 0;
  size_t end_ = 0;
  std::string line_;  // reused: the line being formatted
  uint64_t lines_ = 0;
  uint64_t dropped_ = 0;
  uint64_t dropped_told_ = 0;         // dropped() at the last warning
  uint64_t drop_warning_at_ms_ = 0;   // its time; 0: none yet
  std::function<void()> on_closed_;  // Close's, run once the writer thread ended
  uv_async_t* done_ = nullptr;       // the writer thread says it ended (OnWriterDone)
  bool writer_ended_early_ = false;  // it ended before Close (a failed read of the pipe)
};

}  // namespace bulkhead::proxy
