// SPDX-License-Identifier: MIT
// AdaptiveLimit; see adaptive_limit.h for how the limit moves and why. Loop thread only.
#include "admission/adaptive_limit.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"

namespace bulkhead::admission {
namespace {

constexpr uint64_t kPageBytes = 4096;
constexpr double kMemoryHighShare = 0.9;
// A mean concurrency "no higher" than the floor, with room for the rounding of a mean.
constexpr double kConcurrencySlack = 1e-9;
// Clean windows in a row beyond the tolerance that replace the base, at least (and together
// kBaseSamples requests): a pause of the worker or the noise of a window or two is not enough.
constexpr uint32_t kStaleWindows = 3;
// Requests in clean windows before the base is taken as measured: the mean of 50 service times
// is within about 15% of the truth even when they vary as much as an exponential distribution.
constexpr uint32_t kBaseSamples = 50;

size_t Index(LimitCause cause) { return static_cast<size_t>(cause); }

uint32_t Permille(double ratio) {
  return ratio <= 0 ? 0 : static_cast<uint32_t>(std::llround(std::min(ratio * 1000.0, 4.0e9)));
}

}  // namespace

std::string_view LimitCauseName(LimitCause cause) {
  switch (cause) {
    case LimitCause::kSlowStart:
      return "slow_start";
    case LimitCause::kHeadroom:
      return "headroom";
    case LimitCause::kLatency:
      return "latency";
    case LimitCause::kCpuPressure:
      return "cpu_pressure";
    case LimitCause::kMemoryPressure:
      return "memory_pressure";
    case LimitCause::kMemoryUsage:
      return "memory_usage";
    case LimitCause::kBounds:
      return "bounds";
  }
  return "unknown";
}

std::string_view LimitCauseText(LimitCause cause) {
  switch (cause) {
    case LimitCause::kSlowStart:
      return "service time at its minimum";
    case LimitCause::kHeadroom:
      return "service time near its minimum";
    case LimitCause::kLatency:
      return "service time above its tolerance";
    case LimitCause::kCpuPressure:
      return "cpu pressure trigger";
    case LimitCause::kMemoryPressure:
      return "memory pressure trigger";
    case LimitCause::kMemoryUsage:
      return "memory near memory.max";
    case LimitCause::kBounds:
      return "bounds changed";
  }
  return "unknown";
}

std::string_view GrowthHoldName(GrowthHold hold) {
  switch (hold) {
    case GrowthHold::kNone:
      return "none";
    case GrowthHold::kPressure:
      return "pressure";
    case GrowthHold::kMemoryUsage:
      return "memory_usage";
    case GrowthHold::kMemoryCut:
      return "memory_cut";
    case GrowthHold::kCpuThrottled:
      return "cpu_throttled";
    case GrowthHold::kProbeBackoff:
      return "probe_backoff";
  }
  return "unknown";
}

std::string_view SignalName(Signal signal) {
  switch (signal) {
    case Signal::kServiceTime:
      return "service_time";
    case Signal::kCpuPressure:
      return "cpu_pressure";
    case Signal::kMemoryPressure:
      return "memory_pressure";
    case Signal::kCpuThrottling:
      return "cpu_throttling";
    case Signal::kMemoryUsage:
      return "memory_usage";
  }
  return "unknown";
}

std::string_view AdaptiveLimit::PhaseName(Phase phase) {
  return phase == Phase::kSlowStart ? "slow_start" : "avoidance";
}

bool RegistersCpuTrigger(std::optional<uint64_t> quota_us, uint64_t period_us) {
  return !quota_us || *quota_us >= period_us;
}

uint64_t AdaptiveMemoryHigh(uint64_t memory_max) {
  const auto high = static_cast<uint64_t>(static_cast<double>(memory_max) * kMemoryHighShare);
  return high / kPageBytes * kPageBytes;
}

AdaptiveLimit::AdaptiveLimit(const Clock* clock, const Options& options)
    : clock_(clock), options_(options) {
  BH_CHECK(clock != nullptr);
  BH_CHECK(options.floor >= 1 && options.ceiling >= options.floor);
  BH_CHECK(options.tolerance > 0 && options.tolerance <= 4);
  BH_CHECK(options.window_samples >= 1 && options.max_probe_backoff >= 2);
  BH_CHECK(options.base_horizon_ms >= kBaseBuckets);
  BH_CHECK(options.pressure_cut > 0 && options.pressure_cut < 1);
  BH_CHECK(options.memory_cut > 0 && options.memory_cut < 1);
  BH_CHECK(options.throttle_hold_share > 0 && options.throttle_hold_share <= 1);
  BH_CHECK(options.memory_hold_ratio > 0 && options.memory_hold_ratio <= options.memory_cut_ratio &&
           options.memory_cut_ratio <= 1);
  BH_CHECK(options.memory_probe_wait_ms > 0 &&
           options.max_memory_probe_wait_ms >= options.memory_probe_wait_ms);
  memory_probe_wait_ms_ = options.memory_probe_wait_ms;
  limit_ = options.floor;
  estimate_ = limit_;
  window_opened_ms_ = clock_->NowMs();
  buckets_[0].opened_ms = window_opened_ms_;
}

uint32_t AdaptiveLimit::OnSample(uint64_t service_us, uint32_t running) {
  const uint64_t now_ms = clock_->NowMs();
  // Dispatched before the limit last fell: it ran at the concurrency that fall answered, so it
  // says nothing about the lower limit (its window would be judged as the old one and cut again).
  if (fell_at_ms_ && now_ms * 1000 < *fell_at_ms_ * 1000 + service_us) return limit_;
  ++window_count_;
  window_sum_us_ += service_us;
  window_sum_running_ += running;
  window_peak_running_ = std::max(window_peak_running_, running);
  if (window_count_ >= options_.window_samples &&
      now_ms - window_opened_ms_ >= options_.window_ms) {
    CloseWindow(now_ms);
  }
  return limit_;
}

void AdaptiveLimit::CloseWindow(uint64_t now_ms) {
  const uint32_t window_count = window_count_;
  const double count = window_count;
  const double mean_us = std::max(1.0, static_cast<double>(window_sum_us_) / count);
  const double concurrency = static_cast<double>(window_sum_running_) / count;
  const bool reached_limit = window_peak_running_ >= limit_;
  window_opened_ms_ = now_ms;
  window_count_ = 0;
  window_sum_us_ = 0;
  window_sum_running_ = 0;
  window_peak_running_ = 0;
  ++windows_closed_;

  // Until clean windows of kBaseSamples requests have measured the base, nothing is judged.
  if (!UpdateBase(mean_us, window_count, concurrency, now_ms)) return;
  const double ratio = mean_us / base_us_;
  last_ratio_permille_ = Permille(ratio);
  // This window ran entirely at a limit the previous window's close raised: it is the probe's
  // verdict.
  const bool probe_verdict = increased_at_window_ == windows_closed_ - 1;

  if (ratio > 1 + options_.tolerance) {
    if (probe_verdict) {
      probe_backoff_ = std::min(options_.max_probe_backoff, std::max(2U, probe_backoff_ * 2));
      probe_allowed_at_window_ = windows_closed_ + probe_backoff_;
    }
    const double target = concurrency * (1 + options_.tolerance / 2) / ratio;
    const double lowered = std::max(estimate_ / 2, std::min(estimate_, target));
    phase_ = Phase::kAvoidance;
    MoveTo(lowered, LimitCause::kLatency, Permille(ratio), now_ms);
    return;
  }
  if (probe_verdict) probe_backoff_ = 0;
  if (ratio > 1 + options_.tolerance / 2 || !reached_limit) return;
  if (HoldAt(now_ms) != GrowthHold::kNone || limit_ >= options_.ceiling) return;
  increased_at_window_ = windows_closed_;
  // Growth goes no further than the memory fit and the memory ceiling (HoldAt held it at either
  // already).
  double most = memory_fit_ ? static_cast<double>(*memory_fit_) : options_.ceiling;
  if (memory_ceiling_holds(now_ms)) most = std::min(most, static_cast<double>(memory_ceiling_));
  if (phase_ == Phase::kSlowStart) {
    MoveTo(std::min(most, std::max(estimate_ * 2, estimate_ + 1)), LimitCause::kSlowStart, 0,
           now_ms);
  } else {
    MoveTo(std::min(most, estimate_ + 1), LimitCause::kHeadroom, 0, now_ms);
  }
}

bool AdaptiveLimit::UpdateBase(double mean_us, uint32_t samples, double concurrency,
                               uint64_t now_ms) {
  const uint64_t span_ms = options_.base_horizon_ms / kBaseBuckets;
  if (now_ms - buckets_[bucket_].opened_ms >= span_ms) {
    bucket_ = (bucket_ + 1) % kBaseBuckets;
    buckets_[bucket_] = BaseBucket{};
    buckets_[bucket_].opened_ms = now_ms;
  }
  const bool clean = concurrency <= static_cast<double>(options_.floor) + kConcurrencySlack;
  if (!clean) return base_measured();
  const bool measured = base_measured();
  double sum_us = mean_us;
  uint32_t windows = 1;
  if (measured && mean_us > base_us_ * (1 + options_.tolerance)) {
    // Beyond the tolerance at the floor's concurrency, where no lower limit can help: a pause of
    // the worker, or a base gone stale. Such windows in a row, at least kStaleWindows of them and
    // kBaseSamples requests, are the new base.
    stale_sum_us_ += mean_us;
    stale_samples_ += samples;
    if (++stale_windows_ < kStaleWindows || stale_samples_ < kBaseSamples) return true;
    sum_us = stale_sum_us_;
    windows = stale_windows_;
    samples = stale_samples_;
    buckets_ = {};
    buckets_[bucket_].opened_ms = now_ms;
    base_samples_ = 0;
    phase_ = Phase::kSlowStart;
    probe_backoff_ = 0;
    probe_allowed_at_window_ = 0;
  }
  stale_sum_us_ = 0;
  stale_samples_ = 0;
  stale_windows_ = 0;
  BaseBucket& current = buckets_[bucket_];
  current.sum_us += sum_us;
  current.windows += windows;
  current.samples += samples;
  current.last_ms = now_ms;
  base_samples_ += samples;
  // The lowest average of a slice that holds kBaseSamples requests; the slices of fewer are
  // pooled instead: the lowest of a few small averages is the noise of a few fast requests, and
  // every window judged against it would look slower than it is.
  const BaseBucket* lowest = nullptr;
  BaseBucket pooled;
  for (const BaseBucket& bucket : buckets_) {
    if (bucket.windows == 0 || now_ms - bucket.opened_ms >= options_.base_horizon_ms) continue;
    pooled.sum_us += bucket.sum_us;
    pooled.windows += bucket.windows;
    pooled.last_ms = std::max(pooled.last_ms, bucket.last_ms);
    if (bucket.samples < kBaseSamples) continue;
    if (lowest == nullptr || bucket.mean_us() < lowest->mean_us()) lowest = &bucket;
  }
  if (lowest == nullptr && pooled.windows > 0) lowest = &pooled;
  if (lowest != nullptr) {
    base_us_ = lowest->mean_us();
    base_at_ms_ = lowest->last_ms;
  }
  return base_measured();
}

uint32_t AdaptiveLimit::OnPressure(Signal signal, CpuNeighbours neighbours) {
  BH_CHECK(signal == Signal::kCpuPressure || signal == Signal::kMemoryPressure);
  const uint64_t now_ms = clock_->NowMs();
  pressure_hold_until_ms_ = std::max(pressure_hold_until_ms_, now_ms + options_.pressure_hold_ms);
  // Spared: nobody a cut could give a CPU to, or a cell its own quota holds (throttled), whose
  // cut would only leave quota idle.
  if (signal == Signal::kCpuPressure && (neighbours == CpuNeighbours::kNoneWaiting || throttled_)) {
    ++cpu_pressure_spared_;
    return limit_;
  }
  Cut(options_.pressure_cut,
      signal == Signal::kCpuPressure ? LimitCause::kCpuPressure : LimitCause::kMemoryPressure, 0,
      now_ms);
  return limit_;
}

uint32_t AdaptiveLimit::OnCpuStat(uint64_t nr_periods, uint64_t nr_throttled) {
  if (!has_cpu_stat_ || nr_periods < cpu_periods_ || nr_throttled < cpu_throttled_) {
    has_cpu_stat_ = true;
    cpu_periods_ = nr_periods;
    cpu_throttled_ = nr_throttled;
    return limit_;
  }
  const uint64_t periods = nr_periods - cpu_periods_;
  if (periods == 0) {
    // Not runnable in any period since: idle, so not throttled.
    throttled_ = false;
    throttled_permille_ = 0;
    return limit_;
  }
  if (periods < options_.throttle_min_periods) return limit_;
  const double share = std::min(
      1.0, static_cast<double>(nr_throttled - cpu_throttled_) / static_cast<double>(periods));
  throttled_permille_ = Permille(share);
  throttled_ = share >= options_.throttle_hold_share;
  cpu_periods_ = nr_periods;
  cpu_throttled_ = nr_throttled;
  return limit_;
}

uint32_t AdaptiveLimit::OnMemoryUsage(uint64_t working_set, uint64_t memory_max,
                                      uint32_t running) {
  BH_CHECK(memory_max > 0);
  const uint64_t now_ms = clock_->NowMs();
  const double ratio = static_cast<double>(working_set) / static_cast<double>(memory_max);
  memory_permille_ = Permille(ratio);
  if (running > 0) {
    memory_shares_[memory_share_next_] = std::max<uint64_t>(1, working_set / running);
    memory_share_next_ = (memory_share_next_ + 1) % kMemoryShares;
    // Slots never filled are 0 and leave the largest as it is.
    const uint64_t share = *std::max_element(memory_shares_.begin(), memory_shares_.end());
    const double fit = options_.memory_cut_ratio * static_cast<double>(memory_max) /
                       static_cast<double>(share);
    memory_fit_ = static_cast<uint32_t>(std::min(fit, static_cast<double>(UINT32_MAX)));
  }
  if (ratio >= options_.memory_cut_ratio &&
      (!memory_cut_at_ms_ || now_ms - *memory_cut_at_ms_ >= options_.memory_cut_interval_ms)) {
    memory_cut_at_ms_ = now_ms;
    Cut(options_.memory_cut, LimitCause::kMemoryUsage, memory_permille_, now_ms);
  }
  return limit_;
}

uint32_t AdaptiveLimit::SetBounds(uint32_t floor, uint32_t ceiling) {
  BH_CHECK(floor >= 1 && ceiling >= floor);
  options_.floor = floor;
  options_.ceiling = ceiling;
  MoveTo(estimate_, LimitCause::kBounds, 0, clock_->NowMs());
  return limit_;
}

void AdaptiveLimit::SetTolerance(double tolerance) {
  BH_CHECK(tolerance > 0 && tolerance <= 4);
  options_.tolerance = tolerance;
}

void AdaptiveLimit::SetSignalLive(Signal signal, bool live) {
  live_signals_ = live ? (live_signals_ | SignalBit(signal)) : (live_signals_ & ~SignalBit(signal));
}

bool AdaptiveLimit::signal_live(Signal signal) const {
  return (live_signals_ & SignalBit(signal)) != 0;
}

GrowthHold AdaptiveLimit::growth_hold() const { return HoldAt(clock_->NowMs()); }

GrowthHold AdaptiveLimit::HoldAt(uint64_t now_ms) const {
  if (now_ms < pressure_hold_until_ms_) return GrowthHold::kPressure;
  if (memory_fit_ ? limit_ >= *memory_fit_
                  : memory_permille_ >= Permille(options_.memory_hold_ratio)) {
    return GrowthHold::kMemoryUsage;
  }
  if (memory_ceiling_holds(now_ms) && limit_ >= memory_ceiling_) return GrowthHold::kMemoryCut;
  if (throttled_) return GrowthHold::kCpuThrottled;
  if (windows_closed_ < probe_allowed_at_window_) return GrowthHold::kProbeBackoff;
  return GrowthHold::kNone;
}

bool AdaptiveLimit::memory_ceiling_holds(uint64_t now_ms) const {
  return memory_ceiling_ != 0 && now_ms < memory_ceiling_until_ms_;
}

std::optional<uint32_t> AdaptiveLimit::memory_ceiling() const {
  if (!memory_ceiling_holds(clock_->NowMs())) return std::nullopt;
  return memory_ceiling_;
}

uint64_t AdaptiveLimit::memory_ceiling_left_ms() const {
  const uint64_t now_ms = clock_->NowMs();
  return memory_ceiling_holds(now_ms) ? memory_ceiling_until_ms_ - now_ms : 0;
}

bool AdaptiveLimit::base_measured() const { return base_samples_ >= kBaseSamples; }

std::optional<uint64_t> AdaptiveLimit::base_us() const {
  if (!base_measured()) return std::nullopt;
  return static_cast<uint64_t>(std::llround(base_us_));
}

const LimitChange& AdaptiveLimit::change(size_t i) const {
  BH_CHECK(i < change_count_);
  return changes_[(change_next_ + kRecentChanges - 1 - i) % kRecentChanges];
}

AdaptiveLimit::Carried AdaptiveLimit::Carry() const {
  const uint64_t now_ms = clock_->NowMs();
  Carried carried;
  carried.estimate = estimate_;
  carried.phase = phase_;
  carried.base_us = base_us_;
  carried.base_samples = base_samples_;
  carried.base_age_ms = base_us_ > 0 ? now_ms - std::min(now_ms, base_at_ms_) : 0;
  for (size_t i = 0; i < change_count_; ++i) {
    LimitChange aged = change(i);
    aged.at_ms = now_ms - std::min(now_ms, aged.at_ms);
    carried.changes.push_back(aged);
  }
  carried.changes_by = changes_by_;
  carried.cpu_pressure_spared = cpu_pressure_spared_;
  return carried;
}

void AdaptiveLimit::Restore(const Carried& carried) {
  const uint64_t now_ms = clock_->NowMs();
  estimate_ = std::clamp(carried.estimate, static_cast<double>(options_.floor),
                         static_cast<double>(options_.ceiling));
  limit_ = static_cast<uint32_t>(estimate_);
  phase_ = carried.phase;
  buckets_ = {};
  bucket_ = 0;
  buckets_[0].opened_ms = now_ms;
  base_us_ = 0;
  base_at_ms_ = 0;
  base_samples_ = 0;
  if (carried.base_us > 0 && carried.base_samples > 0) {
    // One clean window of the base's mean and requests: it stays the base for a horizon, as the
    // windows behind it would have, unless a lower slice comes.
    base_us_ = carried.base_us;
    base_at_ms_ = now_ms - std::min(now_ms, carried.base_age_ms);
    base_samples_ = carried.base_samples;
    buckets_[0] = {
        .opened_ms = now_ms,
        .sum_us = carried.base_us,
        .windows = 1,
        .samples = static_cast<uint32_t>(std::min<uint64_t>(carried.base_samples, UINT32_MAX)),
        .last_ms = base_at_ms_};
  }
  const size_t count = std::min(carried.changes.size(), kRecentChanges);
  change_count_ = 0;
  change_next_ = 0;
  // Oldest first, so that change(0) is the newest again.
  for (size_t i = count; i-- > 0;) {
    LimitChange change = carried.changes[i];
    change.at_ms = now_ms - std::min(now_ms, change.at_ms);
    RecordChange(change);
  }
  changes_by_ = carried.changes_by;
  cpu_pressure_spared_ = carried.cpu_pressure_spared;
}

void AdaptiveLimit::Cut(double factor, LimitCause cause, uint32_t permille, uint64_t now_ms) {
  phase_ = Phase::kAvoidance;
  const uint32_t cut_at = limit_;
  MoveTo(estimate_ * factor, cause, permille, now_ms);
  if (cause == LimitCause::kMemoryUsage || cause == LimitCause::kMemoryPressure) {
    HoldBelowMemoryCut(cut_at, now_ms);
  }
}

void AdaptiveLimit::HoldBelowMemoryCut(uint32_t cut_at, uint64_t now_ms) {
  if (memory_ceiling_holds(now_ms)) {
    // Below the ceiling: the overshoot it answered is still clearing.
    if (cut_at < memory_ceiling_) return;
  } else if (memory_ceiling_ != 0 && cut_at > memory_ceiling_) {
    // Its wait was over and growth passed it: a failed probe.
    memory_probe_wait_ms_ = std::min(options_.max_memory_probe_wait_ms, memory_probe_wait_ms_ * 2);
  }
  memory_ceiling_ = std::max(options_.floor, cut_at - 1);
  memory_ceiling_until_ms_ = now_ms + memory_probe_wait_ms_;
}

void AdaptiveLimit::MoveTo(double estimate, LimitCause cause, uint32_t permille, uint64_t now_ms) {
  estimate_ = std::clamp(estimate, static_cast<double>(options_.floor),
                         static_cast<double>(options_.ceiling));
  const auto limit = static_cast<uint32_t>(estimate_);
  if (limit == limit_) return;
  if (limit < limit_) fell_at_ms_ = now_ms;
  RecordChange(LimitChange{now_ms, limit_, limit, cause, permille});
  ++changes_by_[Index(cause)];
  limit_ = limit;
}

void AdaptiveLimit::RecordChange(const LimitChange& change) {
  changes_[change_next_] = change;
  change_next_ = (change_next_ + 1) % kRecentChanges;
  change_count_ = std::min(change_count_ + 1, kRecentChanges);
}

}  // namespace bulkhead::admission
