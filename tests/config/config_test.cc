// SPDX-License-Identifier: MIT
// ParseConfig / LoadConfigFile: a full config with defaults filled, every error kind with its exact
// file:line:col and key, several errors at once, path resolution, and unreadable files.
#include "config/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <climits>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/lexical_path.h"
#include "base/runtime_dir.h"
#include "config/cpu_share.h"
#include "config/size.h"

namespace bulkhead::config {
namespace {

using std::chrono::milliseconds;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;

constexpr char kFile[] = "/etc/bulkhead/bulkhead.toml";

// Every error as "file:line:col: key: message", the form bulkheadd prints.
std::vector<std::string> ErrorLines(const LoadResult& result) {
  std::vector<std::string> lines;
  for (const ConfigError& error : result.errors) lines.push_back(error.ToString());
  return lines;
}

// `text` must be valid; returns its Config.
Config MustParse(std::string_view text, const std::string& source = kFile) {
  LoadResult result = ParseConfig(text, source);
  EXPECT_THAT(ErrorLines(result), IsEmpty());
  EXPECT_TRUE(result.config.has_value());
  return result.config.value_or(Config{});
}

// `text` must be invalid; returns its errors as lines.
std::vector<std::string> Errors(std::string_view text, const std::string& source = kFile) {
  LoadResult result = ParseConfig(text, source);
  EXPECT_FALSE(result.config.has_value());
  EXPECT_FALSE(result.errors.empty());
  return ErrorLines(result);
}

std::string At(int line, int column, std::string_view key, std::string_view message) {
  std::string out = std::string(kFile) + ":" + std::to_string(line) + ":" + std::to_string(column);
  out += ": ";
  out.append(key);
  out += ": ";
  out.append(message);
  return out;
}

// Sets an environment variable for one test and puts the old value back.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// The example of docs/config.md, plus an explicit socket and control socket.
constexpr std::string_view kFullConfig = R"([supervisor]
runtime_dir = "/run/bulkhead"
control_socket = "/run/bulkhead/ctl.sock"
max_payload_bytes = 1048576
log_level = "debug"

[cells.payments]
command = ["/usr/lib/bulkhead/gateway-worker", "--upstream", "https://pay.example.com"]
max_concurrent = 2
max_queue = 1
queue_timeout = "500ms"
restart_delay = "2s"
working_directory = "/var/lib/payments"
socket = "/run/payments/api.sock"

[cells.payments.environment]
PAYMENTS_MODE = "live"
LANG = "C.UTF-8"

[cells.catalog]
command = ["echo-worker"]
max_concurrent = 2
)";

TEST(ParseConfig, FullConfigWithDefaultsFilled) {
  const Config config = MustParse(kFullConfig);
  EXPECT_EQ(config.source, kFile);

  EXPECT_EQ(config.supervisor.runtime_dir, "/run/bulkhead");
  EXPECT_EQ(config.supervisor.control_socket, "/run/bulkhead/ctl.sock");
  EXPECT_EQ(config.supervisor.max_payload_bytes, 1048576u);
  EXPECT_EQ(config.supervisor.log_level, "debug");

  ASSERT_EQ(config.cells.size(), 2u);
  // File order, not the key order toml++ iterates in.
  const CellConfig& payments = config.cells[0];
  EXPECT_EQ(payments.name, "payments");
  EXPECT_THAT(payments.command, ElementsAre("/usr/lib/bulkhead/gateway-worker", "--upstream",
                                            "https://pay.example.com"));
  EXPECT_EQ(payments.socket, "/run/payments/api.sock");
  EXPECT_EQ(payments.worker_socket, "/run/bulkhead/payments.worker.sock");
  EXPECT_EQ(payments.max_concurrent, 2u);
  EXPECT_EQ(payments.max_queue, 1u);
  EXPECT_EQ(payments.queue_timeout, milliseconds(500));
  EXPECT_EQ(payments.restart_delay, milliseconds(2000));
  EXPECT_THAT(payments.environment,
              ElementsAre(Pair("PAYMENTS_MODE", "live"), Pair("LANG", "C.UTF-8")));
  EXPECT_EQ(payments.working_directory, "/var/lib/payments");
  EXPECT_EQ(payments.position.line, 7);
  EXPECT_EQ(payments.position.column, 1);

  const CellConfig& catalog = config.cells[1];
  EXPECT_EQ(catalog.name, "catalog");
  EXPECT_THAT(catalog.command, ElementsAre("echo-worker"));
  EXPECT_EQ(catalog.socket, "/run/bulkhead/catalog.sock");
  EXPECT_EQ(catalog.worker_socket, "/run/bulkhead/catalog.worker.sock");
  EXPECT_EQ(catalog.max_concurrent, 2u);
  EXPECT_EQ(catalog.max_queue, 0u);
  EXPECT_EQ(catalog.queue_timeout, milliseconds(1000));
  EXPECT_EQ(catalog.restart_delay, milliseconds(100));
  EXPECT_THAT(catalog.environment, IsEmpty());
  EXPECT_EQ(catalog.working_directory, "/");
  EXPECT_EQ(catalog.position.line, 20);
  EXPECT_EQ(catalog.position.column, 1);
}

// The example in docs/config.md parses to what its table says.
TEST(ParseConfig, DocumentedExample) {
  std::ifstream doc(std::string(BULKHEAD_SOURCE_DIR) + "/docs/config.md");
  ASSERT_TRUE(doc.good());
  std::string example;
  bool in_block = false;
  for (std::string line; std::getline(doc, line);) {
    if (!in_block && line == "```toml") {
      in_block = true;
    } else if (in_block && line == "```") {
      break;
    } else if (in_block) {
      example += line + "\n";
    }
  }
  ASSERT_FALSE(example.empty());

  // As if run as root without systemd.
  ScopedEnv env("RUNTIME_DIRECTORY", "/run/bulkhead");
  const Config config = MustParse(example, "/etc/bulkhead/bulkhead.toml");
  EXPECT_EQ(config.supervisor.control_socket, "/run/bulkhead/control.sock");
  ASSERT_EQ(config.cells.size(), 2u);
  const CellConfig& payments = config.cells[0];
  EXPECT_EQ(payments.name, "payments");
  EXPECT_EQ(payments.socket, "/run/bulkhead/payments.sock");
  EXPECT_EQ(payments.worker_socket, "/run/bulkhead/payments.worker.sock");
  EXPECT_EQ(payments.max_concurrent, 2u);
  EXPECT_EQ(payments.max_queue, 1u);
  EXPECT_EQ(payments.queue_timeout, milliseconds(500));
  EXPECT_EQ(payments.restart_delay, milliseconds(2000));
  EXPECT_EQ(payments.working_directory, "/var/lib/bulkhead/payments");
  EXPECT_EQ(payments.cpu_max_quota_us, 50000u);
  EXPECT_EQ(payments.cpu_max_period_us, 100000u);
  EXPECT_EQ(payments.memory_max, 268435456u);
  EXPECT_EQ(payments.pids_max, 64u);
  const CellConfig& catalog = config.cells[1];
  EXPECT_EQ(catalog.name, "catalog");
  EXPECT_EQ(catalog.socket, "/run/bulkhead/catalog.sock");
  EXPECT_EQ(catalog.worker_socket, "/run/bulkhead/catalog.worker.sock");
  EXPECT_EQ(catalog.max_concurrent, 2u);
  EXPECT_EQ(catalog.max_queue, 0u);
  EXPECT_EQ(catalog.queue_timeout, milliseconds(1000));
  EXPECT_EQ(catalog.restart_delay, milliseconds(100));
  EXPECT_EQ(catalog.working_directory, "/");
  EXPECT_EQ(catalog.cpu_max_quota_us, std::nullopt);
  EXPECT_EQ(catalog.memory_max, std::nullopt);
  EXPECT_EQ(catalog.pids_max, std::nullopt);
}

TEST(ParseConfig, SupervisorDefaults) {
  const Config config = MustParse(R"([supervisor]
runtime_dir = "/run/bh"
[cells.a]
command = ["x"]
max_concurrent = 1
)");
  EXPECT_EQ(config.supervisor.runtime_dir, "/run/bh");
  EXPECT_EQ(config.supervisor.control_socket, "/run/bh/control.sock");
  EXPECT_EQ(config.supervisor.max_payload_bytes, 4u * 1024 * 1024);
  EXPECT_EQ(config.supervisor.log_level, "info");
}

TEST(ParseConfig, RuntimeDirDefaultsToSystemdRuntimeDirectory) {
  ScopedEnv env("RUNTIME_DIRECTORY", "/run/bulkhead-test");
  const Config config = MustParse(R"([cells.a]
command = ["x"]
max_concurrent = 1
)");
  EXPECT_EQ(config.supervisor.runtime_dir, "/run/bulkhead-test");
  EXPECT_EQ(config.supervisor.control_socket, "/run/bulkhead-test/control.sock");
  ASSERT_EQ(config.cells.size(), 1u);
  EXPECT_EQ(config.cells[0].socket, "/run/bulkhead-test/a.sock");
  EXPECT_EQ(config.cells[0].worker_socket, "/run/bulkhead-test/a.worker.sock");
}

TEST(ParseConfig, RuntimeDirDefaultFollowsTheEnvironment) {
  const Config config = MustParse(R"([cells.a]
command = ["x"]
max_concurrent = 1
)");
  EXPECT_EQ(config.supervisor.runtime_dir, DefaultRuntimeDirFromEnvironment());
}

TEST(ParseConfig, InlineTablesKeepFileOrder) {
  const Config config = MustParse(
      R"(supervisor = { runtime_dir = "/run/bh" }
cells = { b = { command = ["x"], max_concurrent = 1 }, a = { command = ["y"], max_concurrent = 2, environment = { Z = "1", A = "2" } } }
)");
  ASSERT_EQ(config.cells.size(), 2u);
  EXPECT_EQ(config.cells[0].name, "b");
  EXPECT_EQ(config.cells[0].position.line, 2);
  EXPECT_EQ(config.cells[0].position.column, 15);
  EXPECT_EQ(config.cells[1].name, "a");
  EXPECT_THAT(config.cells[1].environment, ElementsAre(Pair("Z", "1"), Pair("A", "2")));
}

TEST(ParseConfig, AcceptsRangeBoundaries) {
  const Config config = MustParse(R"([supervisor]
runtime_dir = "/run/bh"
max_payload_bytes = 1073741824
[cells.a]
command = ["x"]
max_concurrent = 65535
max_queue = 1000000
queue_timeout = "1ms"
restart_delay = "0s"
[cells.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa]
command = ["x"]
max_concurrent = 1
socket = "/run/bh/a-64-chars.sock"
)");
  EXPECT_EQ(config.supervisor.max_payload_bytes, 1073741824u);
  ASSERT_EQ(config.cells.size(), 2u);
  EXPECT_EQ(config.cells[0].max_concurrent, 65535u);
  EXPECT_EQ(config.cells[0].max_queue, 1000000u);
  EXPECT_EQ(config.cells[0].queue_timeout, milliseconds(1));
  EXPECT_EQ(config.cells[0].restart_delay, milliseconds(0));
  EXPECT_EQ(config.cells[1].name.size(), 64u);
}

// cgroup limits: a cell with one limit key, checked on a host with `cpus` CPUs. The key is on
// line 4.
std::string CellWith(std::string_view line) {
  return "[cells.a]\ncommand = [\"x\"]\nmax_concurrent = 1\n" + std::string(line) + "\n";
}

Config MustParseOn(uint32_t cpus, std::string_view text) {
  LoadResult result = ParseConfig(text, kFile, HostFacts{cpus});
  EXPECT_THAT(ErrorLines(result), IsEmpty());
  EXPECT_TRUE(result.config.has_value());
  return result.config.value_or(Config{});
}

std::vector<std::string> ErrorsOn(uint32_t cpus, std::string_view text) {
  LoadResult result = ParseConfig(text, kFile, HostFacts{cpus});
  EXPECT_FALSE(result.config.has_value());
  EXPECT_FALSE(result.errors.empty());
  return ErrorLines(result);
}

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

TEST(ParseConfig, CgroupModes) {
  const std::pair<std::string_view, CgroupMode> cases[] = {
      {"auto", CgroupMode::kAuto}, {"required", CgroupMode::kRequired}, {"off", CgroupMode::kOff}};
  for (const auto& [text, mode] : cases) {
    const Config config =
        MustParse("[supervisor]\ncgroup = \"" + std::string(text) + "\"\n" + CellWith(""));
    EXPECT_EQ(config.supervisor.cgroup, mode) << text;
  }
  EXPECT_THAT(Errors("[supervisor]\ncgroup = \"requried\"\n" + CellWith("")),
              ElementsAre(At(2, 10, "supervisor.cgroup",
                             "must be one of auto, required, off; got \"requried\"; did you mean "
                             "\"required\"?")));
  EXPECT_THAT(Errors("[supervisor]\ncgroup = true\n" + CellWith("")),
              ElementsAre(At(2, 10, "supervisor.cgroup", "expected string, got boolean")));
  EXPECT_THAT(Errors("cgroup = \"off\"\n" + CellWith("")),
              ElementsAre(At(1, 1, "cgroup", "unknown key; cgroup belongs in [supervisor]")));
}

TEST(ParseConfig, OnShutdownActions) {
  EXPECT_EQ(MustParse(CellWith("")).supervisor.on_shutdown, ShutdownAction::kExit);
  const std::pair<std::string_view, ShutdownAction> cases[] = {
      {"exit", ShutdownAction::kExit},
      {"poweroff", ShutdownAction::kPoweroff},
      {"reboot", ShutdownAction::kReboot}};
  for (const auto& [text, action] : cases) {
    const Config config =
        MustParse("[supervisor]\non_shutdown = \"" + std::string(text) + "\"\n" + CellWith(""));
    EXPECT_EQ(config.supervisor.on_shutdown, action) << text;
  }
  EXPECT_THAT(Errors("[supervisor]\non_shutdown = \"powerof\"\n" + CellWith("")),
              ElementsAre(At(2, 15, "supervisor.on_shutdown",
                             "must be one of exit, poweroff, reboot; got \"powerof\"; did you mean "
                             "\"poweroff\"?")));
  EXPECT_THAT(Errors("[supervisor]\non_shutdown = 1\n" + CellWith("")),
              ElementsAre(At(2, 15, "supervisor.on_shutdown", "expected string, got integer")));
}

TEST(ParseConfig, CgroupParentIsACgroupPathUnderTheMount) {
  EXPECT_EQ(MustParse(CellWith("")).supervisor.cgroup_parent, "");
  EXPECT_EQ(MustParse("[supervisor]\ncgroup_parent = \"/pod.slice/bulkhead/\"\n" + CellWith(""))
                .supervisor.cgroup_parent,
            "/pod.slice/bulkhead");
  EXPECT_EQ(
      MustParse("[supervisor]\ncgroup_parent = \"/\"\n" + CellWith("")).supervisor.cgroup_parent,
      "/");
  EXPECT_THAT(Errors("[supervisor]\ncgroup_parent = \"pod.slice\"\n" + CellWith("")),
              ElementsAre(At(2, 17, "supervisor.cgroup_parent",
                             "must be a cgroup path under the cgroup2 mount starting with '/' "
                             "(\"/pod.slice/bulkhead\"), got \"pod.slice\"")));
  EXPECT_THAT(Errors("[supervisor]\ncgroup_parent = \"/a/../b\"\n" + CellWith("")),
              ElementsAre(At(2, 17, "supervisor.cgroup_parent",
                             "must not have empty, \".\" or \"..\" components, got \"/a/../b\"")));
  EXPECT_THAT(Errors("[supervisor]\ncgroup_parent = \"/a//b\"\n" + CellWith("")),
              ElementsAre(At(2, 17, "supervisor.cgroup_parent",
                             "must not have empty, \".\" or \"..\" components, got \"/a//b\"")));
  EXPECT_THAT(Errors("[supervisor]\ncgroup_parent = \"/a b\"\n" + CellWith("")),
              ElementsAre(At(2, 17, "supervisor.cgroup_parent",
                             "must not contain whitespace or control characters, got \"/a b\"")));
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

TEST(ParseConfig, SyntaxErrorIsReportedAlone) {
  EXPECT_THAT(Errors(R"([cells.a]
command = ["x"]
max_concurrent = = 1
max_queue = "not checked"
)"),
              ElementsAre(std::string(kFile) +
                          ":3:18: error while parsing value: could not determine value type"));
}

TEST(ParseConfig, DuplicateKeyIsASyntaxError) {
  EXPECT_THAT(
      Errors(R"([cells.a]
command = ["x"]
max_concurrent = 1
max_concurrent = 2
)"),
      ElementsAre(std::string(kFile) +
                  ":4:18: error while parsing key-value pair: cannot redefine existing integer "
                  "'max_concurrent'"));
}

TEST(ParseConfig, InvalidUtf8IsASyntaxError) {
  const std::vector<std::string> errors = Errors("[cells.a]\ncommand = [\"\xff\"]\n");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0], ::testing::StartsWith(std::string(kFile) + ":2:"));
}

