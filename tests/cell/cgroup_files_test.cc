// SPDX-License-Identifier: MIT
// Tests of cell/cgroup_files.h: the parsers on kernel-format strings (texts as a 6.1 kernel prints
// them, formats per Documentation/admin-guide/cgroup-v2.rst and Documentation/accounting/psi.rst),
// the formatters and range checks.
#include "cell/cgroup_files.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace bulkhead::cell {
namespace {

using ::testing::HasSubstr;

TEST(ParseProcSelfCgroup, UnifiedHierarchy) {
  Result<std::string> path = ParseProcSelfCgroup("0::/system.slice/bulkhead.service\n");
  ASSERT_TRUE(path.ok()) << path.status().message();
  EXPECT_EQ(path.value(), "/system.slice/bulkhead.service");
}

TEST(ParseProcSelfCgroup, HybridHierarchyPicksTheV2Line) {
  Result<std::string> path = ParseProcSelfCgroup(
      "12:memory:/user.slice\n4:cpu,cpuacct:/user.slice\n1:name=systemd:/user.slice/x.scope\n"
      "0::/user.slice/x.scope\n");
  ASSERT_TRUE(path.ok()) << path.status().message();
  EXPECT_EQ(path.value(), "/user.slice/x.scope");
}

TEST(ParseProcSelfCgroup, RootCgroup) {
  Result<std::string> path = ParseProcSelfCgroup("0::/\n");
  ASSERT_TRUE(path.ok());
  EXPECT_EQ(path.value(), "/");
}

TEST(ParseProcSelfCgroup, V1OnlyIsAnError) {
  Result<std::string> path = ParseProcSelfCgroup("4:memory:/\n1:name=systemd:/\n");
  ASSERT_FALSE(path.ok());
  EXPECT_THAT(path.status().message(), HasSubstr("no cgroup v2 line"));
  EXPECT_FALSE(ParseProcSelfCgroup("").ok());
  EXPECT_FALSE(ParseProcSelfCgroup("0::relative\n").ok());
}

TEST(ParseMemoryEvents, Kernel61) {
  Result<MemoryEvents> events =
      ParseMemoryEvents("low 0\nhigh 12\nmax 345\noom 3\noom_kill 2\noom_group_kill 1\n");
  ASSERT_TRUE(events.ok()) << events.status().message();
  EXPECT_EQ(events.value().high, 12u);
  EXPECT_EQ(events.value().max, 345u);
  EXPECT_EQ(events.value().oom, 3u);
  EXPECT_EQ(events.value().oom_kill, 2u);
  EXPECT_EQ(events.value().oom_group_kill, 1u);
  EXPECT_TRUE(events.value().has_oom_group_kill);
}

TEST(ParseMemoryEvents, OlderKernelWithoutOomGroupKill) {
  Result<MemoryEvents> events = ParseMemoryEvents("low 0\nhigh 0\nmax 0\noom 0\noom_kill 7\n");
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(events.value().oom_kill, 7u);
  EXPECT_EQ(events.value().oom_group_kill, 0u);
  EXPECT_FALSE(events.value().has_oom_group_kill);
}

TEST(ParseMemoryEvents, RejectsMalformedAndIncomplete) {
  EXPECT_FALSE(ParseMemoryEvents("oom 1\noom_kill x\n").ok());
  EXPECT_FALSE(ParseMemoryEvents("oom 1\noom_kill\n").ok());
  EXPECT_FALSE(ParseMemoryEvents("low 0\nhigh 0\n").ok());
  EXPECT_FALSE(ParseMemoryEvents("").ok());
}

TEST(ParseCpuStat, ControllerEnabled) {
  Result<CpuStat> stat = ParseCpuStat(
      "usage_usec 601234\nuser_usec 600000\nsystem_usec 1234\nnr_periods 31\nnr_throttled 29\n"
      "throttled_usec 2401000\n");
  ASSERT_TRUE(stat.ok()) << stat.status().message();
  EXPECT_EQ(stat.value().usage_usec, 601234u);
  EXPECT_EQ(stat.value().user_usec, 600000u);
  EXPECT_EQ(stat.value().system_usec, 1234u);
  EXPECT_EQ(stat.value().nr_periods, 31u);
  EXPECT_EQ(stat.value().nr_throttled, 29u);
  EXPECT_EQ(stat.value().throttled_usec, 2401000u);
}

TEST(ParseCpuStat, ControllerDisabledHasNoThrottleKeys) {
  Result<CpuStat> stat = ParseCpuStat("usage_usec 5\nuser_usec 3\nsystem_usec 2\n");
  ASSERT_TRUE(stat.ok());
  EXPECT_EQ(stat.value().usage_usec, 5u);
  EXPECT_EQ(stat.value().nr_throttled, 0u);
}

TEST(ParseCpuStat, RequiresUsage) {
  EXPECT_FALSE(ParseCpuStat("nr_periods 1\n").ok());
  EXPECT_FALSE(ParseCpuStat("usage_usec -1\n").ok());
}

TEST(ParseCgroupEvents, PopulatedAndFrozen) {
  Result<CgroupEvents> events = ParseCgroupEvents("populated 1\nfrozen 0\n");
  ASSERT_TRUE(events.ok());
  EXPECT_TRUE(events.value().populated);
  EXPECT_FALSE(events.value().frozen);
  events = ParseCgroupEvents("populated 0\nfrozen 1\n");
  ASSERT_TRUE(events.ok());
  EXPECT_FALSE(events.value().populated);
  EXPECT_TRUE(events.value().frozen);
  EXPECT_FALSE(ParseCgroupEvents("frozen 0\n").ok());
}

TEST(ParseControllers, SpaceSeparated) {
  EXPECT_THAT(
      ParseControllers("cpuset cpu io memory hugetlb pids rdma misc\n"),
      ::testing::ElementsAre("cpuset", "cpu", "io", "memory", "hugetlb", "pids", "rdma", "misc"));
  EXPECT_TRUE(ParseControllers("\n").empty());
  EXPECT_TRUE(ParseControllers("").empty());
}

TEST(ParseMaxValue, MaxAndNumbers) {
  Result<std::optional<uint64_t>> value = ParseMaxValue("max\n");
  ASSERT_TRUE(value.ok());
  EXPECT_FALSE(value.value().has_value());
  value = ParseMaxValue("33554432\n");
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(value.value(), std::optional<uint64_t>(33554432));
  EXPECT_FALSE(ParseMaxValue("").ok());
  EXPECT_FALSE(ParseMaxValue("12k").ok());
  EXPECT_FALSE(ParseMaxValue("18446744073709551616").ok());  // 2^64 overflows
}

TEST(FormatCpuMax, QuotaAndNoQuota) {
  EXPECT_EQ(FormatCpuMax(std::nullopt, 100000), "max 100000");
  EXPECT_EQ(FormatCpuMax(20000, 100000), "20000 100000");
  EXPECT_EQ(FormatMaxValue(std::nullopt), "max");
  EXPECT_EQ(FormatMaxValue(4096), "4096");
}

TEST(ValidateCellName, AcceptsPlainNamesRejectsPathsAndInterfaceNames) {
  EXPECT_TRUE(ValidateCellName("payments-v2_eu").ok());
  EXPECT_FALSE(ValidateCellName("").ok());
  EXPECT_FALSE(ValidateCellName("..").ok());
  EXPECT_FALSE(ValidateCellName("a/b").ok());
  EXPECT_FALSE(ValidateCellName("memory.max").ok());
  EXPECT_FALSE(ValidateCellName(std::string(65, 'a')).ok());
}

TEST(ValidateLimits, KernelRanges) {
  EXPECT_TRUE(ValidateLimits({}).ok());
  CgroupLimits limits;
  limits.cpu_quota_us = 999;
  EXPECT_THAT(ValidateLimits(limits).message(), HasSubstr("cpu_quota_us"));
  limits = {};
  limits.cpu_period_us = 1000001;
  EXPECT_THAT(ValidateLimits(limits).message(), HasSubstr("cpu_period_us"));
  limits = {};
  limits.cpu_weight = 0;
  EXPECT_FALSE(ValidateLimits(limits).ok());
  limits.cpu_weight = 10001;
  EXPECT_FALSE(ValidateLimits(limits).ok());
  limits.cpu_weight = 10000;
  EXPECT_TRUE(ValidateLimits(limits).ok());
}

TEST(ParseCgroupProcs, OnePidPerLine) {
  Result<std::vector<pid_t>> pids = ParseCgroupProcs("12\n34\n");
  ASSERT_TRUE(pids.ok());
  EXPECT_THAT(pids.value(), ::testing::ElementsAre(12, 34));
  EXPECT_TRUE(ParseCgroupProcs("").ok());
  Result<std::vector<pid_t>> bad = ParseCgroupProcs("12\nbad\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("malformed pid \"bad\""));
  EXPECT_FALSE(ParseCgroupProcs("0\n").ok());
  EXPECT_FALSE(ParseCgroupProcs("4294967296\n").ok());
}

