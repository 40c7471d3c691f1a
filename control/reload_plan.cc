// SPDX-License-Identifier: MIT
#include "control/reload_plan.h"

#include <algorithm>

namespace bulkhead::control {

namespace {

enum class Group { kAdmission, kCgroup, kPolicy, kRestart };

// One key of [cells.NAME], as docs/config.md names it, and how to compare and copy its field.
struct CellKey {
  const char* name;
  Group group;
  bool (*differs)(const config::CellConfig& a, const config::CellConfig& b);
  void (*copy)(config::CellConfig& to, const config::CellConfig& from);
};

template <auto Member>
constexpr CellKey Key(const char* name, Group group) {
  return CellKey{
      name,
      group,
      [](const config::CellConfig& a, const config::CellConfig& b) {
        return !(a.*Member == b.*Member);
      },
      [](config::CellConfig& to, const config::CellConfig& from) { to.*Member = from.*Member; },
  };
}

using C = config::CellConfig;

// In the order of docs/config.md. Fields not listed here (and not `position`) need a restart.
const CellKey kCellKeys[] = {
    Key<&C::command>("command", Group::kRestart),
    Key<&C::max_concurrent>("max_concurrent", Group::kAdmission),
    Key<&C::max_queue>("max_queue", Group::kAdmission),
    Key<&C::queue_timeout>("queue_timeout", Group::kAdmission),
    // Read at each accept; the supervisor splits its descriptor budget anew after a reload.
    Key<&C::max_connections>("max_connections", Group::kAdmission),
    // Read at each reply and each client_write_timeout tick.
    Key<&C::max_unsent_bytes>("max_unsent_bytes", Group::kAdmission),
    Key<&C::client_write_timeout>("client_write_timeout", Group::kAdmission),
    Key<&C::restart>("restart", Group::kPolicy),
    Key<&C::restart_delay>("restart_delay", Group::kPolicy),
    Key<&C::restart_max_delay>("restart_max_delay", Group::kPolicy),
    Key<&C::restart_reset_after>("restart_reset_after", Group::kPolicy),
    Key<&C::start_limit_burst>("start_limit_burst", Group::kPolicy),
    Key<&C::start_limit_interval>("start_limit_interval", Group::kPolicy),
    Key<&C::request_timeout>("request_timeout", Group::kPolicy),
    Key<&C::stall_timeout>("stall_timeout", Group::kPolicy),
    Key<&C::ready>("ready", Group::kRestart),
    // Read when the next worker is spawned; a start under way keeps the timeout it began with.
    Key<&C::start_timeout>("start_timeout", Group::kPolicy),
    Key<&C::watchdog>("watchdog", Group::kRestart),
    Key<&C::stop_signal>("stop_signal", Group::kPolicy),
    // Read by the WorkerRunner when it sends stop_signal: the next stop follows it.
    Key<&C::kill_mode>("kill_mode", Group::kPolicy),
    Key<&C::stop_timeout>("stop_timeout", Group::kPolicy),
    Key<&C::environment>("environment", Group::kRestart),
    Key<&C::working_directory>("working_directory", Group::kRestart),
    Key<&C::cpu_max_quota_us>("cpu_max", Group::kCgroup),
    Key<&C::cpu_max_period_us>("cpu_max_period", Group::kCgroup),
    Key<&C::cpu_weight>("cpu_weight", Group::kCgroup),
    Key<&C::memory_max>("memory_max", Group::kCgroup),
    Key<&C::memory_high>("memory_high", Group::kCgroup),
    Key<&C::memory_swap_max>("memory_swap_max", Group::kCgroup),
    Key<&C::pids_max>("pids_max", Group::kCgroup),
    // memory.oom.group, rewritten live with the limits.
    Key<&C::oom_policy>("oom_policy", Group::kCgroup),
    // Set in the child before exec: the next worker gets it.
    Key<&C::oom_score_adjust>("oom_score_adjust", Group::kRestart),
    // Read by WorkerOutput at each spawn (WorkerRunner::Reconfigure hands them over): the new
    // worker's pipes follow them.
    Key<&C::output>("output", Group::kRestart),
    Key<&C::log_line_max>("log_line_max", Group::kRestart),
    Key<&C::log_rate_limit_burst>("log_rate_limit_burst", Group::kRestart),
    Key<&C::log_rate_limit_interval>("log_rate_limit_interval", Group::kRestart),
};

std::string Where(const config::Config& config, const config::SourcePosition& position) {
  std::string where = config.source;
  if (position.line > 0) {
    where += ":" + std::to_string(position.line) + ":" + std::to_string(position.column);
  }
  return where;
}

void PlanSupervisor(const config::Config& current, const config::Config& next, ReloadPlan* plan) {
  const config::SupervisorConfig& a = current.supervisor;
  const config::SupervisorConfig& b = next.supervisor;
  plan->log_level_changed = a.log_level != b.log_level;
  std::vector<std::string> keys;
  if (a.runtime_dir != b.runtime_dir) keys.push_back("runtime_dir");
  if (a.control_socket != b.control_socket) keys.push_back("control_socket");
  if (a.max_payload_bytes != b.max_payload_bytes) keys.push_back("max_payload_bytes");
  if (a.cgroup != b.cgroup) keys.push_back("cgroup");
  if (a.cgroup_parent != b.cgroup_parent) keys.push_back("cgroup_parent");
  if (a.metrics_listen != b.metrics_listen) keys.push_back("metrics_listen");
  if (a.on_shutdown != b.on_shutdown) keys.push_back("on_shutdown");
  config::SupervisorConfig masked = b;
  masked.log_level = a.log_level;
  masked.runtime_dir = a.runtime_dir;
  masked.control_socket = a.control_socket;
  masked.max_payload_bytes = a.max_payload_bytes;
  masked.cgroup = a.cgroup;
  masked.cgroup_parent = a.cgroup_parent;
  masked.metrics_listen = a.metrics_listen;
  masked.on_shutdown = a.on_shutdown;
  // A key added later and not known here.
  if (!(masked == a)) keys.push_back("(a key other than log_level)");
  for (const std::string& key : keys) {
    plan->errors.push_back(next.source + ": supervisor." + key +
                           ": changed, and only log_level of [supervisor] applies live; restart "
                           "bulkheadd to change it");
  }
}

CellPlan PlanCommonCell(const config::CellConfig& a, const config::CellConfig& b) {
  CellPlan cell;
  cell.name = b.name;
  bool restart = false;
  config::CellConfig masked = b;
  for (const CellKey& key : kCellKeys) {
    if (!key.differs(a, b)) continue;
    cell.changed.push_back(key.name);
    switch (key.group) {
      case Group::kAdmission:
        cell.admission_changed = true;
        break;
      case Group::kCgroup:
        cell.cgroup_changed = true;
        break;
      case Group::kPolicy:
        cell.policy_changed = true;
        break;
      case Group::kRestart:
        restart = true;
        break;
    }
    key.copy(masked, a);
  }
  masked.position = a.position;
  masked.socket = a.socket;  // refused by the caller when it changed, as are the next two
  masked.socket_mode = a.socket_mode;
  masked.socket_group = a.socket_group;
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
    if (a->socket != b.socket) {
      plan.errors.push_back(Where(next, b.position) + ": cells." + b.name +
                            ".socket: a running cell's socket cannot change by reload; remove the "
                            "cell (reload), then add it back with the new socket (reload)");
    }
    // The front socket file's mode and group are set when it is bound, which a reload does not do.
    if (a->socket_mode != b.socket_mode || a->socket_group != b.socket_group) {
      plan.errors.push_back(Where(next, b.position) + ": cells." + b.name +
                            ".socket_mode/socket_group: set when the socket is bound, so they "
                            "cannot change by reload; remove the cell and add it back, or restart "
                            "bulkheadd");
    }
    plan.cells.push_back(PlanCommonCell(*a, b));
  }
  for (const config::CellConfig& a : current.cells) {
    if (Find(next, a.name) == nullptr) {
      plan.cells.push_back(NewOrRemoved(a.name, CellPlan::Action::kRemove));
    }
  }
  return plan;
}

std::string ReloadPlan::Summary() const {
  std::vector<std::string> parts;
  if (log_level_changed) parts.push_back("log_level changed");
  for (const CellPlan& cell : cells) {
    std::string part = cell.name + " " + CellActionName(cell.action);
    if (!cell.changed.empty()) {
      part += " (" + Join(cell.changed, ", ") + " changed)";
    }
    parts.push_back(std::move(part));
  }
  return Join(parts, ", ");
}

}  // namespace bulkhead::control
