// SPDX-License-Identifier: MIT
// PlanReload: every key of a cell classified (live admission, live cgroup, live policy, restart),
// a field it does not know by name restarting the cell, the table position ignored, cells added
// and removed, and the refusals: a changed [supervisor] key other than log_level, a changed cell
// socket.
#include "control/reload_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/config.h"

namespace bulkhead::control {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using Action = CellPlan::Action;

constexpr char kFile[] = "/etc/bulkhead/bulkhead.toml";

constexpr char kBase[] = R"([supervisor]
runtime_dir = "/run/bh"

[cells.payments]
command = ["/bin/pay"]
max_concurrent = 2
max_queue = 4

[cells.catalog]
command = ["/bin/catalog", "--fast"]
max_concurrent = 1
)";

config::Config Parse(const std::string& toml) {
  config::LoadResult loaded = config::ParseConfig(toml, kFile, config::HostFacts{.cpus = 4});
  EXPECT_THAT(loaded.errors, IsEmpty())
      << (loaded.errors.empty() ? "" : loaded.errors[0].ToString());
  return loaded.config.value_or(config::Config{});
}

// kBase with `catalog_extra` appended to [cells.catalog].
ReloadPlan PlanCatalogChange(const std::string& catalog_extra) {
  return PlanReload(Parse(kBase), Parse(std::string(kBase) + catalog_extra));
}

TEST(ReloadPlan, SameFileChangesNothing) {
  ReloadPlan plan = PlanReload(Parse(kBase), Parse(kBase));
  EXPECT_TRUE(plan.ok());
  EXPECT_FALSE(plan.log_level_changed);
  ASSERT_EQ(plan.cells.size(), 2u);
  EXPECT_EQ(plan.cells[0].action, Action::kUnchanged);
  EXPECT_EQ(plan.cells[1].action, Action::kUnchanged);
  EXPECT_EQ(plan.Summary(), "payments unchanged, catalog unchanged");
}

TEST(ReloadPlan, MovedTablesAndCommentsAreNoChange) {
  const std::string moved = R"(# comment
[cells.catalog]
max_concurrent = 1
command = ["/bin/catalog", "--fast"]

[supervisor]
runtime_dir = "/run/bh"


[cells.payments]
max_queue = 4
command = ["/bin/pay"]
max_concurrent = 2
)";
  ReloadPlan plan = PlanReload(Parse(kBase), Parse(moved));
  EXPECT_TRUE(plan.ok());
  // New file order.
  EXPECT_EQ(plan.Summary(), "catalog unchanged, payments unchanged");
}

TEST(ReloadPlan, AdmissionLimitsApplyLive) {
  ReloadPlan plan = PlanReload(Parse(kBase), Parse(R"([supervisor]
runtime_dir = "/run/bh"
[cells.payments]
command = ["/bin/pay"]
max_concurrent = 3
max_queue = 1
queue_timeout = "5s"
[cells.catalog]
command = ["/bin/catalog", "--fast"]
max_concurrent = 1
)"));
  ASSERT_TRUE(plan.ok());
  const CellPlan& payments = plan.cells[0];
  EXPECT_EQ(payments.action, Action::kUpdate);
  EXPECT_THAT(payments.changed, ElementsAre("max_concurrent", "max_queue", "queue_timeout"));
  EXPECT_TRUE(payments.admission_changed);
  EXPECT_FALSE(payments.cgroup_changed);
  EXPECT_FALSE(payments.policy_changed);
  EXPECT_EQ(plan.cells[1].action, Action::kUnchanged);
  EXPECT_EQ(plan.Summary(),
            "payments updated (max_concurrent, max_queue, queue_timeout changed), catalog "
            "unchanged");
}

// Issue 26: a cell switches between a fixed and an adaptive limit live, and the adaptive keys
// move its bounds live (CellDataPath::Reconfigure makes, drops or rebounds its AdaptiveLimit).
TEST(ReloadPlan, ConcurrencyModeAndItsBoundsApplyLive) {
  ReloadPlan plan = PlanCatalogChange(
      "concurrency = \"adaptive\"\nmin_concurrent = 1\nlatency_tolerance = \"25%\"\n");
  ASSERT_TRUE(plan.ok());
  const CellPlan& to_adaptive = plan.cells[1];
  EXPECT_EQ(to_adaptive.action, Action::kUpdate);
  EXPECT_THAT(to_adaptive.changed, ElementsAre("concurrency", "latency_tolerance"));
  EXPECT_TRUE(to_adaptive.admission_changed);
  EXPECT_FALSE(to_adaptive.cgroup_changed);
  EXPECT_FALSE(to_adaptive.policy_changed);

  const std::string adaptive = std::string(kBase) + "concurrency = \"adaptive\"\n";
  plan = PlanReload(Parse(adaptive), Parse(kBase));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan.cells[1].action, Action::kUpdate);
  EXPECT_THAT(plan.cells[1].changed, ElementsAre("concurrency"));
  EXPECT_EQ(plan.Summary(), "payments unchanged, catalog updated (concurrency changed)");
}