// memory.stat as a 6.1 kernel prints it (abridged: the file has some 40 keys).
constexpr const char* kMemoryStat =
    "anon 4194304\nfile 12582912\nkernel 233472\nkernel_stack 16384\npagetables 57344\n"
    "sec_pagetables 0\npercpu 0\nsock 0\nvmalloc 0\nshmem 0\nfile_mapped 2097152\n"
    "file_dirty 0\nfile_writeback 0\nswapcached 0\nanon_thp 0\ninactive_anon 4190208\n"
    "active_anon 4096\ninactive_file 10485760\nactive_file 2097152\nunevictable 0\n"
    "slab_reclaimable 77824\nslab_unreclaimable 66816\npgfault 3080\npgmajfault 0\n";

TEST(ParseMemoryStat, KeepsTheKeysTheAdaptiveModeReads) {
  Result<MemoryStat> stat = ParseMemoryStat(kMemoryStat);
  ASSERT_TRUE(stat.ok()) << stat.status().message();
  EXPECT_EQ(stat->anon, 4194304u);
  EXPECT_EQ(stat->file, 12582912u);
  EXPECT_EQ(stat->inactive_file, 10485760u);
  EXPECT_EQ(stat->active_file, 2097152u);
  EXPECT_FALSE(ParseMemoryStat("anon 1\nfile 2\n").ok());
  EXPECT_FALSE(ParseMemoryStat("anon 1\nfile x\ninactive_file 3\n").ok());
}

