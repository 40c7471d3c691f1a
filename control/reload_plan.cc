// SPDX-License-Identifier: MIT
#include "control/reload_plan.h"

#include <algorithm>
#include <string_view>

#include "config/config_error.h"
#include "config/config_keys.h"

namespace bulkhead::control {

namespace {

// "file:line:col: key: message" at where `key` was written in `next`; a key no longer written (its
// default now) at the header of `table`, or without a position when that is gone too.
std::string Refusal(const config::Config& next, std::string_view table, const std::string& key,
                    const std::string& message) {
  config::SourcePosition at = next.PositionOf(key);
  if (at.line == 0) at = next.PositionOf(table);
  return config::ConfigError{
      .file = next.source, .line = at.line, .column = at.column, .key = key, .message = message}
      .ToString();
}

void PlanSupervisor(const config::Config& current, const config::Config& next, ReloadPlan* plan) {
  const config::SupervisorConfig& a = current.supervisor;
  const config::SupervisorConfig& b = next.supervisor;
  std::vector<std::string> keys;
  config::SupervisorConfig masked = b;
  for (const config::SupervisorKey& key : config::SupervisorKeys()) {
    if (!key.differs(a, b)) continue;
    switch (key.reload) {
      case config::SupervisorReload::kLive:
        plan->log_level_changed = true;
        break;
      case config::SupervisorReload::kRefused:
        keys.emplace_back(key.name);
        break;
    }
    key.copy(masked, a);
  }
  // A field of SupervisorConfig that no key of config/config_keys.h fills.
  if (!(masked == a)) keys.push_back("(a key other than log_level)");
  for (const std::string& key : keys) {
    plan->errors.push_back(Refusal(next, "supervisor", "supervisor." + key,
                                   "changed, and only log_level of [supervisor] applies live; "
                                   "restart bulkheadd to change it"));
  }
}

CellPlan PlanCommonCell(const config::CellConfig& a, const config::CellConfig& b) {
  CellPlan cell;
  cell.name = b.name;
  bool restart = false;
  config::CellConfig masked = b;
  for (const config::CellKey& key : config::CellKeys()) {
    if (!key.differs(a, b)) continue;
    key.copy(masked, a);
    switch (key.reload) {
      case config::CellReload::kAdmission:
        cell.admission_changed = true;
        break;
      case config::CellReload::kCgroup:
        cell.cgroup_changed = true;
        break;
      case config::CellReload::kPolicy:
        cell.policy_changed = true;
        break;
      case config::CellReload::kRestart:
        restart = true;
        break;
      case config::CellReload::kRefused:
        continue;  // refused by the caller
    }
    cell.changed.emplace_back(key.name);
  }
  masked.position = a.position;
  // A field of CellConfig that no key of config/config_keys.h fills (worker_socket, or one added
  // later) needs a new worker.
  if (!(masked == a)) {
    cell.changed.push_back("other settings");
    restart = true;
  }
  if (restart) {
    cell.action = CellPlan::Action::kRestart;
  } else if (!cell.changed.empty()) {
    cell.action = CellPlan::Action::kUpdate;
  }
  return cell;
}

CellPlan NewOrRemoved(const std::string& name, CellPlan::Action action) {
  CellPlan cell;
  cell.name = name;
  cell.action = action;
  return cell;
}

const config::CellConfig* Find(const config::Config& config, const std::string& name) {
  auto it = std::find_if(config.cells.begin(), config.cells.end(),
                         [&](const config::CellConfig& c) { return c.name == name; });
  return it == config.cells.end() ? nullptr : &*it;
}

std::string Join(const std::vector<std::string>& parts, const char* separator) {
  std::string out;
  for (const std::string& part : parts) {
    if (!out.empty()) out += separator;
    out += part;
  }
  return out;
}

}  // namespace

const char* CellActionName(CellPlan::Action action) {
  switch (action) {
    case CellPlan::Action::kUnchanged:
      return "unchanged";
    case CellPlan::Action::kUpdate:
      return "updated";
    case CellPlan::Action::kRestart:
      return "restarted";
    case CellPlan::Action::kAdd:
      return "added";
    case CellPlan::Action::kRemove:
      return "removed";
  }
  return "?";
}

ReloadPlan PlanReload(const config::Config& current, const config::Config& next) {
  ReloadPlan plan;
  PlanSupervisor(current, next, &plan);
  for (const config::CellConfig& b : next.cells) {
    const config::CellConfig* a = Find(current, b.name);
    if (a == nullptr) {
      plan.cells.push_back(NewOrRemoved(b.name, CellPlan::Action::kAdd));
      continue;
    }
    const std::string table = "cells." + b.name;
    auto refuse = [&](const std::string& key, const std::string& message) {
      plan.errors.push_back(Refusal(next, table, table + "." + key, message));
    };
    if (a->socket != b.socket) {
      refuse("socket",
             "a running cell's socket cannot change by reload; remove the cell (reload), then add "
             "it back with the new socket (reload)");
    }
    if (a->listen != b.listen) {
      refuse("listen",
             "a running cell's TCP addresses are bound when it is added and cannot change by "
             "reload; remove the cell (reload), then add it back with the new addresses (reload), "
             "or restart bulkheadd");
    }
    if (a->protocol != b.protocol) {
      refuse("protocol",
             "a running cell's protocol cannot change by reload (its clients and worker speak it); "
             "remove the cell (reload), then add it back with the new protocol (reload)");
    }
    // The front socket file's mode and group are set when it is bound, which a reload does not do.
    const char* const kSetAtBind =
        "set when the socket is bound, so it cannot change by reload; remove the cell and add it "
        "back, or restart bulkheadd";
    if (a->socket_mode != b.socket_mode) refuse("socket_mode", kSetAtBind);
    if (a->socket_group != b.socket_group) refuse("socket_group", kSetAtBind);
    plan.cells.push_back(PlanCommonCell(*a, b));
  }
  for (const config::CellConfig& a : current.cells) {
    if (Find(next, a.name) == nullptr) {
      plan.cells.push_back(NewOrRemoved(a.name, CellPlan::Action::kRemove));
    }
  }
  return plan;
}

void RetryRestarts(const std::set<std::string>& not_taken_over, ReloadPlan* plan) {
  for (CellPlan& cell : plan->cells) {
    const bool kept =
        cell.action == CellPlan::Action::kUnchanged || cell.action == CellPlan::Action::kUpdate;
    if (!kept || !not_taken_over.contains(cell.name)) continue;
    cell.action = CellPlan::Action::kRestart;
    cell.retried = true;
  }
}

std::string ReloadPlan::Summary() const {
  std::vector<std::string> parts;
  if (log_level_changed) parts.push_back("log_level changed");
  for (const CellPlan& cell : cells) {
    std::string part = cell.name + " " + CellActionName(cell.action);
    std::vector<std::string> notes;
    if (!cell.changed.empty()) notes.push_back(Join(cell.changed, ", ") + " changed");
    if (cell.retried) notes.push_back("again: the new worker of an earlier reload never took over");
    if (!notes.empty()) part += " (" + Join(notes, "; ") + ")";
    parts.push_back(std::move(part));
  }
  return Join(parts, ", ");
}

}  // namespace bulkhead::control
