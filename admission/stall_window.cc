// SPDX-License-Identifier: MIT
#include "admission/stall_window.h"

#include <algorithm>

#include "base/check.h"

namespace bulkhead::admission {

void StallWindow::Record(uint64_t now_ms, uint64_t total_us) {
  if (count_ > 0 && (total_us < At(0).total_us || now_ms < At(0).at_ms)) count_ = 0;
  readings_[next_] = Reading{now_ms, total_us};
  next_ = (next_ + 1) % kReadings;
  count_ = std::min(count_ + 1, kReadings);
}

std::optional<double> StallWindow::Share(uint64_t now_ms, uint64_t window_ms) const {
  BH_CHECK(window_ms > 0);
  if (count_ < 2) return std::nullopt;
  const Reading& newest = At(0);
  if (now_ms < newest.at_ms || now_ms - newest.at_ms > window_ms) return std::nullopt;
  const Reading* from = &At(count_ - 1);
  for (size_t age = 1; age < count_; ++age) {
    if (newest.at_ms - At(age).at_ms >= window_ms) {
      from = &At(age);
      break;
    }
  }
  const uint64_t span_ms = newest.at_ms - from->at_ms;
  if (span_ms == 0 || span_ms * 2 < window_ms) return std::nullopt;
  const double stalled_us = static_cast<double>(newest.total_us - from->total_us);
  return std::min(1.0, stalled_us / (static_cast<double>(span_ms) * 1000.0));
}

CpuNeighbours JudgeCpuNeighbours(std::span<const std::optional<double>> others,
                                 double waiting_share) {
  bool unknown = false;
  for (const std::optional<double>& share : others) {
    if (!share) {
      unknown = true;
    } else if (*share >= waiting_share) {
      return CpuNeighbours::kWaiting;
    }
  }
  return unknown ? CpuNeighbours::kUnknown : CpuNeighbours::kNoneWaiting;
}

}  // namespace bulkhead::admission
