// SPDX-License-Identifier: MIT
#include "control/metrics_text.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <functional>
#include <string_view>

#include "control/cell_counter_fields.h"

namespace bulkhead::control {

namespace {

// Writes families one by one; a family's HELP and TYPE lines appear before its first sample.
class Writer {
 public:
  explicit Writer(std::string* out) : out_(out) {}

  void Family(std::string_view name, std::string_view type, std::string_view help) {
    name_ = name;
    type_ = type;
    help_ = help;
    header_written_ = false;
  }

  // One sample of the current family: `suffix` ("", "_bucket", "_sum", "_count") and `labels`
  // (already formatted, e.g. cell="a",reason="full"; empty: no braces).
  void Sample(std::string_view suffix, const std::string& labels, std::string_view value) {
    if (!header_written_) {
      header_written_ = true;
      Append("# HELP ", name_, " ", help_, "\n# TYPE ", name_, " ", type_, "\n");
    }
    if (labels.empty()) {
      Append(name_, suffix, " ", value, "\n");
    } else {
      Append(name_, suffix, "{", labels, "} ", value, "\n");
    }
  }
  void Sample(const std::string& labels, uint64_t value) {
    Sample("", labels, std::to_string(value));
  }

 private:
  template <typename... Parts>
  void Append(const Parts&... parts) {
    (out_->append(parts), ...);
  }

