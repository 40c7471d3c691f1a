// SPDX-License-Identifier: MIT
// What `bulkheadctl start|stop|restart` waits for once the supervisor has accepted the command,
// judged on successive status responses (docs/control.md, "start CELL, stop CELL, restart CELL"),
// and the answers of `is-active` / `is-failed`. Pure: no I/O. Thread-compatible.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bulkhead::ctl {

enum class LifecycleVerdict {
  kPending,  // not there yet: ask again
  kReached,  // stop: no worker ("stopped", or "failed"), or a worker started since (by a start
             // queued behind the stop); start/restart: a new worker is running
  kFailed,   // start/restart: the new worker did not come up (backoff, failed, stopped)
  kHeld,     // start/restart: accepted, but held for a cell it needs (`needs`) that does not
             // start by itself ("stopped", "failed"): the start goes on once that cell runs
};

struct LifecycleProgress {
  LifecycleVerdict verdict = LifecycleVerdict::kPending;
  // kFailed: why, for "bulkheadctl: restart payments: ...": "worker did not start: exit 3 (state
  // backoff, next start in 1.0s)", "cell failed: gave up: ...", "cell is stopped".
  // kHeld: "waiting for catalog (stopped), which does not start by itself: bulkheadctl start
  // catalog". kPending while the start is held for needs that are on their way: the status's
  // state_detail ("waiting for catalog (starting)"), with the next start of each need in backoff
  // ("waiting for catalog (backoff); catalog's next start in 45s"), else empty. A held start whose
  // need starts next only after the wait ends is kHeld: "...; catalog's next start in 2m0s comes
  // after this wait ends (--timeout sets it), and this start goes on once it runs".
  std::string detail;
  // kPending: the detail without its countdown. A caller printing the detail prints it again only
  // when this changes.
  std::string detail_key;
};

// For a start held for the cells it needs (`cell` of a status response, state "waiting"), when
// each of its needs in backoff starts next: "; catalog's next start in 45s" per need in backoff
// ("waiting_for" entries with "next_start_in_ms"), "" when none is.
std::string NextStartsOfNeeds(const nlohmann::json& cell);

// Judges `cell`, one element of a status response's "cells" (docs/control.md), after `command`
// ("start", "stop" or "restart") was accepted. `starts_before` is the cell's "starts" counter read
// before the command was sent: a start or restart is reached once a worker started after it
// (starts > starts_before) is "running", as `systemctl start` of a Type=notify unit waits for
// READY=1. A start held for the cells it needs (state "waiting", docs/control.md) is kPending while
// each of them is on its way ("starting", "backoff", or "waiting": held for its own needs, which
// that cell's own judgement weighs), and kHeld once one is "stopped" or "failed", or once one in
// "backoff" has its next start ("next_start_in_ms" of its waiting_for entry) more than
// `wait_left_ms` (the time the caller still waits; nullopt: no bound) away. A malformed cell is
// kFailed with the reason.
// `automatic_restarts_before` (AutomaticRestarts of the cell before the command; nullopt: not
// known) makes a start or restart kFailed once the cell restarted a worker by itself since: the
// command's worker ended (a crash, a failed start), though the status read may catch its
// successor running (a worker that exits at once, restarted after restart_delay, can be "running"
// at every read).
LifecycleProgress JudgeLifecycle(std::string_view command, uint64_t starts_before,
                                 const nlohmann::json& cell,
                                 std::optional<uint64_t> wait_left_ms = std::nullopt,
                                 std::optional<uint64_t> automatic_restarts_before = std::nullopt);

// The restarts the cell made by itself (restarts_by_reason of its status, all but "operator"): a
// worker's crash, exit, OOM kill, stall, missed watchdog or failed start.
uint64_t AutomaticRestarts(const nlohmann::json& cell);

// `is-active`: a cell in state "running" is active (systemctl's "active"); every other state is
// not (starting, stopping and backoff are transitions, as systemctl's "activating" and
// "deactivating" are not "active").
inline bool IsActiveState(std::string_view state) { return state == "running"; }
// `is-failed`: the restart policy gave up on the cell.
inline bool IsFailedState(std::string_view state) { return state == "failed"; }

// What `is-active` / `is-failed` CELL... print for a status response of every cell.
struct IsStateOutcome {
  std::string out;  // each cell's state on its own line, in the order given; "unknown" for a cell
                    // the supervisor does not have
  // One line per unknown cell, as the supervisor words it for the other commands: `no cell named
  // Web; did you mean "web"?`.
  std::vector<std::string> errors;
  bool any = false;  // at least one cell is in a state that `matches`
};
IsStateOutcome JudgeIsState(const nlohmann::json& response, const std::vector<std::string>& cells,
                            bool (*matches)(std::string_view));

}  // namespace bulkhead::ctl
