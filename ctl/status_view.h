// SPDX-License-Identifier: MIT
// The parts of `bulkheadctl status` that come from the metrics fields of a status response
// (docs/control.md): the activity table under the status table, and `status CELL`'s long form.
// Pure functions; thread-safe. Errors name the field, as FormatStatusTable's do.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"

namespace bulkhead::ctl {

// 1234 -> "1.2s", 75000 -> "1m15s", 3600000 -> "1h0m", 90061000 -> "1d1h": a duration in ms,
// two units at most.
std::string FormatAge(uint64_t ms);
// What is left of a wait ("next start in"), rounded as bulkheadd's state detail rounds it
// (lifecycle's SecondsLeft): up, to tenths below 10 s and to whole seconds from there, so that the
// two lines of `status CELL` agree and a wait not over never reads "0.0s": "7.6s", "12s", "2m5s".
std::string FormatTimeLeft(uint64_t ms);
// A latency in ms (null: "-"): "0.25ms", "12ms", "1.5s".
std::string FormatLatency(const nlohmann::json& ms);
// The long form's "running" figure: requests running over the limit in force, "2/6 (adaptive
// limit; ceiling 16)" for an adaptive cell (its "concurrency"."limit", not "max_concurrent"),
// "2/8" for a fixed one. A missing field throws, as in FormatConcurrency (FormatCellLong
// reports it).
std::string FormatRunning(const nlohmann::json& cell);
// The long form's "clients" figure: "3/1024 (12 refused, 5 closed idle)": open client connections
// over connection_limit, how many were refused for being over it, and how many idle_timeout
// (or header_timeout) closed ("connections_idle_closed").
std::string FormatClients(const nlohmann::json& cell);
// The long form's "swap" line while an overlapping restart runs (the JSON's "swap": phase, the
// other worker's pid, detail; docs/config.md "Restarts"): "starting, next worker pid 978: starting
// the next worker beside the serving one, ...". Empty when none runs (null or absent).
std::string FormatSwap(const nlohmann::json& cell);
// The status JSON's "concurrency" object as `bulkheadctl status CELL` prints it (docs/control.md):
// "8 (fixed)", or "6 of 1..64 (adaptive; -8 at 14:02:11: memory pressure trigger)" with the
// latest change (its time in UTC, as the JSON's "at"), "(adaptive; no change yet)" before one.
std::string FormatConcurrency(const nlohmann::json& concurrency);
// An adaptive cell's controller: "slow_start, base 10.2ms (12.0s ago), ratio 1.31, holding
// none, signals service_time, cpu events spared 0" (the spared count from bulkheadd that give it).
std::string FormatAdaptiveState(const nlohmann::json& concurrency);
// An adaptive cell's kernel signals that are off, and why (the JSON's "signals_off"), signals
// with the same reason together: "cpu_pressure, memory_pressure: no cgroup for the cell: limits
// not enforced (cgroup = "off" in the config); cpu_throttling: no cpu_max". "" when none is off
// (or bulkheadd gives no reasons).
std::string FormatSignalsOff(const nlohmann::json& concurrency);

// One row per cell of response["cells"], under a header, for supervisors whose cells carry
// "recent" (empty string otherwise):
//
//   CELL      IN STATE FOR  WORKER UPTIME  IN FLIGHT  CANCELLED  DROPPED  UNDELIVERED  P50    ...
//   payments  5m12s         5m12s          3          0          0        0            1.2ms  ...
//
// IN STATE FOR is how long the cell has been in its state (the long form's "running for"),
// WORKER UPTIME the worker's age ("-" without a worker), P50/P99 the request duration and WAIT
// the queue wait over the recent window.
Result<std::string> FormatActivityTable(const nlohmann::json& response);

// The long form of one cell (like `systemctl status`): the state line, then one "key: value"
// line per figure (why it does not serve, when the supervisor says, pid, uptime, sockets,
// admission, outcomes by reason, latency, restarts by reason, last exit, status text, policy,
// cgroup path, limits and kernel figures).
Result<std::string> FormatCellLong(const nlohmann::json& cell);

}  // namespace bulkhead::ctl