TEST(CgroupUsage, TheWorkingSetLeavesOutInactivePageCache) {
  CgroupUsage usage;
  usage.memory_current = 16 << 20;
  usage.memory_stat.inactive_file = 10 << 20;
  EXPECT_EQ(usage.working_set(), 6u << 20);
  // Counted at slightly different moments, inactive_file can exceed memory.current.
  usage.memory_stat.inactive_file = 17 << 20;
  EXPECT_EQ(usage.working_set(), 0u);
}

TEST(ParsePressure, CpuOfAKernelBefore513HasNoFullLine) {
  Result<Pressure> pressure =
      ParsePressure("some avg10=1.50 avg60=0.25 avg300=0.00 total=123456\n");
  ASSERT_TRUE(pressure.ok()) << pressure.status().message();
  EXPECT_DOUBLE_EQ(pressure->some.avg10, 1.50);
  EXPECT_DOUBLE_EQ(pressure->some.avg60, 0.25);
  EXPECT_DOUBLE_EQ(pressure->some.avg300, 0.0);
  EXPECT_EQ(pressure->some.total_us, 123456u);
  EXPECT_FALSE(pressure->full.has_value());
}

TEST(ParsePressure, MemoryHasSomeAndFull) {
  Result<Pressure> pressure = ParsePressure(
      "some avg10=80.12 avg60=40.00 avg300=9.87 total=2301000\n"
      "full avg10=12.00 avg60=6.50 avg300=1.30 total=400100\n");
  ASSERT_TRUE(pressure.ok()) << pressure.status().message();
  EXPECT_DOUBLE_EQ(pressure->some.avg10, 80.12);
  EXPECT_EQ(pressure->some.total_us, 2301000u);
  ASSERT_TRUE(pressure->full.has_value());
  EXPECT_DOUBLE_EQ(pressure->full->avg60, 6.50);
  EXPECT_EQ(pressure->full->total_us, 400100u);
}

