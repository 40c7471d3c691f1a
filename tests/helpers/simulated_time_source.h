// SPDX-License-Identifier: MIT
// SimulatedTimeSource: a loop::TimeSource whose time moves only when a test says so (Envoy's
// test/test_common/simulated_time_system.h). Advance(ms) walks time forward from one due timer to
// the next, running each with NowMs() at its own deadline, in deadline order (equal deadlines in
// the order they were armed); a timer armed by a callback runs in the same Advance if it falls due
// within it. Sockets and other handles still run on a real libuv loop: a test advances the
// simulated time, then runs the loop (UV_RUN_NOWAIT) for the I/O and the check phase (AfterPoll).
// Not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "loop/time_source.h"

namespace bulkhead::testing {

class SimulatedTimeSource final : public loop::TimeSource {
 public:
  // Starts at `start_ms`, not 0, so that "0 ms ago" and "never" are told apart in the code under
  // test.
  explicit SimulatedTimeSource(uint64_t start_ms = 1'000'000) : now_ms_(start_ms) {}
  ~SimulatedTimeSource() override;
  SimulatedTimeSource(const SimulatedTimeSource&) = delete;
  SimulatedTimeSource& operator=(const SimulatedTimeSource&) = delete;

  uint64_t NowMs() const override { return now_ms_; }
  uint64_t NowNs() const override { return now_ms_ * 1'000'000 + extra_ns_; }
  std::unique_ptr<loop::Timer> CreateTimer(std::function<void()> on_fire) override;

  // Moves time forward by `ms`, running every timer that falls due on the way (see above).
  void Advance(uint64_t ms);
  // Runs the timers due now (armed with delay 0) without moving time.
  void RunDue() { Advance(0); }
  // Moves the nanosecond reading forward by `ns` without moving NowMs() or running timers (for
  // latency figures below a millisecond).
  void AdvanceNs(uint64_t ns) { extra_ns_ += ns; }

  // Timers armed now, and the earliest deadline among them.
  size_t armed_timers() const { return armed_.size(); }
  std::optional<uint64_t> NextDeadline() const;

 private:
  class SimTimer;
  using Key = std::pair<uint64_t, uint64_t>;  // (deadline ms, arming sequence)

  void Arm(SimTimer* timer, uint64_t delay_ms);
  void Disarm(SimTimer* timer);

  uint64_t now_ms_;
  uint64_t extra_ns_ = 0;
  uint64_t sequence_ = 0;
  std::map<Key, SimTimer*> armed_;
  size_t live_timers_ = 0;
};

}  // namespace bulkhead::testing
