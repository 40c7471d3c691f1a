// SPDX-License-Identifier: MIT
// BuildWorkerEnvironment: what a worker starts with, from the config alone, without a process
// (docs/architecture.md, "Processes"; the e2e tests check the same through a real worker's
// `self` command).
#include "lifecycle/worker_environment.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace bulkhead::lifecycle {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

config::CellConfig Cell() {
  config::CellConfig config;
  config.name = "payments";
  config.command = {"/usr/bin/worker", "--port", "0"};
  return config;
}

TEST(WorkerEnvironment, HoldsTheConfigsVariablesThenWhatBulkheaddSets) {
  config::CellConfig config = Cell();
  config.environment = {{"MODE", "live"}, {"LANG", "C.UTF-8"}};
  cell::SpawnOptions options =
      BuildWorkerEnvironment(config, "/run/bulkhead/payments.notify", 1 << 20, /*listen_fd=*/7);
  EXPECT_THAT(options.argv, ElementsAre("/usr/bin/worker", "--port", "0"));
  EXPECT_THAT(options.environment,
              ElementsAre("MODE=live", "LANG=C.UTF-8",
                          "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                          "NOTIFY_SOCKET=/run/bulkhead/payments.notify",
                          "BULKHEAD_MAX_PAYLOAD_BYTES=1048576"));
  // Descriptor 3 and its sd_listen_fds(3) name: Spawn adds LISTEN_FDS, LISTEN_PID, LISTEN_FDNAMES.
  EXPECT_EQ(options.listen_fd, 7);
  EXPECT_EQ(options.listen_fd_name, "payments");
  EXPECT_EQ(options.parent_death_signal, SIGKILL);
  // Left to each spawn.
  EXPECT_EQ(options.cgroup_fd, -1);
  EXPECT_EQ(options.stdout_fd, -1);
  EXPECT_EQ(options.stderr_fd, -1);
}

TEST(WorkerEnvironment, TheConfigsPathWinsAndBulkheaddsOwnNamesAreNotTakenFromIt) {
  config::CellConfig config = Cell();
  config.environment = {{"PATH", "/opt/bin"},
                        {"NOTIFY_SOCKET", "/tmp/elsewhere"},
                        {"WATCHDOG_USEC", "1"},
                        {"WATCHDOG_PID", "1"},
                        {"BULKHEAD_MAX_PAYLOAD_BYTES", "1"},
                        {"BULKHEAD_WORKER_CONNECTIONS", "multiplex"}};
  cell::SpawnOptions options = BuildWorkerEnvironment(config, "/run/n", 4096, 3);
  EXPECT_THAT(options.environment, ElementsAre("PATH=/opt/bin", "NOTIFY_SOCKET=/run/n",
                                               "BULKHEAD_MAX_PAYLOAD_BYTES=4096"));
}

TEST(WorkerEnvironment, WatchdogAndMultiplexAddTheirVariables) {
  config::CellConfig config = Cell();
  config.watchdog = std::chrono::milliseconds(1500);
  config.worker_connections = config::WorkerConnections::kMultiplex;
  cell::SpawnOptions options = BuildWorkerEnvironment(config, "/run/n", 4096, 3);
  EXPECT_THAT(options.environment,
              ElementsAre("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                          "NOTIFY_SOCKET=/run/n", "BULKHEAD_MAX_PAYLOAD_BYTES=4096",
                          "BULKHEAD_WORKER_CONNECTIONS=multiplex", "WATCHDOG_USEC=1500000"));
}

TEST(WorkerEnvironment, AUserBringsItsVariablesUnlessTheConfigGivesThem) {
  config::CellConfig config = Cell();
  config.user = 1234;
  config.user_name = "pay";
  config.user_home = "/home/pay";
  config.user_shell = "/bin/sh";
  config.environment = {{"HOME", "/srv/pay"}};
  cell::SpawnOptions options = BuildWorkerEnvironment(config, "/run/n", 4096, 3);
  EXPECT_THAT(options.environment,
              ElementsAre("HOME=/srv/pay",
                          "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                          "NOTIFY_SOCKET=/run/n", "BULKHEAD_MAX_PAYLOAD_BYTES=4096", "USER=pay",
                          "LOGNAME=pay", "SHELL=/bin/sh"));
  ASSERT_TRUE(options.credentials.has_value());
  EXPECT_EQ(options.credentials->uid, 1234u);
  EXPECT_EQ(options.credentials->gid, ::getegid()) << "no group: the supervisor's";
  EXPECT_THAT(options.credentials->supplementary_groups, IsEmpty());
}

TEST(WorkerEnvironment, PrivilegesAndPlaceFollowTheConfig) {
  config::CellConfig config = Cell();
  cell::SpawnOptions defaults = BuildWorkerEnvironment(config, "/run/n", 4096, 3);
  EXPECT_FALSE(defaults.credentials.has_value()) << "the supervisor's credentials, unchanged";
  EXPECT_EQ(defaults.umask, 0022u);
  EXPECT_TRUE(defaults.no_new_privileges);
  EXPECT_EQ(defaults.oom_score_adj, 0);
  EXPECT_EQ(defaults.working_directory, "/");

  config.umask = 0077;
  config.no_new_privileges = false;
  config.oom_score_adjust = 500;
  config.working_directory = "/srv/payments";
  config.group = 50;
  config.supplementary_groups = {60, 70};
  config.has_supplementary_groups = true;
  cell::SpawnOptions options = BuildWorkerEnvironment(config, "/run/n", 4096, 3);
  EXPECT_EQ(options.umask, 0077u);
  EXPECT_FALSE(options.no_new_privileges);
  EXPECT_EQ(options.oom_score_adj, 500);
  EXPECT_EQ(options.working_directory, "/srv/payments");
  ASSERT_TRUE(options.credentials.has_value());
  EXPECT_EQ(options.credentials->uid, ::geteuid());
  EXPECT_EQ(options.credentials->gid, 50u);
  EXPECT_THAT(options.credentials->supplementary_groups, ElementsAre(60u, 70u));
}

}  // namespace
}  // namespace bulkhead::lifecycle