TEST(ReloadPlan, CgroupLimitsApplyLive) {
  ReloadPlan plan = PlanCatalogChange(
      "cpu_max = \"50%\"\ncpu_weight = 200\nmemory_max = \"64M\"\nmemory_high = \"32M\"\n"
      "memory_swap_max = 0\npids_max = 64\ncpu_max_period = \"50ms\"\noom_policy = \"continue\"\n");
  ASSERT_TRUE(plan.ok());
  const CellPlan& catalog = plan.cells[1];
  EXPECT_EQ(catalog.action, Action::kUpdate);
  EXPECT_TRUE(catalog.cgroup_changed);
  EXPECT_FALSE(catalog.admission_changed);
  // oom_policy is memory.oom.group, rewritten with the limits.
  EXPECT_THAT(catalog.changed,
              ElementsAre("cpu_max", "cpu_max_period", "cpu_weight", "memory_max", "memory_high",
                          "memory_swap_max", "pids_max", "oom_policy"));
}

TEST(ReloadPlan, LifecyclePolicyAppliesLive) {
  ReloadPlan plan = PlanCatalogChange(
      "restart = \"on-failure\"\nrestart_delay = \"1s\"\nrestart_max_delay = \"1m\"\n"
      "restart_reset_after = \"1m\"\nstart_limit_burst = 9\nstart_limit_interval = \"2m\"\n"
      "request_timeout = \"3s\"\nstall_timeout = \"4s\"\nstart_timeout = \"20s\"\n"
      "stop_signal = \"SIGINT\"\nkill_mode = \"mixed\"\nstop_timeout = \"2s\"\n");
  ASSERT_TRUE(plan.ok());
  const CellPlan& catalog = plan.cells[1];
  EXPECT_EQ(catalog.action, Action::kUpdate);
  EXPECT_TRUE(catalog.policy_changed);
  EXPECT_FALSE(catalog.cgroup_changed);
  EXPECT_THAT(
      catalog.changed,
      ElementsAre("restart", "restart_delay", "restart_max_delay", "restart_reset_after",
                  "start_limit_burst", "start_limit_interval", "request_timeout", "stall_timeout",
                  "start_timeout", "stop_signal", "kill_mode", "stop_timeout"));
}

