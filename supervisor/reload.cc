// SPDX-License-Identifier: MIT
// Supervisor's reload (SIGHUP and the control command "reload"): the file loaded again, planned
// by control::PlanReload, and applied to the running cells (docs/architecture.md, "Reload").
// Loop thread only.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "base/check.h"
#include "base/log.h"
#include "config/config_error.h"
#include "control/reload_plan.h"
#include "supervisor/supervisor.h"

namespace bulkhead::supervisor {

namespace {

cell::CgroupLimits CgroupLimitsOf(const config::CellConfig& c) {
  cell::CgroupLimits limits;
  limits.cpu_quota_us = c.cpu_max_quota_us;
  limits.cpu_period_us = c.cpu_max_period_us;
  limits.cpu_weight = c.cpu_weight;
  limits.memory_max = c.memory_max;
  limits.memory_high = c.memory_high;
  limits.memory_swap_max = c.memory_swap_max;
  limits.pids_max = c.pids_max;
  limits.oom_group = c.oom_policy == config::OomPolicy::kKill;
  return limits;
}

}  // namespace

std::unique_ptr<Cell> Supervisor::MakeCell(const config::CellConfig& cell_config) {
  lifecycle::CellCompartment compartment;
  if (cgroup_tree_) compartment.tree = &*cgroup_tree_;
  compartment.not_enforced_reason = cgroup_note_;
  compartment.limits = CgroupLimitsOf(cell_config);
  compartment.required = config_.supervisor.cgroup == config::CgroupMode::kRequired;
  auto cell = std::make_unique<Cell>(&loop_, &time_, cell_config, std::move(compartment),
                                     config_.supervisor.max_payload_bytes, &pool_, &*write_batch_);
  cell->SetAccessLog(access_log_.get());
  // STATUS= (and the boot's READY=1) follow every cell, a reload's new ones included.
  cell->SetStateObserver([this] { OnCellStateChanged(); });
  // A waiting re-exec looks again when this cell may be carried now or its last request ended.
  cell->SetReexecObserver([this] { NotifyReexec(); });
  Cell* raw = cell.get();
  cell->SetCpuNeighboursJudge([this, raw] {
    return cgroup_poll_ ? cgroup_poll_->Judge(*raw) : admission::CpuNeighbours::kUnknown;
  });
  return cell;
}

void Supervisor::Retire(std::unique_ptr<Cell> cell, Retirement retirement) {
  Cell* raw = cell.get();
  retiring_.push_back(std::move(cell));
  ++retiring_stopping_;
  // Runs at once when the cell is already stopped (or was never started).
  raw->Stop([this, raw, retirement] {
    --retiring_stopping_;
    raw->DisconnectClients();
    raw->CloseHandles([this, raw, retirement] {
      // A cell of a refused reload never existed for the operator: the refusal said so.
      if (retirement == Retirement::kRemoved) {
        Log(LogLevel::kInfo, raw->name(), 0, "cell closed: worker stopped, sockets removed");
      } else {
        Log(LogLevel::kDebug, raw->name(), 0, "not added (reload refused): sockets closed");
      }
      // Copied first: erasing the cell from retiring_ destroys it.
      const std::string name = raw->name();
      std::erase_if(retiring_, [raw](const std::unique_ptr<Cell>& c) { return c.get() == raw; });
      NotifyReexec();  // a settling re-exec may wait for the last retiring cell
      const bool name_in_use = std::any_of(cells_.begin(), cells_.end(),
                                           [&name](const auto& c) { return c->name() == name; });
      if (!name_in_use) cell_logs_.Forget(name);
    });
    MaybeFinishShutdown();
  });
}

Cell* Supervisor::FindCell(const std::string& name) const {
  auto it = std::find_if(cells_.begin(), cells_.end(),
                         [&name](const std::unique_ptr<Cell>& c) { return c->name() == name; });
  return it == cells_.end() ? nullptr : it->get();
}

bool Supervisor::TookOver(const Cell& cell, uint64_t starts_before) {
  return cell.state() == lifecycle::Lifecycle::State::kRunning && cell.starts() > starts_before;
}

std::set<std::string> Supervisor::NotTakenOver() {
  using State = lifecycle::Lifecycle::State;
  std::set<std::string> not_taken_over;
  std::erase_if(reload_starts_, [this, &not_taken_over](const auto& entry) {
    const auto& [name, starts_before] = entry;
    const Cell* cell = FindCell(name);
    if (cell == nullptr || TookOver(*cell, starts_before)) return true;
    const State state = cell->state();
    if (state == State::kStopped || state == State::kStopping) return true;
    if (state == State::kBackoff || state == State::kFailed ||
        (state == State::kRunning && !cell->swapping())) {
      not_taken_over.insert(name);
    }
    return false;  // starting, or a swap under way: the new worker is on its way
  });
  return not_taken_over;
}

ReloadResult Supervisor::Reload() {
  // Before READY=1 the service manager still waits for the start; it is told only of the outcome.
  const bool tell = ready_sent_;
  if (tell) notifier_.Reloading();
  // Every reload, applied or refused, opens the access log's file again: logrotate's postrotate
  // sends SIGHUP (nginx's USR1 and HAProxy's reload do the same job).
  std::string access_log_error;
  if (access_log_) {
    Status reopened = access_log_->Reopen();
    if (!reopened.ok()) {
      access_log_error =
          "supervisor.access_log: not reopened, still writing the old file: " + reopened.message();
      LogError("reload: " + access_log_error);
    }
  }
  ReloadResult result = ApplyReload();
  result.access_log_error = std::move(access_log_error);
  ++(result.ok ? reloads_.applied : reloads_.refused);
  reloads_.last_refused = !result.ok;
  if (tell) notifier_.Ready();
  OnCellStateChanged();
  return result;
}

ReloadResult Supervisor::ApplyReload() {
  ReloadResult result;
  auto refuse = [&result, this]() -> ReloadResult {
    for (const std::string& error : result.errors) LogError("reload: " + error);
    LogError("reload of " + config_.source + " refused (" + std::to_string(result.errors.size()) +
             " error(s)); nothing changed");
    return std::move(result);
  };
  if (shutting_down_) {
    result.errors.push_back("bulkheadd is shutting down");
    return refuse();
  }
  config::LoadResult loaded = config::LoadConfigFile(config_.source);
  // Warnings are shown whether or not the file is refused: fixing one error should not reveal a
  // second round of news.
  // But a named-pipe access_log's warning (its key's only one) was given when bulkheadd started
  // or when the path changed: it is news again only with another path (a file refused whole may
  // have changed it: told then too).
  const bool same_access_log =
      loaded.config && loaded.config->supervisor.access_log == config_.supervisor.access_log;
  for (const config::ConfigError& warning : loaded.warnings) {
    if (same_access_log && warning.key == "supervisor.access_log") continue;
    result.warnings.push_back(warning.ToString());
    LogWarning("reload: " + warning.ToString());
  }
  if (!loaded.config) {
    for (const config::ConfigError& error : loaded.errors)
      result.errors.push_back(error.ToString());
    return refuse();
  }
  config::Config next = std::move(*loaded.config);
  if (!pinned_log_level_.empty()) next.supervisor.log_level = pinned_log_level_;
  result.plan = control::PlanReload(config_, next);
  control::RetryRestarts(NotTakenOver(), &result.plan);
  result.errors = result.plan.errors;
  auto config_of = [&next](const std::string& name) -> const config::CellConfig& {
    return CellNamed(next, name);
  };
  // A refusal of a new cell, placed at its [cells.NAME] header (docs/config.md, "Errors").
  auto at_cell = [&next, &config_of](const std::string& name, std::string message) {
    const config::CellConfig& cell = config_of(name);
    return config::ConfigError{.file = next.source,
                               .line = cell.position.line,
                               .column = cell.position.column,
                               .key = "cells." + name,
                               .message = std::move(message)}
        .ToString();
  };
  for (const control::CellPlan& planned : result.plan.cells) {
    if (planned.action != control::CellPlan::Action::kAdd) continue;
    for (const auto& retiring : retiring_) {
      if (retiring->name() != planned.name) continue;
      // A removed cell leaves status at once, so say what to wait for: its worker's exit, which
      // its stop_timeout bounds.
      std::string message = "a removed cell of that name is still stopping";
      if (retiring->pid() > 0) message += " (worker pid " + std::to_string(retiring->pid()) + ")";
      message += "; reload again once it has stopped, within its stop_timeout";
      result.errors.push_back(at_cell(planned.name, std::move(message)));
    }
  }
  if (!result.errors.empty()) return refuse();

  // New cells bind first: a socket that cannot be claimed refuses the reload before anything
  // running is touched.
  std::vector<std::unique_ptr<Cell>> added;
  for (const control::CellPlan& planned : result.plan.cells) {
    if (planned.action != control::CellPlan::Action::kAdd) continue;
    added.push_back(MakeCell(config_of(planned.name)));
    Status bound = added.back()->Bind();
    if (!bound.ok()) result.errors.push_back(at_cell(planned.name, bound.message()));
  }
  if (!result.errors.empty()) {
    for (auto& cell : added) Retire(std::move(cell), Retirement::kNeverAdded);
    return refuse();
  }

  if (result.plan.log_level_changed)
    SetLogLevel(ParseLogLevel(next.supervisor.log_level).value_or(LogLevel::kInfo));
  std::vector<std::string> notes;
  std::vector<std::unique_ptr<Cell>> cells;
  std::vector<Cell*> to_start;
  auto take = [this](const std::string& name) {
    auto it = std::find_if(cells_.begin(), cells_.end(),
                           [&name](const std::unique_ptr<Cell>& c) { return c->name() == name; });
    BH_CHECK(it != cells_.end());
    std::unique_ptr<Cell> cell = std::move(*it);
    cells_.erase(it);
    return cell;
  };
  size_t next_added = 0;
  for (const control::CellPlan& planned : result.plan.cells) {
    switch (planned.action) {
      case control::CellPlan::Action::kUnchanged:
        cells.push_back(take(planned.name));
        break;
      case control::CellPlan::Action::kUpdate:
      case control::CellPlan::Action::kRestart: {
        std::unique_ptr<Cell> cell = take(planned.name);
        const config::CellConfig& cell_config = config_of(planned.name);
        std::optional<cell::CgroupLimits> limits;
        if (planned.cgroup_changed) limits = CgroupLimitsOf(cell_config);
        Status applied = cell->Reconfigure(cell_config, limits);
        if (!applied.ok()) {
          // The rest of the reload stands; the answer is a failure that names the limits.
          result.limit_errors.push_back("cells." + planned.name + ": " + applied.message());
        }
        if (planned.action == control::CellPlan::Action::kRestart) {
          lifecycle::Lifecycle::State state = cell->state();
          if (state == lifecycle::Lifecycle::State::kStopped ||
              state == lifecycle::Lifecycle::State::kStopping) {
            // A stopped cell stays stopped; a stop or restart under way spawns (if at all) with
            // the new config.
            notes.push_back(planned.name + " is " + lifecycle::Lifecycle::StateName(state) +
                            ": its new config applies at its next start");
          } else {
            result.starts_before[planned.name] = cell->starts();
            cell->RestartForReload();
          }
        }
        cells.push_back(std::move(cell));
        break;
      }
      case control::CellPlan::Action::kAdd:
        result.starts_before[planned.name] = 0;
        to_start.push_back(added[next_added].get());
        cells.push_back(std::move(added[next_added++]));
        break;
      case control::CellPlan::Action::kRemove:
        Retire(take(planned.name), Retirement::kRemoved);
        break;
    }
  }
  BH_CHECK(cells_.empty() && next_added == added.size());
  for (const auto& [name, starts] : result.starts_before) reload_starts_[name] = starts;
  cells_ = std::move(cells);
  config_ = std::move(next);
  // Cells added or removed, or max_connections changed: the descriptor budget is split anew.
  SetUpConnectionBudget();
  StartInNeedsOrder(to_start);
  // A reload may have changed what a held start waits for.
  ScheduleOrder();
  // A reload may have made a cell adaptive, or the last adaptive one fixed, and added or removed
  // cells.
  FollowCgroupPoll();

  result.ok = true;
  result.summary = "reloaded: " + result.plan.Summary();
  for (const std::string& note : notes) result.summary += "; " + note;
  LogInfo(result.summary);
  for (const std::string& error : result.limit_errors) {
    LogError("reload: limits not enforced: " + error);
  }
  return result;
}

std::string Supervisor::ReloadControl() {
  ReloadResult result = Reload();
  if (!result.ok) {
    if (!result.access_log_error.empty()) result.errors.push_back(result.access_log_error);
    nlohmann::json refused = {
        {"ok", false}, {"error", "reload refused; nothing changed"}, {"errors", result.errors}};
    if (!result.warnings.empty()) refused["warnings"] = result.warnings;
    return refused.dump();
  }
  nlohmann::json cells = nlohmann::json::array();
  for (const control::CellPlan& planned : result.plan.cells) {
    nlohmann::json cell = {{"name", planned.name},
                           {"action", control::CellActionName(planned.action)},
                           {"changed", planned.changed}};
    if (auto it = result.starts_before.find(planned.name); it != result.starts_before.end()) {
      cell["starts_before"] = it->second;
    }
    cells.push_back(std::move(cell));
  }
  nlohmann::json response = {{"ok", true}, {"result", result.summary}, {"cells", cells}};
  if (!result.warnings.empty()) response["warnings"] = result.warnings;
  // Applied, but some limit is not in force or the access log still goes to the old file: a
  // failure for the operator (bulkheadctl exits non-zero), with the reload's outcome kept beside
  // the errors.
  std::vector<std::string> failures = result.limit_errors;
  std::string failed;
  if (!result.limit_errors.empty()) failed = "limits not enforced";
  if (!result.access_log_error.empty()) {
    failures.push_back(result.access_log_error);
    failed += (failed.empty() ? "" : " and ") + std::string("the access log not reopened");
  }
  if (!failures.empty()) {
    response["ok"] = false;
    response["error"] = "reloaded, but " + failed;
    response["errors"] = failures;
  }
  return response.dump();
}

}  // namespace bulkhead::supervisor
