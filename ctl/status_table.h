// SPDX-License-Identifier: MIT
// FormatStatusTable: the table `bulkheadctl status` prints, built from a control-socket status
// response (docs/control.md). Pure function; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

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
//
// When the cells carry "limits_enforced" (supervisors with cgroup support), a second table follows
// after an empty line, one row per cell, with the kernel's figures (cgroup v2):
//
//   CELL      MEMORY     CPU        THROTTLED  TASKS  OOM KILLS
//   payments  12M/64M    3.1s/20%   0.8s       4/32   1
//   catalog   not enforced  -  ...
//
// MEMORY is memory.current/memory.max, CPU the CPU time used (cpu.stat usage_usec) and the
// cpu.max quota as a share of one CPU, THROTTLED cpu.stat throttled_usec, TASKS
// pids.current/pids.max ("max": no limit), OOM KILLS the cell's OOM kills since bulkheadd started.
// A cell without a cgroup says "not enforced"; MEMORY or TASKS is "-" when the cell's cgroup lacks
// that controller. When a cell with a cgroup has limits that are not in force ("limits_enforcement"
// says "not enforced"), a last column NOT ENFORCED names them ("memory_max,memory_high"). One line
// "limits not enforced: <why>" per distinct reason closes the table (prefixed "<cell>: " for a
// cell's own reason).
// Last, after an empty line, one line per cell with a non-null "state_detail" (why it does not
// serve): "late: starting for 37 s, waiting for READY=1 (start_timeout 90 s); requests queue".
// Then, after an empty line, when response["supervisor"]["reexec"] says so (docs/reexec.md):
// "re-exec under way: settling" while its phase is not "idle", "last re-exec failed: WHY"
// while its last_error is set, and "binary: PATH replaced on disk since start; `bulkheadctl
// reexec` runs it" while binary_replaced is true (PATH: its binary).
// Errors: a missing "cells" array or a cell field that is missing or of the wrong type, named as
// in "status response: cells[0].running: ...".
Result<std::string> FormatStatusTable(const nlohmann::json& response);

// Rows (the first is the header) as FormatStatusTable lays them out: left-aligned columns as wide
// as their widest entry, two spaces apart, no trailing spaces, '\n' after each row.
// REQUIRES: at least one row, all of the same length.
std::string RenderColumns(const std::vector<std::vector<std::string>>& rows);

}  // namespace bulkhead::ctl
