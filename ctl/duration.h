// SPDX-License-Identifier: MIT
// ParseDuration for bulkheadctl's --timeout: the duration syntax of the config file ("500ms", "2s",
// "1m30s"; docs/config.md), computed again because ctl/ may not link config/.
// tests/ctl/duration_test.cc checks that it accepts and refuses exactly what config::ParseDuration
// does. Pure function; thread-safe.
#pragma once

#include <chrono>
#include <string_view>

#include "base/status.h"

namespace bulkhead::ctl {

// The longest duration accepted: 24h, as in the config.
inline constexpr std::chrono::milliseconds kMaxDuration = std::chrono::hours(24);

// One or more <integer><unit> groups with no separator, units h, m, s and ms, largest unit first
// and each at most once. Refused: an empty string, signs, decimals, spaces, a bare number, unknown
// units, units out of order or repeated, and anything over kMaxDuration. Never overflows. The
// error message quotes `text` and shows the accepted form.
Result<std::chrono::milliseconds> ParseDuration(std::string_view text);

}  // namespace bulkhead::ctl