TEST(ParseConfig, UnknownKeysWithHints) {
  EXPECT_THAT(
      Errors(R"([supervisor]
runtime_dir = "/run/bh"
log_levle = "debug"
[cell.x]
command = ["x"]
[cells.a]
command = ["x"]
max_concurrent = 1
max_queu = 3
colour = "red"
worker_socket = "/run/x.sock"
[cells.a.environment]
A = "1"
[extra]
)"),
      ElementsAre(At(3, 1, "supervisor.log_levle", "unknown key; did you mean \"log_level\"?"),
                  At(4, 2, "cell", "unknown key; did you mean \"cells\"?"),
                  At(9, 1, "cells.a.max_queu", "unknown key; did you mean \"max_queue\"?"),
                  At(10, 1, "cells.a.colour", "unknown key"),
                  At(11, 1, "cells.a.worker_socket",
                     "unknown key; the worker socket is always "
                     "<runtime_dir>/NAME.worker.sock"),
                  At(14, 2, "extra", "unknown key")));
}

TEST(ParseConfig, MisplacedKeysAtTopLevel) {
  EXPECT_THAT(
      Errors(R"(runtime_dir = "/run/bh"
max_queue = 1
[cells.a]
command = ["x"]
max_concurrent = 1
)"),
      ElementsAre(At(1, 1, "runtime_dir", "unknown key; runtime_dir belongs in [supervisor]"),
                  At(2, 1, "max_queue", "unknown key; max_queue belongs in a [cells.NAME] table")));
}

