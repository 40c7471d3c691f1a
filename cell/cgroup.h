// SPDX-License-Identifier: MIT
// cgroup v2 for cells: takes over the supervisor's own cgroup (CgroupTree), gives each cell a leaf
// cgroup with cpu.max, memory.max, pids.max (CellCgroup), reads its stats and kills it whole.
// Source for every file name and format: the kernel's Documentation/admin-guide/cgroup-v2.rst.
// Threading: not thread-safe. Every call is a few small reads or writes of cgroupfs files and
// never waits for processes, so it is fine on the supervisor's loop thread.
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

namespace bulkhead::cell {

// Where systemd and the VM tests mount the cgroup2 hierarchy.
inline constexpr std::string_view kCgroupMount = "/sys/fs/cgroup";
// cpu.max period the kernel uses when none is written (cgroup-v2.rst, "cpu.max").
inline constexpr uint64_t kDefaultCpuPeriodUs = 100000;

// Limits of one cell. Every field maps to one cgroup v2 interface file; nullopt writes the
// kernel's default, which for limits means "max" (no limit). Memory in bytes (the kernel rounds
// down to whole pages), CPU time in microseconds.
struct CgroupLimits {
  // cpu.max "$MAX $PERIOD": the cell may use cpu_quota_us μs of CPU time (summed over all CPUs)
  // in each cpu_period_us μs of wall time, so 20000 / 100000 is 20% of one CPU. nullopt quota
  // writes "max"; nullopt period means kDefaultCpuPeriodUs. Kernel bounds: quota >= 1000,
  // 1000 <= period <= 1000000.
  std::optional<uint64_t> cpu_quota_us;
  std::optional<uint64_t> cpu_period_us;
  // cpu.weight, share of CPU under contention among sibling cells, in [1, 10000]; default 100.
  std::optional<uint32_t> cpu_weight;
  // memory.max: hard limit; reaching it runs the OOM killer inside the cell.
  std::optional<uint64_t> memory_max;
  // memory.high: throttle limit; above it the cell is slowed and reclaimed, never OOM-killed.
  std::optional<uint64_t> memory_high;
  // memory.swap.max: swap the cell may use. Only exists with swap accounting in the kernel.
  std::optional<uint64_t> memory_swap_max;
  // pids.max: processes plus threads; fork()/clone() fail with EAGAIN at the limit.
  std::optional<uint64_t> pids_max;
  // memory.oom.group: true (1) makes an OOM kill take every process of the cell whose
  // oom_score_adj is not -1000 (systemd's OOMPolicy=kill); false (0) kills only the victim the
  // kernel chose (OOMPolicy=continue). Not a limit: WriteLimits always writes it.
  bool oom_group = true;
};

// The limits of CgroupLimits one by one, each held by one interface file (cpu.max takes quota and
// period together).
enum class Limit : uint8_t {
  kCpuMax,
  kCpuWeight,
  kMemoryMax,
  kMemoryHigh,
  kMemorySwapMax,
  kPidsMax
};
inline constexpr size_t kLimitCount = 6;
// The config key and status name: "cpu_max", "cpu_weight", "memory_max", "memory_high",
// "memory_swap_max", "pids_max".
std::string_view LimitName(Limit limit);
// Its interface file: "cpu.max", "cpu.weight", "memory.max", "memory.high", "memory.swap.max",
// "pids.max".
std::string_view LimitFile(Limit limit);
// The controller that provides the file: "cpu", "memory" or "pids".
std::string_view LimitController(Limit limit);
// Whether `limits` sets `limit` (nullopt fields are unset; cpu_max counts the quota only).
bool LimitIsSet(const CgroupLimits& limits, Limit limit);

// What CellCgroup::WriteLimits did: every file is tried, whatever failed before it.
struct LimitsWritten {
  // Indexed by Limit. Ok when the kernel holds the configured value. An unset limit whose file is
  // absent (its controller is not enabled for the cell) is Ok too: nothing limits it, which is
  // what unset means. Otherwise the error names the file, the value and the cause.
  std::array<Status, kLimitCount> limits{Status::Ok(), Status::Ok(), Status::Ok(),
                                         Status::Ok(), Status::Ok(), Status::Ok()};
  // memory.oom.group; an absent file (no memory controller) is Ok: no OOM killer runs there.
  Status oom_group = Status::Ok();

