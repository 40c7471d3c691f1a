// SPDX-License-Identifier: MIT
// TimeSource: the clock and the timers of one loop, the one seam through which the data path, the
// front connections and the worker runner read time and arm their timeouts (Envoy's TimeSystem
// with Dispatcher::createTimer; its SimulatedTimeSystem is the model for the tests' fake,
// tests/helpers/simulated_time_source.h). Code that takes a TimeSource never calls uv_now,
// uv_hrtime or uv_timer_* itself, so a test moves time by hand and no test waits for a timer.
// REQUIRES: loop thread only.
#pragma once

#include <uv.h>

#include <cstdint>
#include <functional>
#include <memory>

#include "base/clock.h"

namespace bulkhead::loop {

// One timer. Destroying it disarms it: its callback never runs afterwards.
class Timer {
 public:
  virtual ~Timer() = default;
  // Arms the timer to run its callback once, `delay_ms` after the source's NowMs(); arming an
  // armed timer moves its deadline. A delay of 0 runs it at the next turn (the loop's next
  // iteration; the simulated source's next Advance or RunDue), never from inside Start.
  virtual void Start(uint64_t delay_ms) = 0;
  virtual void Stop() = 0;
  // Armed and not fired yet.
  virtual bool armed() const = 0;
};

class TimeSource : public Clock {
 public:
  // Clock::NowMs: ms on a monotonic clock, the time timers are measured against.
  // Nanoseconds on a monotonic clock with an arbitrary epoch, for latency figures only.
  virtual uint64_t NowNs() const = 0;
  // A disarmed timer that runs `on_fire` on the loop thread when it falls due.
  virtual std::unique_ptr<Timer> CreateTimer(std::function<void()> on_fire) = 0;
};

// The real source: uv_now(loop) (the loop's cached time, in ms), uv_hrtime(), and uv_timer_t
// timers. A timer's handle outlives its Timer: destroying the Timer closes the handle, whose close
// callback frees it, so the loop must run once more before uv_loop_close (every owner's Close path
// already does).
class LoopTimeSource final : public TimeSource {
 public:
  explicit LoopTimeSource(uv_loop_t* loop) : loop_(loop) {}
  uint64_t NowMs() const override { return uv_now(loop_); }
  uint64_t NowNs() const override { return uv_hrtime(); }
  std::unique_ptr<Timer> CreateTimer(std::function<void()> on_fire) override;

 private:
  uv_loop_t* loop_;
};

}  // namespace bulkhead::loop