TEST(ReloadPlan, WorkerKeysRestartTheCell) {
  struct Case {
    std::string extra;
    std::string key;
  };
  for (const Case& c : {
           Case{"working_directory = \"/tmp\"\n", "working_directory"},
           Case{"ready = \"notify\"\n", "ready"},
           // Told to the worker in its environment: only a new worker serves the other mode.
           Case{"worker_connections = \"multiplex\"\n", "worker_connections"},
           Case{"watchdog = \"10s\"\n", "watchdog"},
           // Set in the child before exec: only a new worker gets it.
           Case{"oom_score_adjust = -500\n", "oom_score_adjust"},
           Case{"[cells.catalog.environment]\nMODE = \"x\"\n", "environment"},
       }) {
    ReloadPlan plan = PlanCatalogChange(c.extra);
    ASSERT_TRUE(plan.ok()) << c.key;
    EXPECT_EQ(plan.cells[1].action, Action::kRestart) << c.key;
    EXPECT_THAT(plan.cells[1].changed, ElementsAre(c.key));
    EXPECT_EQ(plan.cells[0].action, Action::kUnchanged) << c.key;
  }
}

TEST(ReloadPlan, ChangedCommandRestartsAndLiveKeysComeAlong) {
  config::Config current = Parse(kBase);
  config::Config next = current;
  next.cells[1].command = {"/bin/catalog", "--slow"};
  next.cells[1].max_queue = 7;
  ReloadPlan plan = PlanReload(current, next);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan.cells[1].action, Action::kRestart);
  EXPECT_TRUE(plan.cells[1].admission_changed);
  EXPECT_THAT(plan.cells[1].changed, ElementsAre("command", "max_queue"));
  EXPECT_EQ(plan.Summary(), "payments unchanged, catalog restarted (command, max_queue changed)");
}

// The privilege keys are named like every other key (docs/control.md: "other settings" is only for
// a field without a key name), and the credentials are set before exec: a new worker.
TEST(ReloadPlan, PrivilegeKeysRestartTheCellByName) {
  struct Case {
    std::string extra;
    std::vector<std::string> keys;
  };
  for (const Case& c : {
           // A user with a database entry brings its primary group along.
           Case{"user = 0\n", {"user", "group"}},
           Case{"group = 0\n", {"group"}},
           Case{"supplementary_groups = [0]\n", {"supplementary_groups"}},
           Case{"umask = \"0077\"\n", {"umask"}},
           Case{"no_new_privileges = false\n", {"no_new_privileges"}},
       }) {
    ReloadPlan plan = PlanCatalogChange(c.extra);
    ASSERT_TRUE(plan.ok()) << c.extra;
    EXPECT_EQ(plan.cells[1].action, Action::kRestart) << c.extra;
    EXPECT_EQ(plan.cells[1].changed, c.keys) << c.extra;
  }
}

// A CellConfig field that reload does not classify (here worker_socket, which no key sets; a
// field added later behaves the same) restarts the cell rather than being ignored.
TEST(ReloadPlan, UnclassifiedFieldRestartsTheCell) {
  config::Config current = Parse(kBase);
  config::Config next = current;
  next.cells[0].worker_socket = "/run/bh/elsewhere.worker.sock";
  ReloadPlan plan = PlanReload(current, next);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan.cells[0].action, Action::kRestart);
  EXPECT_THAT(plan.cells[0].changed, ElementsAre("other settings"));
}

TEST(ReloadPlan, PositionIsNotAChange) {
  config::Config current = Parse(kBase);
  config::Config next = current;
  next.cells[0].position = {.line = 40, .column = 1};
  EXPECT_EQ(PlanReload(current, next).cells[0].action, Action::kUnchanged);
}

TEST(ReloadPlan, CellsAddedAndRemoved) {
  ReloadPlan plan = PlanReload(Parse(kBase), Parse(R"([supervisor]
runtime_dir = "/run/bh"
[cells.search]
command = ["/bin/search"]
max_concurrent = 1
[cells.payments]
command = ["/bin/pay"]
max_concurrent = 2
max_queue = 4
)"));
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan.cells.size(), 3u);
  EXPECT_EQ(plan.cells[0].name, "search");
  EXPECT_EQ(plan.cells[0].action, Action::kAdd);
  EXPECT_EQ(plan.cells[1].action, Action::kUnchanged);
  EXPECT_EQ(plan.cells[2].name, "catalog");
  EXPECT_EQ(plan.cells[2].action, Action::kRemove);
  EXPECT_EQ(plan.Summary(), "search added, payments unchanged, catalog removed");
}

