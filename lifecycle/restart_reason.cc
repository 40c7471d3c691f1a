// SPDX-License-Identifier: MIT
#include "lifecycle/restart_reason.h"

namespace bulkhead::lifecycle {

std::string_view RestartReasonName(RestartReason reason) {
  switch (reason) {
    case RestartReason::kCrash:
      return "crash";
    case RestartReason::kExit:
      return "exit";
    case RestartReason::kOom:
      return "oom";
    case RestartReason::kStall:
      return "stall";
    case RestartReason::kWatchdog:
      return "watchdog";
    case RestartReason::kStartFailed:
      return "start_failed";
    case RestartReason::kOperator:
      return "operator";
  }
  return "crash";
}

RestartReason ClassifyLastExit(std::string_view last_exit) {
  // Lifecycle::RecordExit writes "<kill reason> (<exit>)" when the supervisor killed the worker.
  if (last_exit.starts_with("stalled")) return RestartReason::kStall;
  if (last_exit.starts_with("watchdog")) return RestartReason::kWatchdog;
  if (last_exit.starts_with("start failed") || last_exit.starts_with("start timeout")) {
    return RestartReason::kStartFailed;
  }
  if (last_exit == "oom-kill") return RestartReason::kOom;
  if (last_exit == "exit 0") return RestartReason::kExit;
  return RestartReason::kCrash;
}

}  // namespace bulkhead::lifecycle
