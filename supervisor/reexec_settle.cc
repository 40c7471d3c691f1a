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

}  // namespace bulkhead::supervisor
