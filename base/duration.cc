// SPDX-License-Identifier: MIT
// ParseDuration: a hand-written scanner over <integer><unit> groups; no allocation on success.
// Pure function; thread-safe.
#include "base/duration.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "base/ascii.h"

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

Status Refuse(std::string_view text, std::string_view problem) {
  std::string message = "invalid duration \"";
  message.append(text);
  message += "\": ";
  message.append(problem);
  message += "; ";
  message.append(kAcceptedForm);
  return Status::Error(std::move(message));
}

constexpr std::string_view kDecimals = "decimals are not allowed";

// The problem with `text` as a duration ("" when there is none: then *ms holds its value).
std::string Scan(std::string_view text, int64_t* ms) {
  if (text.empty()) return "empty";
  for (char c : text) {
    if (IsAsciiSpace(c)) return "spaces are not allowed";
  }
  if (text.front() == '+' || text.front() == '-') return "a sign is not allowed";

  int64_t total_ms = 0;  // Saturates at kLimitMs + 1.
  size_t next_unit = 0;  // Index in kUnits of the largest unit still allowed.
  size_t i = 0;
  while (i < text.size()) {
    // The number: one or more digits, value saturating just above the limit.
    const size_t number_begin = i;
    int64_t number = 0;
    while (i < text.size() && IsAsciiDigit(text[i])) {
      number = std::min<int64_t>(number * 10 + (text[i] - '0'), kLimitMs + 1);
      ++i;
    }
    const std::string_view digits = text.substr(number_begin, i - number_begin);
    if (i < text.size() && (text[i] == '.' || text[i] == ',')) {
      return std::string(kDecimals);
    }

    // The unit: a run of letters.
    const size_t unit_begin = i;
    while (i < text.size() && IsAsciiLetter(text[i])) ++i;
    const std::string_view unit = text.substr(unit_begin, i - unit_begin);

    if (digits.empty() && unit.empty()) {
      return std::string("unexpected character '" + std::string(1, text[i]) + "'");
    }
    if (digits.empty()) {
      return std::string("missing number before unit \"" + std::string(unit) + "\"");
    }
    if (unit.empty()) {
      if (number_begin == 0 && i == text.size()) {
        return std::string("a unit is required, a bare number is ambiguous");
      }
      return std::string("missing unit after \"" + std::string(digits) + "\"");
    }

    size_t unit_index = kUnits.size();
    for (size_t u = 0; u < kUnits.size(); ++u) {
      if (kUnits[u].name == unit) unit_index = u;
    }
    if (unit_index == kUnits.size()) {
      return std::string("unknown unit \"" + std::string(unit) + "\"");
    }
    if (unit_index < next_unit) {
      return std::string("units must go from largest to smallest, each at most once");
    }
    // "1m90s": a group after another is less than one of that one's unit, as a clock reads. A group
    // over kMaxDuration by itself is refused as that, below.
    const int64_t group_ms = number * kUnits[unit_index].ms;
    if (next_unit > 0 && group_ms >= kUnits[next_unit - 1].ms && group_ms <= kLimitMs) {
      const std::string before(kUnits[next_unit - 1].name);
      return "\"" + std::string(digits) + std::string(unit) + "\" is 1" + before +
             " or more, after a group in " + before +
             " (a group must be less than one of the unit before it)";
    }
    next_unit = unit_index + 1;
    total_ms = std::min<int64_t>(total_ms + number * kUnits[unit_index].ms, kLimitMs + 1);
  }
  if (total_ms > kLimitMs) return std::string("longer than the maximum of 24h");
  *ms = total_ms;
  return {};
}