TEST(ReloadPlan, ChangedSocketIsRefusedWithItsPlace) {
  ReloadPlan plan = PlanCatalogChange("socket = \"/run/other/catalog.sock\"\n");
  EXPECT_FALSE(plan.ok());
  ASSERT_EQ(plan.errors.size(), 1u);
  EXPECT_THAT(plan.errors[0], HasSubstr(std::string(kFile) +
                                        ":12:10: cells.catalog.socket: a running cell's socket "
                                        "cannot change by reload"));
}

TEST(ReloadPlan, ChangedSocketModeOrGroupIsRefused) {
  struct Case {
    std::string extra;
    std::string where;  // of the value
  };
  for (const Case& c : {Case{"socket_mode = \"0666\"\n", ":12:15: cells.catalog.socket_mode: "},
                        Case{"socket_group = 0\n", ":12:16: cells.catalog.socket_group: "}}) {
    ReloadPlan plan = PlanCatalogChange(c.extra);
    EXPECT_FALSE(plan.ok()) << c.extra;
    ASSERT_EQ(plan.errors.size(), 1u) << c.extra;
    EXPECT_THAT(plan.errors[0],
                HasSubstr(std::string(kFile) + c.where + "set when the socket is bound"));
  }
}

TEST(ReloadPlan, ChangedProtocolIsRefusedWithItsPlace) {
  ReloadPlan plan = PlanCatalogChange("protocol = \"http\"\n");
  EXPECT_FALSE(plan.ok());
  ASSERT_EQ(plan.errors.size(), 1u);
  EXPECT_THAT(plan.errors[0],
              HasSubstr(std::string(kFile) + ":12:12: cells.catalog.protocol: a running cell's "
                                             "protocol cannot change by reload"));
}

TEST(ReloadPlan, HeaderTimeoutAppliesLive) {
  // header_timeout belongs to HTTP cells only.
  const std::string http_base = std::string(kBase) + "protocol = \"http\"\n";
  ReloadPlan plan = PlanReload(Parse(http_base), Parse(http_base + "header_timeout = \"3s\"\n"));
  EXPECT_TRUE(plan.ok());
  ASSERT_EQ(plan.cells.size(), 2u);
  EXPECT_EQ(plan.cells[1].action, Action::kUpdate);
  EXPECT_THAT(plan.cells[1].changed, ElementsAre("header_timeout"));
}

TEST(ReloadPlan, MaxConnectionsAppliesLive) {
  ReloadPlan plan = PlanCatalogChange("max_connections = 10\n");
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan.cells[1].action, Action::kUpdate);
  EXPECT_THAT(plan.cells[1].changed, ElementsAre("max_connections"));
  EXPECT_TRUE(plan.cells[1].admission_changed);
}

TEST(ReloadPlan, LogLevelAppliesLive) {
  ReloadPlan plan = PlanReload(
      Parse(kBase), Parse(std::string("[supervisor]\nlog_level = \"debug\"\n") + (kBase + 13)));
  EXPECT_TRUE(plan.ok());
  EXPECT_TRUE(plan.log_level_changed);
  EXPECT_EQ(plan.Summary(), "log_level changed, payments unchanged, catalog unchanged");
}

