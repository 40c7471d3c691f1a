// SPDX-License-Identifier: MIT
// TeardownWatcher: what waits for a worker generation to be gone, processes and all, before the
// lifecycle hears of its end: never two generations side by side. It kills what is left of the
// generation (cgroup.kill), at once or, for a stop whose stop_signal went to the whole cgroup
// (kill_mode = "control-group"), from the stop's SIGKILL deadline on, as systemd waits for the
// whole control group until TimeoutStopSec=; it looks every kPollMs whether the generation is
// empty, kills again what a process forked meanwhile, and says once when it is still not empty
// kWarnAfterMs after killing began. REQUIRES: loop thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/status.h"
#include "loop/time_source.h"

namespace bulkhead::lifecycle {

class TeardownWatcher {
 public:
  // How often an emptying generation is looked at, ms.
  static constexpr uint64_t kPollMs = 5;
  // A generation still not empty this long after killing began is logged as an error, once, ms.
  static constexpr uint64_t kWarnAfterMs = 5000;

  // The processes of one generation, as the watcher sees them (the cell's cgroup).
  class Generation {
   public:
    virtual ~Generation() = default;
    // True when none of its processes is left (an error counts as not empty: looked at again).
    virtual Result<bool> IsEmpty() = 0;
    // SIGKILL to every process of it (cgroup.kill); failures are the generation's to log.
    virtual void KillAll() = 0;
    // Where it lives, for the warning ("cgroup /sys/fs/cgroup/.../cells/payments").
    virtual std::string Describe() const = 0;
  };

  // Log lines name `cell_name` (outlives the watcher), as does `time`.
  TeardownWatcher(loop::TimeSource* time, const std::string* cell_name);
  TeardownWatcher(const TeardownWatcher&) = delete;
  TeardownWatcher& operator=(const TeardownWatcher&) = delete;

  // Kills `generation` now when `kill_from_ms` (TimeSource ms) has passed, then looks at it every
  // kPollMs until it is empty, killing again at each look from `kill_from_ms` on, and runs `then`
  // once it is empty (from a timer: never from inside Start). `generation` outlives the watch. A
  // watch under way is replaced: its `then` never runs.
  void Start(Generation* generation, uint64_t kill_from_ms, std::function<void()> then);
  // A generation is being watched (Start, and `then` has not run).
  bool watching() const { return generation_ != nullptr; }
  // Stops watching: `then` never runs.
  void Cancel();

 private:
  void OnTimer();

  loop::TimeSource* time_;
  const std::string* cell_name_;
  std::unique_ptr<loop::Timer> timer_;
  Generation* generation_ = nullptr;
  std::function<void()> then_;
  uint64_t started_ms_ = 0;
  uint64_t kill_from_ms_ = 0;
  bool warned_ = false;
};

}  // namespace bulkhead::lifecycle
