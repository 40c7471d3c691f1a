// SPDX-License-Identifier: MIT
// CgroupCpuUse: the adaptive bench's quota figures from status JSON readings.
#include "bench/cgroup_cpu_use.h"

#include <gtest/gtest.h>

namespace bulkhead::bench {
namespace {

nlohmann::json Cell(uint64_t usage_us, uint64_t periods, uint64_t throttled,
                    nlohmann::json quota_us) {
  return {{"cgroup",
           {{"cpu_usage_usec", usage_us},
            {"cpu_nr_periods", periods},
            {"cpu_nr_throttled", throttled}}},
          {"limits", {{"cpu_quota_us", std::move(quota_us)}, {"cpu_period_us", 100'000}}}};
}

// A 20% quota: 0.18 of a CPU over two rounds of 1 s is 90% of it, throttled in 12 of 20 periods.
TEST(CgroupCpuUse, TheQuotaUsedAndTheThrottledPeriodsOverTheRounds) {
  CgroupCpuUse use;
  EXPECT_EQ(use.Describe(), "");
  use.Add(CgroupCpuUse::Of(Cell(1'000'000, 100, 50, 20'000)),
          CgroupCpuUse::Of(Cell(1'170'000, 110, 56, 20'000)), 1.0);
  use.Add(CgroupCpuUse::Of(Cell(2'000'000, 200, 90, 20'000)),
          CgroupCpuUse::Of(Cell(2'190'000, 210, 96, 20'000)), 1.0);
  EXPECT_EQ(use.Describe(), "cpu 0.180, quota used 0.90, throttled 0.60 of periods");
}

TEST(CgroupCpuUse, WithoutAQuotaOnlyTheCpusAndWithoutACgroupNothing) {
  CgroupCpuUse use;
  use.Add(CgroupCpuUse::Of(Cell(0, 0, 0, nullptr)), CgroupCpuUse::Of(Cell(500'000, 0, 0, nullptr)),
          0.5);
  EXPECT_EQ(use.Describe(), "cpu 1.000");
  CgroupCpuUse none;
  none.Add(CgroupCpuUse::Of({{"name", "fixed-1"}}), CgroupCpuUse::Of({{"name", "fixed-1"}}), 1.0);
  EXPECT_EQ(none.Describe(), "") << "cgroup = \"off\": no cpu.stat in status";
}

}  // namespace
}  // namespace bulkhead::bench