TEST(ParseConfig, WrongTypes) {
  EXPECT_THAT(
      Errors(R"([supervisor]
runtime_dir = "/run/bh"
max_payload_bytes = 1.5
log_level = 3
[cells.a]
command = "/usr/bin/worker"
max_concurrent = "2"
queue_timeout = 5
environment = ["A=1"]
socket = true
[cells.b]
command = ["/usr/bin/worker", 5]
max_concurrent = 1
max_queue = 2024-01-01
[cells.b.environment]
PORT = 8080
)"),
      ElementsAre(
          At(3, 21, "supervisor.max_payload_bytes", "expected integer, got float"),
          At(4, 13, "supervisor.log_level", "expected string, got integer"),
          At(6, 11, "cells.a.command",
             "expected array of strings, got string (write the program and its arguments as "
             "command = [\"/usr/bin/worker\", \"--flag\"])"),
          At(7, 18, "cells.a.max_concurrent", "expected integer, got string"),
          At(8, 17, "cells.a.queue_timeout",
             "expected string, got integer (a duration is a string such as \"500ms\" or \"2s\")"),
          At(9, 15, "cells.a.environment", "expected table, got array"),
          At(10, 10, "cells.a.socket", "expected string, got boolean"),
          At(12, 31, "cells.b.command[1]", "expected string, got integer (quote it)"),
          At(14, 13, "cells.b.max_queue", "expected integer, got date"),
          At(16, 8, "cells.b.environment.PORT", "expected string, got integer (quote it)")));
}

TEST(ParseConfig, NestedTableInEnvironment) {
  EXPECT_THAT(Errors(R"([supervisor]
runtime_dir = "/run/bh"
[cells.a]
command = ["x", ["y"]]
max_concurrent = 1
[cells.a.environment.NESTED]
X = "1"
)"),
              ElementsAre(At(4, 17, "cells.a.command[1]", "expected string, got array"),
                          At(6, 1, "cells.a.environment.NESTED", "expected string, got table")));
}

