// SPDX-License-Identifier: MIT
// RestartPolicy: backoff steps by doubling with saturation (no overflow whatever the options), the
// start limit as a deque of start times pruned to the window. Pure; loop thread only.
#include "cell/restart_policy.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <random>
#include <utility>

#include "base/check.h"

namespace bulkhead::cell {
namespace {

// Doubling stops here: 2^63 ms is beyond any cap ParseDuration can give.
constexpr uint32_t kMaxSteps = 63;

// Start times kept at least, so that a crash loop paced by restart_max_delay (faster than the
// start limit's pace) is told with the starts it really made in the window, not start_limit_burst
// + 1 of them; 8 KiB at most, and only while starts come that fast.
constexpr size_t kMinStartsKept = 1024;

// "60s" for whole seconds, else "1500ms", as the config file spells durations.
std::string FormatInterval(uint64_t ms) {
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

}  // namespace

const char* RestartModeName(RestartMode mode) {
  switch (mode) {
    case RestartMode::kAlways:
      return "always";
    case RestartMode::kOnFailure:
      return "on-failure";
    case RestartMode::kNever:
      return "never";
  }
  return "unknown";
}

const char* StartLimitActionName(StartLimitAction action) {
  switch (action) {
    case StartLimitAction::kBackoff:
      return "backoff";
    case StartLimitAction::kFail:
      return "fail";
  }
  return "unknown";
}

RestartPolicy::Jitter RestartPolicy::SeededJitter(uint64_t seed) {
  return [engine = std::mt19937_64(seed)]() mutable {
    return std::uniform_real_distribution<double>(0.0, 1.0)(engine);
  };
}

RestartPolicy::Jitter RestartPolicy::RandomJitter() {
  // No state in the function itself: a std::mt19937_64 is 2.5 KiB, which every idle cell paid
  // (issue 25 section 8).
  return [] {
    thread_local std::mt19937_64 engine = [] {
      std::random_device device;
      return std::mt19937_64((static_cast<uint64_t>(device()) << 32) | device());
    }();
    return std::uniform_real_distribution<double>(0.0, 1.0)(engine);
  };
}

RestartPolicy::Jitter RestartPolicy::NoJitter() {
  return [] { return 0.0; };
}

RestartPolicy::RestartPolicy(Options options, Jitter jitter)
    : options_(options), jitter_(std::move(jitter)) {
  BH_CHECK(options_.max_delay_ms >= options_.delay_ms);
  BH_CHECK(options_.start_limit_burst >= 1);
  BH_CHECK(jitter_ != nullptr);
}

void RestartPolicy::SetOptions(const Options& options) {
  BH_CHECK(options.max_delay_ms >= options.delay_ms);
  BH_CHECK(options.start_limit_burst >= 1);
  options_ = options;
}

void RestartPolicy::RecordStart(uint64_t now_ms) {
  has_start_ = true;
  start_failed_ = false;
  last_start_ms_ = now_ms;
  if (options_.start_limit_interval_ms == 0) return;
  while (!starts_.empty() && now_ms - starts_.front() >= options_.start_limit_interval_ms) {
    starts_.erase(starts_.begin());
  }
  starts_.push_back(now_ms);
  const size_t kept = StartsKept();
  if (starts_.size() > kept) {
    starts_.erase(starts_.begin(), starts_.end() - static_cast<std::ptrdiff_t>(kept));
  }
}

size_t RestartPolicy::StartsKept() const {
  return std::max(size_t{options_.start_limit_burst} + 1, kMinStartsKept);
}

uint32_t RestartPolicy::StartsWithin(uint64_t now_ms) const {
  if (options_.start_limit_interval_ms == 0) return 0;
  uint32_t count = 0;
  for (uint64_t start : starts_) {
    if (start <= now_ms && now_ms - start < options_.start_limit_interval_ms) ++count;
  }
  return count;
}

uint64_t RestartPolicy::NextStepMs() const {
  uint64_t step = options_.delay_ms;
  for (uint32_t i = 0; i < steps_ && step < options_.max_delay_ms; ++i) {
    step = step > options_.max_delay_ms / 2 ? options_.max_delay_ms : step * 2;
  }
  step = std::min(step, options_.max_delay_ms);
  return crash_looping_ ? std::max(step, CrashLoopStepMs()) : step;
}

uint64_t RestartPolicy::CrashLoopStepMs() const {
  return std::min(options_.start_limit_interval_ms / options_.start_limit_burst,
                  options_.max_delay_ms);
}

RestartPolicy::Decision RestartPolicy::OnExit(uint64_t now_ms, bool clean,
                                              std::string_view exit_description) {
  if (has_start_ && now_ms >= last_start_ms_ &&
      now_ms - last_start_ms_ >= options_.reset_after_ms) {
    // It ran well: what follows is a new failure, not the same loop. The starts before this
    // worker's are the old loop's (a crash loop at boot, say): they no longer count towards the
    // start limit, which would otherwise call this one end crash-looping.
    steps_ = 0;
    short_runs_ = 0;
    crash_looping_ = false;
    if (!start_failed_) {
      std::erase_if(starts_, [this](uint64_t start) { return start < last_start_ms_; });
    }
  } else {
    ++short_runs_;
  }

  Decision decision;
  if (options_.mode == RestartMode::kNever) {
    decision.verdict = Verdict::kStay;
    decision.reason = "restart = \"never\"";
    return decision;
  }
  if (options_.mode == RestartMode::kOnFailure && clean) {
    decision.verdict = Verdict::kStay;
    decision.reason = "exited cleanly and restart = \"on-failure\"";
    return decision;
  }

  const double u = jitter_();
  BH_CHECK(u >= 0.0 && u < 1.0);
  // The step with jitter: it only ever shortens it, by up to kJitterFraction.
  const auto jittered = [u](uint64_t step) {
    const auto cut =
        static_cast<uint64_t>(std::floor(static_cast<double>(step) * kJitterFraction * u));
    return step - std::min(cut, step);
  };
  uint64_t step = NextStepMs();
  uint64_t delay = jittered(step);

  if (options_.start_limit_interval_ms != 0) {
    const uint32_t starts = StartsWithin(now_ms + delay);
    if (starts >= options_.start_limit_burst) {
      // The start limit is hit: the loop is what the operator's start_limit_action is for.
      // Every start of the window is kept up to StartsKept(): past that, the count is a floor.
      const bool floor = starts >= StartsKept();
      const std::string what = std::to_string(starts) + (floor ? " or more" : "") +
                               (starts == 1 ? " start" : " starts") + " in " +
                               FormatInterval(options_.start_limit_interval_ms);
      decision.crash_loop_began = !crash_looping_;
      crash_looping_ = true;
      decision.crash_looping = true;
      if (options_.start_limit_action == StartLimitAction::kFail) {
        decision.verdict = Verdict::kGiveUp;
        decision.reason = "gave up: " + what + ", last " + std::string(exit_description);
        return decision;
      }
      decision.reason = "crash-looping: " + what;
      step = NextStepMs();
      delay = jittered(step);
    }
  }
  if (crash_looping_ && decision.reason.empty()) {
    decision.crash_looping = true;
    decision.reason = "crash-looping: " + std::to_string(short_runs_) + " ends in a row within " +
                      FormatInterval(options_.reset_after_ms) + " of the start";
  }

  if (options_.delay_ms > 0 && step < options_.max_delay_ms && steps_ < kMaxSteps) ++steps_;
  decision.verdict = Verdict::kRestart;
  decision.delay_ms = delay;
  return decision;
}

void RestartPolicy::RestoreSteps(uint32_t steps) { steps_ = std::min(steps, kMaxSteps); }

RestartPolicy::Window RestartPolicy::CarryWindow(uint64_t now_ms) const {
  Window window;
  window.start_ages_ms.reserve(starts_.size());
  for (uint64_t start : starts_) window.start_ages_ms.push_back(now_ms - std::min(now_ms, start));
  window.crash_looping = crash_looping_;
  window.short_runs = short_runs_;
  return window;
}

void RestartPolicy::RestoreWindow(const Window& window, uint64_t now_ms) {
  BH_CHECK(!has_start_ && starts_.empty());
  for (uint64_t age : window.start_ages_ms) starts_.push_back(now_ms - std::min(now_ms, age));
  // Oldest first, as RecordStart keeps them, and no more than it keeps.
  std::sort(starts_.begin(), starts_.end());
  const size_t kept = StartsKept();
  if (starts_.size() > kept) {
    starts_.erase(starts_.begin(), starts_.end() - static_cast<std::ptrdiff_t>(kept));
  }
  if (!starts_.empty()) {
    has_start_ = true;
    last_start_ms_ = starts_.back();
  }
  crash_looping_ = window.crash_looping;
  short_runs_ = window.short_runs;
}

void RestartPolicy::Reset() {
  steps_ = 0;
  short_runs_ = 0;
  crash_looping_ = false;
  start_failed_ = false;
  starts_.clear();
  has_start_ = false;
  last_start_ms_ = 0;
}

}  // namespace bulkhead::cell
