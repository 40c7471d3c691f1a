// SPDX-License-Identifier: MIT
// VM probe for cell/cgroup.h: run as root by tests/vm/run-vm.sh inside the test VM, as the child
// of PID 1, on a real cgroup v2 root (Documentation/admin-guide/cgroup-v2.rst). It delegates,
// makes two cells, starts children in them with clone3(2) CLONE_INTO_CGROUP (its own tiny spawn,
// plus cell::Spawn's exec path) and checks the kernel's own numbers. One "PROBE <check> ok|FAIL
// ..." line per check; exit 0 only if all pass. Single-threaded; it is the child subreaper of
// everything it starts and reaps all of it by pid.
#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "admission/adaptive_limit.h"
#include "cell/cgroup.h"
#include "cell/pressure_trigger.h"
#include "cell/process.h"
#include "tests/vm/vm_probe.h"

namespace bulkhead::cell {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using vm::DescribeStatus;
using vm::FlatKey;
using vm::Gone;
using vm::KilledBySigkill;
using vm::ParentOf;
using vm::Print;
using vm::ReadText;
using vm::ReapAvailable;
using vm::ReapedStatus;
using vm::Str;
using vm::WaitForExit;

// Limits of the two cells (bytes, μs). alpha is small and CPU-capped; beta is roomy.
constexpr uint64_t kMiB = 1024 * 1024;
constexpr uint64_t kAlphaCpuQuotaUs = 20000;  // 20% of one CPU per 100 ms period
constexpr uint64_t kAlphaMemoryMax = 32 * kMiB;
constexpr uint64_t kAlphaPidsMax = 16;
constexpr uint64_t kBetaMemoryMax = 256 * kMiB;
constexpr uint64_t kBetaMemoryHigh = 192 * kMiB;
constexpr uint64_t kBetaPidsMax = 32;
// The OOM child touches twice alpha's memory.max.
constexpr uint64_t kHogBytes = 2 * kAlphaMemoryMax;
// CPU check: busy time in wall-clock ms, and the accepted band around 20% (see docs/vm-tests.md:
// CFS bandwidth is exact to about one period's quota over 30 periods; the rest is headroom for a
// TCG guest on a loaded 2-core host, where the vCPU may not get 20% of real time).
constexpr int kBusyMs = 3000;
constexpr double kCpuShareExpected = 0.20;
constexpr double kCpuShareTolerance = 0.05;
// PSI checks. alpha's memory.high for the memory trigger check; its child fills alpha to 1 MiB
// below it, then allocates 2 MiB more and frees them again and again for kChurnMs: over
// memory.high by at most 1 MiB (the kernel delays an allocating task by the square of how far
// over it is, up to 2 s a time) and far under memory.max.
constexpr uint64_t kAlphaMemoryHigh = 16 * kMiB;
constexpr uint64_t kChurnBytes = 2 * kMiB;
constexpr int kChurnMs = 1000;
// A trigger of 100 ms stall per 1 s window, the most sensitive the checks use.
constexpr PressureThreshold kSensitive{PressureKind::kSome, 100000, 1000000};
// How long idle triggers are watched for an event that must not come: one window and a bit.
constexpr int kQuietMs = 1100;

int g_failures = 0;

void Check(bool ok, const char* check, const std::string& detail) {
  if (!ok) ++g_failures;
  Print("PROBE %-28s %s %s", check, ok ? "ok  " : "FAIL", detail.c_str());
}

long ElapsedMs(Clock::time_point since) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - since).count();
}

// --- Processes. ---

// clone3(2) with CLONE_INTO_CGROUP: the child starts inside `cgroup_fd`'s cgroup, runs `body`
// and _exit()s with its result. Returns the pid, or -1 with errno.
pid_t SpawnInCgroup(int cgroup_fd, const std::function<int()>& body) {
  clone_args args{};
  args.flags = CLONE_INTO_CGROUP;
  args.exit_signal = SIGCHLD;
  args.cgroup = static_cast<uint64_t>(cgroup_fd);
  long pid = syscall(SYS_clone3, &args, sizeof(args));
  if (pid == 0) _exit(body());
  return static_cast<pid_t>(pid);
}

bool PollUntil(const std::function<bool()>& condition, milliseconds deadline) {
  return vm::PollUntil(condition, deadline, milliseconds(5));
}

