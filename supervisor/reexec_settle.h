// SPDX-License-Identifier: MIT
// A re-exec's settling (docs/reexec.md, ReexecPhase::kSettling): how long it may wait for the
// cells that cannot be carried yet (starting, stopping, swapping workers) to settle, and what it
// does at each look. Pure: the caller passes its loop clock's readings (ms). Thread-compatible.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace bulkhead::supervisor {

// The longest a settling may last, ms: a start with no bound (start_timeout = 0) counts as this,
// and no cell's figures make the wait longer (a cell stuck longer is refused, named).
inline constexpr uint64_t kReexecSettleMaxMs = 120'000;

// A cell's bounds that a settling waits out, ms (its config's start_timeout and stop_timeout).
struct SettleTimeouts {
  uint64_t start_timeout_ms = 0;  // 0: a start waits forever for READY=1 or the probe
  uint64_t stop_timeout_ms = 0;
};
// How long a re-exec waits for its cells to settle, ms: the longest start_timeout + stop_timeout
// of `cells`. Every move that makes a cell unsettled ends within that: a start is ready or missed
// start_timeout, then stopped within stop_timeout into backoff; a stop ends within stop_timeout
// (SIGKILL); a worker swap's next worker is ready or abandoned within start_timeout, then the
// previous one stops within stop_timeout. A start_timeout of 0 counts as kReexecSettleMaxMs; the
// result is at most kReexecSettleMaxMs, and 0 with no cell.
uint64_t ReexecSettleBoundMs(std::span<const SettleTimeouts> cells);

// What a settling does at one look at `now_ms`, given what keeps it from going on now
// (`unsettled`: "cells.b: it is starting (...)", "" when nothing does) and its deadline (loop ms).
struct SettleStep {
  enum class Kind : uint8_t {
    kWait,    // something is unsettled and the deadline is ahead: look again later
    kGoOn,    // nothing is unsettled: the checks run
    kRefuse,  // something is unsettled at the deadline: the re-exec is refused (`refusal`)
  };
  Kind kind = Kind::kWait;
  // kRefuse: `unsettled`, then how long it was waited for ("...; still so after 95000 ms of
  // waiting for the cells to settle").
  std::string refusal;
};
SettleStep JudgeSettle(std::string_view unsettled, uint64_t now_ms, uint64_t started_ms,
                       uint64_t deadline_ms);

}  // namespace bulkhead::supervisor
