// SPDX-License-Identifier: MIT
// ParseDuration (see duration.h): one pass over <integer><unit> groups.
#include "ctl/duration.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

namespace bulkhead::ctl {
namespace {

struct Unit {
  std::string_view name;
  int64_t ms;
};
// Largest first: each group's unit must come later in this table than the previous group's.
constexpr std::array<Unit, 4> kUnits = {{{"h", 3'600'000}, {"m", 60'000}, {"s", 1'000}, {"ms", 1}}};
// Values saturate just above the limit, so no sum or product can overflow.
constexpr int64_t kLimitMs = kMaxDuration.count();

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

Status Refuse(std::string_view text, std::string_view problem) {
  return Status::Error("invalid duration \"" + std::string(text) + "\": " + std::string(problem) +
                       "; expected <integer><unit> groups such as \"500ms\", \"2s\" or \"1m30s\" "
                       "(units h, m, s, ms)");
}

}  // namespace

Result<std::chrono::milliseconds> ParseDuration(std::string_view text) {
  if (text.empty()) return Refuse(text, "empty");
  int64_t total_ms = 0;
  size_t next_unit = 0;  // index in kUnits of the largest unit still allowed
  size_t i = 0;
  while (i < text.size()) {
    const size_t digits_begin = i;
    int64_t number = 0;
    while (i < text.size() && IsDigit(text[i])) {
      number = std::min<int64_t>(number * 10 + (text[i] - '0'), kLimitMs + 1);
      ++i;
    }
    const size_t unit_begin = i;
    while (i < text.size() && IsLetter(text[i])) ++i;
    const std::string_view unit = text.substr(unit_begin, i - unit_begin);
    if (unit_begin == digits_begin) {
      if (unit.empty())
        return Refuse(text, "unexpected character '" + std::string(1, text[i]) + "'");
      return Refuse(text, "missing number before unit \"" + std::string(unit) + "\"");
    }
    if (unit.empty()) {
      return Refuse(text,
                    i == text.size() && digits_begin == 0 ? "a unit is required" : "missing unit");
    }
    const auto found =
        std::find_if(kUnits.begin(), kUnits.end(), [&](const Unit& u) { return u.name == unit; });
    if (found == kUnits.end()) return Refuse(text, "unknown unit \"" + std::string(unit) + "\"");
    const size_t index = static_cast<size_t>(found - kUnits.begin());
    if (index < next_unit) return Refuse(text, "units must go from largest to smallest, once each");
    next_unit = index + 1;
    total_ms = std::min<int64_t>(total_ms + number * found->ms, kLimitMs + 1);
  }
  if (total_ms > kLimitMs) return Refuse(text, "longer than the maximum of 24h");
  return std::chrono::milliseconds(total_ms);
}

}  // namespace bulkhead::ctl
