// SPDX-License-Identifier: MIT
#include "control/status_json.h"

#include <time.h>

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "control/cell_counter_fields.h"

namespace bulkhead::control {

namespace {

nlohmann::json PolicyJson(const config::CellConfig& c) {
  auto ms = [](std::chrono::milliseconds d) { return static_cast<uint64_t>(d.count()); };
  const char* restart = c.restart == config::RestartMode::kAlways      ? "always"
                        : c.restart == config::RestartMode::kOnFailure ? "on-failure"
                                                                       : "never";
  nlohmann::json policy = {
      {"restart", restart},
      {"restart_delay_ms", ms(c.restart_delay)},
      {"restart_max_delay_ms", ms(c.restart_max_delay)},
      {"restart_reset_after_ms", ms(c.restart_reset_after)},
      {"start_limit_burst", c.start_limit_burst},
      {"start_limit_interval_ms", ms(c.start_limit_interval)},
      {"start_limit_action",
       c.start_limit_action == config::StartLimitAction::kFail ? "fail" : "backoff"},
      {"request_timeout_ms", ms(c.request_timeout)},
      {"stall_timeout_ms", ms(c.stall_timeout)},
      {"ready", config::ReadyText(c)},
      {"worker_connections", c.worker_connections == config::WorkerConnections::kMultiplex
                                 ? "multiplex"
                                 : "one-per-request"},
      {"start_timeout_ms", ms(c.start_timeout)},
      {"watchdog_ms", ms(c.watchdog)},
      {"stop_signal", c.stop_signal},
      {"kill_mode", c.kill_mode == config::KillMode::kMixed ? "mixed" : "control-group"},
      {"stop_timeout_ms", ms(c.stop_timeout)},
      {"oom_policy", c.oom_policy == config::OomPolicy::kContinue ? "continue" : "kill"},
      {"oom_score_adjust", c.oom_score_adjust},
      {"max_unsent_bytes", c.max_unsent_bytes},
      {"client_write_timeout_ms", ms(c.client_write_timeout)},
  };
  // HTTP cells only: a frames cell refuses the key (config/cell_table.cc).
  policy["idle_timeout_ms"] = ms(c.idle_timeout);
  if (c.protocol == config::Protocol::kHttp) policy["header_timeout_ms"] = ms(c.header_timeout);
  return policy;
}

// A quantile of `counts` in ms, or null when the window holds nothing.
nlohmann::json QuantileMs(const admission::LatencyHistogram::Counts& counts, double q) {
  std::optional<double> seconds = admission::LatencyHistogram::QuantileSeconds(counts, q);
  return seconds ? nlohmann::json(*seconds * 1000.0) : nlohmann::json(nullptr);
}

// The figures added for metrics (docs/control.md): in flight, restarts by reason, and the recent
// window's latency quantiles.
void AddMetricsFields(const CellSnapshot& s, nlohmann::json& j) {
  j["in_flight"] = s.in_flight;
  nlohmann::json by_reason = nlohmann::json::object();
  for (size_t i = 0; i < lifecycle::kRestartReasonCount; ++i) {
    by_reason[std::string(lifecycle::RestartReasonName(static_cast<lifecycle::RestartReason>(i)))] =
        s.restarts_by_reason[i];
  }
  j["restarts_by_reason"] = std::move(by_reason);
  j["recent"] = {
      {"window_s",
       admission::WindowedLatency::kSlices * admission::WindowedLatency::kSliceNs / 1'000'000'000},
      {"requests", s.recent_request_duration.count},
      {"latency_p50_ms", QuantileMs(s.recent_request_duration, 0.5)},
      {"latency_p99_ms", QuantileMs(s.recent_request_duration, 0.99)},
      {"dispatched", s.recent_queue_wait.count},
      {"queue_wait_p50_ms", QuantileMs(s.recent_queue_wait, 0.5)},
      {"queue_wait_p99_ms", QuantileMs(s.recent_queue_wait, 0.99)},
  };
  j["request_duration_count"] = s.request_duration.count;
  j["queue_wait_count"] = s.queue_wait.count;
}

// "2025-01-01T14:02:11Z" for ms since the Unix epoch.
std::string Iso8601(uint64_t wall_ms) {
  const time_t seconds = static_cast<time_t>(wall_ms / 1000);
  tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  const size_t n = strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return std::string(text, n);
}

// "concurrency" (docs/control.md): {"mode": "fixed", "limit": N} for a fixed cell; an adaptive
// one adds its bounds, the controller's state and its last changes, newest first.
nlohmann::json ConcurrencyJson(const ConcurrencySnapshot& c) {
  if (!c.adaptive) return {{"mode", "fixed"}, {"limit", c.limit}};
  nlohmann::json signals = nlohmann::json::array();
  for (size_t i = 0; i < admission::kSignalCount; ++i) {
    if (c.signals[i]) signals.push_back(admission::SignalName(static_cast<admission::Signal>(i)));
  }
  nlohmann::json changes = nlohmann::json::array();
  for (const ConcurrencySnapshot::Change& change : c.changes) {
    changes.push_back({
        {"at", Iso8601(c.wall_now_ms - std::min(c.wall_now_ms, change.ago_ms))},
        {"ago_ms", change.ago_ms},
        {"from", change.from},
        {"to", change.to},
        {"cause", admission::LimitCauseName(change.cause)},
        {"text", admission::LimitCauseText(change.cause)},
    });
  }
  // The kernel signals that are off, each with why (WorkerRunner::KernelSignalsOff).
  nlohmann::json signals_off = nlohmann::json::object();
  for (size_t i = 0; i < admission::kSignalCount; ++i) {
    if (c.signals[i] || c.signals_off[i].empty()) continue;
    signals_off[std::string(admission::SignalName(static_cast<admission::Signal>(i)))] =
        c.signals_off[i];
  }
  nlohmann::json by_cause = nlohmann::json::object();
  for (size_t i = 0; i < admission::kLimitCauseCount; ++i) {
    by_cause[std::string(admission::LimitCauseName(static_cast<admission::LimitCause>(i)))] =
        c.changes_by_cause[i];
  }
  return {
      {"mode", "adaptive"},
      {"limit", c.limit},
      {"floor", c.floor},
      {"ceiling", c.ceiling},
      {"phase", admission::AdaptiveLimit::PhaseName(c.phase)},
      {"hold", admission::GrowthHoldName(c.hold)},
      {"signals", std::move(signals)},
      {"signals_off", std::move(signals_off)},
      {"base_us", c.base_us ? nlohmann::json(*c.base_us) : nlohmann::json(nullptr)},
      {"base_age_ms", c.base_age_ms ? nlohmann::json(*c.base_age_ms) : nlohmann::json(nullptr)},
      {"ratio", c.ratio_permille / 1000.0},
      {"throttled_share", c.throttled_permille / 1000.0},
      {"memory_share", c.memory_permille / 1000.0},
      {"memory_fit", c.memory_fit ? nlohmann::json(*c.memory_fit) : nlohmann::json(nullptr)},
      {"memory_ceiling",
       c.memory_ceiling ? nlohmann::json(*c.memory_ceiling) : nlohmann::json(nullptr)},
      {"memory_ceiling_left_ms", c.memory_ceiling_left_ms},
      {"changes", std::move(changes)},
      {"changes_by_cause", std::move(by_cause)},
      {"cpu_pressure_spared", c.cpu_pressure_spared},
  };
}

nlohmann::json SnapshotJson(const CellSnapshot& s) {
  const admission::CellCounters& c = s.counters;
  nlohmann::json j = {
      {"name", s.name},
      {"state", lifecycle::Lifecycle::StateName(s.state)},
      {"state_since_ms", s.state_since_ms},
      {"state_detail",
       s.state_detail.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.state_detail)},
      {"pid", s.pid == 0 ? nlohmann::json(nullptr) : nlohmann::json(s.pid)},
      {"swap", s.swap_phase == "idle"
                   ? nlohmann::json(nullptr)
                   : nlohmann::json{{"phase", s.swap_phase},
                                    {"pid", s.swap_pid == 0 ? nlohmann::json(nullptr)
                                                            : nlohmann::json(s.swap_pid)},
                                    {"detail", s.swap_detail}}},
      {"restart_failed",
       s.restart_failed.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.restart_failed)},
      {"socket", s.socket},
      {"listen", s.listen},
      {"worker_socket", s.worker_socket},
      {"max_concurrent", s.limits.max_concurrent},
      {"concurrency", ConcurrencyJson(s.concurrency)},
      {"running", s.running},
      {"max_queue", s.limits.max_queue},
      {"queued", s.queued},
      {"queue_timeout_ms", s.limits.queue_timeout_ms},
      {"clients", s.clients},
      {"max_connections", s.max_connections},
      {"connection_limit", s.connection_limit},
      {"worker_connections", s.worker_connections},
      // The sums of rejected_by_reason and failed_by_reason.
      {"rejected", c.rejected()},
      {"failed", c.failed()},
      {"unsent_bytes", s.unsent_bytes},
      {"starts", s.starts},
      {"restarts", s.restarts},
      {"last_exit", s.last_exit.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.last_exit)},
      {"reason", s.reason.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.reason)},
      {"status_text",
       s.status_text.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.status_text)},
      {"uptime_ms", s.uptime_ms},
      {"next_start_in_ms", s.next_start_in_ms},
      {"crash_looping", s.crash_looping},
      {"limits_enforced", s.limits_enforced},
      {"oom_kills", s.oom_kills},
  };
  for (const CellCounterField& field : kCellCounterFields) {
    nlohmann::json& object = field.json_object.empty() ? j : j[std::string(field.json_object)];
    object[std::string(field.json_name)] = c.*field.member;
  }
  // A start held for the cells it needs: the state the operator reads is "waiting", and the detail
  // says for what ("waiting for catalog (starting)"); `needs` is the configured list.
  nlohmann::json waiting_for = nlohmann::json::array();
  std::string waiting_text;
  for (const CellSnapshot::Need& need : s.waiting_for) {
    nlohmann::json entry = {{"cell", need.cell}, {"state", need.state}};
    if (need.state == "backoff") entry["next_start_in_ms"] = need.next_start_in_ms;
    if (!need.held_by.empty()) entry["held_by"] = need.held_by;
    waiting_for.push_back(std::move(entry));
    waiting_text += (waiting_text.empty() ? "" : ", ") + need.cell + " (" + need.state +
                    (need.held_by.empty() ? "" : ", held by " + need.held_by) + ")";
  }
  j["waiting_for"] = std::move(waiting_for);
  if (!s.waiting_for.empty()) {
    j["state"] = "waiting";
    j["state_since_ms"] = s.held_for_ms;
    j["state_detail"] = "waiting for " + waiting_text;
  }
  if (!s.limits_enforced) j["limits_note"] = s.limits_note;
  nlohmann::json enforcement = nlohmann::json::object();
  for (size_t i = 0; i < cell::kLimitCount; ++i) {
    enforcement[std::string(cell::LimitName(static_cast<cell::Limit>(i)))] =
        lifecycle::LimitStateName(s.limit_states[i]);
  }
  j["limits_enforcement"] = std::move(enforcement);
  auto optional = [](const auto& value) {
    return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
  };
  const cell::CgroupLimits& l = s.cgroup_limits;
  j["limits"] = {
      {"cpu_quota_us", optional(l.cpu_quota_us)},
      {"cpu_period_us", l.cpu_period_us.value_or(cell::kDefaultCpuPeriodUs)},
      {"cpu_weight", optional(l.cpu_weight)},
      {"memory_max", optional(l.memory_max)},
      {"memory_high", optional(l.memory_high)},
      {"memory_swap_max", optional(l.memory_swap_max)},
      {"pids_max", optional(l.pids_max)},
  };
  if (s.cgroup) {
    const cell::CgroupStats& k = *s.cgroup;
    j["cgroup"] = {
        {"path", s.cgroup_path},
        {"memory_current", k.has_memory ? nlohmann::json(k.memory_current) : nullptr},
        {"memory_max", optional(k.memory_max)},
        {"cpu_usage_usec", k.cpu.usage_usec},
        {"cpu_nr_periods", k.cpu.nr_periods},
        {"cpu_nr_throttled", k.cpu.nr_throttled},
        {"cpu_throttled_usec", k.cpu.throttled_usec},
        {"pids_current", k.has_pids ? nlohmann::json(k.pids_current) : nullptr},
        {"pids_max", optional(k.pids_max)},
        {"oom_kill", k.memory_events.oom_kill},
        {"oom_group_kill", k.memory_events.oom_group_kill},
    };
  } else {
    j["cgroup"] = nullptr;
  }
  return j;
}

}  // namespace

nlohmann::json CellStatusJson(const CellSnapshot& s, const config::CellConfig& config) {
  nlohmann::json j = SnapshotJson(s);
  AddMetricsFields(s, j);
  j["protocol"] = config::ProtocolName(config.protocol);
  j["needs"] = config.needs;
  j["policy"] = PolicyJson(config);
  return j;
}

}  // namespace bulkhead::control
