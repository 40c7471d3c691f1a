// SPDX-License-Identifier: MIT
// MetricsText: every cell's figures in the Prometheus text exposition format, version 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/). Every metric is listed in
// docs/metrics.md. Served by MetricsServer (`GET /metrics`) and by the control command `metrics`
// (`bulkheadctl metrics`). Pure function; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "control/cell_snapshot.h"

namespace bulkhead::control {

// The Content-Type of MetricsText's output.
inline constexpr char kMetricsContentType[] = "text/plain; version=0.0.4; charset=utf-8";

// The supervisor's config reloads since it started (SIGHUP and the control command `reload`):
// applied (the plan ran, even when a limit it wrote is not in force) or refused (nothing changed:
// an invalid file or a refused change). Rendered as bulkhead_config_reloads_total{result} and
// bulkhead_config_last_reload_successful (docs/metrics.md).
struct ReloadCounts {
  uint64_t applied = 0;
  uint64_t refused = 0;
  bool last_refused = false;  // the latest reload was refused; false before any reload
};

// The access log's lines since bulkheadd started (proxy/access_log.h): made (one per answered
// request), and among them not written (AccessLog::dropped: its buffer full, or refused by the
// destination). Rendered as bulkhead_access_log_lines_total and
// bulkhead_access_log_dropped_total, only when the log is open (docs/metrics.md).
struct AccessLogCounts {
  bool open = false;
  uint64_t lines = 0;
  uint64_t dropped = 0;
};

// One family after another, each under its "# HELP" and "# TYPE" lines: the supervisor's own
// (`reloads` and `access_log`, without a `cell` label), then one sample per cell (label `cell`, in
// `cells` order) or per cell and reason. Families that have no sample (the cgroup figures when no
// cell has a cgroup) are left out. Ends with '\n'.
std::string MetricsText(const std::vector<CellSnapshot>& cells, const ReloadCounts& reloads = {},
                        const AccessLogCounts& access_log = {});

// A label value escaped as the format asks: '\\' -> "\\\\", '"' -> "\\\"", newline -> "\\n".
std::string EscapeLabelValue(std::string_view value);

}  // namespace bulkhead::control
