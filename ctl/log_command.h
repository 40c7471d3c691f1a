// SPDX-License-Identifier: MIT
// `bulkheadctl logs CELL [-f] [-n N]` (docs/control.md, "logs"): the request for a cell's recent
// log lines, what the supervisor's answer holds, and the journalctl(1) command that replaces it
// when bulkheadd logs to the journal. Pure: no I/O. Thread-compatible.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace bulkhead::ctl {

// {"command":"logs","cell":CELL}, with "from":SEQ (lines numbered SEQ and later) and "lines":N
// (at most the last N of them) when given.
nlohmann::json LogsRequest(const std::string& cell, std::optional<uint64_t> from,
                           std::optional<uint64_t> lines);

// Where bulkheadd's lines go when its stderr is the journal: its systemd unit (empty when it runs
// in none) and its pid.
struct JournalSource {
  std::string unit;
  pid_t pid = 0;
};

// One answer to LogsRequest.
struct LogsPage {
  std::vector<std::string> lines;  // the cell's lines, oldest first, without their newline
  uint64_t next = 0;               // the number the next line will get: "from" of the next ask
  uint64_t missed = 0;             // lines from "from" on that the ring no longer held
  std::optional<JournalSource> journal;
};

// {"ok":true,"cell":C,"lines":[...],"next":N,"missed":M,"journal":null|{"unit":U,"pid":P}}.
// An error names the member that is wrong; a refusal ({"ok":false,"error":E}) is E.
Result<LogsPage> ParseLogsPage(const nlohmann::json& response);

// journalctl's argv for the cell's lines: `journalctl -u UNIT CELL=NAME` (or `_PID=PID` without
// a unit), then `-n N` and `-f` when asked. CELL= is the journal field bulkheadd sends with every
// line about a cell (docs/logging.md).
std::vector<std::string> JournalctlArgv(const JournalSource& source, const std::string& cell,
                                        bool follow, std::optional<uint64_t> lines);

}  // namespace bulkhead::ctl