TEST(ParsePressure, IgnoresKeysAndLinesItDoesNotKnow) {
  Result<Pressure> pressure =
      ParsePressure("some avg10=0.00 avg5=3.00 avg60=0.00 avg300=0.00 total=7\nboth x=1\n");
  ASSERT_TRUE(pressure.ok()) << pressure.status().message();
  EXPECT_EQ(pressure->some.total_us, 7u);
}

TEST(ParsePressure, RefusesWhatIsNotAPressureFile) {
  EXPECT_THAT(ParsePressure("").status().message(), HasSubstr("without a \"some\" line"));
  EXPECT_THAT(ParsePressure("full avg10=0.00 total=1\n").status().message(),
              HasSubstr("without a \"some\" line"));
  EXPECT_THAT(ParsePressure("some avg10=0.00 avg60=0.00 avg300=0.00\n").status().message(),
              HasSubstr("without total"));
  EXPECT_THAT(ParsePressure("some avg10=abc total=1\n").status().message(),
              HasSubstr("malformed pressure field \"avg10=abc\""));
  EXPECT_FALSE(ParsePressure("some avg10=-1.00 total=1\n").ok());
  EXPECT_FALSE(ParsePressure("some avg10=100.01 total=1\n").ok());
  EXPECT_FALSE(ParsePressure("some avg10 total=1\n").ok());
  EXPECT_FALSE(ParsePressure("some total=-5\n").ok());
}

TEST(PressureThreshold, FormatsAsPsiTakesIt) {
  EXPECT_EQ(FormatPressureThreshold({PressureKind::kSome, 150000, 1000000}), "some 150000 1000000");
  EXPECT_EQ(FormatPressureThreshold({PressureKind::kFull, 50000, 1000000}), "full 50000 1000000");
  EXPECT_EQ(PressureFile(PressureResource::kMemory), "memory.pressure");
  EXPECT_EQ(PressureName(PressureResource::kIo), "io");
}

TEST(PressureThreshold, TheKernelsBoundsAreCheckedUpFront) {
  EXPECT_TRUE(ValidatePressureThreshold({PressureKind::kSome, 100000, 1000000}).ok());
  EXPECT_TRUE(ValidatePressureThreshold({PressureKind::kSome, 500000, 500000}).ok());
  EXPECT_TRUE(ValidatePressureThreshold({PressureKind::kFull, 1, 10000000}).ok());
  EXPECT_THAT(ValidatePressureThreshold({PressureKind::kSome, 100000, 499999}).message(),
              HasSubstr("window 499999 us outside [500000, 10000000]"));
  EXPECT_FALSE(ValidatePressureThreshold({PressureKind::kSome, 100000, 10000001}).ok());
  EXPECT_THAT(ValidatePressureThreshold({PressureKind::kSome, 0, 1000000}).message(),
              HasSubstr("stall 0 us outside [1, window 1000000]"));
  EXPECT_FALSE(ValidatePressureThreshold({PressureKind::kSome, 1000001, 1000000}).ok());
}

}  // namespace
}  // namespace bulkhead::cell
