// SPDX-License-Identifier: MIT
// StallWindow: the share of recent time in which a cgroup's tasks stalled, from readings of a
// pressure file's cumulative "some" total (Documentation/accounting/psi.rst: total= is the stall
// time in μs since the cgroup was made). The supervisor's poll (supervisor/cgroup_poll.h) keeps
// one per cell, fed by its read of every running cell's cgroup, and asks it, when one adaptive
// cell's cpu.pressure trigger fires, whether another cell is waiting for a CPU
// (docs/adaptive-concurrency.md, "Whose CPU"). Not the kernel's avg10: that is a 10 s average, so a
// cell whose load ended 15 s ago still shows a stall there; the window here is the trigger's own
// second. Pure: no I/O, times are the caller's ms (loop::TimeSource::NowMs). O(1), no allocation.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "admission/adaptive_limit.h"

namespace bulkhead::admission {

class StallWindow {
 public:
  // Readings kept: 8 polls of 250 ms span a 1 s window twice.
  static constexpr size_t kReadings = 8;

  // One reading of the cumulative stall total (μs) at `now_ms`. A total that went back (a new
  // cgroup, a worker generation's leaf) starts the readings anew.
  void Record(uint64_t now_ms, uint64_t total_us);
  // No readings (the cell's worker ended: its next one is judged from fresh readings).
  void Clear() { count_ = 0; }

  // The stalled share (0 to 1) of the last `window_ms` before `now_ms`: from the newest reading
  // back to the newest one at least `window_ms` older (or the oldest kept). nullopt when the
  // newest reading is older than `window_ms`, or the readings span less than half of it: too
  // little to judge. REQUIRES: window_ms > 0.
  std::optional<double> Share(uint64_t now_ms, uint64_t window_ms) const;

  size_t readings() const { return count_; }

 private:
  struct Reading {
    uint64_t at_ms = 0;
    uint64_t total_us = 0;
  };
  // age 0: the newest. REQUIRES: age < count_.
  const Reading& At(size_t age) const {
    return readings_[(next_ + kReadings - 1 - age) % kReadings];
  }

  std::array<Reading, kReadings> readings_{};
  size_t next_ = 0;  // where the next reading goes
  size_t count_ = 0;
};

// Whose CPU, at one cell's cpu.pressure event (AdaptiveLimit::OnPressure): `others` holds, for
// every other cell running a worker in a cgroup, its stalled share over the trigger's window
// (StallWindow::Share; nullopt: too few readings). kWaiting when one reached `waiting_share`;
// otherwise kUnknown when one could not be judged; otherwise kNoneWaiting (also with no others).
CpuNeighbours JudgeCpuNeighbours(std::span<const std::optional<double>> others,
                                 double waiting_share);

}  // namespace bulkhead::admission
