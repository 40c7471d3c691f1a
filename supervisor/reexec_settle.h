// SPDX-License-Identifier: MIT
// A re-exec's settling (docs/reexec.md, ReexecPhase::kSettling): how long it may wait for the
// cells that cannot be carried yet (starting, stopping, swapping workers) to settle, and what it
// does at each look. Pure: the caller passes its loop clock's readings (ms). Thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
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

// What bounds a re-exec under way (settling, checking or draining), loop ms.
struct ReexecBounds {
  uint64_t settle_deadline_ms = 0;  // the settling's deadline, set at the request
  bool checked = false;             // the binary's version check passed already (not run again)
  uint64_t check_ms = 0;            // the check's bound
  uint64_t drain_ms = 0;            // a drain's bound: the longest stop_timeout of the cells
  uint64_t grace_ms = 0;            // after the drain's bound, for the answers of what was left
  // While draining: the drain's deadline (the grace's end once what was left was answered);
  // nullopt in the other phases.
  std::optional<uint64_t> drain_deadline_ms;
  bool abandoned = false;  // draining: the deadline passed and what was left was answered
};
// The most a re-exec under way may still last at `now_ms`, ms, before bulkheadd ends it by the
// exec or a refusal (status's reexec.ends_within_ms, which `bulkheadctl reexec --join` waits).
// A settling goes on to the check (unless `checked`) and a drain; a check or a drain may go back
// to settling, and a drain then starts again, but only before the settling's deadline: so
// (the settling's time left) + check + drain + grace, and for a drain under way at least its own
// time left (only that, past the settling's deadline). Not counted: the access log's close and
// the exec itself, which follow.
uint64_t ReexecEndsWithinMs(const ReexecBounds& bounds, uint64_t now_ms);

}  // namespace bulkhead::supervisor
