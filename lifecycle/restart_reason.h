// SPDX-License-Identifier: MIT
// RestartReason: why a cell's worker was started again, for bulkhead_cell_restarts_total{reason}
// (docs/metrics.md) and `bulkheadctl status`. Pure; thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace bulkhead::lifecycle {

enum class RestartReason : uint8_t {
  kCrash,        // the worker exited non-zero or was killed by a signal
  kExit,         // the worker exited 0 (restart = "always")
  kOom,          // the cgroup's OOM killer killed it (memory.events oom_kill)
  kStall,        // stall_timeout passed with requests in flight: the supervisor killed it
  kWatchdog,     // no WATCHDOG=1 within watchdog (sd_notify(3)): the supervisor killed it
  kStartFailed,  // the previous start failed (exec error, cgroup error, start_timeout)
  kOperator,     // `bulkheadctl restart`
};
inline constexpr size_t kRestartReasonCount = 7;

// "crash", "exit", "oom", "stall", "watchdog", "start_failed", "operator": the label values.
std::string_view RestartReasonName(RestartReason reason);

// Classifies Lifecycle::last_exit(): "oom-kill" -> kOom, "stalled: ..." -> kStall, "watchdog
// timeout: ..." -> kWatchdog, "start failed: ..." and "start timeout: ..." -> kStartFailed,
// "exit 0" -> kExit, anything
// else ("exit 3", "signal 9", "exited") -> kCrash.
RestartReason ClassifyLastExit(std::string_view last_exit);

// Restarts per reason, indexed by RestartReason.
using RestartCounts = std::array<uint64_t, kRestartReasonCount>;

}  // namespace bulkhead::lifecycle