  std::string* out_;
  std::string_view name_, type_, help_;
  bool header_written_ = false;
};

std::string CellLabel(const CellSnapshot& s) { return "cell=\"" + EscapeLabelValue(s.name) + "\""; }

// `ns` as a decimal number of seconds, exactly and without trailing zeros: "0.0001", "2.5", "60".
std::string Seconds(uint64_t ns) {
  std::string text = std::to_string(ns / 1'000'000'000);
  uint64_t fraction = ns % 1'000'000'000;
  if (fraction == 0) return text;
  char digits[16];
  std::snprintf(digits, sizeof digits, ".%09" PRIu64, fraction);
  std::string_view tail(digits);
  while (tail.back() == '0') tail.remove_suffix(1);
  text.append(tail);
  return text;
}

void Histogram(Writer& w, const std::string& cell_label,
               const admission::LatencyHistogram::Counts& c) {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < admission::LatencyHistogram::kBuckets; ++i) {
    cumulative += c.buckets[i];
    std::string le = i + 1 == admission::LatencyHistogram::kBuckets
                         ? std::string("+Inf")
                         : Seconds(admission::LatencyHistogram::kBoundsNs[i]);
    w.Sample("_bucket", cell_label + ",le=\"" + le + "\"", std::to_string(cumulative));
  }
  w.Sample("_sum", cell_label, Seconds(c.sum_ns));
  w.Sample("_count", cell_label, std::to_string(c.count));
}

using Each = std::function<void(const CellSnapshot&, const std::string& cell_label)>;

void ForEachCell(const std::vector<CellSnapshot>& cells, const Each& each) {
  for (const CellSnapshot& s : cells) each(s, CellLabel(s));
}

}  // namespace

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string MetricsText(const std::vector<CellSnapshot>& cells, const ReloadCounts& reloads,
                        const AccessLogCounts& access_log) {
  std::string out;
  Writer w(&out);

  // The supervisor's own, as Prometheus' prometheus_config_last_reload_successful.
  w.Family("bulkhead_config_reloads_total", "counter",
           "Config reloads since bulkheadd started, by result: applied, or refused (nothing "
           "changed).");
  w.Sample("result=\"applied\"", reloads.applied);
  w.Sample("result=\"refused\"", reloads.refused);
  w.Family("bulkhead_config_last_reload_successful", "gauge",
           "0 when the latest config reload was refused (bulkheadd runs the config it had before), "
           "else 1.");
  w.Sample("", uint64_t{reloads.last_refused ? 0U : 1U});
  if (access_log.open) {
    w.Family("bulkhead_access_log_lines_total", "counter",
             "Access log lines made since bulkheadd started, one per answered request, the "
             "dropped ones included.");
    w.Sample("", access_log.lines);
    w.Family("bulkhead_access_log_dropped_total", "counter",
             "Access log lines not written: dropped because the log's buffer was full (its "
             "destination did not keep up), or refused by the destination (a named pipe's "
             "reader left).");
    w.Sample("", access_log.dropped);
  }

  w.Family("bulkhead_up", "gauge",
           "1 when the cell's worker is running and its admission open, else 0.");
  ForEachCell(cells, [&](const CellSnapshot& s, const std::string& l) {
    w.Sample(l, s.state == lifecycle::Lifecycle::State::kRunning ? 1 : 0);
  });

  w.Family("bulkhead_cell_state", "gauge",
           "The cell's lifecycle state: 1 for the current state, 0 for the others.");
  ForEachCell(cells, [&](const CellSnapshot& s, const std::string& l) {
    for (size_t i = 0; i < lifecycle::Lifecycle::kStateCount; ++i) {
      auto state = static_cast<lifecycle::Lifecycle::State>(i);
      w.Sample(l + ",state=\"" + lifecycle::Lifecycle::StateName(state) + "\"",
               s.state == state ? 1 : 0);
    }
  });

  w.Family("bulkhead_cell_waiting", "gauge",
           "1 while the cell's start waits for a cell it needs (`needs`) to be running, else 0.");
  ForEachCell(cells, [&](const CellSnapshot& s, const std::string& l) {
    w.Sample(l, s.waiting_for.empty() ? 0 : 1);
  });

  w.Family("bulkhead_cell_crash_looping", "gauge",
           "1 while the cell is crash-looping: it hit its start limit (start_limit_burst starts "
           "within start_limit_interval) and no worker has run restart_reset_after since; with "
           "start_limit_action fail it gave up (state failed).");
  ForEachCell(cells, [&](const CellSnapshot& s, const std::string& l) {
    w.Sample(l, s.crash_looping ? 1 : 0);
  });
  w.Family("bulkhead_cell_next_start_seconds", "gauge",
           "Time until the next start of the cell's worker, while it waits in backoff; absent "
           "when no start is due.");
  ForEachCell(cells, [&](const CellSnapshot& s, const std::string& l) {
    if (s.state == lifecycle::Lifecycle::State::kBackoff) {
      w.Sample("", l, Seconds(s.next_start_in_ms * 1'000'000));
    }
  });

  // The counters, in kCellCounterFields order: each family under one header, then per cell its
  // samples.
  for (auto field = kCellCounterFields.begin(); field != kCellCounterFields.end();) {
    const CounterMetric* metric = field->metric;
    auto end = std::find_if(field, kCellCounterFields.end(),
                            [metric](const CellCounterField& f) { return f.metric != metric; });
    if (metric != nullptr) {
      w.Family(metric->name, "counter", metric->help);
      ForEachCell(cells, [&](const CellSnapshot& s, const std::string& l) {
        for (auto f = field; f != end; ++f) {
          std::string labels = l;
          if (!f->outcome.empty()) {
            labels.append(",outcome=\"").append(f->outcome).append("\",reason=\"");
            labels.append(f->reason).append("\"");
          }
          w.Sample(labels, s.counters.*(f->member));
        }
      });
    }
    field = end;
  }

  w.Family("bulkhead_requests_in_flight", "gauge",
           "Admitted requests without an outcome yet (queued, running and not yet answered, or "
           "answered with the reply not yet written whole).");
  ForEachCell(cells,
              [&](const CellSnapshot& s, const std::string& l) { w.Sample(l, s.in_flight); });
  w.Family("bulkhead_requests_running", "gauge", "Requests holding a worker slot.");
  ForEachCell(cells, [&](const CellSnapshot& s, const std::string& l) { w.Sample(l, s.running); });
  w.Family("bulkhead_requests_queued", "gauge", "Requests waiting in the queue for a slot.");
  ForEachCell(cells, [&](const CellSnapshot& s, const std::string& l) { w.Sample(l, s.queued); });
  w.Family("bulkhead_max_concurrent", "gauge", "The cell's slots (max_concurrent).");
  ForEachCell(cells, [&](const CellSnapshot& s, const std::string& l) {
    w.Sample(l, s.limits.max_concurrent);
  });
  w.Family("bulkhead_concurrency_limit", "gauge",
           "Requests the cell admits to its worker at once now: max_concurrent for a fixed cell, "
           "the adaptive limit for an adaptive one.");
  ForEachCell(cells, [&](const CellSnapshot& s, const std::string& l) {
    w.Sample(l, s.concurrency.limit);
  });
  w.Family("bulkhead_concurrency_limit_bound", "gauge",
           "An adaptive cell's bounds: min_concurrent (floor) and max_concurrent (ceiling).");
  ForEachCell(cells, [&](const CellSnapshot& s, const std::string& l) {
    if (!s.concurrency.adaptive) return;
    w.Sample(l + ",bound=\"floor\"", s.concurrency.floor);
    w.Sample(l + ",bound=\"ceiling\"", s.concurrency.ceiling);
  });
  w.Family("bulkhead_concurrency_limit_changes_total", "counter",
           "Changes of an adaptive cell's limit, by cause.");
  ForEachCell(cells, [&](const CellSnapshot& s, const std::string& l) {
    if (!s.concurrency.adaptive) return;
    for (size_t i = 0; i < admission::kLimitCauseCount; ++i) {
      std::string cause(admission::LimitCauseName(static_cast<admission::LimitCause>(i)));
      w.Sample(l + ",cause=\"" + cause + "\"", s.concurrency.changes_by_cause[i]);
    }
  });
  w.Family("bulkhead_concurrency_cpu_pressure_spared_total", "counter",
           "An adaptive cell's cpu.pressure events that held growth without a cut: no other cell "
           "was waiting for a CPU.");
  ForEachCell(cells, [&](const CellSnapshot& s, const std::string& l) {
    if (s.concurrency.adaptive) w.Sample(l, s.concurrency.cpu_pressure_spared);
  });
  w.Family("bulkhead_service_time_base_seconds", "gauge",
           "An adaptive cell's base service time (without queueing), once measured.");
  ForEachCell(cells, [&](const CellSnapshot& s, const std::string& l) {
    if (s.concurrency.base_us) w.Sample("", l, Seconds(*s.concurrency.base_us * 1000));
  });
  w.Family("bulkhead_max_queue", "gauge", "The cell's queue places (max_queue).");
  ForEachCell(
      cells, [&](const CellSnapshot& s, const std::string& l) { w.Sample(l, s.limits.max_queue); });
  w.Family("bulkhead_queue_timeout_seconds", "gauge",
           "How long a request may wait in the queue before it is refused (queue_timeout).");
  ForEachCell(cells, [&](const CellSnapshot& s, const std::string& l) {
    w.Sample("", l, Seconds(s.limits.queue_timeout_ms * 1'000'000));
  });
  w.Family("bulkhead_client_connections", "gauge", "Open client connections.");
  ForEachCell(cells, [&](const CellSnapshot& s, const std::string& l) { w.Sample(l, s.clients); });
  w.Family("bulkhead_connection_limit", "gauge",
           "Client connections the cell keeps open at once: max_connections, or its share of the "
           "supervisor's descriptor budget when that is less.");
  ForEachCell(
      cells, [&](const CellSnapshot& s, const std::string& l) { w.Sample(l, s.connection_limit); });
  w.Family("bulkhead_client_unsent_bytes", "gauge",
           "Reply bytes held for clients, not yet written to their sockets (max_unsent_bytes).");
  ForEachCell(cells,
              [&](const CellSnapshot& s, const std::string& l) { w.Sample(l, s.unsent_bytes); });

  w.Family("bulkhead_queue_wait_seconds", "histogram",
           "Time from admission to dispatch to the worker, of dispatched requests.");
  ForEachCell(cells,
              [&](const CellSnapshot& s, const std::string& l) { Histogram(w, l, s.queue_wait); });
  w.Family("bulkhead_request_duration_seconds", "histogram",
           "Time from admission to the outcome, of requests dispatched to the worker.");
  ForEachCell(cells, [&](const CellSnapshot& s, const std::string& l) {
    Histogram(w, l, s.request_duration);
  });

  w.Family("bulkhead_cell_starts_total", "counter", "Worker start attempts.");
  ForEachCell(cells, [&](const CellSnapshot& s, const std::string& l) { w.Sample(l, s.starts); });
  w.Family("bulkhead_cell_restarts_total", "counter",
           "Worker starts that replaced an earlier worker, by what ended the earlier one.");
  ForEachCell(cells, [&](const CellSnapshot& s, const std::string& l) {
    for (size_t i = 0; i < lifecycle::kRestartReasonCount; ++i) {
      std::string reason(lifecycle::RestartReasonName(static_cast<lifecycle::RestartReason>(i)));
      w.Sample(l + ",reason=\"" + reason + "\"", s.restarts_by_reason[i]);
    }
  });
  w.Family("bulkhead_cell_oom_kills_total", "counter",
           "OOM kills in the cell's cgroup, the worker's or a helper's (memory.events "
           "oom_group_kill, or oom_kill under oom_policy continue).");
  ForEachCell(cells,
              [&](const CellSnapshot& s, const std::string& l) { w.Sample(l, s.oom_kills); });
  w.Family("bulkhead_cell_uptime_seconds", "gauge", "Age of the current worker; 0 when none.");
  ForEachCell(cells, [&](const CellSnapshot& s, const std::string& l) {
    w.Sample("", l, Seconds(s.uptime_ms * 1'000'000));
  });

  w.Family("bulkhead_cell_limit_enforced", "gauge",
           "1 when the cell's configured cgroup limit is in force, 0 when it is not (no cgroup, "
           "its controller missing, or its write failed); absent for limits not set.");
  ForEachCell(cells, [&](const CellSnapshot& s, const std::string& l) {
    for (size_t i = 0; i < cell::kLimitCount; ++i) {
      if (s.limit_states[i] == lifecycle::LimitState::kUnlimited) continue;
      std::string limit(cell::LimitName(static_cast<cell::Limit>(i)));
      w.Sample(l + ",limit=\"" + limit + "\"",
               s.limit_states[i] == lifecycle::LimitState::kEnforced ? 1 : 0);
    }
  });

  // The kernel's figures (cgroup v2), for cells that have a cgroup (and the controller).
  w.Family("bulkhead_cell_memory_bytes", "gauge", "The cell cgroup's memory.current.");
  ForEachCell(cells, [&](const CellSnapshot& s, const std::string& l) {
    if (s.cgroup && s.cgroup->has_memory) w.Sample(l, s.cgroup->memory_current);
  });
  w.Family("bulkhead_cell_memory_max_bytes", "gauge",
           "The cell cgroup's memory.max; absent when unlimited.");
  ForEachCell(cells, [&](const CellSnapshot& s, const std::string& l) {
    if (s.cgroup && s.cgroup->memory_max) w.Sample(l, *s.cgroup->memory_max);
  });
  w.Family("bulkhead_cell_cpu_usage_seconds_total", "counter",
           "CPU time used by the cell cgroup (cpu.stat usage_usec).");
  ForEachCell(cells, [&](const CellSnapshot& s, const std::string& l) {
    if (s.cgroup) w.Sample("", l, Seconds(s.cgroup->cpu.usage_usec * 1000));
  });
  w.Family("bulkhead_cell_cpu_throttled_seconds_total", "counter",
           "Time the cell cgroup was throttled by cpu.max (cpu.stat throttled_usec).");
  ForEachCell(cells, [&](const CellSnapshot& s, const std::string& l) {
    if (s.cgroup) w.Sample("", l, Seconds(s.cgroup->cpu.throttled_usec * 1000));
  });
  w.Family("bulkhead_cell_cpu_quota_cpus", "gauge",
           "The cell's cpu.max quota as a number of CPUs; absent when unlimited.");
  ForEachCell(cells, [&](const CellSnapshot& s, const std::string& l) {
    const cell::CgroupLimits& limits = s.cgroup_limits;
    if (!s.cgroup || !limits.cpu_quota_us) return;
    uint64_t period = limits.cpu_period_us.value_or(cell::kDefaultCpuPeriodUs);
    char buf[40];
    std::snprintf(buf, sizeof buf, "%g",
                  static_cast<double>(*limits.cpu_quota_us) / static_cast<double>(period));
    w.Sample("", l, buf);
  });
  w.Family("bulkhead_cell_tasks", "gauge", "Tasks in the cell cgroup (pids.current).");
  ForEachCell(cells, [&](const CellSnapshot& s, const std::string& l) {
    if (s.cgroup && s.cgroup->has_pids) w.Sample(l, s.cgroup->pids_current);
  });
  return out;
}

}  // namespace bulkhead::control
