// SPDX-License-Identifier: MIT
// AdaptiveLimit: the concurrency limit of one cell in the adaptive mode (issue 26). The limit
// floats between a floor (min_concurrent) and a ceiling (max_concurrent); the service time of each
// finished request raises or lowers it, and the cell's own kernel signals (PSI triggers, cpu.max
// throttling, memory.current near memory.max) lower it or stop it rising. Pure: no I/O, no libuv;
// time comes from a base::Clock. OnSample (once per finished request) is O(1) and never allocates.
// REQUIRES: one owner thread (the loop). Wiring, config keys and status:
// docs/adaptive-concurrency.md.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "base/clock.h"

namespace bulkhead::admission {

// How the limit moves
// -------------------
// (1) Service time. The owner reports each request the worker answered: its time at the worker
// (dispatch to the end of its answer; the queue excluded) and how many requests ran at the worker
// when it ended, itself included (Bulkhead::running() before Finish). Samples are summed into
// windows; a window closes at the first sample that finds it at least window_ms old and holding
// window_samples samples. A closed window has a mean service time S, a mean concurrency C and the
// highest concurrency seen, and is judged against the base B (the recent lowest service time
// without queueing, below) by the ratio R = S / B, as Vegas judges RTT against its no-load RTT and
// Envoy's gradient controller judges its sampled RTT against minRTT:
//   R > 1 + tolerance       the limit falls to C * (1 + tolerance / 2) / R, at most halved per
//                           window (cause kLatency). For a worker whose service time grows in
//                           proportion to its concurrency past its knee, that lands mid-band in
//                           one step, where Vegas would take one step per window.
//   R <= 1 + tolerance / 2  and a sample of the window saw the whole limit running: the limit
//                           grows, doubling in slow start (kSlowStart), by one after the first
//                           fall (kHeadroom), unless growth is held (below). A window that never
//                           reached the limit says nothing about more concurrency: no growth
//                           (the drift guard of Netflix's VegasLimit and Gradient2Limit).
//   otherwise               unchanged.
// A request dispatched before the limit last fell (of any cause; its start is the sample's time
// less its service time) is no sample: it ran at the concurrency the fall answered, and a window
// of such requests, judged against the lower limit, cut again and again (TCP cuts its window once
// per round trip for the same reason; in a simulation of the memory-bound bench's worker, noisy
// work on 2 CPUs, the limit went from 12 to 3 in three windows, each seeing the requests of the
// one before: adaptive_limit_simulation_test.cc).
// An increase that the very next window undoes (it fell by kLatency) was a failed probe: the next
// increase waits 2 windows, then 4, 8, ... up to max_probe_backoff; a probe that holds resets the
// wait. At a knee of one request (a cell with less than one CPU of cpu.max) the limit then sits at
// 1 and visits 2 for one window in 64, instead of every other window.
//
// The base B, and why no phase pins the limit low to measure it. A window is clean when its mean
// concurrency is at most the floor: the floor is the concurrency the operator holds the cell can
// always run without queueing (so it should not exceed the worker's own parallelism), and a clean
// window measures the service time without queueing that the limit admitted. Clean windows are
// averaged per eighth of base_horizon_ms, and B is the lowest of those averages within the
// horizon that hold 50 requests or more (with none such, all of the horizon's clean windows
// averaged together): an average of enough requests, not the lowest single window or the lowest
// small slice, since the minimum of many noisy windows sits far below the true service time and
// would shed for nothing (Netflix's note on Gradient2).
// Windows above the floor never change B; with no clean window in the horizon, B stays as it was.
// The limit starts at the floor, so the first windows are clean and measure B; until clean windows
// of 50 requests have (a reload from a fixed limit leaves more running at first), nothing is
// judged: B is the yardstick of every later window, and the mean of fewer, when service times
// vary much, is off by more than the tolerance allows. Clean windows beyond the tolerance, three or
// more in a row and together 50 requests, are B anew (their average): at the floor no lower limit
// can bring the service time back, so B is stale (the work or the machine got slower), and slow
// start searches for the knee again; fewer such windows are taken for a pause of the worker.
// This is safe without Envoy's periodic minRTT measurement (min_rtt_calc_interval pins the
// concurrency low and sheds; BBR's ProbeRTT and Vegas's probe likewise):
// (a) B cannot drift up with load: busy windows never touch it, so the limit cannot ratchet up
//     under sustained overload as a plain windowed minimum would (each horizon it would adopt the
//     inflated service time, and the limit would climb to the ceiling in a few horizons);
// (b) a B that has become too low does not pin the limit: R is large, the limit falls, and at the
//     floor clean windows measure B anew. That fall answers a service time that really rose, once,
//     when it rose; nothing is shed on a schedule. Lulls (no more requests than the floor) refresh
//     B on their own;
// (c) a B that has become too high (the work got faster while the cell stayed busy) only makes the
//     limit more generous: the service time is still held within the tolerance of the old B, as
//     before, until a lull or a cut reaches the floor; the kernel signals (2)-(4) still bound it.
//
// (2) PSI triggers (Documentation/accounting/psi.rst). OnPressure: the limit is multiplied by
// pressure_cut and growth is held for pressure_hold_ms. The kernel sends at most one event per
// trigger window, so sustained pressure keeps cutting once a window down to the floor.
// A cpu.pressure event cuts only when a cut can give a CPU to another cell: the owner says
// (CpuNeighbours) whether another cell's tasks waited for a CPU over the trigger's window. When
// none did (the cell runs alone, or its neighbours are idle or not short of CPU) the event only
// holds growth (the CPUs are short: more requests would only queue) and counts as
// cpu_pressure_spared; the waiting it saw is its own tasks' or processes' outside every cell (the
// callers, bulkheadd), which a lower limit does not relieve: its service time does, through (1).
// When the owner cannot tell (no readings yet), the event cuts, as isolation comes first.
// Nor does an event cut while the last cpu.stat evaluation (3) found the cell throttled (its
// quota used up in throttle_hold_share of the periods): it is spared, whoever waits. A throttled
// cell's CPU use is its cpu.max quota at every concurrency that keeps the quota busy, and its
// tasks' throttled time is itself CPU stall (the reason RegistersCpuTrigger leaves quotas below
// one CPU out), so its events are its own quota's; a cut frees a CPU for a neighbour only once
// it drives the cell below that concurrency, leaving the quota the operator gave it idle, which
// a fixed limit at the ceiling would not. A cell waiting behind a busy neighbour is not
// throttled (nr_throttled counts only its quota running out), so this does not spare it.
// (docs/adaptive-concurrency.md, "Whose CPU"; the VM bench's memory-bound cell, CPU-hungry itself
// in a TCG guest, was cut to 1 to 3 by its cpu events alone where 4 to 8 served best.)
// (3) cpu.max throttling. OnCpuStat takes cpu.stat's cumulative nr_periods and nr_throttled; when
// at least throttle_min_periods periods passed since the last evaluation and throttle_hold_share of
// them were throttled, growth is held until an evaluation finds otherwise. It never cuts: a cell
// working exactly at its quota, at its best throughput, is throttled in nearly every period too,
// so the share says the quota is used up, not by how much it is oversubscribed; cutting on it
// drives a well-sized cell below its knee and back (the sawtooth of an AIMD fed by throttling).
// The oversubscription shows in the service time, and (1) cuts on that.
// (4) Memory. OnMemoryUsage takes the working set (memory.current less memory.stat's
// inactive_file, as the kubelet counts it: clean page cache is reclaimed, not an OOM risk),
// memory.max and the requests running at the worker then: the ratio Envoy's overload manager
// watches. At memory_cut_ratio the limit is multiplied by memory_cut, at most once per
// memory_cut_interval_ms (the requests holding memory need time to finish before a second cut
// could show). Growth stops at the memory fit: the most requests whose working set stays under
// memory_cut_ratio of memory.max if each takes the largest share per running request (working
// set / running, the worker's own memory shared out among them, so an upper bound) of the last
// kMemoryShares samples that had one running. A fixed hold ratio cannot tell a cell at 80% with
// room for one more request from one that a single request takes past the cut; in the VM bench's
// memory-bound cell (64M, 6 MiB per request, ~5 MiB of its own) the old hold at 75% stopped it
// at 7 where 8 fit, and its overshoots into memory.high cost it a third of the best fixed
// setting's goodput. Until a sample with a running request came, memory_hold_ratio holds growth
// instead.
// The fit errs high while requests are still taking their memory (a request that has just begun
// holds little of it yet), so growth reaches a limit the memory cannot hold and is cut there. A
// memory cut (kMemoryUsage or kMemoryPressure) at limit L therefore also holds growth at L - 1,
// the memory ceiling, for memory_probe_wait_ms, as TCP's ssthresh remembers where a loss came:
// the limit climbs back to L - 1 and stays. Once the wait is over growth may pass it again (the
// work may have got lighter); a cut past it then is a failed probe and doubles the next wait, up
// to max_memory_probe_wait_ms. The ceiling moves only at a cut at or above it, or once its hold
// ended: a cut below it, while it holds, answers the same overshoot still clearing (or requests
// that grew, which the fit measures). In a memory-only VM run of the bench's memory-bound cell,
// where 8 fit and 9 did not, the fit let the limit try 9 or 10 about every 30 s and each try was
// cut to 6 or 7 (docs/benchmarks.md, "The memory ceiling").
// Growth holds are derived in one place, growth_hold(), from the state above.
//
// memory.high: decided. In the adaptive mode, when memory_max is set and memory_high is not, the
// cell's memory.high is set to AdaptiveMemoryHigh(memory_max) = 90% of memory.max. Without swap
// (the bench and most servers), anonymous memory cannot be reclaimed, so a cell with only
// memory.max grows to it with little stall and is OOM-killed, failing every request in flight;
// memory.pressure says nothing before that. Above memory.high the kernel reclaims and throttles
// the allocating tasks instead (mem_cgroup_handle_over_high, accounted as memory stall), which
// makes memory.pressure rise and the memory trigger fire: the limit is cut while requests are
// only slowed, not killed. Meta's Senpai moves memory.high continuously to find a workload's
// working set and offload the rest to swap; with no swap that probing would only throttle
// anonymous memory that cannot go anywhere, so the adaptive mode sets one fixed band instead. The
// layers, from the bottom: the memory fit (stop growing where one more request's share would pass
// memory_cut_ratio; memory_hold_ratio 75% before it is known), memory_cut_ratio 85% (cut, from
// polling), memory.high 90% (the kernel throttles at allocation speed, PSI cuts), memory.max 100%
// (OOM kill, the last resort). An operator's memory_high wins; memory_high = memory_max turns the
// band off.

// Why the limit changed: one row of the changes-by-cause counters, one cause per LimitChange.
enum class LimitCause : uint8_t {
  kSlowStart,       // service time at its minimum and the limit reached: doubled
  kHeadroom,        // service time within half the tolerance and the limit reached: + 1
  kLatency,         // service time above (1 + tolerance) x its minimum
  kCpuPressure,     // a cpu.pressure PSI trigger fired
  kMemoryPressure,  // a memory.pressure PSI trigger fired
  kMemoryUsage,     // the working set reached memory_cut_ratio of memory.max
  kBounds,          // SetBounds moved the floor above it or the ceiling below it (a reload)
};
inline constexpr size_t kLimitCauseCount = 7;
// Metric label and status JSON value: "slow_start", "headroom", "latency", "cpu_pressure",
// "memory_pressure", "memory_usage", "bounds".
std::string_view LimitCauseName(LimitCause cause);
// For status lines ("-8 at 14:02:11: memory pressure trigger"): "service time at its minimum",
// "service time near its minimum", "service time above its tolerance", "cpu pressure trigger",
// "memory pressure trigger", "memory near memory.max", "bounds changed".
std::string_view LimitCauseText(LimitCause cause);

// What keeps the limit from growing now; kNone when nothing does.
enum class GrowthHold : uint8_t {
  kNone,
  kPressure,      // a PSI trigger fired less than pressure_hold_ms ago
  kMemoryUsage,   // the limit is at the memory fit (or, before it is known, the last working
                  // set was at or above memory_hold_ratio of memory.max)
  kMemoryCut,     // the limit is at the memory ceiling: one above it was cut for memory lately
  kCpuThrottled,  // the last cpu.stat evaluation found throttle_hold_share of periods throttled
  kProbeBackoff,  // the last increase was undone by the window after it; waiting some windows
};
// "none", "pressure", "memory_usage", "memory_cut", "cpu_throttled", "probe_backoff".
std::string_view GrowthHoldName(GrowthHold hold);

// The signals an owner may feed, for status ("which signals are live"): without cgroup v2 only
// kServiceTime is.
enum class Signal : uint8_t {
  kServiceTime,
  kCpuPressure,
  kMemoryPressure,
  kCpuThrottling,
  kMemoryUsage,
};
inline constexpr size_t kSignalCount = 5;
// "service_time", "cpu_pressure", "memory_pressure", "cpu_throttling", "memory_usage".
std::string_view SignalName(Signal signal);
// A set of Signals as one byte, bit i for Signal i: what an owner passes to say which are live.
inline constexpr uint8_t SignalBit(Signal signal) {
  return static_cast<uint8_t>(1u << static_cast<unsigned>(signal));
}

// At a cpu.pressure event: whether another cell's tasks waited for a CPU over the trigger's window
// (the owner's judgment, supervisor/: admission::StallWindow per cell).
enum class CpuNeighbours : uint8_t {
  kUnknown,      // not judged (no readings yet, no cgroup v2 on the others): the event cuts
  kWaiting,      // another cell stalled at least the threshold share: the event cuts
  kNoneWaiting,  // no other cell did (or none runs): the event holds growth only
};

// One change of the limit.
struct LimitChange {
  uint64_t at_ms = 0;  // Clock::NowMs() of the change (monotonic; status converts to wall time)
  uint32_t from = 0;
  uint32_t to = 0;
  LimitCause cause = LimitCause::kBounds;
  // kLatency: S / B in thousandths (2400: 2.4x its minimum); kMemoryUsage: working set /
  // memory.max in thousandths; 0 otherwise.
  uint32_t permille = 0;
};

// The PSI triggers the adaptive mode registers on a cell's cgroup (psi.rst: "<some|full> <stall
// us> <window us>", windows of 500 ms to 10 s). Both "some": one stalled request is already a
// request slowed.
struct PsiThreshold {
  uint64_t stall_us;
  uint64_t window_us;
};
// memory.pressure: 100 ms of stall per 1 s. Memory stalls (reclaim, memory.high throttling,
// refaults) are time a request is not served at all, and they grow quickly near the limits.
inline constexpr PsiThreshold kMemoryTrigger{100'000, 1'000'000};
// cpu.pressure: 500 ms of stall per 1 s: runnable tasks waited for a CPU half the time.
inline constexpr PsiThreshold kCpuTrigger{500'000, 1'000'000};
// Whether the cpu trigger is registered for a cell whose cpu.max is `quota_us` per `period_us`
// (nullopt quota: "max"). Not when the quota is below one CPU: a task that wants a CPU and is
// throttled counts as CPU stall (psi since Linux 5.7), so one runnable request alone stalls
// (1 - quota/period) of the time (80% at 20%) at any concurrency: cpu.pressure then measures the
// quota, not the concurrency, and cpu.stat throttling (3) stands in for it. With no quota or one of
// a CPU or more, cpu.pressure at 50% means more runnable tasks than CPUs to run them (the cell's
// own, or neighbours' taking its share), which fewer concurrent requests relieve.
bool RegistersCpuTrigger(std::optional<uint64_t> quota_us, uint64_t period_us);
// memory.high for an adaptive cell with memory.max = `memory_max` bytes and no memory_high set:
// 90% of it, rounded down to whole 4 KiB pages (see "memory.high: decided" above).
uint64_t AdaptiveMemoryHigh(uint64_t memory_max);

class AdaptiveLimit {
 public:
  struct Options {
    uint32_t floor = 1;     // min_concurrent, >= 1
    uint32_t ceiling = 64;  // max_concurrent, >= floor
    // The service time may reach (1 + tolerance) x its minimum before the limit falls; in (0, 4].
    double tolerance = 0.5;
    // A window closes at the first sample that finds it >= window_ms old and >= window_samples
    // samples big.
    uint64_t window_ms = 100;
    uint32_t window_samples = 10;
    // How long a qualifying window keeps the base down, ms (kept in 8 buckets of 1/8 each).
    uint64_t base_horizon_ms = 60'000;
    // Longest wait between probes after failed ones, in windows (>= 2).
    uint32_t max_probe_backoff = 64;
    // PSI trigger: limit x pressure_cut, growth held pressure_hold_ms (two 1 s trigger windows).
    double pressure_cut = 0.75;
    uint64_t pressure_hold_ms = 2'000;
    // cpu.stat: evaluated once >= throttle_min_periods periods passed; >= throttle_hold_share of
    // them throttled holds growth.
    uint32_t throttle_min_periods = 5;
    double throttle_hold_share = 0.5;
    // Working set / memory.max: >= memory_cut_ratio cuts by memory_cut, at most once per
    // memory_cut_interval_ms; growth stops at the memory fit (above), or, before any sample with a
    // running request, at memory_hold_ratio.
    double memory_hold_ratio = 0.75;
    double memory_cut_ratio = 0.85;
    double memory_cut = 0.75;
    uint64_t memory_cut_interval_ms = 1'000;
    // After a memory cut at limit L growth stops at L - 1 for memory_probe_wait_ms; a cut past it
    // once that wait is over doubles the next wait, up to max_memory_probe_wait_ms (above).
    uint64_t memory_probe_wait_ms = 30'000;
    uint64_t max_memory_probe_wait_ms = 480'000;
  };

  // slow_start  No cut of any cause since the base was (re)measured: growth doubles. Initial.
  // avoidance   After a cut of any cause: growth is + 1 per window. Slow start returns only when a
  //             stale base is measured anew (the work got slower: the limit found is stale too).
  enum class Phase : uint8_t { kSlowStart, kAvoidance };
  // "slow_start", "avoidance".
  static std::string_view PhaseName(Phase phase);

  // Changes kept for status, newest first.
  static constexpr size_t kRecentChanges = 16;

  // REQUIRES: `clock` outlives this; options valid (BH_CHECK: floor >= 1, ceiling >= floor,
  // tolerance in (0, 4], window_samples >= 1, cuts in (0, 1), ratios in (0, 1], hold <= cut).
  AdaptiveLimit(const Clock* clock, const Options& options);
  AdaptiveLimit(const AdaptiveLimit&) = delete;
  AdaptiveLimit& operator=(const AdaptiveLimit&) = delete;

  // The effective limit, in [floor, ceiling]: what Bulkhead::SetMaxConcurrent should hold.
  uint32_t limit() const { return limit_; }
  uint32_t floor() const { return options_.floor; }
  uint32_t ceiling() const { return options_.ceiling; }
  const Options& options() const { return options_; }

  // Each input returns the limit after it. A lowered limit only stops new starts (the owner's
  // Bulkhead lets running requests finish); after a raised one the owner calls StartNext().

  // (1) A request the worker answered: `service_us` at the worker, `running` requests at the
  // worker when it ended, itself included (>= 1). Requests that got no answer (the worker died,
  // the client's request was never sent) are not samples. O(1), no allocation.
  uint32_t OnSample(uint64_t service_us, uint32_t running);
  // (2) A PSI trigger fired. `signal`: kCpuPressure or kMemoryPressure. `neighbours` matters for
  // kCpuPressure only: kNoneWaiting holds growth without a cut (above).
  uint32_t OnPressure(Signal signal, CpuNeighbours neighbours = CpuNeighbours::kUnknown);
  // (3) cpu.stat's cumulative nr_periods and nr_throttled. A counter that went back (a new cgroup)
  // starts the count anew.
  uint32_t OnCpuStat(uint64_t nr_periods, uint64_t nr_throttled);
  // (4) The working set (bytes) against memory.max (bytes, > 0), with `running` requests at the
  // worker when it was read (0: none, which leaves the memory fit as it was).
  uint32_t OnMemoryUsage(uint64_t working_set, uint64_t memory_max, uint32_t running);
  // New bounds (a reload): the limit is clamped into them (cause kBounds when that moves it); the
  // base and the phase stay. REQUIRES: 1 <= floor <= ceiling.
  uint32_t SetBounds(uint32_t floor, uint32_t ceiling);
  // A new tolerance (a reload), from the next window on; the base stays. REQUIRES: in (0, 4].
  void SetTolerance(double tolerance);

  // Which signals the owner feeds (for status); all off but kServiceTime at construction.
  void SetSignalLive(Signal signal, bool live);
  bool signal_live(Signal signal) const;

  // --- State for status and metrics. ---
  Phase phase() const { return phase_; }
  GrowthHold growth_hold() const;
  // The base B in μs, or nullopt while it is being measured (not yet, or anew after it went
  // stale); when a clean window last went into it (Clock ms).
  std::optional<uint64_t> base_us() const;
  uint64_t base_measured_at_ms() const { return base_at_ms_; }
  // R of the last closed window in thousandths, 0 before the first.
  uint32_t last_ratio_permille() const { return last_ratio_permille_; }
  // Share of periods throttled at the last cpu.stat evaluation, and working set / memory.max at
  // the last memory sample, in thousandths.
  uint32_t throttled_permille() const { return throttled_permille_; }
  uint32_t memory_permille() const { return memory_permille_; }
  // The memory fit (above), or nullopt before a memory sample with a running request.
  std::optional<uint32_t> memory_fit() const { return memory_fit_; }
  // The memory ceiling while it holds (above), else nullopt; the ms left of its hold (0 when
  // none holds).
  std::optional<uint32_t> memory_ceiling() const;
  uint64_t memory_ceiling_left_ms() const;
  // cpu.pressure events that held growth without a cut (no other cell was waiting for a CPU).
  uint64_t cpu_pressure_spared() const { return cpu_pressure_spared_; }
  uint64_t windows_closed() const { return windows_closed_; }
  // The last changes, newest first: change(0) is the latest. REQUIRES: i < change_count().
  size_t change_count() const { return change_count_; }
  const LimitChange& change(size_t i) const;
  // Changes since construction (or since the first image's, when Restored), by cause.
  uint64_t changes_by(LimitCause cause) const { return changes_by_[static_cast<size_t>(cause)]; }

  // --- Re-exec (docs/reexec.md): what the next bulkheadd image takes over. ---
  // The controller's state that outlives a re-exec: the limit, the phase, the base and the
  // changes. Times are ages in ms at the exec (the new image's clock starts afresh). Not carried:
  // the open window and the probe backoff (the drain ends every request before the exec), the
  // kernel signals' readings and the memory fit (the next poll reads them again), pressure holds
  // and the memory ceiling (the next memory cut sets it again).
  struct Carried {
    double estimate = 1;  // the limit as a real number; the limit is its whole part
    Phase phase = Phase::kSlowStart;
    // The base in μs (0: not measured), the requests of the clean windows behind it, and how long
    // ago a clean window last went into it.
    double base_us = 0;
    uint64_t base_samples = 0;
    uint64_t base_age_ms = 0;
    // The recent changes, newest first (at most kRecentChanges), each at_ms an age in ms.
    std::vector<LimitChange> changes;
    std::array<uint64_t, kLimitCauseCount> changes_by{};
    uint64_t cpu_pressure_spared = 0;
  };
  Carried Carry() const;
  // In the new image, before any sample: the carried state becomes this controller's (the
  // estimate clamped into this controller's bounds, which a re-exec keeps: the config in force).
  // A base of fewer requests than a measured one needs stays unmeasured, as it was.
  void Restore(const Carried& carried);

 private:
  static constexpr size_t kBaseBuckets = 8;
  // Memory samples (with a running request) whose share per request the memory fit takes: 2 s of
  // the runner's 250 ms polls.
  static constexpr size_t kMemoryShares = 8;
  // The clean windows that closed in one slice of the horizon: their means summed.
  struct BaseBucket {
    uint64_t opened_ms = 0;
    double sum_us = 0;
    uint32_t windows = 0;
    uint32_t samples = 0;  // requests in those windows
    uint64_t last_ms = 0;  // when the last of them closed

    double mean_us() const { return sum_us / windows; }
  };

  void CloseWindow(uint64_t now_ms);
  // Takes a closed window of `samples` requests into the base; false while the base is not
  // measured.
  bool UpdateBase(double mean_us, uint32_t samples, double concurrency, uint64_t now_ms);
  bool base_measured() const;
  // Moves the limit to `estimate` (clamped), recording a change when the whole limit moves.
  void MoveTo(double estimate, LimitCause cause, uint32_t permille, uint64_t now_ms);
  // Puts `change` on the ring of recent changes as the newest (change(0)), dropping the oldest
  // past kRecentChanges. Does not count it in changes_by_.
  void RecordChange(const LimitChange& change);
  // A cut of any cause: leaves slow start. A memory cause also moves the memory ceiling.
  void Cut(double factor, LimitCause cause, uint32_t permille, uint64_t now_ms);
  // A memory cut at limit `cut_at`: the memory ceiling's rules (above).
  void HoldBelowMemoryCut(uint32_t cut_at, uint64_t now_ms);
  bool memory_ceiling_holds(uint64_t now_ms) const;
  GrowthHold HoldAt(uint64_t now_ms) const;

  const Clock* clock_;
  Options options_;
  Phase phase_ = Phase::kSlowStart;
  double estimate_;  // the limit as a real number in [floor, ceiling]; limit_ is its whole part
  uint32_t limit_;

  // The open window.
  uint64_t window_opened_ms_;
  uint32_t window_count_ = 0;
  uint64_t window_sum_us_ = 0;
  uint64_t window_sum_running_ = 0;
  uint32_t window_peak_running_ = 0;
  uint64_t windows_closed_ = 0;

  // The base.
  std::array<BaseBucket, kBaseBuckets> buckets_{};
  size_t bucket_ = 0;
  double base_us_ = 0;  // 0: none yet
  uint64_t base_at_ms_ = 0;
  uint64_t base_samples_ = 0;  // requests in the clean windows since the base was (re)started
  // Clean windows in a row beyond the tolerance, their means and requests summed (UpdateBase).
  uint32_t stale_windows_ = 0;
  double stale_sum_us_ = 0;
  uint32_t stale_samples_ = 0;
  uint32_t last_ratio_permille_ = 0;
  // When the limit last fell (any cause): samples of requests dispatched before are not taken.
  std::optional<uint64_t> fell_at_ms_;

  // Probing: the window count after which the last increase happened (none: UINT64_MAX), the
  // current wait and the first window count at which growth may resume.
  uint64_t increased_at_window_ = UINT64_MAX;
  uint32_t probe_backoff_ = 0;
  uint64_t probe_allowed_at_window_ = 0;

  // Kernel signals.
  uint64_t pressure_hold_until_ms_ = 0;
  uint64_t cpu_pressure_spared_ = 0;
  bool has_cpu_stat_ = false;
  uint64_t cpu_periods_ = 0;
  uint64_t cpu_throttled_ = 0;
  bool throttled_ = false;
  uint32_t throttled_permille_ = 0;
  uint32_t memory_permille_ = 0;
  std::optional<uint64_t> memory_cut_at_ms_;
  // Working set / running of the last memory samples with a running request (bytes), a ring.
  std::array<uint64_t, kMemoryShares> memory_shares_{};
  size_t memory_share_next_ = 0;
  std::optional<uint32_t> memory_fit_;
  // The memory ceiling. Three states, from these alone: none (memory_ceiling_ == 0: no memory cut
  // yet); holding (now < memory_ceiling_until_ms_: growth stops at memory_ceiling_); over (its
  // wait ended: growth may pass it, and a cut past it doubles memory_probe_wait_ms_).
  uint32_t memory_ceiling_ = 0;
  uint64_t memory_ceiling_until_ms_ = 0;
  uint64_t memory_probe_wait_ms_;

  uint8_t live_signals_ = 1;  // bit per Signal; kServiceTime

  std::array<LimitChange, kRecentChanges> changes_{};
  size_t change_next_ = 0;  // where the next change goes
  size_t change_count_ = 0;
  std::array<uint64_t, kLimitCauseCount> changes_by_{};
};

}  // namespace bulkhead::admission
