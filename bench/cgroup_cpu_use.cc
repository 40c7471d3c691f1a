// SPDX-License-Identifier: MIT
#include "bench/cgroup_cpu_use.h"

#include <algorithm>
#include <cstdio>

namespace bulkhead::bench {

CgroupCpuUse CgroupCpuUse::Of(const nlohmann::json& cell_json) {
  CgroupCpuUse use;
  if (!cell_json.is_object() || !cell_json.contains("cgroup") || !cell_json["cgroup"].is_object()) {
    return use;
  }
  const nlohmann::json& k = cell_json["cgroup"];
  use.usage_us = k.value("cpu_usage_usec", uint64_t{0});
  use.periods = k.value("cpu_nr_periods", uint64_t{0});
  use.throttled = k.value("cpu_nr_throttled", uint64_t{0});
  if (cell_json.contains("limits") && cell_json["limits"].is_object()) {
    const nlohmann::json& limits = cell_json["limits"];
    const double period = limits.value("cpu_period_us", 100'000.0);
    if (limits.contains("cpu_quota_us") && limits["cpu_quota_us"].is_number() && period > 0) {
      use.quota_share = limits["cpu_quota_us"].get<double>() / period;
    }
  }
  use.read = true;
  return use;
}

void CgroupCpuUse::Add(const CgroupCpuUse& before, const CgroupCpuUse& after,
                       double round_seconds) {
  if (!before.read || !after.read || after.usage_us < before.usage_us) return;
  read = true;
  usage_us += after.usage_us - before.usage_us;
  periods += after.periods - std::min(after.periods, before.periods);
  throttled += after.throttled - std::min(after.throttled, before.throttled);
  seconds += round_seconds;
  quota_share = after.quota_share;
}

std::string CgroupCpuUse::Describe() const {
  if (!read || seconds <= 0) return "";
  const double cpus = static_cast<double>(usage_us) / (seconds * 1e6);
  char text[128];
  if (quota_share > 0) {
    std::snprintf(
        text, sizeof text, "cpu %.3f, quota used %.2f, throttled %.2f of periods", cpus,
        cpus / quota_share,
        periods > 0 ? static_cast<double>(throttled) / static_cast<double>(periods) : 0.0);
  } else {
    std::snprintf(text, sizeof text, "cpu %.3f", cpus);
  }
  return text;
}

}  // namespace bulkhead::bench
