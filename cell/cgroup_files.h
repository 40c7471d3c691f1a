// SPDX-License-Identifier: MIT
// The cgroup v2 interface files a cell uses, as data: the limits (cpu.max, cpu.weight, memory.max,
// memory.high, memory.swap.max, pids.max), the counters read back (memory.events, memory.stat,
// cpu.stat, cgroup.events), pressure stall information (cpu.pressure, memory.pressure,
// io.pressure and their triggers) and pure parsers, formatters and checks for them. No I/O:
// cell/cgroup.h and cell/pressure_trigger.h do the reading and writing. Sources: the kernel's
// Documentation/admin-guide/cgroup-v2.rst and Documentation/accounting/psi.rst.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

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

// memory.stat, the keys the adaptive mode reads (bytes). The file has many more keys, and kernels
// add keys; only these are kept.
struct MemoryStat {
  uint64_t anon = 0;  // anonymous memory (brk, mmap(MAP_ANONYMOUS)): no swap, no reclaim
  uint64_t file = 0;  // page cache, tmpfs and shared memory included
  uint64_t active_file = 0;
  uint64_t inactive_file = 0;  // page cache the kernel reclaims first
};

// What CellCgroup::ReadUsage() returns: the numbers the adaptive mode polls (docs/
// adaptive-concurrency.md). The memory files are absent while the memory controller is not
// enabled for the cell (has_memory false, the memory fields 0 / nullopt).
struct CgroupUsage {
  CpuStat cpu;  // cpu.stat; its nr_/throttled_ keys need the cpu controller
  // cpu.pressure's "some" total= (μs of stall since the cgroup was made: psi.rst), which the
  // supervisor keeps to judge whose CPU ("Whose CPU"); nullopt without PSI (no cpu.pressure) or
  // when the file could not be read or parsed.
  std::optional<uint64_t> cpu_stall_us;
  bool has_memory = true;              // memory.current, memory.max, memory.stat were there
  uint64_t memory_current = 0;         // memory.current, bytes
  std::optional<uint64_t> memory_max;  // memory.max, bytes; nullopt = "max"
  MemoryStat memory_stat;              // memory.stat

  // memory.current less inactive_file: what the cell holds that reclaim would not readily give
  // back, as the kubelet's working set counts it. Compared with memory.max by the adaptive mode.
  uint64_t working_set() const;
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
// cgroup.procs (or cgroup.threads): one pid per line, in no order. Fails on a line that is not a
// pid.
Result<std::vector<pid_t>> ParseCgroupProcs(std::string_view text);
// memory.events. "oom" and "oom_kill" are required; absent keys (oom_group_kill before 5.17) are 0.
Result<MemoryEvents> ParseMemoryEvents(std::string_view text);
// cpu.stat. "usage_usec" is required; the others are 0 when absent.
Result<CpuStat> ParseCpuStat(std::string_view text);
// cgroup.events. "populated" is required.
Result<CgroupEvents> ParseCgroupEvents(std::string_view text);
// memory.stat. "anon", "file" and "inactive_file" are required; "active_file" is 0 when absent.
Result<MemoryStat> ParseMemoryStat(std::string_view text);
// cgroup.controllers or cgroup.subtree_control: space-separated controller names, unordered.
std::vector<std::string> ParseControllers(std::string_view text);
// A single-value limit file (memory.max, pids.max, ...): "max" -> nullopt, else a decimal.
Result<std::optional<uint64_t>> ParseMaxValue(std::string_view text);
// Inverse of ParseMaxValue: nullopt -> "max".
std::string FormatMaxValue(std::optional<uint64_t> value);
// cpu.max content: "max 100000" for no quota, "20000 100000" for 20% of one CPU.
std::string FormatCpuMax(std::optional<uint64_t> quota_us, uint64_t period_us);

// --- Pressure stall information (Documentation/accounting/psi.rst). ---

// The resources with a pressure file in every non-root cgroup (and in /proc/pressure/).
enum class PressureResource : uint8_t { kCpu, kMemory, kIo };
// "cpu.pressure", "memory.pressure", "io.pressure".
std::string_view PressureFile(PressureResource resource);
// "cpu", "memory", "io": the names under /proc/pressure/, and for messages.
std::string_view PressureName(PressureResource resource);

// One line of a pressure file: the share of time (percent, 0 to 100) in which tasks were stalled
// on the resource, averaged over the last 10, 60 and 300 s, and the total stall time in μs.
struct PressureLine {
  double avg10 = 0;
  double avg60 = 0;
  double avg300 = 0;
  uint64_t total_us = 0;
};

// A pressure file. "some": at least one non-idle task stalled; "full": all of them at once (for
// cpu.pressure only since Linux 5.13; absent before, so optional).
struct Pressure {
  PressureLine some;
  std::optional<PressureLine> full;
};

// "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=... total=...\n". The "some" line and
// every line's total are required; unknown lines and keys are ignored (kernels add them).
Result<Pressure> ParsePressure(std::string_view text);

// Which line a trigger watches.
enum class PressureKind : uint8_t { kSome, kFull };

// A trigger's threshold: wake up when the stall time of `kind` reaches stall_us within any
// window_us. The kernel notifies at most once per window.
struct PressureThreshold {
  PressureKind kind = PressureKind::kSome;
  uint64_t stall_us = 0;
  uint64_t window_us = 0;
};
// What is written to a pressure file to register the trigger: "some 100000 1000000" (psi.rst:
// "<some|full> <stall amount in us> <time window in us>"). The writer adds the terminating NUL.
std::string FormatPressureThreshold(const PressureThreshold& threshold);
// The kernel's bounds, checked up front so the error names the value and not just EINVAL:
// 500 ms <= window_us <= 10 s, 0 < stall_us <= window_us (psi.rst; Linux >= 6.5 takes shorter
// windows from privileged writers, which bulkhead never asks for). Not checked here: an
// unprivileged writer (no CAP_SYS_RESOURCE) on Linux >= 6.5 needs a window that is a multiple
// of 2 s, else the write fails with EPERM (before 6.5 it needs the capability outright).
Status ValidatePressureThreshold(const PressureThreshold& threshold);

// Cell names become directory names next to interface files, so they are 1-64 characters of
// [A-Za-z0-9_-]. Having no '.', they never collide with "cgroup.*" or "<controller>.*" files
// (cgroup-v2.rst, "Avoid Name Collisions"). Config validation can call this early.
Status ValidateCellName(std::string_view name);
// Checks the kernel's ranges up front so that errors name the field, not just EINVAL.
Status ValidateLimits(const CgroupLimits& limits);

}  // namespace bulkhead::cell
