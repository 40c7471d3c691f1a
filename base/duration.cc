// SPDX-License-Identifier: MIT
// ParseDuration: a hand-written scanner over <integer><unit> groups; no allocation on success.
// Pure function; thread-safe.
#include "base/duration.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

namespace bulkhead {
namespace {

using std::chrono::milliseconds;

constexpr std::string_view kAcceptedForm =
    "expected one or more <integer><unit> groups, largest unit first, such as \"500ms\", \"2s\" "
    "or \"1m30s\" (units: h, m, s, ms)";

struct Unit {
  std::string_view name;
  int64_t ms;
};
// Largest first: a group's unit must come later in this table than the previous group's unit.
constexpr std::array<Unit, 4> kUnits = {{{"h", 3'600'000}, {"m", 60'000}, {"s", 1'000}, {"ms", 1}}};

// Any value above this is refused; saturating at it keeps every product and sum within int64_t.
constexpr int64_t kLimitMs = kMaxDuration.count();

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

Status Refuse(std::string_view text, std::string_view problem) {
  std::string message = "invalid duration \"";
  message.append(text);
  message += "\": ";
  message.append(problem);
  message += "; ";
  message.append(kAcceptedForm);
  return Status::Error(std::move(message));
}

}  // namespace

Result<milliseconds> ParseDuration(std::string_view text) {
  if (text.empty()) return Refuse(text, "empty");
  for (char c : text) {
    if (IsSpace(c)) return Refuse(text, "spaces are not allowed");
  }
  if (text.front() == '+' || text.front() == '-') return Refuse(text, "a sign is not allowed");

  int64_t total_ms = 0;  // Saturates at kLimitMs + 1.
  size_t next_unit = 0;  // Index in kUnits of the largest unit still allowed.
  size_t i = 0;
  while (i < text.size()) {
    // The number: one or more digits, value saturating just above the limit.
    const size_t number_begin = i;
    int64_t number = 0;
    while (i < text.size() && IsDigit(text[i])) {
      number = std::min<int64_t>(number * 10 + (text[i] - '0'), kLimitMs + 1);
      ++i;
    }
    const std::string_view digits = text.substr(number_begin, i - number_begin);
    if (i < text.size() && (text[i] == '.' || text[i] == ',')) {
      return Refuse(text,
                    "decimals are not allowed; use a smaller unit (\"1500ms\", not \"1.5s\")");
    }

    // The unit: a run of letters.
    const size_t unit_begin = i;
    while (i < text.size() && IsLetter(text[i])) ++i;
    const std::string_view unit = text.substr(unit_begin, i - unit_begin);

    if (digits.empty() && unit.empty()) {
      return Refuse(text, "unexpected character '" + std::string(1, text[i]) + "'");
    }
    if (digits.empty()) {
      return Refuse(text, "missing number before unit \"" + std::string(unit) + "\"");
    }
    if (unit.empty()) {
      if (number_begin == 0 && i == text.size()) {
        return Refuse(text, "a unit is required, a bare number is ambiguous");
      }
      return Refuse(text, "missing unit after \"" + std::string(digits) + "\"");
    }

    size_t unit_index = kUnits.size();
    for (size_t u = 0; u < kUnits.size(); ++u) {
      if (kUnits[u].name == unit) unit_index = u;
    }
    if (unit_index == kUnits.size()) {
      return Refuse(text, "unknown unit \"" + std::string(unit) + "\"");
    }
    if (unit_index < next_unit) {
      return Refuse(text, "units must go from largest to smallest, each at most once");
    }
    next_unit = unit_index + 1;
    total_ms = std::min<int64_t>(total_ms + number * kUnits[unit_index].ms, kLimitMs + 1);
  }
  if (total_ms > kLimitMs) return Refuse(text, "longer than the maximum of 24h");
  return milliseconds(total_ms);
}

}  // namespace bulkhead
