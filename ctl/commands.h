// SPDX-License-Identifier: MIT
// bulkheadctl's subcommands (docs/control.md, packaging/man/bulkheadctl.8): each asks bulkheadd
// over its control socket, prints to stdout/stderr, and returns an exit code from
// base/exit_status.h. main.cc parses the command line and calls one of them.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ctl/deadline.h"

namespace bulkhead::ctl {

// Bound on a control-socket exchange when --timeout is not given.
inline constexpr std::chrono::seconds kDefaultControlTimeout{10};

// At priority err when stderr is the journal (bulkheadctl as a unit's ExecReload=).
void PrintError(const std::string& message);

// status [CELL] [--json]: the cells as tables, or the supervisor's JSON response. With CELL, exits
// as `systemctl status UNIT` does: kExitOk when it is running, kExitNotRunning otherwise.
int StatusCommand(const std::string& socket, const std::string& cell, bool json, Deadline deadline);

// is-active / is-failed CELL...: prints each cell's state on its own line (unless `quiet`), as
// `systemctl is-active` does, "unknown" for a cell the supervisor does not have (named on stderr,
// with the closest cell: JudgeIsState); exits kExitOk
// when at least one cell `matches` (IsActiveState / IsFailedState), else `not_matched` (systemctl:
// 3 for is-active, 1 for is-failed).
int IsStateCommand(const std::string& socket, const std::vector<std::string>& cells,
                   bool (*matches)(std::string_view), int not_matched, bool quiet,
                   Deadline deadline);

// status --watch: redraws every `interval` until SIGINT or SIGTERM, then exits 0. On a terminal
// each view replaces the last one (the screen is cleared first); elsewhere (a pipe, a file) the
// views follow one another, with no control codes. Each query is bounded by `timeout` (or
// kDefaultControlTimeout); a failed query ends the watch with its exit code.
int WatchStatusCommand(const std::string& socket, const std::string& cell, bool json,
                       std::chrono::milliseconds interval,
                       std::optional<std::chrono::milliseconds> timeout);

// metrics: the Prometheus text exposition of every cell, as the metrics endpoint serves it.
int MetricsCommand(const std::string& socket, Deadline deadline);

// call CELL [DATA]: sends one request (DATA, else stdin up to max_payload_bytes) and prints the
// reply's payload, or the outcome (REJECTED/FAILED with its reason) and its exit code.
int CallCommand(const std::string& socket, const std::string& cell,
                const std::optional<std::string>& data, bool raw, Deadline deadline);

// start / stop / restart CELL... (or every cell with `all`): sends the command for each cell,
// then, unless `no_block`, waits until each has got where it was asked to go (JudgeLifecycle),
// by asking for the status every kPollInterval until `wait_deadline`. Exchanges are bounded by
// `deadline` when given (--timeout bounds the whole command), else each by kDefaultControlTimeout.
int CellCommands(const std::string& socket, const std::string& command,
                 std::vector<std::string> cells, bool all, bool no_block, Deadline deadline);

// logs CELL [-f] [-n N]: the cell's recent lines from the supervisor's ring; or, when bulkheadd
// logs to the journal, journalctl run in place of this process (execvp: its exit code, pager and
// --follow are journalctl's). With `follow`, asks for newer lines every kPollInterval until
// SIGINT or SIGTERM, then exits 0; lines the ring dropped before they were read are counted on
// stderr.
int LogsCommand(const std::string& socket, const std::string& cell, bool follow,
                std::optional<uint64_t> lines, Deadline deadline);

// reload: the supervisor re-reads its config file and applies it; refused files change nothing.
// An applied reload then, unless `no_block`, waits for each cell it restarted or added until a new
// worker runs, as `restart` / `start` wait: kExitFailure (the cell named, and why, on stderr) when
// one did not come up (a swap that failed, backoff, failed, held for a need) or the wait timed
// out; kExitConfigInvalid when refused. Exchanges are bounded by `deadline` when given (it bounds
// the whole command), else each by kDefaultControlTimeout, and the wait by 90 s.
int ReloadCommand(const std::string& socket, bool no_block, Deadline deadline);

// reexec: bulkheadd re-executes its binary in place (docs/reexec.md). Unless `no_block`, waits
// until the new image answers status (prints "re-executed: ..." and exits kExitOk) or the old
// one reports why the exec failed (kExitFailure, the reason on stderr); a refusal exits
// kExitFailure at once. `settle_timeout`, when given, bounds how long bulkheadd waits for its
// cells to settle (the request's "settle_timeout_ms"). Bounded as ReloadCommand, the wait
// lengthened by the settling's bound bulkheadd answers.
int ReexecCommand(const std::string& socket, bool no_block, Deadline deadline,
                  std::optional<std::chrono::milliseconds> settle_timeout);

// reexec --join: asks for no re-exec; waits for the one under way as ReexecCommand does (the same
// outputs and exit codes), as long as bulkheadd says it may still last (status's
// reexec.ends_within_ms) and 10 s more, or `deadline` when given. With none under way, says how
// the last one ended at once (JudgeJoin): kExitOk when it went ahead, kExitFailure when it failed
// or there was none. For a caller whose `reexec` exited kExitReexecUnderWay (postinst).
int ReexecJoinCommand(const std::string& socket, Deadline deadline);

}  // namespace bulkhead::ctl
