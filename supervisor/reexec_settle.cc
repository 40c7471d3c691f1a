// SPDX-License-Identifier: MIT
#include "supervisor/reexec_settle.h"

#include <algorithm>

namespace bulkhead::supervisor {

uint64_t ReexecSettleBoundMs(std::span<const SettleTimeouts> cells) {
  uint64_t longest = 0;
  for (const SettleTimeouts& cell : cells) {
    const uint64_t start =
        cell.start_timeout_ms == 0 ? kReexecSettleMaxMs
                                   : std::min(cell.start_timeout_ms, kReexecSettleMaxMs);
    longest = std::max(longest, start + std::min(cell.stop_timeout_ms, kReexecSettleMaxMs));
  }
  return std::min(longest, kReexecSettleMaxMs);
}

SettleStep JudgeSettle(std::string_view unsettled, uint64_t now_ms, uint64_t started_ms,
                       uint64_t deadline_ms) {
  if (unsettled.empty()) return {.kind = SettleStep::Kind::kGoOn, .refusal = {}};
  if (now_ms < deadline_ms) return {.kind = SettleStep::Kind::kWait, .refusal = {}};
  return {.kind = SettleStep::Kind::kRefuse,
          .refusal = std::string(unsettled) + "; still so after " +
                     std::to_string(now_ms - std::min(now_ms, started_ms)) +
                     " ms of waiting for the cells to settle"};
}

uint64_t ReexecEndsWithinMs(const ReexecBounds& bounds, uint64_t now_ms) {
  auto left = [now_ms](uint64_t deadline_ms) {
    return deadline_ms > now_ms ? deadline_ms - now_ms : 0;
  };
  const uint64_t settle_left = left(bounds.settle_deadline_ms);
  const uint64_t after_settling =
      settle_left + (bounds.checked ? 0 : bounds.check_ms) + bounds.drain_ms + bounds.grace_ms;
  if (!bounds.drain_deadline_ms) return after_settling;
  const uint64_t drain_left =
      left(*bounds.drain_deadline_ms) + (bounds.abandoned ? 0 : bounds.grace_ms);
  // Past the settling's deadline a cell unsettled at the drain's end refuses the re-exec.
  return settle_left > 0 ? std::max(drain_left, after_settling) : drain_left;
}

}  // namespace bulkhead::supervisor
