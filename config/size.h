// SPDX-License-Identifier: MIT
// ParseSize: the size strings of the config file ("512K", "256M", "1G") to bytes, for the cgroup v2
// memory limits. Pure function; thread-safe.
#pragma once

#include <cstdint>
#include <string_view>

#include "base/status.h"

namespace bulkhead::config {

// The largest size ParseSize accepts, in bytes: the largest TOML integer, so that both forms of a
// size key (integer bytes and strings) have the same range. Just under 8 EiB.
inline constexpr uint64_t kMaxSizeBytes = 9'223'372'036'854'775'807;

// The accepted forms of a size key, for error messages.
inline constexpr std::string_view kSizeForms =
    "expected bytes as a TOML integer without quotes (1048576), or a string <integer><unit> such "
    "as \"512K\", \"256M\", \"1G\" or \"1T\" (units K, M, G, T or Ki, Mi, Gi, Ti, all powers of "
    "1024)";

// Parses "<integer><unit>", units K, M, G, T or Ki, Mi, Gi, Ti, all powers of 1024 (as systemd's
// MemoryMax=): "512K" = 524288, "256M", "1G", "1Ti", "0M" = 0. Refused: an empty string, a bare
// number ("1048576": bytes are a TOML integer, not a string), a sign, decimals ("1.5G": the message
// suggests "1536M" when a smaller unit is exact), spaces, a '#' (a comment inside the quotes),
// other units ("32Mb", "1g", "1GB": the message suggests the fix), "max" (no limit is an unset
// key), and anything above kMaxSizeBytes. Never overflows, however many digits. On failure the
// message names the problem and shows the accepted forms.
Result<uint64_t> ParseSize(std::string_view text);

}  // namespace bulkhead::config
