// SPDX-License-Identifier: MIT
// FormatStatusTable (see status_table.h). Field checks throw FieldError, caught in
// FormatStatusTable and returned as a Status: nothing throws out of this file.
#include "ctl/status_table.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <iterator>
#include <vector>

#include "ctl/lifecycle_wait.h"

namespace bulkhead::ctl {
namespace {

using Row = std::vector<std::string>;

// A cell field that is missing or of the wrong type.
struct FieldError {
  std::string key;
  std::string problem;
};

const nlohmann::json& Field(const nlohmann::json& cell, const char* key) {
  if (!cell.is_object()) throw FieldError{"", "not an object"};
  auto it = cell.find(key);
  if (it == cell.end()) throw FieldError{key, "missing"};
  return *it;
}

std::string Text(const nlohmann::json& cell, const char* key) {
  const nlohmann::json& value = Field(cell, key);
  if (!value.is_string()) throw FieldError{key, "not a string"};
  return value.get<std::string>();
}

std::string Unsigned(const nlohmann::json& cell, const char* key) {
  const nlohmann::json& value = Field(cell, key);
  // A parsed non-negative integer is number_unsigned; one built in code may be number_integer.
  const bool non_negative =
      value.is_number_unsigned() || (value.is_number_integer() && value.get<int64_t>() >= 0);
  if (!non_negative) throw FieldError{key, "not an unsigned integer"};
  return std::to_string(value.get<uint64_t>());
}

// "-" when null.
std::string TextOrDash(const nlohmann::json& cell, const char* key) {
  if (Field(cell, key).is_null()) return "-";
  return Text(cell, key);
}

std::string UnsignedOrDash(const nlohmann::json& cell, const char* key) {
  if (Field(cell, key).is_null()) return "-";
  return Unsigned(cell, key);
}

// The concurrency limit in force: an adaptive cell's current limit ("concurrency"."limit"), not
// its ceiling ("max_concurrent"); older bulkheadd have no "concurrency" (every cell fixed).
std::string LimitInForce(const nlohmann::json& cell) {
  auto concurrency = cell.find("concurrency");
  if (concurrency == cell.end() || !concurrency->is_object()) {
    return Unsigned(cell, "max_concurrent");
  }
  try {
    return Unsigned(*concurrency, "limit");
  } catch (const FieldError& error) {
    throw FieldError{"concurrency." + error.key, error.problem};
  }
}

Row CellRow(const nlohmann::json& cell, bool with_last_exit) {
  Row row = {
      Text(cell, "name"),
      Text(cell, "state"),
      UnsignedOrDash(cell, "pid"),
      Unsigned(cell, "running") + "/" + LimitInForce(cell),
      Unsigned(cell, "queued") + "/" + Unsigned(cell, "max_queue"),
      Unsigned(cell, "ok"),
      Unsigned(cell, "rejected"),
      Unsigned(cell, "failed"),
      Unsigned(cell, "restarts"),
  };
  if (with_last_exit) row.push_back(TextOrDash(cell, "last_exit"));
  return row;
}

std::string Render(const std::vector<Row>& rows) {
  std::vector<size_t> widths(rows.front().size(), 0);
  for (const Row& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  std::string out;
  for (const Row& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) {
      out += row[c];
      if (c + 1 < row.size()) out.append(widths[c] - row[c].size() + 2, ' ');
    }
    out += '\n';
  }
  return out;
}

// 1536 -> "1.5K", 67108864 -> "64M": IEC units, one decimal below 10.
std::string Bytes(uint64_t bytes) {
  static const char* kUnits[] = {"B", "K", "M", "G", "T", "P"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  char out[32];
  if (unit == 0 || value >= 10) {
    std::snprintf(out, sizeof out, "%.0f%s", value, kUnits[unit]);
  } else {
    std::snprintf(out, sizeof out, "%.1f%s", value, kUnits[unit]);
  }
  return out;
}

std::string Seconds(uint64_t usec) {
  char out[32];
  std::snprintf(out, sizeof out, "%.1fs", static_cast<double>(usec) / 1e6);
  return out;
}

uint64_t Number(const nlohmann::json& object, const char* key) {
  const nlohmann::json& value = Field(object, key);
  if (!value.is_number_unsigned() && !(value.is_number_integer() && value.get<int64_t>() >= 0)) {
    throw FieldError{key, "not an unsigned integer"};
  }
  return value.get<uint64_t>();
}

// "max" when null (no limit).
std::string LimitOr(const nlohmann::json& object, const char* key,
                    const std::function<std::string(uint64_t)>& format) {
  if (Field(object, key).is_null()) return "max";
  return format(Number(object, key));
}

Row CompartmentRow(const nlohmann::json& cell) {
  // Without a cgroup nothing is enforced; with one, the figures (NOT ENFORCED names the gaps).
  if (!Field(cell, "limits_enforced").get<bool>() && Field(cell, "cgroup").is_null()) {
    return {Text(cell, "name"), "not enforced", "-", "-", "-", "-"};
  }
  const nlohmann::json& limits = Field(cell, "limits");
  const nlohmann::json& kernel = Field(cell, "cgroup");
  if (kernel.is_null()) return {Text(cell, "name"), "-", "-", "-", "-", "-"};
  auto memory = [&]() -> std::string {
    if (Field(kernel, "memory_current").is_null()) return "-";  // no memory controller
    return Bytes(Number(kernel, "memory_current")) + "/" + LimitOr(kernel, "memory_max", Bytes);
  };
  auto tasks = [&]() -> std::string {
    if (Field(kernel, "pids_current").is_null()) return "-";  // no pids controller
    return std::to_string(Number(kernel, "pids_current")) + "/" +
           LimitOr(kernel, "pids_max", [](uint64_t n) { return std::to_string(n); });
  };
  std::string quota = "max";
  if (!Field(limits, "cpu_quota_us").is_null()) {
    double share = 100.0 * static_cast<double>(Number(limits, "cpu_quota_us")) /
                   static_cast<double>(Number(limits, "cpu_period_us"));
    char text[32];
    std::snprintf(text, sizeof text, "%g%%", share);
    quota = text;
  }
  return {
      Text(cell, "name"),
      memory(),
      Seconds(Number(kernel, "cpu_usage_usec")) + "/" + quota,
      Seconds(Number(kernel, "cpu_throttled_usec")),
      tasks(),
      std::to_string(Number(cell, "oom_kills")),
  };
}

// The limits "limits_enforcement" calls "not enforced", comma-separated; "" when none (or when
// the supervisor does not report it).
std::string NotEnforcedLimits(const nlohmann::json& cell) {
  auto it = cell.find("limits_enforcement");
  if (it == cell.end() || !it->is_object()) return {};
  std::string names;
  for (auto limit = it->begin(); limit != it->end(); ++limit) {
    if (!limit.value().is_string() || limit.value().get<std::string>() != "not enforced") continue;
    if (!names.empty()) names += ",";
    names += limit.key();
  }
  return names;
}

}  // namespace

std::string RenderColumns(const std::vector<std::vector<std::string>>& rows) {
  return Render(rows);
}

Result<std::string> FormatStatusTable(const nlohmann::json& response) {
  if (!response.is_object() || !response.contains("cells") || !response["cells"].is_array()) {
    return Status::Error("status response: no \"cells\" array");
  }
  const nlohmann::json& cells = response["cells"];
  size_t index = 0;
  try {
    bool with_last_exit = false;
    for (index = 0; index < cells.size(); ++index) {
      if (TextOrDash(cells[index], "last_exit") != "-") with_last_exit = true;
    }
    std::vector<Row> rows;
    rows.push_back(
        {"CELL", "STATE", "PID", "RUNNING", "QUEUED", "OK", "REJECTED", "FAILED", "RESTARTS"});
    if (with_last_exit) rows.front().push_back("LAST EXIT");
    for (index = 0; index < cells.size(); ++index) {
      rows.push_back(CellRow(cells[index], with_last_exit));
    }
    std::string out = Render(rows);
    // The kernel's side, from supervisors that report it (docs/control.md): one row per cell.
    bool with_compartments = !cells.empty();
    for (index = 0; index < cells.size(); ++index) {
      if (!cells[index].is_object() || !cells[index].contains("limits_enforced")) {
        with_compartments = false;
      }
    }
    if (with_compartments) {
      std::vector<Row> kernel_rows;
      kernel_rows.push_back({"CELL", "MEMORY", "CPU", "THROTTLED", "TASKS", "OOM KILLS"});
      // A cell with a cgroup whose limits are partly in force names the others in a last column.
      bool with_not_enforced = false;
      for (index = 0; index < cells.size(); ++index) {
        if (!Field(cells[index], "cgroup").is_null() && !NotEnforcedLimits(cells[index]).empty()) {
          with_not_enforced = true;
        }
      }
      if (with_not_enforced) kernel_rows.front().push_back("NOT ENFORCED");
      std::vector<std::string> notes;
      for (index = 0; index < cells.size(); ++index) {
        const nlohmann::json& cell = cells[index];
        kernel_rows.push_back(CompartmentRow(cell));
        const bool has_cgroup = !Field(cell, "cgroup").is_null();
        if (with_not_enforced) {
          std::string names = has_cgroup ? NotEnforcedLimits(cell) : std::string();
          kernel_rows.back().push_back(names.empty() ? "-" : names);
        }
        if (!Field(cell, "limits_enforced").get<bool>() && cell.contains("limits_note") &&
            cell["limits_note"].is_string() && !cell["limits_note"].get<std::string>().empty()) {
          // The supervisor-wide reason once; a cell's own reason with its name.
          std::string note = (has_cgroup ? Text(cell, "name") + ": " : std::string()) +
                             cell["limits_note"].get<std::string>();
          if (std::find(notes.begin(), notes.end(), note) == notes.end()) notes.push_back(note);
        }
      }
      out += "\n" + Render(kernel_rows);
      for (const std::string& note : notes) out += "limits not enforced: " + note + "\n";
    }
    // Why each cell that does not serve does not (supervisors that report it).
    std::string details;
    for (index = 0; index < cells.size(); ++index) {
      if (cells[index].is_object() && cells[index].contains("state_detail") &&
          !cells[index]["state_detail"].is_null()) {
        // A held start says when each need in backoff starts next, as `start` does.
        details += Text(cells[index], "name") + ": " + Text(cells[index], "state_detail") +
                   NextStartsOfNeeds(cells[index]) + "\n";
      }
    }
    if (!details.empty()) out += "\n" + details;
    // A re-exec under way, or why the last one failed (docs/reexec.md).
    // Optional: a supervisor that does not say has none to tell.
    std::string reexec;
    auto member = [](const nlohmann::json& object, const char* key) {
      return object.is_object() && object.contains(key) ? object[key] : nlohmann::json();
    };
    const nlohmann::json state = member(member(response, "supervisor"), "reexec");
    const nlohmann::json phase = member(state, "phase");
    if (phase.is_string() && phase.get<std::string>() != "idle") {
      reexec += "re-exec under way: " + phase.get<std::string>() + "\n";
      // A settling names what it waits for, one line each.
      const nlohmann::json waiting = member(state, "waiting_for");
      if (waiting.is_array()) {
        for (const nlohmann::json& why : waiting) {
          if (why.is_string()) reexec += "  waiting for " + why.get<std::string>() + "\n";
        }
      }
    }
    const nlohmann::json error = member(state, "last_error");
    if (error.is_string()) reexec += "last re-exec failed: " + error.get<std::string>() + "\n";
    // A package upgrade replaced the binary and nobody re-executed it yet.
    const nlohmann::json binary = member(state, "binary");
    if (member(state, "binary_replaced") == true && binary.is_string()) {
      reexec += "binary: " + binary.get<std::string>() +
                " replaced on disk since start; `bulkheadctl reexec` runs it\n";
    }
    if (!reexec.empty()) out += "\n" + reexec;
    return out;
  } catch (const FieldError& e) {
    std::string where = "status response: cells[" + std::to_string(index) + "]";
    if (!e.key.empty()) where += "." + e.key;
    return Status::Error(where + ": " + e.problem);
  }
}

}  // namespace bulkhead::ctl
