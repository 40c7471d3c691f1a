// SPDX-License-Identifier: MIT
// ParseDuration: the duration strings of the config file ("500ms", "2s", "1m30s") to milliseconds.
// Pure function; thread-safe.
#pragma once

#include <chrono>
#include <string_view>

#include "base/status.h"

namespace bulkhead {

// The longest duration ParseDuration accepts: 24h.
inline constexpr std::chrono::milliseconds kMaxDuration = std::chrono::hours(24);

// Parses one or more <integer><unit> groups with no separator, units h, m, s and ms, largest unit
// first and each unit at most once: "500ms", "2s", "1m30s", "1h", "0s". Refused: an empty string,
// a sign, decimals, spaces, a bare number ("5"), unknown units ("5sec"), units out of order or
// repeated ("30s1m"), and anything longer than kMaxDuration. Never overflows, however many digits.
// On failure the message names the problem and shows the accepted form.
Result<std::chrono::milliseconds> ParseDuration(std::string_view text);

}  // namespace bulkhead
