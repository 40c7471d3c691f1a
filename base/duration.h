// SPDX-License-Identifier: MIT
// ParseDuration: the duration strings of the config file ("500ms", "2s", "1m30s") to milliseconds.
// Pure function; thread-safe.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace bulkhead {

// The longest duration ParseDuration accepts: 24h.
inline constexpr std::chrono::milliseconds kMaxDuration = std::chrono::hours(24);

// Parses one or more <integer><unit> groups with no separator, units h, m, s and ms, largest unit
// first, each unit at most once, and each group after the first less than one of the unit of the
// group before it (as a clock reads): "500ms", "2s", "1m30s", "1h90s", "1h", "0s"; the first group
// may be any size ("90s"). Refused: an empty string, a sign, decimals, spaces, a bare number
// ("5"), unknown units ("5sec"), units out of order or repeated ("30s1m", "500ms1s"), a group that
// should have been carried ("1m90s", "23h60m", "1s1500ms"), and anything longer than
// kMaxDuration. Never overflows, however many digits. Not systemd.time(7)'s rule (any order,
// summed): one spelling per value in the file and in its errors, and "1m90s" is more often a slip
// than a sum. On failure the message names the problem, the text to write instead when
// SuggestDuration has one (`decimals are not allowed; write "1500ms"`, `... write "2m30s"` for
// "1m90s"), a bare number's reading as seconds (`write "5s" for seconds`; as ms when that is over
// kMaxDuration) or, for decimals finer than a millisecond, the nearest whole ms (`durations are
// whole milliseconds: the nearest is "1s"` for "1.0001s"), and the accepted form.
Result<std::chrono::milliseconds> ParseDuration(std::string_view text);

// The accepted form of a duration written as people often write one: decimals ("1.5s" ->
// "1500ms", "0.5m" -> "30s"), longer or upper-case unit names ("3sec", "2 mins", "1 hour", "5S"
// -> "3s", "2m", "1h", "5s"), blanks between and around groups ("3 s", "1h 30m"). Units may come in
// any order. Whole numbers with their units largest first, each once and each after the first less
// than one of the unit before it, are kept as written ("90S" -> "90s", not "1m30s"); otherwise the
// total is written anew ("30s1m" -> "1m30s", "1m90s" -> "2m30s"). A value that
// is no whole number of ms, longer than kMaxDuration, or with a unit that names no duration has
// none. nullopt as well when ParseDuration accepts `text` as it is.
std::optional<std::string> SuggestDuration(std::string_view text);

}  // namespace bulkhead
