// SPDX-License-Identifier: MIT
// FormatStatusTable (see status_table.h). Field checks throw FieldError, caught in
// FormatStatusTable and returned as a Status: nothing throws out of this file.
#include "ctl/status_table.h"

#include <algorithm>
#include <cstdint>
#include <vector>

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

Row CellRow(const nlohmann::json& cell, bool with_last_exit) {
  Row row = {
      Text(cell, "name"),
      Text(cell, "state"),
      UnsignedOrDash(cell, "pid"),
      Unsigned(cell, "running") + "/" + Unsigned(cell, "max_concurrent"),
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

}  // namespace

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
    return Render(rows);
  } catch (const FieldError& e) {
    std::string where = "status response: cells[" + std::to_string(index) + "]";
    if (!e.key.empty()) where += "." + e.key;
    return Status::Error(where + ": " + e.problem);
  }
}

}  // namespace bulkhead::ctl
