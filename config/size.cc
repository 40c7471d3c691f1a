// SPDX-License-Identifier: MIT
// ParseSize: a hand-written scanner over one <integer><unit> group, with hints for the usual
// mistakes. Pure function; thread-safe.
#include "config/size.h"

#include <algorithm>
#include <array>
#include <string>

#include "base/ascii.h"
namespace bulkhead::config {
namespace {

struct Unit {
  std::string_view name;
  int shift;  // The unit is 1 << shift bytes.
};
constexpr std::array<Unit, 8> kUnits = {
    {{"K", 10}, {"M", 20}, {"G", 30}, {"T", 40}, {"Ki", 10}, {"Mi", 20}, {"Gi", 30}, {"Ti", 40}}};
// For decimal hints: the unit of 1 << shift bytes, for shift 10, 20, 30, is kSmallerUnit[shift /
// 10].
constexpr std::array<std::string_view, 4> kSmallerUnit = {"", "K", "M", "G"};

const Unit* FindUnit(std::string_view name) {
  for (const Unit& unit : kUnits) {
    if (unit.name == name) return &unit;
  }
  return nullptr;
}

Status Refuse(std::string_view text, std::string_view problem) {
  std::string message = "invalid size \"";
  message.append(text);
  message += "\": ";
  message.append(problem);
  message += "; ";
  message.append(kSizeForms);
  return Status::Error(std::move(message));
}

// A unit as people often write it, made valid: "Mb", "MB", "mb" -> "M"; "GiB" -> "Gi"; "g" -> "G".
// "" when there is no obvious fix.
std::string FixUnit(std::string_view unit) {
  std::string fixed(unit);
  if (fixed.size() > 1 && (fixed.back() == 'B' || fixed.back() == 'b')) fixed.pop_back();
  if (!fixed.empty()) fixed.front() = ToUpperAscii(fixed.front());
  if (fixed.size() == 2 && fixed[1] == 'I') fixed[1] = 'i';
  return FindUnit(fixed) != nullptr ? fixed : "";
}

// The hint for "<whole>.<fraction><unit>": the same size in the largest smaller unit that makes it
// whole ("1.5G" -> "1536M"), or in bytes; a general hint when none does.
std::string DecimalHint(std::string_view text, std::string_view whole, std::string_view fraction,
                        const Unit& unit) {
  std::string general = "decimals are not allowed; use a smaller unit (\"1536M\", not \"1.5G\")";
  // Beyond these lengths the exact arithmetic below could overflow; such sizes get the general
  // hint.
  if (whole.size() > 12 || fraction.empty() || fraction.size() > 12) return general;
  unsigned __int128 scaled = 0;  // whole.fraction × 10^fraction.size()
  for (char c : whole) scaled = scaled * 10 + static_cast<unsigned>(c - '0');
  for (char c : fraction) scaled = scaled * 10 + static_cast<unsigned>(c - '0');
  unsigned __int128 denominator = 1;
  for (size_t i = 0; i < fraction.size(); ++i) denominator *= 10;
  for (int shift = unit.shift - 10; shift >= 0; shift -= 10) {
    const unsigned __int128 numerator = scaled << (unit.shift - shift);
    if (numerator % denominator != 0) continue;
    const auto value = static_cast<uint64_t>(numerator / denominator);
    if (value > kMaxSizeBytes) return general;
    if (shift == 0) {
      return "decimals are not allowed; write " + std::to_string(value) +
             " (bytes, a TOML integer without quotes), not \"" + std::string(text) + "\"";
    }
    return "decimals are not allowed; use a smaller unit (\"" + std::to_string(value) +
           std::string(kSmallerUnit[shift / 10]) + "\", not \"" + std::string(text) + "\")";
  }
  return general;
}

}  // namespace

Result<uint64_t> ParseSize(std::string_view text) {
  if (text.empty()) return Refuse(text, "empty");
  if (const size_t hash = text.find('#'); hash != std::string_view::npos) {
    std::string_view before = text.substr(0, hash);
    while (!before.empty() && IsAsciiSpace(before.back())) before.remove_suffix(1);
    return Refuse(text, "a '#' inside the quotes is not a comment; end the string before it: \"" +
                            std::string(before) + "\"  # ...");
  }
  if (std::any_of(text.begin(), text.end(), IsAsciiSpace)) {
    return Refuse(text, "spaces are not allowed");
  }
  if (text.front() == '+' || text.front() == '-') return Refuse(text, "a sign is not allowed");
  if (text == "max" || text == "infinity") {
    return Refuse(text, "leave the key out for no limit");
  }

  // The number: digits, value saturating just above the limit (checked before multiplying, as
  // (kMaxSizeBytes + 1) × 10 does not fit in 64 bits).
  constexpr uint64_t kSaturated = kMaxSizeBytes + 1;
  size_t i = 0;
  uint64_t number = 0;
  while (i < text.size() && IsAsciiDigit(text[i])) {
    const auto digit = static_cast<uint64_t>(text[i] - '0');
    number = number > (kSaturated - digit) / 10 ? kSaturated : number * 10 + digit;
    ++i;
  }
  const std::string_view digits = text.substr(0, i);
  if (i < text.size() && (text[i] == '.' || text[i] == ',')) {
    const size_t fraction_begin = i + 1;
    size_t end = fraction_begin;
    while (end < text.size() && IsAsciiDigit(text[end])) ++end;
    const std::string_view fraction = text.substr(fraction_begin, end - fraction_begin);
    const Unit* unit = FindUnit(text.substr(end));
    if (text[i] == '.' && unit != nullptr && !digits.empty()) {
      return Refuse(text, DecimalHint(text, digits, fraction, *unit));
    }
    return Refuse(text, "decimals are not allowed; use a smaller unit (\"1536M\", not \"1.5G\")");
  }

  // The unit: a run of letters, then nothing.
  const size_t unit_begin = i;
  while (i < text.size() && IsAsciiLetter(text[i])) ++i;
  const std::string_view unit_name = text.substr(unit_begin, i - unit_begin);
  if (digits.empty() && unit_name.empty()) {
    return Refuse(text, "unexpected character '" + std::string(1, text[i]) + "'");
  }
  if (digits.empty()) {
    return Refuse(text, "missing number before unit \"" + std::string(unit_name) + "\"");
  }
  if (i < text.size()) {
    return Refuse(text, "unexpected character '" + std::string(1, text[i]) + "'");
  }
  if (unit_name.empty()) {
    return Refuse(text,
                  "a unit is required in a string; write bytes as a TOML integer without "
                  "quotes (" +
                      std::string(digits) + "), or add a unit");
  }
  const Unit* unit = FindUnit(unit_name);
  if (unit == nullptr) {
    std::string problem = "unknown unit \"" + std::string(unit_name) + "\"";
    const std::string fixed = FixUnit(unit_name);
    if (!fixed.empty()) {
      problem += "; write \"" + std::string(digits) + fixed + "\"";
    }
    return Refuse(text, problem);
  }
  if (number > (kMaxSizeBytes >> unit->shift)) {
    return Refuse(text, "larger than the maximum of " + std::to_string(kMaxSizeBytes) +
                            " bytes (just under 8 EiB)");
  }
  return number << unit->shift;
}

}  // namespace bulkhead::config