// Reads one pid_t from `fd` within `deadline`, or 0.
pid_t ReadPid(int fd, milliseconds deadline) {
  pollfd entry{fd, POLLIN, 0};
  if (poll(&entry, 1, static_cast<int>(deadline.count())) != 1) return 0;
  pid_t pid = 0;
  return read(fd, &pid, sizeof(pid)) == sizeof(pid) ? pid : 0;
}

void WritePid(int fd, pid_t pid) {
  ssize_t ignored = write(fd, &pid, sizeof(pid));
  (void)ignored;
}

[[noreturn]] void PauseForever() {
  while (true) pause();
}

// --- Checks. ---

struct Cells {
  CgroupTree tree;
  CellCgroup alpha;
  CellCgroup beta;
};

CgroupLimits AlphaLimits() {
  CgroupLimits limits;
  limits.cpu_quota_us = kAlphaCpuQuotaUs;
  limits.cpu_weight = 50;
  limits.memory_max = kAlphaMemoryMax;
  limits.memory_swap_max = 0;
  limits.pids_max = kAlphaPidsMax;
  return limits;
}

std::optional<Cells> SetUp() {
  Clock::time_point start = Clock::now();
  Result<CgroupTree> tree = CgroupTree::Delegate();
  Check(tree.ok(), "delegate", tree.ok() ? "own=" + tree->own_path() : tree.status().message());
  if (!tree.ok()) return std::nullopt;
  std::string self = ReadText("/proc/self/cgroup");
  Check(self == "0::/supervisor", "delegate.supervisor_leaf", "/proc/self/cgroup=" + self);
  std::string own_control = ReadText(tree->own_path() + "/cgroup.subtree_control");
  std::string cells_control = ReadText(tree->cells_path() + "/cgroup.subtree_control");
  Check(own_control == "cpu memory pids" && cells_control == "cpu memory pids",
        "delegate.subtree_control", "own=\"" + own_control + "\" cells=\"" + cells_control + "\"");
  Result<CgroupTree> again = CgroupTree::Delegate();
  Check(again.ok() && again->own_path() == tree->own_path(), "delegate.idempotent",
        again.ok() ? "own=" + again->own_path() : again.status().message());

  Result<CellCgroup> alpha = CellCgroup::Create(tree.value(), "alpha");
  Result<CellCgroup> beta = CellCgroup::Create(tree.value(), "beta");
  Check(alpha.ok() && beta.ok(), "cells.create",
        !alpha.ok()  ? alpha.status().message()
        : !beta.ok() ? beta.status().message()
                     : alpha->path() + " " + beta->path());
  if (!alpha.ok() || !beta.ok()) return std::nullopt;

  CgroupLimits alpha_limits = AlphaLimits();
  CgroupLimits beta_limits;
  beta_limits.cpu_weight = 200;
  beta_limits.memory_max = kBetaMemoryMax;
  beta_limits.memory_high = kBetaMemoryHigh;
  beta_limits.pids_max = kBetaPidsMax;
  Status alpha_written = alpha->WriteLimits(alpha_limits).status();
  Status beta_written = beta->WriteLimits(beta_limits).status();
  Check(alpha_written.ok() && beta_written.ok(), "cells.write_limits",
        alpha_written.message() + beta_written.message() + Str("%ld ms", ElapsedMs(start)));
  return Cells{std::move(tree).value(), std::move(alpha).value(), std::move(beta).value()};
}

// (1) The interface files hold exactly what was configured.
void CheckLimitFiles(const Cells& cells) {
  struct Expected {
    const CellCgroup* cell;
    const char* file;
    std::string value;
  };
  const Expected expected[] = {
      {&cells.alpha, "cpu.max", "20000 100000"},
      {&cells.alpha, "cpu.weight", "50"},
      {&cells.alpha, "memory.max", std::to_string(kAlphaMemoryMax)},
      {&cells.alpha, "memory.high", "max"},
      {&cells.alpha, "memory.swap.max", "0"},
      {&cells.alpha, "pids.max", std::to_string(kAlphaPidsMax)},
      {&cells.alpha, "memory.oom.group", "1"},
      {&cells.beta, "cpu.max", "max 100000"},
      {&cells.beta, "cpu.weight", "200"},
      {&cells.beta, "memory.max", std::to_string(kBetaMemoryMax)},
      {&cells.beta, "memory.high", std::to_string(kBetaMemoryHigh)},
      {&cells.beta, "memory.swap.max", "max"},
      {&cells.beta, "pids.max", std::to_string(kBetaPidsMax)},
      {&cells.beta, "memory.oom.group", "1"},
  };
  for (const Expected& entry : expected) {
    std::string actual = ReadText(entry.cell->path() + "/" + entry.file);
    Check(actual == entry.value, "limits.file",
          Str("%s/%s=\"%s\" want \"%s\"", entry.cell->name().c_str(), entry.file, actual.c_str(),
              entry.value.c_str()));
  }
  Result<CgroupStats> stats = cells.alpha.ReadStats();
  Check(stats.ok() && stats->memory_max == kAlphaMemoryMax && stats->pids_max == kAlphaPidsMax &&
            stats->memory_current < kAlphaMemoryMax,
        "limits.read_stats",
        stats.ok() ? Str("memory.current=%llu memory.max=%llu pids.max=%llu",
                         (unsigned long long)stats->memory_current,
                         (unsigned long long)stats->memory_max.value_or(0),
                         (unsigned long long)stats->pids_max.value_or(0))
                   : stats.status().message());
}

