// SPDX-License-Identifier: MIT
// OomKillTracker: what a cell's memory.events say about OOM kills, one look at a time: how many
// kills the kernel's OOM killer made in the cell, and whether the death of the worker was one of
// them. Pure logic, no I/O and no clock (lifecycle::OomWatch reads the file and keeps the time);
// plus ProcessIsDying, which reads /proc. Sources: the kernel's
// Documentation/admin-guide/cgroup-v2.rst
// ("memory.events", "memory.oom.group") and mm/oom_kill.c (__oom_kill_process raises oom_kill
// just before it queues SIGKILL to the victim; oom_kill_process then raises oom_group_kill and
// kills every other member whose oom_score_adj is not -1000).
// Threading: not thread-safe; one owner (a cell, on the loop thread).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string_view>

#include "base/status.h"
#include "cell/cgroup.h"

namespace bulkhead::cell {

// OOM kills between two reads of memory.events, as an operator counts them: one per decision of
// the OOM killer in the cell.
// - group_kill (memory.oom.group = 1, oom_policy "kill"): one per rise of oom_group_kill, since
//   oom_kill counts kill actions, not decisions (6.1 kills the victim, then every member again:
//   one process gives oom_kill 2). On kernels before 5.17, which have no oom_group_kill key, a
//   rise of oom_kill counts as one.
// - otherwise (oom_policy "continue"): one per rise of oom_kill, each a single victim.
// A counter that went down (the cgroup was created anew) counts nothing.
uint64_t CountOomKills(const MemoryEvents& before, const MemoryEvents& after, bool group_kill);

// Tells a worker's OOM kill from any other death. The kernel has no per-process record, so the
// tracker combines the two facts it has: the wait status (the OOM killer only ever sends SIGKILL)
// and memory.events oom_kill / oom_group_kill, compared look by look. A rise seen while the worker
// runs leaves its fate open ("pending") until OomWatch has checked the worker a while later
// (WorkerSurvived when it is neither dead nor dying) or until it is reaped. So a helper killed in
// the cell while the worker survives (oom_policy "continue", or a worker at oom_score_adj -1000)
// is counted, but the worker's later crash or manual kill -9 is not taken for an OOM kill.
class OomKillTracker {
 public:
  // What one look found, against the look before it.
  struct Look {
    bool rose = false;    // oom_kill or oom_group_kill rose
    uint64_t kills = 0;   // CountOomKills of this look
    MemoryEvents before;  // the previous look's counters
    MemoryEvents now;     // this look's counters
  };

  // `baseline`: memory.events as found when the cell's cgroup was opened; kills before it are not
  // counted.
  explicit OomKillTracker(const MemoryEvents& baseline) : last_(baseline) {}

  // Feeds a fresh read of memory.events. `group_kill`: memory.oom.group is 1 now. A rise while
  // `worker_running` (a worker exists and is not reaped yet) makes the worker's fate pending.
  Look Observe(const MemoryEvents& now, bool group_kill, bool worker_running);

  // The worker was checked after the rise (ProcessIsDying false): the kills seen so far spared it.
  void WorkerSurvived() { pending_ = false; }
  // A new worker starts: whatever happened before concerns no process of it.
  void WorkerStarted() { pending_ = false; }

  // The worker was reaped with `wait_status`; `final_look` is a look taken after the reap. It was
  // OOM-killed when the wait status is SIGKILL and an OOM kill it did not survive happened in the
  // cell: one in `final_look`, or one pending since an earlier look. Settles the pending fate.
  bool WorkerDied(int wait_status, const Look& final_look);

  // A rise was seen while the worker ran and it has not been checked since.
  bool pending() const { return pending_; }
  // OOM kills counted since the tracker was made.
  uint64_t kills() const { return kills_; }
  // The counters of the last look.
  const MemoryEvents& last() const { return last_; }

 private:
  MemoryEvents last_;
  uint64_t kills_ = 0;
  bool pending_ = false;
};

// Whether the kernel is killing process `pid` or has killed it, from the text of /proc/<pid>/stat
// (state Z or X, or PF_EXITING in its flags field) and /proc/<pid>/status (SIGKILL in SigPnd or
// ShdPnd). Errors describe malformed text.
Result<bool> ParseProcessDying(std::string_view proc_stat, std::string_view proc_status);
// Reads both files of `pid` (a child not yet reaped: its zombie keeps them). A process whose
// files are gone is dying.
Result<bool> ProcessIsDying(pid_t pid);

}  // namespace bulkhead::cell
