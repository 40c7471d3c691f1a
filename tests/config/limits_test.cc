// SPDX-License-Identifier: MIT
// The limit keys of a cell (config/limits.h): cpu_max, cpu_max_period, cpu_weight, memory_max,
// memory_high, memory_swap_max, pids_max, oom_policy, oom_score_adjust; defaults, values, the
// checks across keys, and every error with its file:line:col.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/cpu_share.h"
#include "config/size.h"
#include "tests/config/config_test_util.h"

namespace bulkhead::config {
namespace {

using ::testing::ElementsAre;

TEST(ParseConfig, CgroupLimitsAreUnsetByDefault) {
  const Config config = MustParse(CellWith(""));
  EXPECT_EQ(config.supervisor.cgroup, CgroupMode::kAuto);
  ASSERT_EQ(config.cells.size(), 1u);
  const CellConfig& cell = config.cells[0];
  EXPECT_EQ(cell.cpu_max_quota_us, std::nullopt);
  EXPECT_EQ(cell.cpu_max_period_us, 100000u);
  EXPECT_EQ(cell.cpu_weight, std::nullopt);
  EXPECT_EQ(cell.memory_max, std::nullopt);
  EXPECT_EQ(cell.memory_high, std::nullopt);
  EXPECT_EQ(cell.memory_swap_max, std::nullopt);
  EXPECT_EQ(cell.pids_max, std::nullopt);
}

// Every cgroup key set, in two cells, on a 4-CPU host.
constexpr std::string_view kCgroupConfig = R"([supervisor]
runtime_dir = "/run/bh"
cgroup = "required"

[cells.payments]
command = ["/usr/lib/bulkhead/gateway-worker"]
max_concurrent = 2
cpu_max = "150%"
cpu_weight = 200
memory_max = "256M"
memory_high = "192Mi"
memory_swap_max = 0
pids_max = 64

[cells.batch]
command = ["batch-worker"]
max_concurrent = 1
cpu_max = "12.5%"
cpu_max_period = "10ms"
cpu_weight = 1
memory_max = 1073741824
memory_high = "1G"
memory_swap_max = "512K"
pids_max = 4194304
)";

TEST(ParseConfig, CgroupKeysAllSet) {
  const Config config = MustParseOn(4, kCgroupConfig);
  EXPECT_EQ(config.supervisor.cgroup, CgroupMode::kRequired);
  ASSERT_EQ(config.cells.size(), 2u);

  const CellConfig& payments = config.cells[0];
  EXPECT_EQ(payments.cpu_max_quota_us, 150000u);
  EXPECT_EQ(payments.cpu_max_period_us, 100000u);
  EXPECT_EQ(payments.cpu_weight, 200u);
  EXPECT_EQ(payments.memory_max, 256u << 20);
  EXPECT_EQ(payments.memory_high, 192u << 20);
  EXPECT_EQ(payments.memory_swap_max, 0u);
  EXPECT_EQ(payments.pids_max, 64u);

  const CellConfig& batch = config.cells[1];
  EXPECT_EQ(batch.cpu_max_quota_us, 1250u);  // 12.5% of 10000 μs.
  EXPECT_EQ(batch.cpu_max_period_us, 10000u);
  EXPECT_EQ(batch.cpu_weight, 1u);
  EXPECT_EQ(batch.memory_max, uint64_t{1} << 30);
  EXPECT_EQ(batch.memory_high, uint64_t{1} << 30);  // Equal to memory_max is allowed.
  EXPECT_EQ(batch.memory_swap_max, 512u << 10);
  EXPECT_EQ(batch.pids_max, 4194304u);
}

TEST(ParseConfig, CpuMaxIsAShareOfOneCpuTimesThePeriod) {
  struct Case {
    std::string_view lines;
    uint64_t quota_us;
    uint64_t period_us;
  };
  const Case cases[] = {
      {"cpu_max = \"50%\"", 50000, 100000},
      {"cpu_max = \"1%\"", 1000, 100000},  // The smallest quota in the default period.
      {"cpu_max = \"12.5%\"", 12500, 100000},
      {"cpu_max = \"0.125%\"\ncpu_max_period = \"1s\"", 1250, 1000000},
      {"cpu_max = \"150%\"", 150000, 100000},
      {"cpu_max = \"200%\"", 200000, 100000},  // All the host's CPUs.
      {"cpu_max = \"100%\"\ncpu_max_period = \"1ms\"", 1000, 1000},
      {"cpu_max_period = \"250ms\"\ncpu_max = \"20%\"", 50000, 250000},  // Either order.
  };
  for (const Case& c : cases) {
    const Config config = MustParseOn(2, CellWith(c.lines));
    ASSERT_EQ(config.cells.size(), 1u) << c.lines;
    EXPECT_EQ(config.cells[0].cpu_max_quota_us, c.quota_us) << c.lines;
    EXPECT_EQ(config.cells[0].cpu_max_period_us, c.period_us) << c.lines;
  }
  // A period alone sets no quota.
  const Config period_only = MustParseOn(2, CellWith("cpu_max_period = \"50ms\""));
  EXPECT_EQ(period_only.cells[0].cpu_max_quota_us, std::nullopt);
  EXPECT_EQ(period_only.cells[0].cpu_max_period_us, 50000u);
}

TEST(ParseConfig, CpuMaxAboveTheHostsCpusIsRefused) {
  EXPECT_THAT(
      ErrorsOn(1, CellWith("cpu_max = \"150%\"")),
      ElementsAre(At(4, 11, "cells.a.cpu_max", "150% is above the 100% × 1 CPU of this host")));
  EXPECT_THAT(ErrorsOn(2, CellWith("cpu_max = \"200.001%\"")),
              ElementsAre(At(4, 11, "cells.a.cpu_max",
                             "200.001% is above the 100% × 2 CPUs of this host")));
  EXPECT_EQ(MustParseOn(1, CellWith("cpu_max = \"100%\"")).cells[0].cpu_max_quota_us, 100000u);
}

TEST(ParseConfig, CpuMaxUsesTheCpusOnlineOnThisHost) {
  const uint32_t cpus = CurrentHostFacts().cpus;
  ASSERT_GE(cpus, 1u);
  ASSERT_EQ(static_cast<long>(cpus), sysconf(_SC_NPROCESSORS_ONLN));
  const std::string all = std::to_string(cpus * 100) + "%";
  EXPECT_EQ(MustParse(CellWith("cpu_max = \"" + all + "\"")).cells[0].cpu_max_quota_us,
            uint64_t{cpus} * 100000);
  const std::string over = std::to_string(cpus * 100 + 1) + "%";
  EXPECT_THAT(Errors(CellWith("cpu_max = \"" + over + "\"")),
              ElementsAre(At(4, 11, "cells.a.cpu_max",
                             over + " is above the 100% × " + std::to_string(cpus) +
                                 (cpus == 1 ? " CPU" : " CPUs") + " of this host")));
}

TEST(ParseConfig, BadCpuKeys) {
  const auto share_error = [](std::string_view text) {
    return ParseCpuShare(text).status().message();
  };
  EXPECT_THAT(
      ErrorsOn(2, R"([cells.a]
command = ["x"]
max_concurrent = 1
cpu_max = "0%"
cpu_weight = 0
[cells.b]
command = ["x"]
max_concurrent = 1
cpu_max = "50"
cpu_weight = 10001
[cells.c]
command = ["x"]
max_concurrent = 1
cpu_max = 50
cpu_weight = "100"
[cells.d]
command = ["x"]
max_concurrent = 1
cpu_max = 0.5
cpu_max_period = "0s"
[cells.e]
command = ["x"]
max_concurrent = 1
cpu_max = "50% # half"
cpu_max_period = "2s"
[cells.f]
command = ["x"]
max_concurrent = 1
cpu_max = "10%"
cpu_max_period = "100us"
)"),
      ElementsAre(
          At(4, 11, "cells.a.cpu_max", share_error("0%")),
          At(5, 14, "cells.a.cpu_weight", "must be between 1 and 10000, got 0"),
          At(9, 11, "cells.b.cpu_max",
             "invalid CPU share \"50\": missing '%'; write \"50%\" for 50% of one CPU; expected a "
             "share of one CPU as a percentage string such as \"50%\", \"150%\" (1.5 CPUs) or "
             "\"12.5%\" (at most 3 decimals)"),
          At(10, 14, "cells.b.cpu_weight", "must be between 1 and 10000, got 10001"),
          At(14, 11, "cells.c.cpu_max",
             "expected string, got integer (write a share of one CPU as a percentage string, such "
             "as \"50%\")"),
          At(15, 14, "cells.c.cpu_weight", "expected integer, got string"),
          At(19, 11, "cells.d.cpu_max",
             "expected string, got float (write a share of one CPU as a percentage string, such as "
             "\"50%\")"),
          At(20, 18, "cells.d.cpu_max_period",
             "must be between 1ms and 1s (the cpu.max period range), got \"0s\""),
          At(24, 11, "cells.e.cpu_max", share_error("50% # half")),
          At(25, 18, "cells.e.cpu_max_period",
             "must be between 1ms and 1s (the cpu.max period range), got \"2s\""),
          At(30, 18, "cells.f.cpu_max_period", ParseDuration("100us").status().message())));
}

TEST(ParseConfig, CpuMaxQuotaBelowTheKernelsMinimum) {
  EXPECT_THAT(ErrorsOn(2, CellWith("cpu_max = \"0.5%\"")),
              ElementsAre(At(4, 11, "cells.a.cpu_max",
                             "gives a cpu.max quota of 500 μs per 100000 μs period, below the "
                             "kernel's minimum of 1000 μs; raise cpu_max or cpu_max_period")));
  // The period may come first; the error stays at cpu_max. 9.99% of 10000 μs is 999 μs.
  EXPECT_THAT(ErrorsOn(2, CellWith("cpu_max_period = \"10ms\"\ncpu_max = \"9.99%\"")),
              ElementsAre(At(5, 11, "cells.a.cpu_max",
                             "gives a cpu.max quota of 999 μs per 10000 μs period, below the "
                             "kernel's minimum of 1000 μs; raise cpu_max or cpu_max_period")));
  // 9.995% of 10000 μs is 999.5 μs, rounded to 1000 μs: accepted.
  EXPECT_EQ(MustParseOn(2, CellWith("cpu_max_period = \"10ms\"\ncpu_max = \"9.995%\""))
                .cells[0]
                .cpu_max_quota_us,
            1000u);
}

TEST(ParseConfig, MemorySizesAsIntegerBytesOrStringsWithUnits) {
  struct Case {
    std::string_view line;
    uint64_t bytes;
  };
  const Case cases[] = {
      {"memory_max = 1048576", 1048576},
      {"memory_max = 1", 1},
      {"memory_max = \"512K\"", 512u << 10},
      {"memory_max = \"256M\"", 256u << 20},
      {"memory_max = \"1G\"", uint64_t{1} << 30},
      {"memory_max = \"1T\"", uint64_t{1} << 40},
      {"memory_max = \"256Mi\"", 256u << 20},
      {"memory_max = \"2Ti\"", uint64_t{2} << 40},
      {"memory_max = 9223372036854775807", kMaxSizeBytes},
  };
  for (const Case& c : cases) {
    const Config config = MustParse(CellWith(c.line));
    ASSERT_EQ(config.cells.size(), 1u) << c.line;
    EXPECT_EQ(config.cells[0].memory_max, c.bytes) << c.line;
  }
  EXPECT_EQ(MustParse(CellWith("memory_high = \"1536M\"")).cells[0].memory_high, 1536u << 20);
  // No swap at all.
  EXPECT_EQ(MustParse(CellWith("memory_swap_max = 0")).cells[0].memory_swap_max, 0u);
  EXPECT_EQ(MustParse(CellWith("memory_swap_max = \"0M\"")).cells[0].memory_swap_max, 0u);
  EXPECT_EQ(MustParse(CellWith("memory_swap_max = \"2G\"")).cells[0].memory_swap_max,
            uint64_t{2} << 30);
}

TEST(ParseConfig, BadMemorySizes) {
  const auto size_error = [](std::string_view text) { return ParseSize(text).status().message(); };
  EXPECT_THAT(
      Errors(R"([cells.a]
command = ["x"]
max_concurrent = 1
memory_max = "32Mb"
memory_high = "-1"
memory_swap_max = -1
[cells.b]
command = ["x"]
max_concurrent = 1
memory_max = "0"
memory_high = 0
memory_swap_max = "750M # note"
[cells.c]
command = ["x"]
max_concurrent = 1
memory_max = "1.5G"
memory_high = 1.5
memory_swap_max = "8388608T"
[cells.d]
command = ["x"]
max_concurrent = 1
memory_max = 0
memory_high = "0M"
memory_swap_max = "1 G"
)"),
      ElementsAre(
          At(4, 14, "cells.a.memory_max",
             "invalid size \"32Mb\": unknown unit \"Mb\"; write \"32M\"; expected bytes as a TOML "
             "integer without quotes (1048576), or a string <integer><unit> such as \"512K\", "
             "\"256M\", \"1G\" or \"1T\" (units K, M, G, T or Ki, Mi, Gi, Ti, all powers of 1024)"),
          At(5, 15, "cells.a.memory_high", size_error("-1")),
          At(6, 19, "cells.a.memory_swap_max",
             "invalid size -1: must not be negative; expected bytes as a TOML integer without "
             "quotes (1048576), or a string <integer><unit> such as \"512K\", \"256M\", \"1G\" or "
             "\"1T\" (units K, M, G, T or Ki, Mi, Gi, Ti, all powers of 1024)"),
          At(10, 14, "cells.b.memory_max", size_error("0")),
          At(11, 15, "cells.b.memory_high",
             "must be greater than 0: a memory.high of 0 would throttle the cell from the start; "
             "leave memory_high out for no limit"),
          At(12, 19, "cells.b.memory_swap_max", size_error("750M # note")),
          At(16, 14, "cells.c.memory_max",
             "invalid size \"1.5G\": decimals are not allowed; use a smaller unit (\"1536M\", not "
             "\"1.5G\"); " +
                 std::string(kSizeForms)),
          At(17, 15, "cells.c.memory_high",
             "expected size, got float (write bytes as an integer, 268435456, or a string with a "
             "unit, \"256M\")"),
          At(18, 19, "cells.c.memory_swap_max", size_error("8388608T")),
          At(22, 14, "cells.d.memory_max",
             "must be greater than 0: a memory.max of 0 would OOM-kill the cell at once; leave "
             "memory_max out for no limit"),
          At(23, 15, "cells.d.memory_high",
             "must be greater than 0: a memory.high of 0 would throttle the cell from the start; "
             "leave memory_high out for no limit"),
          At(24, 19, "cells.d.memory_swap_max", size_error("1 G"))));
  // Past the largest TOML integer: toml++ refuses it as a syntax error.
  const std::vector<std::string> too_big = Errors(CellWith("memory_max = 9223372036854775808"));
  ASSERT_EQ(too_big.size(), 1u);
  EXPECT_THAT(too_big[0], ::testing::StartsWith(std::string(kFile) + ":4:"));
  EXPECT_THAT(size_error("750M # note"),
              ::testing::HasSubstr("a '#' inside the quotes is not a comment"));
}

TEST(ParseConfig, MemoryHighMayNotExceedMemoryMax) {
  EXPECT_THAT(Errors(CellWith("memory_max = \"256M\"\nmemory_high = \"257M\"")),
              ElementsAre(At(5, 15, "cells.a.memory_high",
                             "must be at most memory_max (\"256M\"), got \"257M\"")));
  // Reported at memory_high whichever comes first; integers are shown as written.
  EXPECT_THAT(Errors(CellWith("memory_high = 268435457\nmemory_max = \"256M\"")),
              ElementsAre(At(4, 15, "cells.a.memory_high",
                             "must be at most memory_max (\"256M\"), got 268435457")));
  // A broken memory_max gives its own error only.
  EXPECT_THAT(Errors(CellWith("memory_max = \"0M\"\nmemory_high = \"1G\"")),
              ElementsAre(At(4, 14, "cells.a.memory_max",
                             "must be greater than 0: a memory.max of 0 would OOM-kill the cell "
                             "at once; leave memory_max out for no limit")));
  // memory_high alone, or below memory_max, is fine; swap is independent of both.
  EXPECT_EQ(MustParse(CellWith("memory_high = \"8G\"")).cells[0].memory_high, uint64_t{8} << 30);
  const Config config =
      MustParse(CellWith("memory_max = \"1G\"\nmemory_high = \"1023M\"\nmemory_swap_max = \"4G\""));
  EXPECT_EQ(config.cells[0].memory_high, 1023u << 20);
  EXPECT_EQ(config.cells[0].memory_swap_max, uint64_t{4} << 30);
}

TEST(ParseConfig, PidsMax) {
  EXPECT_EQ(MustParse(CellWith("pids_max = 1")).cells[0].pids_max, 1u);
  EXPECT_EQ(MustParse(CellWith("pids_max = 4194304")).cells[0].pids_max, 4194304u);
  EXPECT_THAT(Errors(CellWith("pids_max = 0")),
              ElementsAre(At(4, 12, "cells.a.pids_max",
                             "must be between 1 and 4194304 (PID_MAX_LIMIT), got 0")));
  EXPECT_THAT(Errors(CellWith("pids_max = 4194305")),
              ElementsAre(At(4, 12, "cells.a.pids_max",
                             "must be between 1 and 4194304 (PID_MAX_LIMIT), got 4194305")));
  EXPECT_THAT(Errors(CellWith("pids_max = -1")),
              ElementsAre(At(4, 12, "cells.a.pids_max",
                             "must be between 1 and 4194304 (PID_MAX_LIMIT), got -1")));
  EXPECT_THAT(Errors(CellWith("pids_max = \"100\"")),
              ElementsAre(At(4, 12, "cells.a.pids_max", "expected integer, got string")));
}

// systemd's OOMPolicy= and OOMScoreAdjust=, per cell (issue 12).
TEST(ParseConfig, OomPolicyAndOomScoreAdjust) {
  const Config defaults = MustParse(CellWith(""));
  EXPECT_EQ(defaults.cells[0].oom_policy, OomPolicy::kKill);
  EXPECT_EQ(defaults.cells[0].oom_score_adjust, 0);  // reset, never inherited from bulkheadd
  const Config set = MustParse(CellWith("oom_policy = \"continue\"\noom_score_adjust = -1000"));
  EXPECT_EQ(set.cells[0].oom_policy, OomPolicy::kContinue);
  EXPECT_EQ(set.cells[0].oom_score_adjust, -1000);
  EXPECT_EQ(MustParse(CellWith("oom_policy = \"kill\"")).cells[0].oom_policy, OomPolicy::kKill);
  EXPECT_EQ(MustParse(CellWith("oom_score_adjust = 1000")).cells[0].oom_score_adjust, 1000);

  EXPECT_THAT(
      Errors(CellWith("oom_policy = \"stop\"")),
      ElementsAre(At(4, 14, "cells.a.oom_policy", "must be one of kill, continue; got \"stop\"")));
  EXPECT_THAT(Errors(CellWith("oom_policy = \"continu\"")),
              ElementsAre(At(4, 14, "cells.a.oom_policy",
                             "must be one of kill, continue; got \"continu\"; did you mean "
                             "\"continue\"?")));
  EXPECT_THAT(Errors(CellWith("oom_score_adjust = 1001")),
              ElementsAre(At(4, 20, "cells.a.oom_score_adjust",
                             "must be between -1000 and 1000 (oom_score_adj), got 1001")));
  EXPECT_THAT(Errors(CellWith("oom_score_adjust = -1001")),
              ElementsAre(At(4, 20, "cells.a.oom_score_adjust",
                             "must be between -1000 and 1000 (oom_score_adj), got -1001")));
  EXPECT_THAT(Errors(CellWith("oom_score_adjust = \"-500\"")),
              ElementsAre(At(4, 20, "cells.a.oom_score_adjust", "expected integer, got string")));
  EXPECT_THAT(Errors(CellWith("oom_score_ajust = 5")),
              ElementsAre(At(4, 1, "cells.a.oom_score_ajust",
                             "unknown key; did you mean \"oom_score_adjust\"?")));
}

TEST(ParseConfig, CgroupKeyNamesWithHints) {
  EXPECT_THAT(
      Errors(CellWith("memory_maxx = \"1G\"")),
      ElementsAre(At(4, 1, "cells.a.memory_maxx", "unknown key; did you mean \"memory_max\"?")));
  EXPECT_THAT(Errors(CellWith("pid_max = 10")),
              ElementsAre(At(4, 1, "cells.a.pid_max", "unknown key; did you mean \"pids_max\"?")));
  EXPECT_THAT(Errors("memory_max = \"1G\"\n" + CellWith("")),
              ElementsAre(At(1, 1, "memory_max",
                             "unknown key; memory_max belongs in a [cells.NAME] table")));
  EXPECT_THAT(Errors("[supervisor]\ncgroups = \"off\"\n" + CellWith("")),
              ElementsAre(At(2, 1, "supervisor.cgroups", "unknown key; did you mean \"cgroup\"?")));
}

}  // namespace
}  // namespace bulkhead::config
