// SPDX-License-Identifier: MIT
// ReexecCheck: `BINARY --reexec-state-versions` run off the loop's back before a re-exec
// (docs/reexec.md, failure 1): the child is spawned, its stdout read through a uv_poll, its exit
// learnt from the supervisor's reaper (which owns waitpid), the whole bounded by a timer of the
// loop's clock. The loop goes on serving meanwhile. REQUIRES: loop thread only.
#pragma once

#include <sys/types.h>
#include <uv.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/status.h"
#include "base/unique_fd.h"
#include "loop/handle_group.h"
#include "loop/time_source.h"

namespace bulkhead::supervisor {

class ReexecCheck {
 public:
  // `handles`: the owner's group, which holds the poll while a check runs; `time` arms the bound.
  // Both outlive the check.
  ReexecCheck(uv_loop_t* loop, loop::TimeSource* time, loop::HandleGroup* handles);
  ~ReexecCheck();
  ReexecCheck(const ReexecCheck&) = delete;
  ReexecCheck& operator=(const ReexecCheck&) = delete;

  // Spawns `binary --reexec-state-versions` (stdin /dev/null, stdout a pipe, stderr inherited,
  // no signal blocked) and returns; `on_done` runs once, from a loop callback, with what
  // JudgeStateVersions says of its output and exit, or "no answer within T ms" once `timeout_ms`
  // passed on the loop's clock (the child is then SIGKILLed; the reaper reaps it). Errors, with
  // nothing started: the spawn's ("exec /x: No such file or directory"), the pipe's, the poll's.
  // REQUIRES: !running().
  Status Start(const std::string& binary, int version, uint64_t timeout_ms,
               std::function<void(Status)> on_done);
  // For the reaper: true when `pid` is the running check's child (its `wait_status` is taken).
  bool OnChildExit(pid_t pid, int wait_status);
  // Ends a check under way without running on_done: the child is SIGKILLed, the poll closed.
  void Cancel();
  // Started and on_done not run yet.
  bool running() const { return state_ != State::kIdle; }

 private:
  // Where a check stands; the output is read until EOF and the exit is reaped, in either order.
  enum class State : uint8_t {
    kIdle,         // none under way: no poll, no timer armed, pid_ 0
    kRunning,      // the child runs: the poll reads its stdout, the timer is armed
    kOutputEnded,  // its stdout hit EOF (poll closed); waiting for its exit, the timer armed
    kExited,       // its exit was reaped; still reading its stdout, the timer armed
  };

  static void OnReadable(uv_poll_t* poll, int status, int events);
  // Closes the poll, stops the timer, runs on_done with `result`, back to kIdle.
  void Finish(Status result);
  void ClosePoll();

  uv_loop_t* loop_;
  loop::HandleGroup* handles_;
  std::unique_ptr<loop::Timer> timer_;
  State state_ = State::kIdle;
  std::string binary_;
  int version_ = 0;
  uint64_t timeout_ms_ = 0;
  pid_t pid_ = 0;
  int wait_status_ = 0;
  UniqueFd read_end_;
  uv_poll_t* poll_ = nullptr;
  std::string output_;
  std::function<void(Status)> on_done_;
};

}  // namespace bulkhead::supervisor
