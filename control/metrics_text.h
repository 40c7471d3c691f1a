// SPDX-License-Identifier: MIT
// MetricsText: every cell's figures in the Prometheus text exposition format, version 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/). Every metric is listed in
// docs/metrics.md. Served by MetricsServer (`GET /metrics`) and by the control command `metrics`
// (`bulkheadctl metrics`). Pure function; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "control/cell_snapshot.h"

namespace bulkhead::control {

// The Content-Type of MetricsText's output.
inline constexpr char kMetricsContentType[] = "text/plain; version=0.0.4; charset=utf-8";

// One family after another, each under its "# HELP" and "# TYPE" lines, one sample per cell (label
// `cell`, in `cells` order) or per cell and reason. Families that have no sample (the cgroup
// figures when no cell has a cgroup) are left out. Ends with '\n'.
std::string MetricsText(const std::vector<CellSnapshot>& cells);

// A label value escaped as the format asks: '\\' -> "\\\\", '"' -> "\\\"", newline -> "\\n".
std::string EscapeLabelValue(std::string_view value);

}  // namespace bulkhead::control
