// SPDX-License-Identifier: MIT
// cgroup v2 for cells (the files themselves: cell/cgroup_files.h): takes over the supervisor's own
// cgroup (CgroupTree), gives each cell a leaf cgroup with cpu.max, memory.max, pids.max
// (CellCgroup), reads its stats and kills it whole. Source for every file name and format: the
// kernel's Documentation/admin-guide/cgroup-v2.rst. Threading: not thread-safe. Every call is a few
// small reads or writes of cgroupfs files and never waits for processes, so it is fine on the
// supervisor's loop thread.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"
#include "cell/cgroup_files.h"

namespace bulkhead::cell {

// --- The supervisor's part of the hierarchy. ---

// How Delegate() finds and checks the hierarchy. The defaults are the real system; tests point
// root_mount and proc_self_cgroup at a temporary fake tree and turn check_filesystem off.
struct DelegateOptions {
  std::string root_mount = std::string(kCgroupMount);
  std::string proc_self_cgroup = "/proc/self/cgroup";
  // statfs(2) root_mount and require CGROUP2_SUPER_MAGIC.
  bool check_filesystem = true;
  // Process moved into <own>/supervisor; 0 means the caller.
  pid_t pid = 0;
  // The cgroup to build the tree in, as a path under root_mount ("/pod.slice/bulkhead"); empty:
  // the one options.proc_self_cgroup names (bulkheadd's own). With a parent, the process moves to
  // <parent>/supervisor only when it already lives in <parent> or below it; elsewhere it stays
  // where it is, and <parent> must have no processes of its own.
  std::string parent;
  // Controllers enabled for the cells.
  std::vector<std::string> controllers = {"cpu", "memory", "pids"};
  // true: every one of `controllers` must be available, else Delegate fails (cgroup =
  // "required"). false: those available are enabled, the others are left out and listed in
  // CgroupTree::missing_controllers() (cgroup = "auto": apply what the kernel offers).
  bool require_all_controllers = true;
};

// The supervisor's delegated cgroup ("own": the one /proc/self/cgroup names at start, or the
// `parent` of DelegateOptions) laid out as
//   <own>/supervisor      leaf holding bulkheadd itself
//   <own>/cells           no processes; +cpu +memory +pids in its cgroup.subtree_control
//   <own>/cells/<name>    one leaf per cell (CellCgroup), the only place workers run
// Processes live only in leaves, as the no-internal-process rule requires (cgroup-v2.rst,
// "No Internal Process Constraint"), and <own>/cells can carry limits for all cells together.
// Works at the root cgroup (PID 1 of a VM or container) and in a systemd unit with Delegate=yes.
// Copyable: it holds paths only.
class CgroupTree {
 public:
  // Delegate({.root_mount = root_mount}).
  static Result<CgroupTree> Delegate(std::string_view root_mount = kCgroupMount);
  // Checks that root_mount is cgroup v2 and that own/cgroup.controllers lists every needed
  // controller; creates <own>/supervisor and moves options.pid there (its threads follow);
  // enables the controllers in <own>/cgroup.subtree_control and <own>/cells/cgroup.subtree_control.
  // Idempotent: a second call, or a call from a process already in <own>/supervisor (the last
  // component of its path is "supervisor", e.g. after an exec restart), finds the same layout.
  // Errors name the file and the fix, e.g. "controller memory not available in
  // /sys/fs/cgroup/x/cgroup.controllers (available: pids): run under a systemd unit with
  // Delegate=yes, or as PID 1 with cgroup2 mounted".
  static Result<CgroupTree> Delegate(const DelegateOptions& options);

  // Absolute directory paths, no trailing slash.
  const std::string& own_path() const { return own_path_; }
  const std::string& supervisor_path() const { return supervisor_path_; }
  const std::string& cells_path() const { return cells_path_; }
  // Controllers of DelegateOptions::controllers that were not available and are not enabled
  // (empty with require_all_controllers), and the file that said so, for messages.
  const std::vector<std::string>& missing_controllers() const { return missing_controllers_; }
  const std::string& controllers_file() const { return controllers_file_; }

 private:
  CgroupTree() = default;

  std::string own_path_;
  std::string supervisor_path_;
  std::string cells_path_;
  std::vector<std::string> missing_controllers_;
  std::string controllers_file_;
};

// How Kill() kills.
enum class KillMethod {
  kAuto,               // cgroup.kill when the kernel has it, else kSignalEachProcess
  kCgroupKill,         // write "1" to cgroup.kill (kernel >= 5.14); fails when it is missing
  kSignalEachProcess,  // SIGKILL every pid in cgroup.procs (and sub-cgroups) until none is new
};

// One cell's leaf cgroup, <own>/cells/<name>. Owns an open O_DIRECTORY descriptor of it, which is
// what clone3(2) CLONE_INTO_CGROUP takes so that a worker starts inside the cell and never runs a
// single instruction outside it. Move-only. Destruction closes the descriptor but leaves the
// cgroup in place: teardown is explicit (Kill, poll IsEmpty, Remove).
class CellCgroup {
 public:
  // Creates the cell's cgroup (mkdir) and opens it. An existing cgroup of that name (left by an
  // earlier run) is adopted as it is, processes included: check IsEmpty() and Kill() if needed.
  static Result<CellCgroup> Create(const CgroupTree& tree, std::string_view name);

  CellCgroup(CellCgroup&&) = default;
  CellCgroup& operator=(CellCgroup&&) = default;