// A unit as people write it ("sec", "Minutes", "HR"): its ms, 0 when it names none. "M" alone is
// a size's unit (mebibytes) more often than minutes: none.
int64_t UnitMs(std::string_view word) {
  if (word == "M") return 0;
  const std::string lower = ToLowerAscii(word);
  struct Alias {
    std::string_view name;
    int64_t ms;
  };
  static constexpr Alias kAliases[] = {
      {"h", 3'600'000},     {"hr", 3'600'000},   {"hrs", 3'600'000}, {"hour", 3'600'000},
      {"hours", 3'600'000}, {"m", 60'000},       {"min", 60'000},    {"mins", 60'000},
      {"minute", 60'000},   {"minutes", 60'000}, {"s", 1'000},       {"sec", 1'000},
      {"secs", 1'000},      {"second", 1'000},   {"seconds", 1'000}, {"ms", 1},
      {"msec", 1},          {"msecs", 1},        {"millisecond", 1}, {"milliseconds", 1},
  };
  for (const Alias& alias : kAliases) {
    if (alias.name == lower) return alias.ms;
  }
  return 0;
}

// `ms` in the accepted form, largest unit first; a part below a second is written in ms with the
// seconds ("1500ms", "1m1500ms"), as people read "1.5s".
std::string FormatDuration(int64_t ms) {
  if (ms == 0) return "0s";
  const int64_t hours = ms / 3'600'000;
  const int64_t minutes = ms % 3'600'000 / 60'000;
  int64_t seconds = ms % 60'000 / 1'000;
  int64_t rest = ms % 1'000;
  if (rest != 0) {
    rest += seconds * 1'000;
    seconds = 0;
  }
  std::string out;
  if (hours != 0) out += std::to_string(hours) + "h";
  if (minutes != 0) out += std::to_string(minutes) + "m";
  if (seconds != 0) out += std::to_string(seconds) + "s";
  if (rest != 0) out += std::to_string(rest) + "ms";
  return out;
}

// The accepted name of the unit of `ms` milliseconds (one of kUnits).
std::string_view UnitName(int64_t ms) {
  for (const Unit& unit : kUnits) {
    if (unit.ms == ms) return unit.name;
  }
  return "";
}

// The accepted form of `text` (see SuggestDuration). With `round`, a value that is no whole
// number of ms is rounded to the nearest (half up), and *rounded says so; a value that rounds to
// 0 from above has none (0 turns many timeouts off).
std::optional<std::string> Suggest(std::string_view text, bool round, bool* rounded) {
  *rounded = false;
  int64_t accepted = 0;
  if (Scan(text, &accepted).empty()) return std::nullopt;
  // Whole numbers with units largest first, each once ("90S", "2 mins", "1h 30min") keep their
  // numbers, with the units' accepted names: "90s", not "1m30s".
  std::string as_written;
  int64_t last_unit = INT64_MAX;
  int64_t total = 0;
  bool any = false;
  bool nonzero_fraction = false;
  size_t i = 0;
  auto skip_blanks = [&] {
    while (i < text.size() && IsAsciiSpace(text[i])) ++i;
  };
  skip_blanks();
  while (i < text.size()) {
    // <digits>[(.|,)<digits>] <blanks> <unit>
    int64_t whole = 0;
    const size_t whole_begin = i;
    while (i < text.size() && IsAsciiDigit(text[i])) {
      whole = std::min<int64_t>(whole * 10 + (text[i] - '0'), kLimitMs + 1);
      ++i;
    }
    if (i == whole_begin) return std::nullopt;
    int64_t fraction = 0;
    int64_t scale = 1;
    if (i < text.size() && (text[i] == '.' || text[i] == ',')) {
      ++i;
      const size_t fraction_begin = i;
      while (i < text.size() && IsAsciiDigit(text[i])) {
        // Past as many digits as any unit has ms, a digit changes no whole ms: rounding ignores
        // it; an exact suggestion has none.
        if (scale > 1'000'000'000) {
          if (!round) return std::nullopt;
          nonzero_fraction = nonzero_fraction || text[i] != '0';
          ++i;
          continue;
        }
        fraction = fraction * 10 + (text[i] - '0');
        scale *= 10;
        ++i;
      }
      if (i == fraction_begin) return std::nullopt;
    }
    skip_blanks();
    const size_t unit_begin = i;
    while (i < text.size() && IsAsciiLetter(text[i])) ++i;
    const int64_t unit = UnitMs(text.substr(unit_begin, i - unit_begin));
    if (unit == 0) return std::nullopt;
    int64_t part = fraction * unit / scale;
    if (fraction * unit % scale != 0) {  // not a whole number of ms
      if (!round) return std::nullopt;
      *rounded = true;
      if (2 * (fraction * unit % scale) >= scale) ++part;
    }
    nonzero_fraction = nonzero_fraction || fraction != 0;
    // A group after the first that is one of the unit before it or more ("1m90s") is carried.
    if (scale == 1 && unit < last_unit && (last_unit == INT64_MAX || whole * unit < last_unit)) {
      as_written += std::to_string(whole);
      as_written.append(UnitName(unit));
      last_unit = unit;
    } else {
      last_unit = 0;  // a decimal, or units out of order or repeated: the sum is written anew
    }
    total = std::min<int64_t>(total + whole * unit + part, kLimitMs + 1);
    any = true;
    skip_blanks();
  }
  if (!any || total > kLimitMs || (total == 0 && nonzero_fraction)) return std::nullopt;
  return last_unit > 0 ? as_written : FormatDuration(total);
}

}  // namespace

Result<milliseconds> ParseDuration(std::string_view text) {
  int64_t ms = 0;
  std::string problem = Scan(text, &ms);
  if (problem.empty()) return milliseconds(ms);
  bool rounded = false;
  if (std::optional<std::string> suggestion = Suggest(text, /*round=*/true, &rounded)) {
    problem += rounded
                   ? "; durations are whole milliseconds: the nearest is \"" + *suggestion + "\""
                   : "; write \"" + *suggestion + "\"";
  } else if (problem == kDecimals) {
    problem += "; durations are whole milliseconds";
  } else if (!text.empty() && std::all_of(text.begin(), text.end(), IsAsciiDigit)) {
    // A bare number (`--watch 5`, `timeout = "5"`): as seconds, as systemd.time(7) reads one, when
    // that is not too long; else as milliseconds.
    int64_t number = 0;
    for (char c : text) number = std::min<int64_t>(number * 10 + (c - '0'), kLimitMs + 1);
    if (number <= kLimitMs / 1'000) {
      problem += "; write \"" + std::to_string(number) + "s\" for seconds";
    } else if (number <= kLimitMs) {
      problem += "; write \"" + std::to_string(number) + "ms\" for milliseconds";
    }
  }
  return Refuse(text, problem);
}

std::optional<std::string> SuggestDuration(std::string_view text) {
  bool rounded = false;
  return Suggest(text, /*round=*/false, &rounded);
}

}  // namespace bulkhead
