// SPDX-License-Identifier: MIT
// Clock: the seam through which policy code reads monotonic time, so that tests drive it by hand
// (envoy's simulated_time_system.h, ninja's FakeCommandRunner idea applied to time). Clocks are
// read on the loop thread only; FakeClock is not thread-safe.
#pragma once

#include <time.h>

#include <cstdint>

#include "base/check.h"

namespace bulkhead {

class Clock {
 public:
  virtual ~Clock() = default;
  // Milliseconds on a monotonic clock with an arbitrary epoch: never goes back, not affected by
  // changes of the wall-clock time. Only differences between two readings mean anything.
  virtual uint64_t NowMs() const = 0;
};

// CLOCK_MONOTONIC, read on every call. Code on the libuv loop should prefer a clock that returns
// uv_now(loop), the loop's cached time that its timers are measured against.
class MonotonicClock final : public Clock {
 public:
  uint64_t NowMs() const override { return NowUs() / 1000; }
  // The same clock in microseconds, for what must name it so (sd_notify(3)'s MONOTONIC_USEC, which
  // the service manager compares with its own CLOCK_MONOTONIC reading).
  uint64_t NowUs() const {
    timespec now{};
    BH_CHECK(clock_gettime(CLOCK_MONOTONIC, &now) == 0);
    return static_cast<uint64_t>(now.tv_sec) * 1000000 + static_cast<uint64_t>(now.tv_nsec) / 1000;
  }
};

// A clock that moves only when told to. For tests: no sleeps, every time step explicit.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(uint64_t start_ms = 0) : now_ms_(start_ms) {}

  uint64_t NowMs() const override { return now_ms_; }

  void AdvanceMs(uint64_t ms) { now_ms_ += ms; }
  // REQUIRES: now_ms >= NowMs() (a monotonic clock never goes back).
  void SetMs(uint64_t now_ms) {
    BH_CHECK(now_ms >= now_ms_);
    now_ms_ = now_ms;
  }

 private:
  uint64_t now_ms_;
};

}  // namespace bulkhead