  const std::string& name() const { return name_; }
  // Absolute directory path.
  const std::string& path() const { return path_; }
  // For clone_args.cgroup with CLONE_INTO_CGROUP (or openat). -1 after Remove().
  int dir_fd() const { return dir_fd_.get(); }
  // <path>/cgroup.events: the kernel raises a file-modified event (inotify IN_MODIFY, libuv
  // uv_fs_event) when "populated" changes, so the loop can learn that a killed cell is empty
  // without polling.
  std::string events_path() const { return path_ + "/cgroup.events"; }
  // <path>/memory.events: a file-modified event follows every change of its counters (the
  // kernel's cgroup_file_notify, at most one per 10 ms), so OOM kills can be watched the same way.
  std::string memory_events_path() const { return path_ + "/memory.events"; }

  // Writes cpu.max, cpu.weight, memory.max, memory.high, memory.swap.max, pids.max (each unset
  // field as the kernel default, so calling again with fewer limits lifts the others) and
  // memory.oom.group = limits.oom_group (1: an OOM kill takes the whole cell, never half of it).
  // Every file is written even when an earlier one failed, and each outcome is reported
  // (LimitsWritten): a controller withdrawn from the parent's cgroup.subtree_control removes its
  // files (ENOENT), which fails a set limit and skips an unset one. Limits outside the kernel's
  // ranges (ValidateLimits) fail every entry and nothing is written.
  LimitsWritten WriteLimits(const CgroupLimits& limits);

  // Reads memory.current, memory.max, cpu.stat, pids.current, pids.max and memory.events.
  Result<CgroupStats> ReadStats() const;
  // Reads memory.events alone (one small read), for watching OOM kills.
  Result<MemoryEvents> ReadMemoryEvents() const;
  // Reads what the adaptive mode polls: cpu.stat, cpu.pressure, memory.current, memory.max and
  // memory.stat (five small reads; the memory files only with the memory controller). Errors:
  // those of the cpu.stat and memory files; cpu.pressure absent (no PSI) or unreadable only
  // leaves cpu_stall_us nullopt.
  Result<CgroupUsage> ReadUsage() const;
  // Reads <resource>.pressure: the stall averages and totals, for status. Triggers on the same
  // files: cell/pressure_trigger.h.
  Result<Pressure> ReadPressure(PressureResource resource) const;

  // --- Worker generations (docs/config.md, "Where the processes live"). ---

  // Creates the leaf of one worker generation, <path>/gen-<generation>, and opens it (an existing
  // one, left by an earlier run, is adopted as it is). First enables the memory controller for
  // the cell's children (cgroup.subtree_control, when the cell's cgroup.controllers offers it), so
  // that each generation has its own memory.oom.group while the limits stay on the cell; from then
  // on, by the no-internal-process rule (cgroup-v2.rst), processes live only in generations. Fails
  // with EBUSY while the cell itself holds processes: Kill() and wait until IsEmpty() first. The
  // generation's name() is "<cell>/gen-<generation>".
  Result<CellCgroup> CreateGeneration(uint64_t generation);
  // Writes memory.oom.group (1: an OOM kill takes every process of this cgroup). An absent file
  // (no memory controller here) is Ok: no OOM group to set.
  Status WriteOomGroup(bool oom_group);
  // This cgroup has its own memory.oom.group (the memory controller is enabled for it).
  bool HasOomGroup() const;
  // Removes every gen-* sub-cgroup (rmdir); one with processes fails with EBUSY, and the others
  // are still removed.
  Status RemoveGenerations();

  // Pids listed in this cgroup's cgroup.procs (not its sub-cgroups'), unordered.
  Result<std::vector<pid_t>> Procs() const;

  // Sends SIGKILL to every process in the cell and its sub-cgroups and returns without waiting;
  // the processes die asynchronously. Then poll IsEmpty() (or watch events_path()) with a
  // deadline, and Remove(). kSignalEachProcess re-reads cgroup.procs until a pass finds no pid it
  // has not signalled yet (at most 32 passes): a process with SIGKILL pending cannot fork, so
  // nothing escapes. Its one weakness, which cgroup.kill does not have: a pid that is reaped and
  // reused between the read and kill(2) could hit another process; the supervisor, as the
  // single-threaded reaper of its workers, does not reap during the call.
  Status Kill(KillMethod method = KillMethod::kAuto);

  // Sends `signal` to every process in the cell and its sub-cgroups, as systemd's
  // KillMode=control-group does (there is no cgroup.signal file): reads cgroup.procs and signals
  // each pid not signalled yet, until a pass finds none new (at most 32 passes), so a process
  // forked meanwhile is reached too. Returns without waiting. Same pid-reuse caveat as Kill.
  Status Signal(int signal);

  // True when the cell and its sub-cgroups have no live process: "populated 0" in cgroup.events
  // (or an empty cgroup.procs on kernels without it). Zombies not yet reaped do not count.
  Result<bool> IsEmpty() const;

  // Removes the cgroup directory (rmdir) and closes dir_fd(). Fails with EBUSY while the cell has
  // processes. Removing a cgroup that is already gone succeeds.
  Status Remove();

 private:
  CellCgroup(std::string name, std::string path, UniqueFd dir_fd)
      : name_(std::move(name)), path_(std::move(path)), dir_fd_(std::move(dir_fd)) {}

  Status KillWithCgroupKill();
  // "cell NAME: cgroup already removed".
  Status Removed() const;
  Status SignalEachProcess(int signal);

  std::string name_;
  std::string path_;
  UniqueFd dir_fd_;
};

}  // namespace bulkhead::cell