// Two processes that live in beta until the fork-bomb check kills the cell: `sleeper` from this
// probe's clone3 spawn and `worker`, busybox sleep exec'd by the launcher (cell::Spawn with
// SpawnOptions::cgroup_fd). Both must start inside the cell.
struct BetaResidents {
  pid_t sleeper = 0;
  pid_t worker = 0;
};

BetaResidents StartBetaResidents(const Cells& cells) {
  BetaResidents residents;
  residents.sleeper = SpawnInCgroup(cells.beta.dir_fd(), []() -> int { PauseForever(); });
  Check(residents.sleeper > 0, "spawn.clone3",
        residents.sleeper > 0 ? Str("pid=%d", residents.sleeper) : strerror(errno));
  if (residents.sleeper <= 0) return residents;
  std::string where = ReadText(Str("/proc/%d/cgroup", residents.sleeper));
  Check(where == "0::/cells/beta", "spawn.into_cgroup",
        Str("pid %d in ", residents.sleeper) + where);
  Result<std::vector<pid_t>> procs = cells.beta.Procs();
  Check(procs.ok() && procs->size() == 1 && procs->front() == residents.sleeper,
        "spawn.cgroup_procs",
        procs.ok() ? Str("beta cgroup.procs has %zu pid(s)", procs->size())
                   : procs.status().message());
  Result<bool> empty = cells.beta.IsEmpty();
  Check(empty.ok() && !empty.value(), "spawn.populated", "beta populated");

  SpawnOptions options;
  options.argv = {"sleep", "3600"};
  options.environment = {"PATH=/bin"};
  options.cgroup_fd = cells.beta.dir_fd();
  Result<pid_t> worker = Spawn(options);
  if (worker.ok()) residents.worker = worker.value();
  std::string worker_where =
      worker.ok() ? ReadText(Str("/proc/%d/cgroup", residents.worker)) : "<no worker>";
  // Spawn returns once exec has closed the CLOEXEC status pipe; the kernel sets the new argv a
  // little later in the same execve, so /proc/PID/cmdline may still be empty for a moment.
  std::string worker_exe;
  if (worker.ok()) {
    PollUntil(
        [&] {
          worker_exe = ReadText(Str("/proc/%d/cmdline", residents.worker));
          return worker_exe.rfind("sleep", 0) == 0;
        },
        milliseconds(5000));
  }
  Check(worker.ok() && worker_where == "0::/cells/beta" && worker_exe.rfind("sleep", 0) == 0,
        "spawn.launcher_into_cgroup",
        worker.ok() ? Str("cell::Spawn sleep pid %d in ", residents.worker) + worker_where
                    : worker.status().message());
  return residents;
}

