// SPDX-License-Identifier: MIT
// CgroupPoll: the one timer that reads the cells' cgroups (docs/adaptive-concurrency.md, "Polling"
// and "Whose CPU"). Each tick reads every cell's cgroup once (Polled::PollCgroup: an adaptive
// cell's usage, which its own controller takes, cpu.pressure included; another cell's
// cpu.pressure alone) and keeps each cell's cpu.pressure "some" total in an admission::StallWindow,
// so that at one cell's cpu.pressure event Judge can say whether another cell is waiting for a
// CPU. Whether the timer runs follows from Follow's arguments alone. REQUIRES: loop thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "admission/adaptive_limit.h"
#include "admission/stall_window.h"
#include "loop/time_source.h"

namespace bulkhead::supervisor {

class CgroupPoll {
 public:
  // Ticks, ms: 2.5 cpu.max periods of 100 ms (the controller judges throttling once 5 have
  // passed), 4 readings per trigger window.
  static constexpr uint64_t kPollMs = 250;
  // The window judged: the cpu trigger's own (admission::kCpuTrigger, 1 s).
  static constexpr uint64_t kWindowMs = 1000;
  // A cell whose tasks stalled for a CPU this share of the window is waiting.
  static constexpr double kWaitingShare = 0.10;

  // One cell as the poll sees it (supervisor::Cell; a test's).
  class Polled {
   public:
    // Reads the cell's cgroup once (lifecycle::WorkerRunner::PollCgroup): cpu.pressure's "some"
    // total, μs; nullopt when no worker runs in a cgroup, or it could not be read.
    virtual std::optional<uint64_t> PollCgroup() = 0;
    // A worker of the cell runs in a cgroup: the cell could be waiting for a CPU.
    virtual bool RunsInCgroup() const = 0;
    // concurrency = "adaptive".
    virtual bool adaptive() const = 0;

   protected:
    ~Polled() = default;
  };

  // Timers from `time`, which outlives the poll.
  explicit CgroupPoll(loop::TimeSource* time);

  // The cells polled, and what the timer follows: it runs (its first tick at the next turn, then
  // every kPollMs) while cgroups are enforced, bulkheadd is not shutting down and one of `cells` is
  // adaptive; otherwise it stops. A cell no longer in `cells` is forgotten with its readings; the
  // others keep theirs. Call at boot, after every reload and at shutdown. Each of `cells` outlives
  // the next Follow (or the poll).
  void Follow(std::span<Polled* const> cells, bool cgroups_enforced, bool shutting_down);
  // At `fired`'s cpu.pressure event: admission::JudgeCpuNeighbours over every other cell that
  // runs a worker in a cgroup, by its stalled share over the last kWindowMs.
  admission::CpuNeighbours Judge(const Polled& fired) const;
  bool running() const { return timer_->armed(); }

 private:
  struct Entry {
    Polled* cell = nullptr;
    admission::StallWindow stall;
  };
  void Tick();

  loop::TimeSource* time_;
  std::vector<Entry> entries_;
  std::unique_ptr<loop::Timer> timer_;
};

}  // namespace bulkhead::supervisor
