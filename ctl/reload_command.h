// SPDX-License-Identifier: MIT
// `bulkheadctl reload`: the request and what the CLI prints for the supervisor's answer
// (docs/control.md, "reload"). Pure: no I/O. Thread-compatible.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace bulkhead::ctl {

// {"command":"reload"}.
nlohmann::json ReloadRequest();

// What bulkheadctl prints and returns for a reload response.
struct ReloadOutcome {
  std::string out;    // for stdout: the summary line, "reloaded: ...\n"
  std::string err;    // for stderr: one line per error, then "bulkheadctl: reload refused ...\n"
  int exit_code = 0;  // kExitOk; kExitConfigInvalid when refused; kExitFailure when malformed
  // The config file's warnings ("file:line:col: key: message"), applied or refused: for stderr,
  // each as "warning: LINE" at priority warning.
  std::vector<std::string> warnings;
};

// {"ok":true,"result":S,...} prints S; {"ok":false,"error":E,"errors":[...]} prints each error
// (as "file:line:col: cells.NAME.key: message") and E on stderr and exits kExitConfigInvalid;
// anything else is kExitFailure.
ReloadOutcome InterpretReload(const nlohmann::json& response);

}  // namespace bulkhead::ctl