// (2) A child allocating past alpha's memory.max is OOM-killed; beta's child lives on.
void CheckOomKill(const Cells& cells, const BetaResidents& beta_residents) {
  Clock::time_point start = Clock::now();
  pid_t hog = SpawnInCgroup(cells.alpha.dir_fd(), [] {
    for (uint64_t done = 0; done < kHogBytes; done += kMiB) {
      auto* chunk = static_cast<char*>(malloc(kMiB));
      if (chunk == nullptr) return 3;
      memset(chunk, 0x5a, kMiB);  // touch every page so that it is charged
    }
    return 0;  // survived: the limit did not hold
  });
  std::optional<int> status = WaitForExit(hog, milliseconds(30000));
  long took = ElapsedMs(start);
  Check(KilledBySigkill(status), "oom.child_killed",
        Str("hog pid %d (%llu MiB wanted, memory.max %llu MiB): %s after %ld ms", hog,
            (unsigned long long)(kHogBytes / kMiB), (unsigned long long)(kAlphaMemoryMax / kMiB),
            DescribeStatus(status).c_str(), took));
  if (!status) {
    kill(hog, SIGKILL);
    WaitForExit(hog, milliseconds(5000));
  }

  Result<CgroupStats> alpha = cells.alpha.ReadStats();
  Check(
      alpha.ok() && alpha->memory_events.oom_kill >= 1 && alpha->memory_events.oom_group_kill >= 1,
      "oom.memory_events",
      alpha.ok() ? Str("alpha oom=%llu oom_kill=%llu oom_group_kill=%llu max=%llu",
                       (unsigned long long)alpha->memory_events.oom,
                       (unsigned long long)alpha->memory_events.oom_kill,
                       (unsigned long long)alpha->memory_events.oom_group_kill,
                       (unsigned long long)alpha->memory_events.max)
                 : alpha.status().message());
  Result<CgroupStats> beta = cells.beta.ReadStats();
  ReapAvailable();
  auto alive = [](pid_t pid) { return pid > 0 && !ReapedStatus(pid) && kill(pid, 0) == 0; };
  bool residents_alive = alive(beta_residents.sleeper) && alive(beta_residents.worker);
  Check(residents_alive && beta.ok() && beta->memory_events.oom_kill == 0, "oom.other_cell_lives",
        Str("beta pids %d and %d %s, beta oom_kill=%lld", beta_residents.sleeper,
            beta_residents.worker, residents_alive ? "alive" : "NOT BOTH ALIVE",
            beta.ok() ? (long long)beta->memory_events.oom_kill : -1LL));
}

// --- PSI (Documentation/accounting/psi.rst) on a real cgroup: counts of trigger events. ---

// A trigger on one of alpha's pressure files and the events it reported.
struct Watched {
  const char* name;
  std::optional<PressureTrigger> trigger;
  int fired = 0;
  bool gone = false;
};

Watched Watch(const char* name, const CellCgroup& cell, PressureResource resource,
              const PressureThreshold& threshold) {
  Result<PressureTrigger> trigger =
      PressureTrigger::Register(cell.dir_fd(), cell.path(), resource, threshold);
  Check(trigger.ok(), "psi.register",
        Str("%s: ", name) + (trigger.ok()
                                 ? FormatPressureThreshold(threshold) + " on " + trigger->path()
                                 : trigger.status().message()));
  Watched watched{name, std::nullopt};
  if (trigger.ok()) watched.trigger.emplace(std::move(trigger).value());
  return watched;
}

// Polls every trigger (10 ms each) and counts its events until `until` says stop or `deadline`
// passes. Each poll that sees POLLPRI consumes the kernel's event, so each is counted once.
void CountEvents(std::vector<Watched*> watched, const std::function<bool()>& until,
                 milliseconds deadline) {
  const Clock::time_point end = Clock::now() + deadline;
  while (Clock::now() < end && !until()) {
    for (Watched* w : watched) {
      if (!w->trigger) continue;
      Result<PressureTrigger::Event> event = w->trigger->Wait(10);
      if (event.ok() && event.value() == PressureTrigger::Event::kFired) ++w->fired;
      if (event.ok() && event.value() == PressureTrigger::Event::kGone) w->gone = true;
    }
  }
}

// Runs `child` in alpha and counts the events of `watched` until it exits; its wait status.
std::optional<int> RunAndCount(const Cells& cells, const std::function<int()>& child,
                               std::vector<Watched*> watched, milliseconds deadline) {
  pid_t pid = SpawnInCgroup(cells.alpha.dir_fd(), child);
  if (pid <= 0) return std::nullopt;
  CountEvents(
      std::move(watched),
      [&] {
        ReapAvailable();
        return ReapedStatus(pid).has_value();
      },
      deadline);
  std::optional<int> status = ReapedStatus(pid);
  if (!status) {
    kill(pid, SIGKILL);
    status = WaitForExit(pid, milliseconds(5000));
  }
  return status;
}

// (5a) Idle, alpha's triggers stay quiet: no task, no stall, no event.
void CheckTriggersQuietWhenIdle(std::vector<Watched*> watched) {
  CountEvents(
      watched, [] { return false; }, milliseconds(kQuietMs));
  std::string detail;
  int fired = 0;
  for (Watched* w : watched) {
    fired += w->fired;
    detail += Str("%s fired %d; ", w->name, w->fired);
  }
  Check(fired == 0, "psi.idle_quiet", detail + Str("alpha idle for %d ms", kQuietMs));
  for (Watched* w : watched) w->fired = 0;
}

