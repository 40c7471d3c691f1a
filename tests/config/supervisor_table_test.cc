// SPDX-License-Identifier: MIT
// The [supervisor] table (config/supervisor_table.h): its defaults (runtime_dir from the
// environment), log_level, cgroup, cgroup_parent, on_shutdown, and their errors with file:line:col.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "base/runtime_dir.h"
#include "config/config.h"
#include "tests/config/config_test_util.h"

namespace bulkhead::config {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

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

// max_payload_bytes is a size like max_unsent_bytes and memory_max: "200M" as well as 209715200,
// within the same 1 GiB either way.
TEST(ParseConfig, MaxPayloadBytesTakesASizeString) {
  EXPECT_EQ(MustParse("[supervisor]\nmax_payload_bytes = \"200M\"\n" + CellWith(""))
                .supervisor.max_payload_bytes,
            200u << 20);
  EXPECT_EQ(MustParse("[supervisor]\nmax_payload_bytes = \"1Gi\"\n" + CellWith(""))
                .supervisor.max_payload_bytes,
            1u << 30);
  EXPECT_THAT(Errors("[supervisor]\nmax_payload_bytes = \"2G\"\n" + CellWith("")),
              ElementsAre(At(2, 21, "supervisor.max_payload_bytes",
                             "must be between 1 and 1073741824 (1 GiB), got \"2G\"")));
  EXPECT_THAT(Errors("[supervisor]\nmax_payload_bytes = \"0K\"\n" + CellWith("")),
              ElementsAre(At(2, 21, "supervisor.max_payload_bytes",
                             "must be between 1 and 1073741824 (1 GiB), got \"0K\"")));
  EXPECT_THAT(Errors("[supervisor]\nmax_payload_bytes = \"200MB\"\n" + CellWith("")),
              ElementsAre(AllOf(HasSubstr(At(2, 21, "supervisor.max_payload_bytes", "")),
                                HasSubstr("\"200MB\""))));
}

TEST(ParseConfig, SupervisorMustBeATable) {
  EXPECT_THAT(Errors(R"(supervisor = 1
[cells.a]
command = ["x"]
max_concurrent = 1
)"),
              ElementsAre(At(1, 14, "supervisor", "expected table, got integer")));
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

}  // namespace
}  // namespace bulkhead::config

namespace bulkhead::config {
namespace {

constexpr char kAccessLogCell[] = "[cells.a]\ncommand = [\"/bin/true\"]\nmax_concurrent = 1\n";

TEST(AccessLogKey, UnsetMeansNoLogStderrAndPathsResolvedFromTheConfigFile) {
  LoadResult unset = ParseConfig(std::string(kAccessLogCell), "/etc/bh/b.toml");
  ASSERT_TRUE(unset.config.has_value());
  EXPECT_EQ(unset.config->supervisor.access_log, "");

  LoadResult to_stderr = ParseConfig(
      std::string("[supervisor]\naccess_log = \"stderr\"\n") + kAccessLogCell, "/etc/bh/b.toml");
  ASSERT_TRUE(to_stderr.config.has_value());
  EXPECT_EQ(to_stderr.config->supervisor.access_log, "stderr");

  LoadResult relative =
      ParseConfig(std::string("[supervisor]\naccess_log = \"logs/access.log\"\n") + kAccessLogCell,
                  "/etc/bh/b.toml");
  ASSERT_TRUE(relative.config.has_value());
  EXPECT_EQ(relative.config->supervisor.access_log, "/etc/bh/logs/access.log");
}

TEST(AccessLogKey, NonStringIsAnErrorAtItsPlace) {
  LoadResult result =
      ParseConfig(std::string("[supervisor]\naccess_log = 3\n") + kAccessLogCell, "/etc/bh/b.toml");
  EXPECT_FALSE(result.config.has_value());
  ASSERT_FALSE(result.errors.empty());
  EXPECT_NE(result.errors[0].ToString().find("b.toml:2:14: supervisor.access_log"),
            std::string::npos)
      << result.errors[0].ToString();
}

}  // namespace
}  // namespace bulkhead::config