TEST(ParseConfig, SupervisorMustBeATable) {
  EXPECT_THAT(Errors(R"(supervisor = 1
[cells.a]
command = ["x"]
max_concurrent = 1
)"),
              ElementsAre(At(1, 14, "supervisor", "expected table, got integer")));
}

TEST(ParseConfig, CellsMustBeATableOfTables) {
  EXPECT_THAT(Errors(R"([[cells]]
command = ["x"]
)"),
              ElementsAre(At(1, 1, "cells",
                             "expected table, got array (write each cell as a [cells.NAME] "
                             "table, not [[cells]])")));
  EXPECT_THAT(Errors(R"(cells.a = 1
)"),
              ElementsAre(At(1, 11, "cells.a",
                             "expected table, got integer (write the cell as a [cells.NAME] "
                             "table)")));
}

TEST(ParseConfig, OutOfRangeNumbers) {
  EXPECT_THAT(
      Errors(R"([supervisor]
runtime_dir = "/run/bh"
max_payload_bytes = 0
[cells.a]
command = ["x"]
max_concurrent = 0
max_queue = -1
[cells.b]
command = ["x"]
max_concurrent = 65536
max_queue = 1000001
)"),
      ElementsAre(At(3, 21, "supervisor.max_payload_bytes",
                     "must be between 1 and 1073741824 (1 GiB), got 0"),
                  At(6, 18, "cells.a.max_concurrent", "must be between 1 and 65535, got 0"),
                  At(7, 13, "cells.a.max_queue", "must be between 0 and 1000000, got -1"),
                  At(10, 18, "cells.b.max_concurrent", "must be between 1 and 65535, got 65536"),
                  At(11, 13, "cells.b.max_queue", "must be between 0 and 1000000, got 1000001")));
  EXPECT_THAT(Errors(R"([supervisor]
max_payload_bytes = 1073741825
[cells.a]
command = ["x"]
max_concurrent = 1
)"),
              ElementsAre(At(2, 21, "supervisor.max_payload_bytes",
                             "must be between 1 and 1073741824 (1 GiB), got 1073741825")));
}

TEST(ParseConfig, MalformedDurations) {
  EXPECT_THAT(
      Errors(R"([supervisor]
runtime_dir = "/run/bh"
[cells.a]
command = ["x"]
max_concurrent = 1
queue_timeout = "1.5s"
restart_delay = "-1s"
[cells.b]
command = ["x"]
max_concurrent = 1
queue_timeout = "0s"
restart_delay = "0s"
)"),
      ElementsAre(At(6, 17, "cells.a.queue_timeout", ParseDuration("1.5s").status().message()),
                  At(7, 17, "cells.a.restart_delay", ParseDuration("-1s").status().message()),
                  At(11, 17, "cells.b.queue_timeout", "must be greater than 0")));
}

TEST(ParseConfig, MissingRequiredKeysPointAtTheCellTable) {
  EXPECT_THAT(Errors(R"([supervisor]
runtime_dir = "/run/bh"
[cells.a]
max_queue = 1
[cells.b]
command = ["x"]
)"),
              ElementsAre(At(3, 1, "cells.a.command", "missing required key"),
                          At(3, 1, "cells.a.max_concurrent", "missing required key"),
                          At(5, 1, "cells.b.max_concurrent", "missing required key")));
}

TEST(ParseConfig, NoCells) {
  const std::string unpositioned =
      std::string(kFile) + ": cells: no cells defined; add at least one [cells.NAME] table";
  EXPECT_THAT(Errors(""), ElementsAre(unpositioned));
  EXPECT_THAT(Errors("[supervisor]\nlog_level = \"info\"\n"), ElementsAre(unpositioned));
  EXPECT_THAT(
      Errors("cells = {}\n"),
      ElementsAre(At(1, 9, "cells", "no cells defined; add at least one [cells.NAME] table")));
  EXPECT_THAT(
      Errors("[supervisor]\n[cells]\n"),
      ElementsAre(At(2, 1, "cells", "no cells defined; add at least one [cells.NAME] table")));
}

TEST(ParseConfig, InvalidCellNames) {
  const std::string too_long(65, 'a');
  const std::string message =
      "cell name must be 1 to 64 characters of A-Z, a-z, 0-9, '_' and '-', not starting with '-'";
  EXPECT_THAT(
      Errors(R"([supervisor]
runtime_dir = "/run/bh"
[cells."bad name"]
command = ["x"]
max_concurrent = 1
[cells.)" + too_long +
             R"(]
command = ["x"]
max_concurrent = 1
[cells.""]
command = ["x"]
max_concurrent = 1
[cells."a.b"]
command = ["x"]
max_concurrent = 1
[cells.ok_Name-2]
command = ["x"]
max_concurrent = 1
)"),
      ElementsAre(At(3, 8, "cells.\"bad name\"", message), At(6, 8, "cells." + too_long, message),
                  At(9, 8, "cells.\"\"", message), At(12, 8, "cells.\"a.b\"", message)));
}

// Issue 13: "--help" would become --help.sock and read as an option of bulkheadctl.
TEST(ParseConfig, CellNamesStartingWithADashAreRefused) {
  const std::string message =
      "cell name must be 1 to 64 characters of A-Z, a-z, 0-9, '_' and '-', not starting with '-'";
  EXPECT_THAT(Errors(R"([supervisor]
runtime_dir = "/run/bh"
[cells.--help]
command = ["x"]
max_concurrent = 1
[cells.-x]
command = ["x"]
max_concurrent = 1
[cells.a-]
command = ["x"]
max_concurrent = 1
)"),
              ElementsAre(At(3, 8, "cells.--help", message), At(6, 8, "cells.-x", message)));
}

TEST(ParseConfig, BadCommands) {
  EXPECT_THAT(Errors(R"([supervisor]
runtime_dir = "/run/bh"
[cells.a]
command = []
max_concurrent = 1
[cells.b]
command = ["", "arg"]
max_concurrent = 1
[cells.c]
command = ["x\u0000y"]
max_concurrent = 1
)"),
              ElementsAre(At(4, 11, "cells.a.command",
                             "must not be empty; give the program and its arguments"),
                          At(7, 12, "cells.b.command[0]", "the program must not be empty"),
                          At(10, 12, "cells.c.command[0]", "must not contain a NUL character")));
}

TEST(ParseConfig, BadEnvironmentNames) {
  const std::string message =
      "an environment variable name must be non-empty and contain no '=' or NUL";
  EXPECT_THAT(Errors(R"([supervisor]
runtime_dir = "/run/bh"
[cells.a]
command = ["x"]
max_concurrent = 1
environment = { "A=B" = "1", "" = "2", GOOD = "3" }
)"),
              ElementsAre(At(6, 17, "cells.a.environment.\"A=B\"", message),
                          At(6, 30, "cells.a.environment.\"\"", message)));
}

