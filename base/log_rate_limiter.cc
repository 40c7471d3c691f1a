// SPDX-License-Identifier: MIT
#include "base/log_rate_limiter.h"

namespace bulkhead {

LogRateLimiter::LogRateLimiter(uint32_t burst, uint64_t interval_ms)
    : burst_(burst), interval_ms_(interval_ms) {}

LogRateLimiter::Decision LogRateLimiter::Admit(uint64_t now_ms) {
  Decision decision;
  if (burst_ == 0 || interval_ms_ == 0) {
    decision.log = true;
    return decision;
  }
  decision.suppressed_before = EndWindow(now_ms);
  if (!open_) {
    open_ = true;
    window_start_ms_ = now_ms;
    logged_ = 0;
  }
  if (logged_ < burst_) {
    ++logged_;
    decision.log = true;
  } else {
    ++suppressed_;
  }
  return decision;
}

uint64_t LogRateLimiter::EndWindow(uint64_t now_ms, bool force) {
  if (!open_ || (!force && now_ms - window_start_ms_ < interval_ms_)) return 0;
  open_ = false;
  uint64_t dropped = suppressed_;
  suppressed_ = 0;
  return dropped;
}

std::optional<uint64_t> LogRateLimiter::SuppressionEndsAt() const {
  if (!open_ || suppressed_ == 0) return std::nullopt;
  return window_start_ms_ + interval_ms_;
}

}  // namespace bulkhead
