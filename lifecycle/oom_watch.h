// SPDX-License-Identifier: MIT
// OomWatch: the OOM kills in one cell's cgroup, as its memory.events counts them (cgroup v2 docs,
// "memory.events": oom_kill, oom_group_kill), watched with inotify through uv_fs_event or read
// every second when that fails. Every rise is counted and logged when it happens; one seen while
// the worker runs is checked 200 ms later against the worker's /proc state, so that the worker's
// death is blamed on an OOM kill only when it did not survive one (cell::OomKillTracker).
// REQUIRES: loop thread only.
#pragma once

#include <sys/types.h>
#include <uv.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "cell/cgroup.h"
#include "cell/oom_kill_tracker.h"
#include "loop/handle_group.h"
#include "loop/time_source.h"

namespace bulkhead::lifecycle {

class OomWatch {
 public:
  // `worker_pid()` is the live worker's pid, 0 when none. Log lines name `cell_name`. Its timer
  // (the survival check, or the poll) runs on `time`, which outlives the watch.
  OomWatch(uv_loop_t* loop, loop::TimeSource* time, const std::string* cell_name,
           std::function<pid_t()> worker_pid);
  ~OomWatch();
  OomWatch(const OomWatch&) = delete;
  OomWatch& operator=(const OomWatch&) = delete;

  // Starts watching `cgroup`'s memory.events; kills before now are not counted (they are an
  // earlier run's). `limits` (memory.oom.group, memory.max) are read at each look. Both outlive
  // the watch.
  void Start(const cell::CellCgroup* cgroup, const cell::CgroupLimits* limits);
  // A worker is about to be spawned: OOM kills before it concern none of its processes.
  void WorkerStarted();
  // The worker was reaped with `wait_status`: true when its death was an OOM kill (a SIGKILL, and
  // an OOM kill it was not seen to survive). REQUIRES: worker_pid() still names it. False when not
  // started.
  bool WorkerDied(int wait_status);
  // OOM kills since Start, one per decision of the kernel's OOM killer.
  uint64_t kills() const { return tracker_ ? tracker_->kills() : 0; }

  // Closes the watch; `on_closed` runs from its close callback.
  void Close(std::function<void()> on_closed);

 private:
  // Reads memory.events, counts and logs what rose since the previous look, and arms the survival
  // check of the worker when one runs.
  cell::OomKillTracker::Look Look();
  static void OnMemoryEvents(uv_fs_event_t* handle, const char* filename, int events, int status);
  void OnTimer();

  loop::TimeSource* time_;
  const std::string* cell_name_;
  std::function<pid_t()> worker_pid_;
  const cell::CellCgroup* cgroup_ = nullptr;
  const cell::CgroupLimits* limits_ = nullptr;
  std::optional<cell::OomKillTracker> tracker_;
  loop::HandleGroup handles_;
  uv_fs_event_t* watch_;
  // The worker's survival check after an OOM kill, or the poll of memory.events every kPollMs
  // when it cannot be watched (`polling_`).
  std::unique_ptr<loop::Timer> timer_;
  bool polling_ = false;
  uint64_t seen_ms_ = 0;  // when the last OOM kill was seen with the worker running
};

}  // namespace bulkhead::lifecycle
