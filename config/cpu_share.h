// SPDX-License-Identifier: MIT
// ParseCpuShare: the CPU share strings of the config file ("50%", "150%", "12.5%"), and CpuQuotaUs,
// the cgroup v2 cpu.max quota a share gives in a period. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string_view>

#include "base/status.h"

namespace bulkhead::config {

// A share is counted in thousandths of a percent of one CPU: "12.5%" is 12500, "150%" is 150000.
inline constexpr uint64_t kCpuShareScale = 1000;
// The largest share ParseCpuShare accepts: 10000000% (100000 CPUs). The config layer then bounds a
// share by the CPUs of the host.
inline constexpr uint64_t kMaxCpuShare = 10'000'000 * kCpuShareScale;

// Parses "<integer>[.<1 to 3 digits>]%": "50%" = half of one CPU, "150%" = 1.5 CPUs, "12.5%",
// "0.125%". Returns thousandths of a percent, > 0. Refused: an empty string, no '%' ("50"), a sign,
// 0%, more than 3 decimals, a ',' as decimal point, spaces, a '#' (a comment inside the quotes),
// anything after the '%', and shares above kMaxCpuShare. Never overflows. On failure the message
// names the problem and shows the accepted form.
Result<uint64_t> ParseCpuShare(std::string_view text);

// The cpu.max quota, in μs of CPU time per `period_us` μs of wall time, of a share in thousandths
// of a percent (cgroup-v2.rst, "cpu.max"): share × period / 100, rounded to the nearest μs. "50%"
// in 100000 μs is 50000 μs. REQUIRES: share <= kMaxCpuShare, period_us <= 1000000.
uint64_t CpuQuotaUs(uint64_t share, uint64_t period_us);

}  // namespace bulkhead::config