TEST(ReloadPlan, OtherSupervisorKeysAreRefusedByName) {
  struct Case {
    std::string line;
    std::string key;
  };
  for (const Case& c : {
           Case{"max_payload_bytes = 1024\n", "max_payload_bytes"},
           Case{"control_socket = \"/run/ctl.sock\"\n", "control_socket"},
           Case{"cgroup = \"off\"\n", "cgroup"},
           Case{"metrics_listen = \"127.0.0.1:0\"\n", "metrics_listen"},
           Case{"on_shutdown = \"poweroff\"\n", "on_shutdown"},
           Case{"cgroup_parent = \"/pod.slice\"\n", "cgroup_parent"},
           Case{"control_socket_mode = \"0600\"\n", "control_socket_mode"},
           Case{"control_socket_group = 0\n", "control_socket_group"},
           Case{"control_group = 0\n", "control_group"},
       }) {
    ReloadPlan plan =
        PlanReload(Parse(kBase), Parse(std::string("[supervisor]\n") + c.line + (kBase + 13)));
    ASSERT_EQ(plan.errors.size(), 1u) << c.key;
    // At the value, line 2 (after "[supervisor]"): "cgroup = " is 9 characters.
    const std::string column = std::to_string(c.key.size() + 4);
    EXPECT_EQ(plan.errors[0], std::string(kFile) + ":2:" + column + ": supervisor." + c.key +
                                  ": changed, and only log_level of [supervisor] applies live; "
                                  "restart bulkheadd to change it");
  }
  // runtime_dir alone (in the file, the sockets under it would move too).
  config::Config current = Parse(kBase);
  config::Config next = current;
  next.supervisor.runtime_dir = "/run/elsewhere";
  ReloadPlan plan = PlanReload(current, next);
  ASSERT_EQ(plan.errors.size(), 1u);
  EXPECT_EQ(plan.errors[0], std::string(kFile) +
                                ":2:15: supervisor.runtime_dir: changed, and only log_level of "
                                "[supervisor] applies live; restart bulkheadd to change it");
}

// A refused key that is no longer written (back to its default) is placed at its table's header.
TEST(ReloadPlan, ARemovedRefusedKeyPointsAtItsTable) {
  ReloadPlan supervisor = PlanReload(
      Parse(std::string("[supervisor]\ncgroup = \"off\"\n") + (kBase + 13)), Parse(kBase));
  ASSERT_EQ(supervisor.errors.size(), 1u);
  EXPECT_THAT(supervisor.errors[0],
              HasSubstr(std::string(kFile) + ":1:1: supervisor.cgroup: changed"));

  ReloadPlan cell = PlanReload(Parse(std::string(kBase) + "protocol = \"http\"\n"), Parse(kBase));
  ASSERT_EQ(cell.errors.size(), 1u);
  EXPECT_THAT(cell.errors[0],
              HasSubstr(std::string(kFile) + ":9:1: cells.catalog.protocol: a running cell's "
                                             "protocol cannot change by reload"));
}

// The same file again, after its restart of catalog failed: catalog is restarted again, not
// "unchanged" (nor only "updated"), so that the second reload fails as the first did.
TEST(ReloadPlan, AnUnchangedCellWhoseNewWorkerNeverTookOverIsRestartedAgain) {
  ReloadPlan plan = PlanReload(Parse(kBase), Parse(kBase));
  RetryRestarts({"catalog", "gone"}, &plan);
  ASSERT_EQ(plan.cells.size(), 2u);
  EXPECT_EQ(plan.cells[0].action, Action::kUnchanged);
  EXPECT_EQ(plan.cells[1].action, Action::kRestart);
  EXPECT_TRUE(plan.cells[1].retried);
  EXPECT_THAT(plan.cells[1].changed, IsEmpty());
  EXPECT_EQ(plan.Summary(),
            "payments unchanged, catalog restarted (again: the new worker of an earlier reload "
            "never took over)");
  ReloadPlan changed = PlanCatalogChange("max_queue = 3\n");
  RetryRestarts({"catalog"}, &changed);
  EXPECT_EQ(changed.cells[1].action, Action::kRestart);
  EXPECT_EQ(changed.Summary(),
            "payments unchanged, catalog restarted (max_queue changed; again: the new worker of an "
            "earlier reload never took over)");
}

}  // namespace
}  // namespace bulkhead::control
