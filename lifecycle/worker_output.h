// SPDX-License-Identifier: MIT
// WorkerOutput: a cell's worker stdout and stderr, captured and logged line by line with the cell
// name and pid (docs/logging.md). Each worker generation gets a new pipe per stream; the child gets
// the write ends as descriptors 1 and 2, the supervisor reads the other ends non-blocking on the
// loop (uv_pipe_t), cuts lines (LineSplitter, bounded by log_line_max) and logs them through the
// cell's rate limit (LogRateLimiter). The supervisor never blocks on a worker's output and holds
// one pending line per stream and one 64 KiB read buffer per thread, shared by every cell's
// streams and allocated at the first read: a worker writing faster than the loop reads blocks on
// its own full pipe, and a cell whose worker writes nothing costs no buffer. REQUIRES: loop thread
// only.
#pragma once

#include <sys/types.h>
#include <uv.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/log_rate_limiter.h"
#include "base/status.h"
#include "base/unique_fd.h"
#include "cell/process.h"
#include "config/config.h"
#include "lifecycle/line_splitter.h"
#include "loop/handle_group.h"
#include "loop/time_source.h"

namespace bulkhead::lifecycle {

class WorkerOutput {
 public:
  // Reads `output`, `log_line_max` and the rate limit keys of `config`. The rate limit's windows
  // are measured on `time`, which outlives the output.
  WorkerOutput(uv_loop_t* loop, loop::TimeSource* time, const config::CellConfig& config);
  // REQUIRES: Close has completed.
  ~WorkerOutput();
  WorkerOutput(const WorkerOutput&) = delete;
  WorkerOutput& operator=(const WorkerOutput&) = delete;

  // A reload: `output`, `log_line_max` and the rate limit keys of `config` apply from the next
  // Prepare (the live generation's pipes keep their line limit); a pending suppression summary
  // is logged first when the rate limit changes.
  void SetOptions(const config::CellConfig& config);

  // Before a spawn: sets options->stdout_fd and stderr_fd per the `output` mode (new pipes for
  // "log", /dev/null for "null", untouched for "inherit"). On error (pipe2, open) nothing is set,
  // so the worker inherits the supervisor's stdout and stderr.
  Status Prepare(cell::SpawnOptions* options);
  // After the spawn Prepare was for: the parent's write ends are closed; with `pid` > 0 the read
  // ends are watched and their lines logged with that pid, with 0 (the spawn failed) closed.
  void Spawned(pid_t pid);
  // The worker was reaped: what is left in its pipes is read now (at most kDrainMaxBytes per
  // stream) and logged, an unterminated last line included, and the pipes are closed. Processes
  // it left behind that still hold the write ends get EPIPE (SIGPIPE) when they write; they never
  // delay the next generation, which gets new pipes.
  void WorkerExited();

  // A re-exec (docs/reexec.md). The read ends of the live worker's pipes, -1 for a stream not
  // captured (they stay owned here), for the state; and, in the new image, the same taken back for
  // the worker `pid`: read and logged from here as after Spawned (either may be invalid: not
  // captured). A line the previous image had read only in part is lost at the exec.
  int stdout_fd() const;
  int stderr_fd() const;
  void Adopt(UniqueFd stdout_read, UniqueFd stderr_read, pid_t pid);

  // Closes every handle (reporting a pending suppression first); `on_closed` runs once the last
  // close callback has run. REQUIRES: no worker (WorkerExited called, or never spawned).
  void Close(std::function<void()> on_closed);

  // Bytes read from one stream when its worker is reaped.
  static constexpr size_t kDrainMaxBytes = 1 << 20;

 private:
  struct Stream;

  Stream* Open(UniqueFd read_end, const char* name, pid_t pid);
  void CloseStream(Stream* stream);
  void Drain(Stream* stream);
  void OnLine(const Stream& stream, std::string_view line, bool truncated);
  void LogSuppressed(uint64_t count, pid_t pid);
  void ArmSuppressionTimer();

  static void OnAlloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf);
  static void OnRead(uv_stream_t* handle, ssize_t nread, const uv_buf_t* buf);
  void OnSuppressionTimer();

  uv_loop_t* loop_;
  loop::TimeSource* time_;
  std::string cell_;
  config::OutputMode mode_;
  size_t line_max_;
  LogRateLimiter limiter_;
  uint64_t interval_ms_;
  uint32_t burst_;

  // Between Prepare and Spawned.
  UniqueFd stdout_read_;
  UniqueFd stderr_read_;
  UniqueFd stdout_write_;
  UniqueFd stderr_write_;

  // The live generation's streams (null once closed).
  Stream* stdout_ = nullptr;
  Stream* stderr_ = nullptr;
  pid_t last_pid_ = 0;  // of the last line dropped: named in the suppression summary
  // The streams' pipes.
  loop::HandleGroup handles_;
  // Ends a window in which lines were dropped, to log how many.
  std::unique_ptr<loop::Timer> suppression_timer_;
};

}  // namespace bulkhead::lifecycle
