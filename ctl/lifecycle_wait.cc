// SPDX-License-Identifier: MIT
#include "ctl/lifecycle_wait.h"

#include <map>
#include <string>
#include <vector>

#include "base/closest_match.h"
#include "ctl/status_view.h"

namespace bulkhead::ctl {
namespace {

std::string StringOr(const nlohmann::json& cell, const char* key, const std::string& fallback) {
  auto it = cell.find(key);
  return it != cell.end() && it->is_string() ? it->get<std::string>() : fallback;
}

// A count: an unsigned integer, or a non-negative one (as a JSON parser may type it).
bool IsCount(const nlohmann::json& value) {
  return value.is_number_unsigned() || (value.is_number_integer() && value.get<int64_t>() >= 0);
}

LifecycleProgress Failed(std::string detail) {
  return {LifecycleVerdict::kFailed, std::move(detail), ""};
}

// A start held for the cells it needs: pending while each is on its way; held for good while one of
// them is stopped or failed, which no timer of the supervisor changes (only an operator's start);
// held for this wait when one in backoff starts next only after `wait_left_ms`.
LifecycleProgress JudgeHeldStart(const nlohmann::json& cell, std::optional<uint64_t> wait_left_ms) {
  const std::string detail = StringOr(cell, "state_detail", "waiting for the cells it needs");
  // One pass over the needs: the ones that do not start by themselves (stopped, failed), the next
  // start of each one in backoff, and the first of those whose next start comes after the wait.
  std::vector<std::string> idle;
  std::string next_starts;  // "; catalog's next start in 45s"
  std::string late;         // "catalog's next start in 2m0s"
  std::string late_name;
  auto needs = cell.find("waiting_for");
  if (needs != cell.end() && needs->is_array()) {
    for (const nlohmann::json& need : *needs) {
      const std::string state = StringOr(need, "state", "");
      const std::string name = StringOr(need, "cell", "?");
      if (state == "stopped" || state == "failed") idle.push_back(name);
      // A need held itself, by a cell down its chain that does not start by itself.
      if (state == "waiting") {
        if (std::string behind = StringOr(need, "held_by", ""); !behind.empty()) {
          idle.push_back(behind);
        }
      }
      auto next = need.find("next_start_in_ms");
      if (state != "backoff" || next == need.end() || !IsCount(*next)) continue;
      const uint64_t ms = next->get<uint64_t>();
      const std::string next_start = name + "'s next start in " + FormatTimeLeft(ms);
      next_starts += "; " + next_start;
      if (late.empty() && wait_left_ms && ms > *wait_left_ms) {
        late = next_start;
        late_name = name;
      }
    }
  }
  if (idle.empty() && late.empty()) {
    return {LifecycleVerdict::kPending, detail + next_starts, detail};
  }
  if (idle.empty()) {
    return {LifecycleVerdict::kHeld,
            detail + "; " + late +
                " comes after this wait ends (--timeout sets it), and this start goes on once it "
                "runs (bulkheadctl status " +
                late_name + ")",
            ""};
  }
  const bool one = idle.size() == 1;
  std::string names;  // "catalog", "catalog and search"
  for (const std::string& name : idle) names += (names.empty() ? "" : " and ") + name;
  return {LifecycleVerdict::kHeld,
          detail + "; " + names +
              (one ? " does not start by itself" : " do not start by themselves") +
              ", and this start goes on once " + (one ? "it runs" : "they run") +
              " (bulkheadctl start " + idle.front() + ")",
          ""};
}

}  // namespace

std::string NextStartsOfNeeds(const nlohmann::json& cell) {
  std::string next_starts;
  auto needs = cell.find("waiting_for");
  if (needs == cell.end() || !needs->is_array()) return next_starts;
  for (const nlohmann::json& need : *needs) {
    auto next = need.find("next_start_in_ms");
    if (StringOr(need, "state", "") != "backoff" || next == need.end() || !IsCount(*next)) {
      continue;
    }
    next_starts += "; " + StringOr(need, "cell", "?") + "'s next start in " +
                   FormatTimeLeft(next->get<uint64_t>());
  }
  return next_starts;
}

uint64_t AutomaticRestarts(const nlohmann::json& cell) {
  uint64_t total = 0;
  auto reasons = cell.find("restarts_by_reason");
  if (reasons == cell.end() || !reasons->is_object()) return 0;
  for (auto it = reasons->begin(); it != reasons->end(); ++it) {
    if (it.key() != "operator" && IsCount(it.value())) total += it.value().get<uint64_t>();
  }
  return total;
}

LifecycleProgress JudgeLifecycle(std::string_view command, uint64_t starts_before,
                                 const nlohmann::json& cell, std::optional<uint64_t> wait_left_ms,
                                 std::optional<uint64_t> automatic_restarts_before) {
  if (!cell.is_object() || !cell.contains("state") || !cell["state"].is_string() ||
      !cell.contains("starts") || !IsCount(cell["starts"])) {
    return Failed("status response has no \"state\" and \"starts\" for the cell: " + cell.dump());
  }
  const std::string state = cell["state"].get<std::string>();
  const bool started_since = cell["starts"].get<uint64_t>() > starts_before;
  if (command == "stop") {
    // A start or restart sent during the stop is queued behind it (docs/control.md): a worker
    // started since means the stopped one is gone, as `systemctl stop` returns once its job is
    // done though a later start job runs the unit again.
    if (state == "stopped" || state == "failed" || started_since) {
      return {LifecycleVerdict::kReached, "", ""};
    }
    return {};
  }
  if (state == "failed") return Failed("cell failed: " + StringOr(cell, "reason", "-"));
  if (state == "stopped") return Failed("cell is stopped");
  if (state == "waiting") return JudgeHeldStart(cell, wait_left_ms);
  if (automatic_restarts_before && AutomaticRestarts(cell) > *automatic_restarts_before) {
    return Failed("worker did not start: " + StringOr(cell, "last_exit", "-") +
                  " (the cell restarted it by itself since; state " + state + ")");
  }
  if (!started_since) {
    // An overlapping restart (restart_overlap) that failed: the next worker never took over, the
    // previous one serves on (status says why until the next restart).
    auto swap = cell.find("swap");
    auto failed = cell.find("restart_failed");
    if (command == "restart" && state == "running" && swap != cell.end() && swap->is_null() &&
        failed != cell.end() && failed->is_string()) {
      return Failed("restart failed: " + failed->get<std::string>());
    }
    return {};
  }
  if (state == "running") return {LifecycleVerdict::kReached, "", ""};
  if (state == "backoff") {
    // "crash-looping" (status --json's crash_looping) says that the next start is slower.
    auto looping = cell.find("crash_looping");
    const bool crash_looping =
        looping != cell.end() && looping->is_boolean() && looping->get<bool>();
    std::string detail = "worker did not start: " + StringOr(cell, "last_exit", "-") +
                         (crash_looping ? " (state backoff, crash-looping" : " (state backoff");
    if (auto next = cell.find("next_start_in_ms"); next != cell.end() && IsCount(*next)) {
      detail += ", next start in " + FormatTimeLeft(next->get<uint64_t>());
    }
    return Failed(detail + ")");
  }
  return {};  // starting; or stopping, when a worker started since was already being replaced
}

IsStateOutcome JudgeIsState(const nlohmann::json& response, const std::vector<std::string>& cells,
                            bool (*matches)(std::string_view)) {
  std::map<std::string, std::string> states;
  std::vector<std::string> names;
  if (auto all = response.find("cells"); all != response.end() && all->is_array()) {
    for (const nlohmann::json& cell : *all) {
      const std::string name = StringOr(cell, "name", "");
      if (name.empty()) continue;
      names.push_back(name);
      states[name] = StringOr(cell, "state", "unknown");
    }
  }
  const std::vector<std::string_view> candidates(names.begin(), names.end());
  IsStateOutcome outcome;
  for (const std::string& cell : cells) {
    auto it = states.find(cell);
    if (it == states.end()) {
      outcome.errors.push_back("no cell named " + cell + DidYouMean(cell, candidates));
      outcome.out += "unknown\n";
      continue;
    }
    outcome.any = outcome.any || matches(it->second);
    outcome.out += it->second + "\n";
  }
  return outcome;
}

}  // namespace bulkhead::ctl
