// SPDX-License-Identifier: MIT
// `bulkheadctl reload`: the request and what the CLI prints for the supervisor's answer
// (docs/control.md, "reload"). Pure: no I/O. Thread-compatible.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace bulkhead::ctl {

// {"command":"reload"}.
nlohmann::json ReloadRequest();

// A cell whose worker an applied reload restarted ("restarted") or started ("added"), to wait for
// as `bulkheadctl restart` / `start` waits (JudgeLifecycle).
struct ReloadWait {
  std::string cell;
  std::string command;  // "restart" or "start"
  uint64_t starts_before = 0;
};

// What bulkheadctl prints and returns for a reload response.
struct ReloadOutcome {
  std::string out;    // for stdout: the summary line, "reloaded: ...\n"
  std::string err;    // for stderr: one line per error, then "bulkheadctl: reload refused ...\n"
  int exit_code = 0;  // kExitOk; kExitConfigInvalid when refused; kExitFailure when malformed
  // The config file's warnings ("file:line:col: key: message"), applied or refused: for stderr,
  // each as "warning: LINE" at priority warning.
  std::vector<std::string> warnings;
  // Applied: the response's cells that carry "starts_before", in its order.
  std::vector<ReloadWait> waits;
};

// {"ok":true,"result":S,...} prints S; {"ok":false,"error":E,"errors":[...]} prints each error
// (as "file:line:col: cells.NAME.key: message") and E on stderr and exits kExitConfigInvalid;
// anything else is kExitFailure. An applied reload's cells with "starts_before" (a count) become
// `waits`.
ReloadOutcome InterpretReload(const nlohmann::json& response);

// Where an applied reload's summary goes once bulkheadctl knows its exit code (`exit_code`: the
// response's, then the wait for the new workers'): stdout when the reload succeeded; else stderr,
// after the failures, as a summary of what was applied and no claim of success ("bulkheadctl:
// reloaded: web restarted (command changed); not every change is in force (see above)").
struct ReloadSummary {
  std::string out;
  std::string err;
};
ReloadSummary SummaryAfterWaits(const ReloadOutcome& outcome, int exit_code);

}  // namespace bulkhead::ctl