// (5b) memory.high below memory.max, no swap (alpha's memory.swap.max is 0): a child that fills
// alpha to 1 MiB below memory.high (16 MiB) and then allocates 2 MiB more again and again goes
// over it. The kernel throttles it there (reclaim that cannot free anonymous memory, then the
// over-high delay, both counted as memory stall) instead of OOM-killing it at memory.max: the
// memory trigger fires and the child lives. This is what the adaptive mode's memory.high
// (admission/adaptive_limit.h) buys.
void CheckMemoryHighFiresTheMemoryTrigger(Cells& cells, Watched& memory) {
  CgroupLimits limits = AlphaLimits();
  limits.memory_high = kAlphaMemoryHigh;
  Status written = cells.alpha.WriteLimits(limits).status();
  Result<CgroupStats> before = cells.alpha.ReadStats();
  // What alpha already holds: page cache and kernel memory left by the checks before.
  const uint64_t charged = before.ok() ? before->memory_current : 0;
  const uint64_t below_high = kAlphaMemoryHigh - kMiB;
  const uint64_t held_bytes = below_high - std::min(charged, below_high);
  Clock::time_point start = Clock::now();
  std::optional<int> status = RunAndCount(
      cells,
      [held_bytes] {
        void* held = mmap(nullptr, held_bytes + 1, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (held == MAP_FAILED) return 3;
        memset(held, 0x5a, held_bytes);
        Clock::time_point begin = Clock::now();
        while (Clock::now() - begin < milliseconds(kChurnMs)) {
          void* more = mmap(nullptr, kChurnBytes, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
          if (more == MAP_FAILED) return 4;
          memset(more, 0xa5, kChurnBytes);
          munmap(more, kChurnBytes);
        }
        return 0;
      },
      {&memory}, milliseconds(kChurnMs + 20000));
  long took = ElapsedMs(start);
  Result<CgroupStats> after = cells.alpha.ReadStats();
  const long long high_events =
      before.ok() && after.ok()
          ? (long long)(after->memory_events.high - before->memory_events.high)
          : -1;
  Check(written.ok() && status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0 &&
            memory.fired >= 1 && high_events > 0,
        "psi.memory_high_fires",
        Str("memory.high %llu MiB, memory.max %llu MiB; %llu KiB charged before, the child held "
            "%llu KiB and churned %llu MiB: %s after %ld ms; memory trigger fired %d time(s); "
            "memory.events high +%lld",
            (unsigned long long)(kAlphaMemoryHigh / kMiB),
            (unsigned long long)(kAlphaMemoryMax / kMiB), (unsigned long long)(charged / 1024),
            (unsigned long long)(held_bytes / 1024), (unsigned long long)(kChurnBytes / kMiB),
            DescribeStatus(status).c_str(), took, memory.fired, high_events) +
            (written.ok() ? "" : "; " + written.message()));
}

// (5) cpu.max 20000 100000: a busy loop gets 20% of one CPU and is throttled; and (5c) PSI counts
// the throttling as cpu stall: one busy task alone fires both cpu triggers, the sensitive one and
// the adaptive mode's own (50% of a window), and cpu.pressure's some total grows by most of the
// wall time. So under a quota below one CPU cpu.pressure measures the quota, not the concurrency
// (why admission::RegistersCpuTrigger says no there).
void CheckCpuMax(const Cells& cells, Watched& cpu, Watched& cpu_adaptive) {
  Result<CgroupStats> before = cells.alpha.ReadStats();
  Result<Pressure> pressure_before = cells.alpha.ReadPressure(PressureResource::kCpu);
  Clock::time_point start = Clock::now();
  std::optional<int> status = RunAndCount(
      cells,
      [] {
        Clock::time_point begin = Clock::now();
        volatile uint64_t spins = 0;
        while (Clock::now() - begin < milliseconds(kBusyMs)) spins = spins + 1;
        return 0;
      },
      {&cpu, &cpu_adaptive}, milliseconds(kBusyMs + 15000));
  double wall_us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
  Result<Pressure> pressure_after = cells.alpha.ReadPressure(PressureResource::kCpu);
  const double stall_share =
      pressure_before.ok() && pressure_after.ok()
          ? static_cast<double>(pressure_after->some.total_us - pressure_before->some.total_us) /
                wall_us
          : -1;
  Check(cpu.fired >= 1 && cpu_adaptive.fired >= 1, "psi.cpu_trigger_fires",
        Str("one busy task under cpu.max 20%%: %s fired %d, %s fired %d time(s) in %.0f ms",
            FormatPressureThreshold(kSensitive).c_str(), cpu.fired,
            FormatPressureThreshold({PressureKind::kSome, admission::kCpuTrigger.stall_us,
                                     admission::kCpuTrigger.window_us})
                .c_str(),
            cpu_adaptive.fired, wall_us / 1000));
  Check(stall_share >= 0.5, "psi.cpu_quota_is_stall",
        Str("cpu.pressure some total grew by %.0f%% of the wall time (quota 20%%: ~80%% expected)",
            stall_share * 100));
  Result<CgroupStats> after = cells.alpha.ReadStats();
  if (!before.ok() || !after.ok()) {
    Check(false, "cpu.stat", before.status().message() + after.status().message());
    return;
  }
  uint64_t usage = after->cpu.usage_usec - before->cpu.usage_usec;
  uint64_t periods = after->cpu.nr_periods - before->cpu.nr_periods;
  uint64_t throttled = after->cpu.nr_throttled - before->cpu.nr_throttled;
  uint64_t throttled_us = after->cpu.throttled_usec - before->cpu.throttled_usec;
  double share = static_cast<double>(usage) / wall_us;
  Check(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0, "cpu.busy_child",
        DescribeStatus(status));
  Check(share > kCpuShareExpected - kCpuShareTolerance &&
            share < kCpuShareExpected + kCpuShareTolerance,
        "cpu.max_share",
        Str("usage_usec=%llu over wall %.0f us = %.1f%% of one CPU (want %.0f%% +- %.0f)",
            (unsigned long long)usage, wall_us, share * 100, kCpuShareExpected * 100,
            kCpuShareTolerance * 100));
  Check(throttled > 0, "cpu.throttled",
        Str("nr_periods=%llu nr_throttled=%llu throttled_usec=%llu", (unsigned long long)periods,
            (unsigned long long)throttled, (unsigned long long)throttled_us));
}

// (3) A fork bomb in beta stops at pids.max; the signal-each-pid fallback of Kill() clears it.
void CheckForkBomb(Cells& cells, const BetaResidents& beta_residents) {
  Clock::time_point start = Clock::now();
  pid_t bomb = SpawnInCgroup(cells.beta.dir_fd(), [] {
    int failures = 0;
    while (true) {  // parent and every child keep forking until the kernel says no
      pid_t pid = fork();
      if (pid < 0 && ++failures >= 20) PauseForever();
      if (pid < 0) usleep(1000);
    }
    return 0;
  });
  // pids.current may read one or two above pids.max for an instant: the kernel charges a fork
  // first and reverts the charge when it went over the limit, and two vCPUs fork at once. The
  // invariant is on processes, so the checks count cgroup.procs lines (each bomb process is
  // single-threaded) and require pids.current to settle at exactly pids.max.
  std::string pids_current_path = cells.beta.path() + "/pids.current";
  auto pids_current = [&] { return std::atoll(ReadText(pids_current_path).c_str()); };
  auto procs_count = [&] {
    Result<std::vector<pid_t>> procs = cells.beta.Procs();
    return procs.ok() ? static_cast<long long>(procs->size()) : -1LL;
  };
  const auto limit = static_cast<long long>(kBetaPidsMax);
  long long peak_current = 0;
  long long peak_procs = 0;
  auto sample = [&] {
    peak_current = std::max(peak_current, pids_current());
    peak_procs = std::max(peak_procs, procs_count());
  };
  bool reached = PollUntil(
      [&] {
        sample();
        return peak_procs >= limit;
      },
      milliseconds(20000));
  long took = ElapsedMs(start);
  // Every bomb process pauses after 20 refused forks; until then they keep pushing.
  long long settled_current = 0;
  long long settled_procs = 0;
  bool settled = PollUntil(
      [&] {
        sample();
        settled_current = pids_current();
        settled_procs = procs_count();
        return settled_current == limit && settled_procs == limit;
      },
      milliseconds(5000));
  PollUntil(
      [&] {
        sample();
        return false;
      },
      milliseconds(300));
  long long refused = FlatKey(cells.beta.path() + "/pids.events", "max");
  Check(reached && settled && peak_procs == limit && refused > 0, "pids.fork_bomb_capped",
        Str("pids.max %lld: processes peaked at %lld after %ld ms, settled at pids.current=%lld "
            "procs=%lld; pids.events max=%lld (pids.current sampled peak %lld)",
            limit, peak_procs, took, settled_current, settled_procs, refused, peak_current));

  Clock::time_point kill_start = Clock::now();
  Status killed = cells.beta.Kill(KillMethod::kSignalEachProcess);
  bool emptied = PollUntil(
      [&] {
        Result<bool> empty = cells.beta.IsEmpty();
        return empty.ok() && empty.value();
      },
      milliseconds(10000));
  long kill_ms = ElapsedMs(kill_start);
  std::optional<int> bomb_status = WaitForExit(bomb, milliseconds(5000));
  std::optional<int> sleeper_status = WaitForExit(beta_residents.sleeper, milliseconds(5000));
  std::optional<int> worker_status = WaitForExit(beta_residents.worker, milliseconds(5000));
  ReapAvailable();
  std::string now_current = ReadText(pids_current_path);
  Check(killed.ok() && emptied && now_current == "0" && KilledBySigkill(bomb_status) &&
            KilledBySigkill(sleeper_status) && KilledBySigkill(worker_status),
        "pids.kill_by_signals",
        Str("%s; empty=%d after %ld ms, pids.current=%s, bomb %s, sleeper %s, worker %s",
            killed.ok() ? "Kill(kSignalEachProcess) ok" : killed.message().c_str(), emptied,
            kill_ms, now_current.c_str(), DescribeStatus(bomb_status).c_str(),
            DescribeStatus(sleeper_status).c_str(), DescribeStatus(worker_status).c_str()));
}

// (4) A child that double-forks a setsid() daemon: Kill() (cgroup.kill) leaves nothing alive.
void CheckDoubleForkKill(CellCgroup& alpha) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    Check(false, "kill.pipe", strerror(errno));
    return;
  }
  int write_end = pipe_fds[1];
  pid_t child = SpawnInCgroup(alpha.dir_fd(), [write_end]() -> int {
    signal(SIGTERM, SIG_IGN);
    pid_t middle = fork();
    if (middle == 0) {
      setsid();
      pid_t daemon = fork();
      if (daemon == 0) {
        signal(SIGHUP, SIG_IGN);
        WritePid(write_end, getpid());
        PauseForever();
      }
      _exit(daemon > 0 ? 0 : 1);
    }
    int status = 0;
    waitpid(middle, &status, 0);
    PauseForever();
  });
  close(pipe_fds[1]);
  pid_t daemon = ReadPid(pipe_fds[0], milliseconds(10000));
  close(pipe_fds[0]);
  if (child <= 0 || daemon <= 0) {
    Check(false, "kill.setup", Str("child %d daemon %d", child, daemon));
    if (child > 0) {
      kill(child, SIGKILL);
      WaitForExit(child, milliseconds(5000));
    }
    return;
  }
  std::string where = ReadText(Str("/proc/%d/cgroup", daemon));
  pid_t daemon_sid = getsid(daemon);
  pid_t child_sid = getsid(child);
  // The daemon reports before its parent has exited: wait for the reparenting to us.
  int daemon_ppid = 0;
  PollUntil(
      [&] {
        daemon_ppid = ParentOf(daemon);
        return daemon_ppid == getpid();
      },
      milliseconds(5000));
  Result<std::vector<pid_t>> procs = alpha.Procs();
  bool listed = procs.ok() && std::find(procs->begin(), procs->end(), daemon) != procs->end() &&
                std::find(procs->begin(), procs->end(), child) != procs->end();
  Check(where == "0::/cells/alpha" && daemon_sid != child_sid && daemon_ppid == getpid() && listed,
        "kill.daemon_in_cell",
        Str("child %d (sid %d); daemon %d (sid %d, reparented to ppid %d) in %s; both in "
            "cgroup.procs: %d",
            child, child_sid, daemon, daemon_sid, daemon_ppid, where.c_str(), listed));

  Status busy = alpha.Remove();
  Check(!busy.ok() && busy.error_number() == EBUSY, "kill.remove_refused_while_populated",
        busy.ok() ? "Remove() succeeded on a populated cell" : busy.message());

  Clock::time_point start = Clock::now();
  Status killed = alpha.Kill();
  bool emptied = PollUntil(
      [&] {
        Result<bool> empty = alpha.IsEmpty();
        return empty.ok() && empty.value();
      },
      milliseconds(5000));
  long took = ElapsedMs(start);
  // We are the child subreaper: the daemon was reparented to us, so both are reaped here and
  // kill(pid, 0) cannot be fooled by a zombie.
  std::optional<int> child_status = WaitForExit(child, milliseconds(5000));
  std::optional<int> daemon_status = WaitForExit(daemon, milliseconds(5000));
  bool none_left = Gone(child) && Gone(daemon);
  Check(killed.ok() && emptied && none_left && KilledBySigkill(child_status) &&
            KilledBySigkill(daemon_status),
        "kill.cgroup_kill_whole_cell",
        Str("%s; %s after %ld ms; child %s, daemon %s; kill(pid,0): %s",
            killed.ok() ? "Kill() ok" : killed.message().c_str(),
            emptied ? "populated 0" : "STILL POPULATED", took, DescribeStatus(child_status).c_str(),
            DescribeStatus(daemon_status).c_str(),
            none_left ? "ESRCH for both" : "SOMETHING SURVIVED"));
}

