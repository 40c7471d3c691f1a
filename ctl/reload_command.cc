// SPDX-License-Identifier: MIT
#include "ctl/reload_command.h"

#include <string_view>

#include "base/exit_status.h"
#include "ctl/control_client.h"

namespace bulkhead::ctl {
namespace {

// The cells of an applied reload whose new worker is to be waited for.
std::vector<ReloadWait> WaitsOf(const nlohmann::json& response) {
  std::vector<ReloadWait> waits;
  auto cells = response.find("cells");
  if (cells == response.end() || !cells->is_array()) return waits;
  for (const nlohmann::json& cell : *cells) {
    if (!cell.is_object()) continue;
    auto name = cell.find("name");
    auto starts = cell.find("starts_before");
    if (name == cell.end() || !name->is_string() || starts == cell.end() ||
        !starts->is_number_unsigned()) {
      continue;
    }
    waits.push_back(
        {.cell = name->get<std::string>(),
         .command = cell.value("action", std::string()) == "added" ? "start" : "restart",
         .starts_before = starts->get<uint64_t>()});
  }
  return waits;
}

}  // namespace

nlohmann::json ReloadRequest() { return {{"command", "reload"}}; }

ReloadOutcome InterpretReload(const nlohmann::json& response) {
  ReloadOutcome outcome;
  auto text = [&response](const char* key) {
    auto it = response.find(key);
    return it != response.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  if (!response.is_object()) {
    outcome.err = "bulkheadctl: unexpected response " + response.dump() + "\n";
    outcome.exit_code = kExitFailure;
    return outcome;
  }
  if (auto warnings = response.find("warnings");
      warnings != response.end() && warnings->is_array()) {
    for (const nlohmann::json& warning : *warnings) {
      outcome.warnings.push_back(warning.is_string() ? warning.get<std::string>() : warning.dump());
    }
  }
  if (response.value("ok", false) == true && !text("result").empty()) {
    outcome.out = text("result") + "\n";
    outcome.exit_code = kExitOk;
    outcome.waits = WaitsOf(response);
    return outcome;
  }
  auto errors = response.find("errors");
  if (response.value("ok", true) == false && !text("result").empty() && errors != response.end() &&
      errors->is_array()) {
    // Applied, but some cgroup limit is not in force: the outcome on stdout, the limits that
    // failed on stderr, and the exit code of a failure that is not the config's.
    outcome.out = text("result") + "\n";
    outcome.waits = WaitsOf(response);
    for (const nlohmann::json& error : *errors) {
      outcome.err += (error.is_string() ? error.get<std::string>() : error.dump()) + "\n";
    }
    outcome.err += "bulkheadctl: " + text("error") + "\n";
    outcome.exit_code = kExitFailure;
    return outcome;
  }
  if (response.value("ok", true) == false && errors != response.end() && errors->is_array()) {
    for (const nlohmann::json& error : *errors) {
      outcome.err += (error.is_string() ? error.get<std::string>() : error.dump()) + "\n";
    }
    outcome.err +=
        "bulkheadctl: " + (text("error").empty() ? "reload refused" : text("error")) + "\n";
    outcome.exit_code = kExitConfigInvalid;
    return outcome;
  }
  outcome.err = "bulkheadctl: reload: " +
                (text("error").empty() ? "unexpected response " + response.dump() : text("error")) +
                "\n";
  // A caller without the privilege (docs/control.md, "Credentials") exits as every command does.
  outcome.exit_code = IsPermissionDenied(response) ? kExitPermissionDenied : kExitFailure;
  return outcome;
}

ReloadSummary SummaryAfterWaits(const ReloadOutcome& outcome, int exit_code) {
  if (exit_code == kExitOk || outcome.out.empty()) return {.out = outcome.out, .err = ""};
  std::string_view line = outcome.out;
  if (line.ends_with('\n')) line.remove_suffix(1);
  return {
      .out = "",
      .err = "bulkheadctl: " + std::string(line) + "; not every change is in force (see above)\n"};
}

}  // namespace bulkhead::ctl
