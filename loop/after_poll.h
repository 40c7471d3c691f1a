// SPDX-License-Identifier: MIT
// AfterPoll: runs a callback once the loop has polled for I/O, so that a timeout's verdict takes
// in what was already waiting in the sockets. libuv runs expired timers before it polls (libuv
// docs/src/design.rst, "The I/O loop"): after bulkheadd was stopped (SIGSTOP), frozen with its
// host or starved of CPU, timers fire for a silence that did not happen, with the replies and
// WATCHDOG=1 that ended it still unread. A timer that finds its deadline passed calls Request()
// instead of acting; the callback runs in the check phase of that loop iteration, after a poll
// that an idle handle keeps from blocking, and decides again with whatever that poll read.
// REQUIRES: loop thread only; Request() from a timer callback (a request made during the poll
// phase would run after the rest of that same poll, not after a fresh one).
#pragma once

#include <uv.h>

#include <functional>

#include "loop/handle_group.h"

namespace bulkhead::loop {

class AfterPoll {
 public:
  // `callback` runs once per batch of Request() calls. The handles live until Close() completes.
  AfterPoll(uv_loop_t* loop, std::function<void()> callback);
  AfterPoll(const AfterPoll&) = delete;
  AfterPoll& operator=(const AfterPoll&) = delete;

  // Runs the callback after the loop's next poll for I/O; a second call before then adds nothing.
  void Request();
  bool requested() const;

  // Closes both handles; `on_closed` runs from the last close callback. A pending callback is
  // dropped.
  void Close(std::function<void()> on_closed);

 private:
  static void OnCheck(uv_check_t* handle);

  std::function<void()> callback_;
  HandleGroup handles_;
  uv_check_t* check_;
  uv_idle_t* idle_;
};

}  // namespace bulkhead::loop