  const Status& of(Limit limit) const { return limits[static_cast<size_t>(limit)]; }
  // Every write succeeded (or was rightly skipped).
  bool ok() const;
  // Ok, or one error listing every failure "limit: error", "; "-separated.
  Status status() const;
};

// memory.events (hierarchical counters since the cgroup was created).
struct MemoryEvents {
  uint64_t low = 0;
  uint64_t high = 0;
  uint64_t max = 0;
  uint64_t oom = 0;  // times usage hit memory.max and an allocation was about to fail
  // Kills by any OOM killer. Counts kill actions, not distinct processes: with memory.oom.group
  // a 6.1 kernel kills the victim, then every member including the victim again (measured in the
  // VM: one process, oom_kill 2). Treat it as "> 0 since last read", never as a process count.
  uint64_t oom_kill = 0;
  uint64_t oom_group_kill = 0;  // times memory.oom.group killed the whole cgroup (kernel >= 5.17)
  bool has_oom_group_kill = false;  // the kernel writes the oom_group_kill key (>= 5.17)
};

// cpu.stat. The three nr_/throttled_ keys only exist while the cpu controller is enabled.
struct CpuStat {
  uint64_t usage_usec = 0;  // CPU time used, μs, all CPUs summed
  uint64_t user_usec = 0;
  uint64_t system_usec = 0;
  uint64_t nr_periods = 0;      // cpu.max periods in which the cgroup was runnable
  uint64_t nr_throttled = 0;    // periods in which it ran out of quota
  uint64_t throttled_usec = 0;  // wall time its tasks spent throttled, μs
};

// cgroup.events.
struct CgroupEvents {
  bool populated = false;  // the cgroup or a descendant has live processes
  bool frozen = false;
};

// What ReadStats() returns: the kernel's own numbers for one cell. The files of a controller that
// is not enabled for the cell are absent: its fields stay 0 / nullopt and its flag says so.
struct CgroupStats {
  bool has_memory = true;              // memory.current, memory.max and memory.events were there
  bool has_pids = true;                // pids.current and pids.max were there
  bool has_cpu = true;                 // cpu.max was there (cpu.stat is a core file, always there)
  uint64_t memory_current = 0;         // memory.current, bytes
  std::optional<uint64_t> memory_max;  // memory.max, bytes; nullopt = "max"
  CpuStat cpu;                         // cpu.stat
  uint64_t pids_current = 0;           // pids.current
  std::optional<uint64_t> pids_max;    // pids.max; nullopt = "max"
  MemoryEvents memory_events;          // memory.events
};

// --- Pure parsers and formatters (no I/O). Errors describe the text, not the file. ---

// The cgroup v2 path of a process from /proc/<pid>/cgroup: the "0::<path>" line, e.g.
// "/system.slice/bulkhead.service". Fails when there is no such line (a cgroup-v1-only system).
Result<std::string> ParseProcSelfCgroup(std::string_view text);
// memory.events. "oom" and "oom_kill" are required; absent keys (oom_group_kill before 5.17) are 0.
Result<MemoryEvents> ParseMemoryEvents(std::string_view text);
// cpu.stat. "usage_usec" is required; the others are 0 when absent.
Result<CpuStat> ParseCpuStat(std::string_view text);
// cgroup.events. "populated" is required.
Result<CgroupEvents> ParseCgroupEvents(std::string_view text);
// cgroup.controllers or cgroup.subtree_control: space-separated controller names, unordered.
std::vector<std::string> ParseControllers(std::string_view text);
// A single-value limit file (memory.max, pids.max, ...): "max" -> nullopt, else a decimal.
Result<std::optional<uint64_t>> ParseMaxValue(std::string_view text);
// Inverse of ParseMaxValue: nullopt -> "max".
std::string FormatMaxValue(std::optional<uint64_t> value);
// cpu.max content: "max 100000" for no quota, "20000 100000" for 20% of one CPU.
std::string FormatCpuMax(std::optional<uint64_t> quota_us, uint64_t period_us);

// Cell names become directory names next to interface files, so they are 1-64 characters of
// [A-Za-z0-9_-]. Having no '.', they never collide with "cgroup.*" or "<controller>.*" files
// (cgroup-v2.rst, "Avoid Name Collisions"). Config validation can call this early.
Status ValidateCellName(std::string_view name);
// Checks the kernel's ranges up front so that errors name the field, not just EINVAL.
Status ValidateLimits(const CgroupLimits& limits);

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
  // memory.oom.group = limits.oom_group (1: an OOM kill takes the whole cell, never half of it). Every file is
  // written even when an earlier one failed, and each outcome is reported (LimitsWritten): a
  // controller withdrawn from the parent's cgroup.subtree_control removes its files (ENOENT),
  // which fails a set limit and skips an unset one. Limits outside the kernel's ranges
  // (ValidateLimits) fail every entry and nothing is written.
  LimitsWritten WriteLimits(const CgroupLimits& limits);

  // Reads memory.current, memory.max, cpu.stat, pids.current, pids.max and memory.events.
  Result<CgroupStats> ReadStats() const;
  // Reads memory.events alone (one small read), for watching OOM kills.
  Result<MemoryEvents> ReadMemoryEvents() const;

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
  Status SignalEachProcess(int signal);

  std::string name_;
  std::string path_;
  UniqueFd dir_fd_;
};

}  // namespace bulkhead::cell