// (8) and (5d): the cells go, and a trigger on a removed cgroup reports POLLERR.
void TearDown(Cells& cells, Watched& alpha_memory) {
  for (CellCgroup* cell : {&cells.alpha, &cells.beta}) {
    Result<bool> empty = cell->IsEmpty();
    if (!empty.ok() || !empty.value()) {
      Check(false, "teardown.leftovers", cell->name() + " still populated; killing");
      cell->Kill();
      PollUntil(
          [&] {
            Result<bool> now = cell->IsEmpty();
            return now.ok() && now.value();
          },
          milliseconds(5000));
    }
    std::string path = cell->path();
    Status removed = cell->Remove();
    Check(removed.ok() && access(path.c_str(), F_OK) != 0, "teardown.remove",
          removed.ok() ? path + " removed" : removed.message());
  }
  ReapAvailable();
  Result<PressureTrigger::Event> event =
      alpha_memory.trigger ? alpha_memory.trigger->Check()
                           : Result<PressureTrigger::Event>(Status::Error("no trigger"));
  Check(event.ok() && event.value() == PressureTrigger::Event::kGone, "psi.gone_after_remove",
        event.ok() ? Str("alpha's memory trigger after rmdir: %s",
                         std::string(PressureEventName(event.value())).c_str())
                   : event.status().message());
}