TEST(ParseConfig, BadLogLevel) {
  EXPECT_THAT(
      Errors(R"([supervisor]
log_level = "Info"
[cells.a]
command = ["x"]
max_concurrent = 1
)"),
      ElementsAre(At(2, 13, "supervisor.log_level",
                     "must be one of debug, info, warning, error; got \"Info\"; did you mean "
                     "\"info\"?")));
  EXPECT_THAT(Errors(R"([supervisor]
log_level = "verbose"
[cells.a]
command = ["x"]
max_concurrent = 1
)"),
              ElementsAre(At(2, 13, "supervisor.log_level",
                             "must be one of debug, info, warning, error; got \"verbose\"")));
}

TEST(ParseConfig, LifecycleDefaults) {
  const Config config = MustParse(R"([cells.a]
command = ["x"]
max_concurrent = 1
)");
  ASSERT_EQ(config.cells.size(), 1u);
  const CellConfig& cell = config.cells[0];
  EXPECT_EQ(cell.restart, RestartMode::kAlways);
  EXPECT_EQ(cell.restart_delay, milliseconds(100));
  EXPECT_EQ(cell.restart_max_delay, milliseconds(30'000));
  EXPECT_EQ(cell.restart_reset_after, milliseconds(10'000));
  EXPECT_EQ(cell.start_limit_burst, 5u);
  EXPECT_EQ(cell.start_limit_interval, milliseconds(60'000));
  EXPECT_EQ(cell.request_timeout, milliseconds(0));
  EXPECT_EQ(cell.stall_timeout, milliseconds(0));
  EXPECT_EQ(cell.ready, ReadyMode::kExec);
  EXPECT_EQ(cell.watchdog, milliseconds(0));
  EXPECT_EQ(cell.stop_signal, SIGTERM);
  EXPECT_EQ(cell.stop_timeout, milliseconds(5000));
}

TEST(ParseConfig, LifecycleKeysAllSet) {
  const Config config = MustParse(R"([cells.a]
command = ["x"]
max_concurrent = 1
restart = "on-failure"
restart_delay = "250ms"
restart_max_delay = "1m"
restart_reset_after = "2m"
start_limit_burst = 1000
start_limit_interval = "1h"
request_timeout = "3s"
stall_timeout = "10s"
ready = "notify"
watchdog = "5s"
stop_signal = "HUP"
stop_timeout = "1s500ms"
[cells.b]
command = ["x"]
max_concurrent = 1
restart = "never"
start_limit_burst = 1
)");
  ASSERT_EQ(config.cells.size(), 2u);
  const CellConfig& a = config.cells[0];
  EXPECT_EQ(a.restart, RestartMode::kOnFailure);
  EXPECT_EQ(a.restart_delay, milliseconds(250));
  EXPECT_EQ(a.restart_max_delay, milliseconds(60'000));
  EXPECT_EQ(a.restart_reset_after, milliseconds(120'000));
  EXPECT_EQ(a.start_limit_burst, 1000u);
  EXPECT_EQ(a.start_limit_interval, milliseconds(3'600'000));
  EXPECT_EQ(a.request_timeout, milliseconds(3000));
  EXPECT_EQ(a.stall_timeout, milliseconds(10'000));
  EXPECT_EQ(a.ready, ReadyMode::kNotify);
  EXPECT_EQ(a.watchdog, milliseconds(5000));
  EXPECT_EQ(a.stop_signal, SIGHUP);
  EXPECT_EQ(a.stop_timeout, milliseconds(1500));
  EXPECT_EQ(config.cells[1].restart, RestartMode::kNever);
  EXPECT_EQ(config.cells[1].start_limit_burst, 1u);
}

TEST(ParseConfig, ZeroTurnsOffTimeoutsWatchdogAndStartLimit) {
  const Config config = MustParse(R"([cells.a]
command = ["x"]
max_concurrent = 1
restart_delay = "0s"
restart_max_delay = "0s"
start_limit_interval = "0s"
request_timeout = "0s"
stall_timeout = "0s"
watchdog = "0s"
)");
  ASSERT_EQ(config.cells.size(), 1u);
  const CellConfig& cell = config.cells[0];
  EXPECT_EQ(cell.restart_delay, milliseconds(0));
  EXPECT_EQ(cell.restart_max_delay, milliseconds(0));
  EXPECT_EQ(cell.start_limit_interval, milliseconds(0));
  EXPECT_EQ(cell.request_timeout, milliseconds(0));
  EXPECT_EQ(cell.stall_timeout, milliseconds(0));
  EXPECT_EQ(cell.watchdog, milliseconds(0));
}

TEST(ParseConfig, StopSignalNamesWithOrWithoutSigPrefix) {
  const std::vector<std::pair<std::string, int>> names = {
      {"TERM", SIGTERM}, {"INT", SIGINT},   {"HUP", SIGHUP},  {"QUIT", SIGQUIT},
      {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"KILL", SIGKILL}};
  for (const auto& [name, number] : names) {
    for (const std::string& written : {name, "SIG" + name}) {
      const Config config = MustParse(
          "[cells.a]\ncommand = [\"x\"]\nmax_concurrent = 1\n"
          "stop_signal = \"" +
          written + "\"\n");
      ASSERT_EQ(config.cells.size(), 1u) << written;
      EXPECT_EQ(config.cells[0].stop_signal, number) << written;
    }
  }
}

TEST(ParseConfig, BadLifecycleValues) {
  const std::string signals =
      "must be one of SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGKILL (the SIG prefix "
      "may be left out); got ";
  EXPECT_THAT(
      Errors(R"([supervisor]
runtime_dir = "/run/bh"
[cells.a]
command = ["x"]
max_concurrent = 1
restart = "sometimes"
ready = "notfy"
stop_signal = "SIGFOO"
start_limit_burst = 0
restart_reset_after = "0s"
stop_timeout = "0s"
watchdog = "1.5s"
[cells.b]
command = ["x"]
max_concurrent = 1
restart = "alwyas"
stop_signal = "sigterm"
start_limit_burst = 1001
[cells.c]
command = ["x"]
max_concurrent = 1
stop_signal = 15
restart = true
ready = "Notify"
stall_timeout = 5
stop_timout = "1s"
[cells.d]
command = ["x"]
max_concurrent = 1
stop_signal = "TREM"
)"),
      ElementsAre(
          At(6, 11, "cells.a.restart",
             "must be one of always, on-failure, never; got \"sometimes\""),
          At(7, 9, "cells.a.ready",
             "must be one of exec, notify; got \"notfy\"; did you mean \"notify\"?"),
          At(8, 15, "cells.a.stop_signal", signals + "\"SIGFOO\""),
          At(9, 21, "cells.a.start_limit_burst", "must be between 1 and 1000, got 0"),
          At(10, 23, "cells.a.restart_reset_after", "must be greater than 0"),
          At(11, 16, "cells.a.stop_timeout", "must be greater than 0"),
          At(12, 12, "cells.a.watchdog", ParseDuration("1.5s").status().message()),
          At(16, 11, "cells.b.restart",
             "must be one of always, on-failure, never; got \"alwyas\"; did you mean "
             "\"always\"?"),
          At(17, 15, "cells.b.stop_signal", signals + "\"sigterm\"; did you mean \"SIGTERM\"?"),
          At(18, 21, "cells.b.start_limit_burst", "must be between 1 and 1000, got 1001"),
          At(22, 15, "cells.c.stop_signal",
             "expected string, got integer (write the signal's name, such as \"SIGTERM\")"),
          At(23, 11, "cells.c.restart", "expected string, got boolean"),
          At(24, 9, "cells.c.ready",
             "must be one of exec, notify; got \"Notify\"; did you mean \"notify\"?"),
          At(25, 17, "cells.c.stall_timeout",
             "expected string, got integer (a duration is a string such as \"500ms\" or "
             "\"2s\")"),
          At(26, 1, "cells.c.stop_timout", "unknown key; did you mean \"stop_timeout\"?"),
          At(30, 15, "cells.d.stop_signal", signals + "\"TREM\"; did you mean \"SIGTERM\"?")));
}

TEST(ParseConfig, RestartMaxDelayMayNotBeBelowRestartDelay) {
  EXPECT_THAT(Errors(R"([supervisor]
runtime_dir = "/run/bh"
[cells.a]
command = ["x"]
max_concurrent = 1
restart_max_delay = "1m"
restart_delay = "1m30s"
[cells.b]
command = ["x"]
max_concurrent = 1
restart_max_delay = "50ms"
)"),
              ElementsAre(At(6, 21, "cells.a.restart_max_delay",
                             "must be at least restart_delay (\"1m30s\"), got \"1m\""),
                          At(11, 21, "cells.b.restart_max_delay",
                             "must be at least restart_delay (\"100ms\", the default), got "
                             "\"50ms\"")));
  // Equal is fine; left out, the cap follows a restart_delay above its 30s default.
  const Config config = MustParse(R"([cells.a]
command = ["x"]
max_concurrent = 1
restart_delay = "2s"
restart_max_delay = "2s"
[cells.b]
command = ["x"]
max_concurrent = 1
restart_delay = "2m"
)");
  ASSERT_EQ(config.cells.size(), 2u);
  EXPECT_EQ(config.cells[0].restart_max_delay, milliseconds(2000));
  EXPECT_EQ(config.cells[1].restart_max_delay, milliseconds(120'000));
}

TEST(ParseConfig, EmptyPaths) {
  EXPECT_THAT(Errors(R"([supervisor]
runtime_dir = ""
[cells.a]
command = ["x"]
max_concurrent = 1
socket = ""
working_directory = ""
)"),
              ElementsAre(At(2, 15, "supervisor.runtime_dir", "must not be empty"),
                          At(6, 10, "cells.a.socket", "must not be empty"),
                          At(7, 21, "cells.a.working_directory", "must not be empty")));
}

TEST(ParseConfig, DuplicateSocketsNameTheEarlierUse) {
  EXPECT_THAT(Errors(R"([supervisor]
runtime_dir = "/run/bh"
control_socket = "/run/bh/api.sock"
[cells.a]
command = ["x"]
max_concurrent = 1
socket = "/run/bh/api.sock"
[cells.b]
command = ["x"]
max_concurrent = 1
socket = "/run/bh/./sub/../a.worker.sock"
[cells.d]
command = ["x"]
max_concurrent = 1
socket = "/run/bh/d.sock"
)"),
              ElementsAre(At(7, 10, "cells.a.socket",
                             "socket /run/bh/api.sock is also used by supervisor.control_socket"),
                          At(11, 10, "cells.b.socket",
                             "socket /run/bh/a.worker.sock is also used by the worker socket of "
                             "cells.a")));
}

// The hidden NAME.notify socket clashes like any other: a cell socket placed there would be
// removed and replaced by the cell's NOTIFY_SOCKET at startup, and its worker never heard.
TEST(ParseConfig, SocketOnAnotherCellsNotifySocketIsRefused) {
  EXPECT_THAT(Errors(R"([supervisor]
runtime_dir = "/run/bh"
[cells.a]
command = ["x"]
max_concurrent = 1
[cells.b]
command = ["x"]
max_concurrent = 1
socket = "/run/bh/a.notify"
)"),
              ElementsAre(At(9, 10, "cells.b.socket",
                             "socket /run/bh/a.notify is also used by the notify socket of "
                             "cells.a")));
}

TEST(ParseConfig, NotifySocketIsDerivedFromTheRuntimeDir) {
  Config config = MustParse(R"([supervisor]
runtime_dir = "/run/bh"
[cells.a]
command = ["x"]
max_concurrent = 1
)");
  EXPECT_EQ(config.cells[0].notify_socket, "/run/bh/a.notify");
}

TEST(ParseConfig, DuplicateSocketIsReportedAtTheLaterUseInFileOrder) {
  EXPECT_THAT(Errors(R"([cells.a]
command = ["x"]
max_concurrent = 1
socket = "/run/bh/api.sock"
[cells.b]
command = ["x"]
max_concurrent = 1
socket = "/run/bh/api.sock"
[supervisor]
runtime_dir = "/run/bh"
control_socket = "/run/bh/api.sock"
)"),
              ElementsAre(At(8, 10, "cells.b.socket",
                             "socket /run/bh/api.sock is also used by cells.a.socket"),
                          At(11, 18, "supervisor.control_socket",
                             "socket /run/bh/api.sock is also used by cells.a.socket")));
}

TEST(ParseConfig, CellNamedControlClashesWithDefaultControlSocket) {
  EXPECT_THAT(Errors(R"([supervisor]
runtime_dir = "/run/bh"
[cells.control]
command = ["x"]
max_concurrent = 1
)"),
              ElementsAre(At(3, 1, "cells.control.socket",
                             "default socket /run/bh/control.sock is also used by "
                             "supervisor.control_socket")));
}

TEST(ParseConfig, SocketPathLongerThanSunPath) {
  const std::string fits = "/" + std::string(106, 'x');      // 107 bytes.
  const std::string too_long = "/" + std::string(107, 'y');  // 108 bytes.
  EXPECT_THAT(Errors(R"([supervisor]
runtime_dir = "/run/bh"
[cells.a]
command = ["x"]
max_concurrent = 1
socket = ")" + fits + R"("
[cells.b]
command = ["x"]
max_concurrent = 1
socket = ")" + too_long +
                     R"("
)"),
              ElementsAre(At(10, 10, "cells.b.socket",
                             "socket " + too_long +
                                 " is 108 bytes, over the 107-byte limit of a Unix socket path "
                                 "(sun_path)")));
}

TEST(ParseConfig, RuntimeDirTooLongForDerivedSockets) {
  const std::string runtime_dir = "/" + std::string(95, 'r');  // 96 bytes.
  EXPECT_THAT(
      Errors(R"([supervisor]
runtime_dir = ")" +
             runtime_dir + R"("
[cells.a]
command = ["x"]
max_concurrent = 1
)"),
      ElementsAre(At(2, 15, "supervisor.control_socket",
                     "default socket " + runtime_dir +
                         "/control.sock is 109 bytes, over the 107-byte limit of a Unix socket "
                         "path (sun_path); shorten supervisor.runtime_dir"),
                  // a.sock is 103 bytes and fits.
                  At(3, 1, "cells.a",
                     "worker socket " + runtime_dir +
                         "/a.worker.sock is 110 bytes, over the 107-byte limit of a Unix socket "
                         "path (sun_path); shorten supervisor.runtime_dir or the cell name")));
}

TEST(ParseConfig, SeveralErrorsReportedTogetherInFileOrder) {
  LoadResult result = ParseConfig(R"([cells.b]
command = ["x"]
max_concurrent = 0
[cells.a]
max_queue = "big"
[supervisor]
runtime_dir = "/run/bh"
log_level = "loud"
)",
                                  kFile);
  EXPECT_FALSE(result.config.has_value());
  EXPECT_THAT(ErrorLines(result),
              ElementsAre(At(3, 18, "cells.b.max_concurrent", "must be between 1 and 65535, got 0"),
                          At(4, 1, "cells.a.command", "missing required key"),
                          At(4, 1, "cells.a.max_concurrent", "missing required key"),
                          At(5, 13, "cells.a.max_queue", "expected integer, got string"),
                          At(8, 13, "supervisor.log_level",
                             "must be one of debug, info, warning, error; got \"loud\"")));
  // The structured fields agree with the text.
  ASSERT_EQ(result.errors.size(), 5u);
  EXPECT_EQ(result.errors[3].file, kFile);
  EXPECT_EQ(result.errors[3].line, 5);
  EXPECT_EQ(result.errors[3].column, 13);
  EXPECT_EQ(result.errors[3].key, "cells.a.max_queue");
  EXPECT_EQ(result.errors[3].message, "expected integer, got string");
}

TEST(ParseConfig, RelativePathsResolveAgainstTheConfigDirectory) {
  const Config config = MustParse(R"([supervisor]
runtime_dir = "../run"
control_socket = "ctl/control.sock"
[cells.a]
command = ["../bin/worker", "--data", "./data"]
max_concurrent = 1
socket = "sockets//a.sock"
working_directory = "."
[cells.b]
command = ["worker", "x/y"]
max_concurrent = 1
working_directory = "/srv/b/../b2/"
)",
                                  "/etc/bulkhead/conf.d/main.toml");
  EXPECT_EQ(config.supervisor.runtime_dir, "/etc/bulkhead/run");
  EXPECT_EQ(config.supervisor.control_socket, "/etc/bulkhead/conf.d/ctl/control.sock");
  ASSERT_EQ(config.cells.size(), 2u);
  const CellConfig& a = config.cells[0];
  // Only command[0] is a path; arguments are passed as written.
  EXPECT_THAT(a.command, ElementsAre("/etc/bulkhead/bin/worker", "--data", "./data"));
  EXPECT_EQ(a.socket, "/etc/bulkhead/conf.d/sockets/a.sock");
  EXPECT_EQ(a.worker_socket, "/etc/bulkhead/run/a.worker.sock");
  EXPECT_EQ(a.working_directory, "/etc/bulkhead/conf.d");
  const CellConfig& b = config.cells[1];
  // No '/': looked up in $PATH at exec time, so kept as is.
  EXPECT_THAT(b.command, ElementsAre("worker", "x/y"));
  EXPECT_EQ(b.socket, "/etc/bulkhead/run/b.sock");
  EXPECT_EQ(b.working_directory, "/srv/b2");
}

TEST(ParseConfig, RelativeSourcePathIsAnchoredAtTheCwd) {
  char cwd[PATH_MAX];
  ASSERT_NE(getcwd(cwd, sizeof(cwd)), nullptr);
  const Config config = MustParse(R"([supervisor]
runtime_dir = "run"
[cells.a]
command = ["./worker"]
max_concurrent = 1
)",
                                  "conf/bulkhead.toml");
  EXPECT_EQ(config.source, "conf/bulkhead.toml");
  EXPECT_EQ(config.supervisor.runtime_dir, NormalizePath(std::string(cwd) + "/conf/run"));
  ASSERT_EQ(config.cells.size(), 1u);
  EXPECT_THAT(config.cells[0].command,
              ElementsAre(NormalizePath(std::string(cwd) + "/conf/worker")));
}

TEST(ParseConfig, NeverThrowsAndKeepsItsContractOnDamagedInput) {
  // Every prefix of a valid file, and the file with each byte replaced by characters that break
  // TOML in different ways. Only the contract is checked: config set iff no errors, every error
  // names the file, and errors are sorted.
  std::vector<std::string> inputs;
  for (size_t n = 0; n <= kFullConfig.size(); ++n) inputs.emplace_back(kFullConfig.substr(0, n));
  for (size_t i = 0; i < kFullConfig.size(); ++i) {
    for (char c : {'"', '[', '=', '\n', '\0', '\xff', '.', '0'}) {
      std::string damaged(kFullConfig);
      damaged[i] = c;
      inputs.push_back(std::move(damaged));
    }
  }
  for (const std::string& input : inputs) {
    LoadResult result;
    ASSERT_NO_THROW(result = ParseConfig(input, kFile)) << input;
    ASSERT_EQ(result.config.has_value(), result.errors.empty()) << input;
    for (size_t e = 0; e < result.errors.size(); ++e) {
      ASSERT_EQ(result.errors[e].file, kFile);
      ASSERT_FALSE(result.errors[e].message.empty());
      if (e > 0) {
        const ConfigError& prev = result.errors[e - 1];
        const ConfigError& cur = result.errors[e];
        ASSERT_TRUE(prev.line < cur.line || (prev.line == cur.line && prev.column <= cur.column))
            << input;
      }
    }
  }
}

// LoadConfigFile against real files in a fresh temporary directory.
class LoadConfigFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "bulkhead-config-XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    for (const std::string& file : files_) unlink(file.c_str());
    rmdir(dir_.c_str());
  }
  std::string Write(const std::string& name, std::string_view text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    files_.push_back(path);
    return path;
  }

  std::string dir_;
  std::vector<std::string> files_;
};

TEST_F(LoadConfigFileTest, ReadsAndAnchorsPathsAtTheFile) {
  const std::string path = Write("bulkhead.toml", R"([supervisor]
runtime_dir = "run"
[cells.a]
command = ["x"]
max_concurrent = 1
)");
  LoadResult result = LoadConfigFile(path);
  ASSERT_THAT(ErrorLines(result), IsEmpty());
  ASSERT_TRUE(result.config.has_value());
  EXPECT_EQ(result.config->source, path);
  EXPECT_EQ(result.config->supervisor.runtime_dir, NormalizePath(dir_ + "/run"));
}

TEST_F(LoadConfigFileTest, ReportsErrorsUnderThePathAsGiven) {
  const std::string path = Write("bad.toml", "[cells.a]\nmax_concurrent = 1\n");
  LoadResult result = LoadConfigFile(path);
  EXPECT_FALSE(result.config.has_value());
  EXPECT_THAT(ErrorLines(result),
              ElementsAre(path + ":1:1: cells.a.command: missing required key"));
}

TEST_F(LoadConfigFileTest, MissingFileGivesOneClearError) {
  const std::string path = dir_ + "/missing.toml";
  LoadResult result = LoadConfigFile(path);
  EXPECT_FALSE(result.config.has_value());
  EXPECT_THAT(ErrorLines(result),
              ElementsAre(path + ": cannot open config file: No such file or directory"));
}

TEST_F(LoadConfigFileTest, DirectoryGivesOneClearError) {
  LoadResult result = LoadConfigFile(dir_);
  EXPECT_FALSE(result.config.has_value());
  EXPECT_THAT(ErrorLines(result), ElementsAre(dir_ + ": cannot read config file: Is a directory"));
}

TEST(ParseConfig, WorkerOutputKeys) {
  const CellConfig defaults = MustParse(CellWith("")).cells[0];
  EXPECT_EQ(defaults.output, OutputMode::kLog);
  EXPECT_EQ(defaults.log_line_max, 4096u);
  EXPECT_EQ(defaults.log_rate_limit_burst, 1000u);
  EXPECT_EQ(defaults.log_rate_limit_interval, std::chrono::seconds(10));

  const CellConfig set = MustParse(CellWith("output = \"null\"\nlog_line_max = \"64K\"\n"
                                            "log_rate_limit_burst = 0\n"
                                            "log_rate_limit_interval = \"1m\""))
                             .cells[0];
  EXPECT_EQ(set.output, OutputMode::kNull);
  EXPECT_EQ(set.log_line_max, 65536u);
  EXPECT_EQ(set.log_rate_limit_burst, 0u);
  EXPECT_EQ(set.log_rate_limit_interval, std::chrono::minutes(1));
  EXPECT_EQ(MustParse(CellWith("output = \"inherit\"\nlog_line_max = 64")).cells[0].output,
            OutputMode::kInherit);

  EXPECT_THAT(Errors(CellWith("log_line_max = 63")),
              ElementsAre(At(4, 16, "cells.a.log_line_max",
                             "must be between 64 and 1048576 bytes (1M), got 63")));
  EXPECT_THAT(Errors(CellWith("log_line_max = \"2M\"")),
              ElementsAre(At(4, 16, "cells.a.log_line_max",
                             "must be between 64 and 1048576 bytes (1M), got \"2M\"")));
  EXPECT_THAT(Errors(CellWith("log_rate_limit_burst = 1000001")),
              ElementsAre(At(4, 24, "cells.a.log_rate_limit_burst",
                             "must be between 0 and 1000000, got 1000001")));
  std::vector<std::string> bad_output = Errors(CellWith("output = \"journal\""));
  ASSERT_EQ(bad_output.size(), 1u);
  EXPECT_THAT(bad_output[0], ::testing::HasSubstr("cells.a.output"));
  EXPECT_THAT(bad_output[0], ::testing::HasSubstr("must be one of log, inherit, null"));
}

// cells.NAME.max_unsent_bytes and client_write_timeout: defaults (following max_payload_bytes),
// values, and positioned errors.
TEST(ParseConfig, MaxUnsentBytesAndClientWriteTimeout) {
  const CellConfig defaults = MustParse(CellWith("")).cells[0];
  EXPECT_EQ(defaults.max_unsent_bytes, uint64_t{64} << 20);
  EXPECT_EQ(defaults.client_write_timeout, std::chrono::seconds(30));
  // With 64 MiB payloads the default holds two full-size replies and 64 KiB.
  EXPECT_EQ(MustParse("[supervisor]\nmax_payload_bytes = 67108864\n" + CellWith(""))
                .cells[0]
                .max_unsent_bytes,
            2 * ((uint64_t{64} << 20) + 16) + 65536);

  const CellConfig set =
      MustParse(CellWith("max_unsent_bytes = \"8M\"\nclient_write_timeout = \"0s\"")).cells[0];
  EXPECT_EQ(set.max_unsent_bytes, uint64_t{8} << 20);
  EXPECT_EQ(set.client_write_timeout, std::chrono::milliseconds(0));

  EXPECT_THAT(Errors(CellWith("max_unsent_bytes = \"4M\"")),
              ElementsAre(At(4, 20, "cells.a.max_unsent_bytes",
                             "must hold one full-size reply: at least max_payload_bytes + 16 "
                             "(4194320 bytes), got \"4M\"")));
  EXPECT_THAT(
      Errors("[supervisor]\nmax_payload_bytes = 1024\n" + CellWith("max_unsent_bytes = 1000")),
      ElementsAre(At(6, 20, "cells.a.max_unsent_bytes",
                     "must hold one full-size reply: at least max_payload_bytes + 16 "
                     "(1040 bytes), got 1000")));
  std::vector<std::string> bad_timeout = Errors(CellWith("client_write_timeout = 30"));
  ASSERT_EQ(bad_timeout.size(), 1u);
  EXPECT_THAT(bad_timeout[0], ::testing::HasSubstr(":4:24: cells.a.client_write_timeout"));
}

// cells.NAME.max_connections: its default, its range, and positioned errors.
TEST(ParseConfig, MaxConnectionsDefaultAndRange) {
  EXPECT_EQ(MustParse(R"([supervisor]
runtime_dir = "/run/bh"
[cells.a]
command = ["x"]
max_concurrent = 1
)")
                .cells[0]
                .max_connections,
            1024u);
  const Config config = MustParse(R"([supervisor]
runtime_dir = "/run/bh"
[cells.a]
command = ["x"]
max_concurrent = 1
max_connections = 1
[cells.b]
command = ["x"]
max_concurrent = 1
max_connections = 1048576
)");
  EXPECT_EQ(config.cells[0].max_connections, 1u);
  EXPECT_EQ(config.cells[1].max_connections, 1048576u);
  EXPECT_THAT(
      Errors(R"([supervisor]
runtime_dir = "/run/bh"
[cells.a]
command = ["x"]
max_concurrent = 1
max_connections = 0
[cells.b]
command = ["x"]
max_concurrent = 1
max_connections = 1048577
[cells.c]
command = ["x"]
max_concurrent = 1
max_connections = "many"
)"),
      ElementsAre(
          At(6, 19, "cells.a.max_connections", "must be between 1 and 1048576, got 0"),
          At(10, 19, "cells.b.max_connections", "must be between 1 and 1048576, got 1048577"),
          At(14, 19, "cells.c.max_connections", "expected integer, got string")));
}

}  // namespace
}  // namespace bulkhead::config
