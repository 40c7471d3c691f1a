// SPDX-License-Identifier: MIT
// ReloadPlan: what a configuration reload (`bulkheadctl reload`, SIGHUP) changes, computed from the
// running config and the newly loaded one, per cell, before anything is touched. Pure: no I/O, no
// clock; thread-compatible. docs/config.md ("Reload") documents the classification.
//
// Each key of a cell is either live (applied to the running cell: admission limits, cgroup limits,
// lifecycle policy), needs a new worker (the cell is restarted, keeping its front socket, its
// clients and its queue) or is refused (the socket keys): its config::CellReload in the key table
// config/config_keys.h. The comparison is exhaustive: a CellConfig field that no key fills counts
// as needing a restart (CellConfig::operator== compares every field; only `position` is ignored).
// Likewise every [supervisor] key but log_level refuses the reload.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "config/config.h"

namespace bulkhead::control {

struct CellPlan {
  enum class Action {
    kUnchanged,  // nothing to do: the cell is not touched
    kUpdate,     // live keys only: applied to the running cell, same worker
    kRestart,    // a key that needs a new worker changed (live keys are applied too)
    kAdd,        // a new cell: bind its sockets and start it
    kRemove,     // gone from the file: stop admitting, drain, stop, close and remove its sockets
  };
  std::string name;
  Action action = Action::kUnchanged;
  // The keys that changed, as named in docs/config.md, in the order of that reference
  // ("max_concurrent", "cpu_max", "command", ...). A change of a field reload does not know by
  // name is listed as "other settings". Empty for kUnchanged, kAdd and kRemove.
  std::vector<std::string> changed;
  // Which groups of live keys changed (kUpdate, kRestart).
  bool admission_changed = false;  // max_concurrent, max_queue, queue_timeout
  bool cgroup_changed = false;     // cpu_max, cpu_max_period, cpu_weight, memory_*, pids_max,
                                   // oom_policy
  bool policy_changed = false;     // restart*, start_limit_*, *_timeout, stop_signal, kill_mode
  // kRestart because an earlier reload's new worker for this cell never took over: this reload
  // asks for it again (RetryRestarts).
  bool retried = false;
};

struct ReloadPlan {
  // Why the reload is refused as a whole, each as a config error placed at the new value
  // ("bulkhead.toml:2:15: supervisor.runtime_dir: ..."), or at its table's header for a key that
  // was removed; when non-empty nothing may be applied.
  std::vector<std::string> errors;
  bool log_level_changed = false;
  // The cells of the new config in file order, then the removed ones in their old order.
  std::vector<CellPlan> cells;

  bool ok() const { return errors.empty(); }
  // One line: "payments unchanged, catalog restarted (command changed), search added".
  std::string Summary() const;
};

// Compares `current` (running) with `next` (just loaded and valid). Refused (errors): a changed
// [supervisor] key other than log_level, needing a restart of bulkheadd; a changed cell `socket`
// (remove the cell in one reload and add it back in the next). Never throws.
ReloadPlan PlanReload(const config::Config& current, const config::Config& next);

// Makes each kUnchanged or kUpdate cell of `plan` named in `not_taken_over` a kRestart (`retried`;
// live keys that changed are applied too, as for any restart). `not_taken_over`: the cells whose
// new worker, asked for by an earlier reload, never took over (its overlapping restart failed and
// the previous worker serves on with the config of before, or the cell is in backoff or failed).
// A reload of that same file then restarts each again and reports it as the first reload did, a
// failure included, instead of answering "unchanged" over a cell that does not run the file's
// config.
void RetryRestarts(const std::set<std::string>& not_taken_over, ReloadPlan* plan);

// "unchanged", "updated", "restarted", "added", "removed".
const char* CellActionName(CellPlan::Action action);

}  // namespace bulkhead::control