int Main() {
  if (const char* in_vm = getenv("BULKHEAD_IN_VM"); in_vm == nullptr || strcmp(in_vm, "1") != 0) {
    fprintf(stderr,
            "cgroup_probe: refusing to run outside the test VM (it writes /sys/fs/cgroup); "
            "use tests/vm/run-vm.sh\n");
    return 2;
  }
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    Print("PROBE cannot become child subreaper: %s", strerror(errno));
    return 1;
  }
  Clock::time_point start = Clock::now();
  std::optional<Cells> cells = SetUp();
  if (cells) {
    CheckLimitFiles(*cells);
    BetaResidents residents = StartBetaResidents(*cells);
    CheckOomKill(*cells, residents);
    Watched cpu = Watch("cpu", cells->alpha, PressureResource::kCpu, kSensitive);
    Watched cpu_adaptive = Watch(
        "cpu (adaptive)", cells->alpha, PressureResource::kCpu,
        {PressureKind::kSome, admission::kCpuTrigger.stall_us, admission::kCpuTrigger.window_us});
    Watched memory = Watch("memory (adaptive)", cells->alpha, PressureResource::kMemory,
                           {PressureKind::kSome, admission::kMemoryTrigger.stall_us,
                            admission::kMemoryTrigger.window_us});
    CheckTriggersQuietWhenIdle({&cpu, &cpu_adaptive, &memory});
    CheckMemoryHighFiresTheMemoryTrigger(*cells, memory);
    CheckCpuMax(*cells, cpu, cpu_adaptive);
    CheckForkBomb(*cells, residents);
    CheckDoubleForkKill(cells->alpha);
    TearDown(*cells, memory);
  }
  Print("PROBE summary: %d failure(s) in %ld ms", g_failures, ElapsedMs(start));
  return g_failures == 0 && cells ? 0 : 1;
}

}  // namespace
}  // namespace bulkhead::cell

int main() { return bulkhead::cell::Main(); }
