// SPDX-License-Identifier: MIT
// LogRateLimiter: at most `burst` lines per window of `interval_ms`, then lines are dropped and
// counted until the window ends, like journald's per-service limit (journald.conf(5)
// RateLimitIntervalSec=, RateLimitBurst=). A window opens with the first line after the previous
// one ended. Pure: the caller passes the time (ms, any monotonic clock); one thread. Users: a
// worker's output lines (lifecycle::WorkerOutput, the cell's log_rate_limit_* keys) and a cell's
// bad-request warnings (proxy::CellDataPath, burst 1 per 1000 ms).
#pragma once

#include <cstdint>
#include <optional>

namespace bulkhead {

class LogRateLimiter {
 public:
  // burst == 0 or interval_ms == 0: no limit, every line is logged.
  LogRateLimiter(uint32_t burst, uint64_t interval_ms);

  struct Decision {
    bool log = false;  // log this line; false: it is dropped (and counted)
    // Lines dropped in a window that had ended before this line: log "suppressed K lines" first.
    uint64_t suppressed_before = 0;
  };
  // A line at `now_ms` (never earlier than the time of the previous call).
  Decision Admit(uint64_t now_ms);

  // Ends the current window if it is over at `now_ms` (or at once when `force`): returns the lines
  // it dropped (0 if none) and forgets them. For a timer armed at window_end_ms() and for shutdown.
  uint64_t EndWindow(uint64_t now_ms, bool force = false);

  // When the current window ends, if one is open and has dropped lines (so a timer is worth
  // arming); nullopt otherwise.
  std::optional<uint64_t> SuppressionEndsAt() const;

  uint64_t suppressed() const { return suppressed_; }

 private:
  uint32_t burst_;
  uint64_t interval_ms_;
  bool open_ = false;
  uint64_t window_start_ms_ = 0;
  uint32_t logged_ = 0;
  uint64_t suppressed_ = 0;
};

}  // namespace bulkhead
