// SPDX-License-Identifier: MIT
// FormatStatusTable: the table `bulkheadctl status` prints, built from a control-socket status
// response (docs/control.md). Pure function; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"

namespace bulkhead::ctl {

// One line per cell of response["cells"], in the supervisor's order, under a header line:
//
//   CELL      STATE    PID    RUNNING  QUEUED  OK  REJECTED  FAILED  RESTARTS
//   payments  running  41234  2/2      1/1     3   1         1       0
//
// Columns are left-aligned, as wide as their widest entry and separated by two spaces; no line
// has trailing spaces; every line ends with '\n'. PID is "-" when "pid" is null. RUNNING is
// running/max_concurrent and QUEUED queued/max_queue. A last column LAST EXIT appears only when
// some cell has a non-null "last_exit" ("exit 3", "signal 9"), with "-" for the others.
// Errors: a missing "cells" array or a cell field that is missing or of the wrong type, named as
// in "status response: cells[0].running: ...".
Result<std::string> FormatStatusTable(const nlohmann::json& response);

}  // namespace bulkhead::ctl
