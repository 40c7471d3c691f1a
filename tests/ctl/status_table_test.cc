// SPDX-License-Identifier: MIT
// FormatStatusTable: the exact table of docs/control.md, column sizing, the optional LAST EXIT
// column, and errors that name the offending field.
#include "ctl/status_table.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

namespace bulkhead::ctl {
namespace {

nlohmann::json Cell(const std::string& name, nlohmann::json pid, int running, int max_concurrent,
                    int queued, int max_queue, int ok, int rejected, int failed, int restarts,
                    nlohmann::json last_exit = nullptr) {
  return {{"name", name},
          {"state", pid.is_null() ? "backoff" : "running"},
          {"pid", pid},
          {"running", running},
          {"max_concurrent", max_concurrent},
          {"queued", queued},
          {"max_queue", max_queue},
          {"ok", ok},
          {"rejected", rejected},
          {"failed", failed},
          {"restarts", restarts},
          {"last_exit", last_exit}};
}

// A vector, not a json: `json cells = {one_cell}` is that cell itself under clang (CWG 1467) and
// a one-element array under gcc.
nlohmann::json Response(const std::vector<nlohmann::json>& cells) {
  return {{"ok", true}, {"cells", cells}};
}

TEST(StatusTable, MatchesTheDocumentedExample) {
  nlohmann::json response = Response({Cell("payments", 41234, 2, 2, 1, 1, 3, 1, 1, 0),
                                      Cell("catalog", 41236, 0, 2, 0, 0, 1, 0, 0, 0)});
  Result<std::string> table = FormatStatusTable(response);
  ASSERT_TRUE(table.ok()) << table.status().message();
  EXPECT_EQ(*table,
            "CELL      STATE    PID    RUNNING  QUEUED  OK  REJECTED  FAILED  RESTARTS\n"
            "payments  running  41234  2/2      1/1     3   1         1       0\n"
            "catalog   running  41236  0/2      0/0     1   0         0       0\n");
}

TEST(StatusTable, WidensColumnsToTheirLongestEntry) {
  nlohmann::json response = Response({Cell("a", 7, 12, 1000, 0, 100000, 1234567, 0, 0, 42)});
  Result<std::string> table = FormatStatusTable(response);
  ASSERT_TRUE(table.ok()) << table.status().message();
  EXPECT_EQ(*table,
            "CELL  STATE    PID  RUNNING  QUEUED    OK       REJECTED  FAILED  RESTARTS\n"
            "a     running  7    12/1000  0/100000  1234567  0         0       42\n");
}

// An adaptive cell's RUNNING is over the limit in force, not over its ceiling (max_concurrent).
TEST(StatusTable, RunningIsOverTheLimitInForce) {
  nlohmann::json adaptive = Cell("a", 7, 3, 16, 0, 0, 0, 0, 0, 0);
  adaptive["concurrency"] = {{"mode", "adaptive"}, {"limit", 4}, {"floor", 1}, {"ceiling", 16}};
  nlohmann::json fixed = Cell("f", 8, 1, 2, 0, 0, 0, 0, 0, 0);
  fixed["concurrency"] = {{"mode", "fixed"}, {"limit", 2}};
  Result<std::string> table = FormatStatusTable(Response({adaptive, fixed}));
  ASSERT_TRUE(table.ok()) << table.status().message();
  EXPECT_EQ(*table,
            "CELL  STATE    PID  RUNNING  QUEUED  OK  REJECTED  FAILED  RESTARTS\n"
            "a     running  7    3/4      0/0     0   0         0       0\n"
            "f     running  8    1/2      0/0     0   0         0       0\n");
  adaptive["concurrency"].erase("limit");
  Result<std::string> broken = FormatStatusTable(Response({adaptive}));
  ASSERT_FALSE(broken.ok());
  EXPECT_THAT(broken.status().message(), ::testing::HasSubstr("concurrency.limit: missing"));
}

TEST(StatusTable, NullPidIsADash) {
  Result<std::string> table =
      FormatStatusTable(Response({Cell("x", nullptr, 0, 1, 0, 0, 0, 0, 0, 0)}));
  ASSERT_TRUE(table.ok()) << table.status().message();
  EXPECT_EQ(*table,
            "CELL  STATE    PID  RUNNING  QUEUED  OK  REJECTED  FAILED  RESTARTS\n"
            "x     backoff  -    0/1      0/0     0   0         0       0\n");
}

TEST(StatusTable, AddsLastExitColumnOnlyWhenSomeCellHasOne) {
  nlohmann::json response = Response({Cell("payments", 5, 0, 2, 0, 1, 0, 0, 1, 1, "exit 3"),
                                      Cell("catalog", 6, 0, 2, 0, 0, 0, 0, 0, 0)});
  Result<std::string> table = FormatStatusTable(response);
  ASSERT_TRUE(table.ok()) << table.status().message();
  EXPECT_EQ(*table,
            "CELL      STATE    PID  RUNNING  QUEUED  OK  REJECTED  FAILED  RESTARTS  LAST EXIT\n"
            "payments  running  5    0/2      0/1     0   0         1       1         exit 3\n"
            "catalog   running  6    0/2      0/0     0   0         0       0         -\n");
}

// Issue 11 item 7: a cell that does not serve says why, under the table.
TEST(StatusTable, SaysWhyEachCellThatDoesNotServeDoesNot) {
  nlohmann::json late = Cell("late", 7, 0, 1, 2, 4, 0, 0, 0, 0);
  late["state"] = "starting";
  late["state_detail"] =
      "starting for 37 s, waiting for READY=1 (start_timeout 90 s); requests queue";
  nlohmann::json up = Cell("up", 8, 0, 1, 0, 0, 5, 0, 0, 0);
  up["state_detail"] = nullptr;
  nlohmann::json gone = Cell("gone", nullptr, 0, 1, 0, 0, 0, 3, 0, 4);
  gone["state"] = "failed";
  gone["state_detail"] =
      "failed: start limit hit (gave up: 5 starts in 60s, last exit 1); requests are refused "
      "until bulkheadctl restart";
  Result<std::string> table = FormatStatusTable(Response({late, up, gone}));
  ASSERT_TRUE(table.ok()) << table.status().message();
  EXPECT_EQ(*table,
            "CELL  STATE     PID  RUNNING  QUEUED  OK  REJECTED  FAILED  RESTARTS\n"
            "late  starting  7    0/1      2/4     0   0         0       0\n"
            "up    running   8    0/1      0/0     5   0         0       0\n"
            "gone  failed    -    0/1      0/0     0   3         0       4\n"
            "\n"
            "late: starting for 37 s, waiting for READY=1 (start_timeout 90 s); requests queue\n"
            "gone: failed: start limit hit (gave up: 5 starts in 60s, last exit 1); requests are "
            "refused until bulkheadctl restart\n");
}

TEST(StatusTable, NoCellsGivesTheHeaderOnly) {
  Result<std::string> table = FormatStatusTable(Response({}));
  ASSERT_TRUE(table.ok()) << table.status().message();
  EXPECT_EQ(*table, "CELL  STATE  PID  RUNNING  QUEUED  OK  REJECTED  FAILED  RESTARTS\n");
}

// A re-exec under way shows its phase (a settling what it waits for), and the last one's failure
// its reason; an idle one with no failure adds nothing.
TEST(StatusTable, ShowsTheReexecPhaseWhatASettlingWaitsForAndTheLastError) {
  nlohmann::json response = Response({Cell("a", 7, 0, 1, 0, 0, 0, 0, 0, 0)});
  const std::string table = "CELL  STATE    PID  RUNNING  QUEUED  OK  REJECTED  FAILED  RESTARTS\n"
                            "a     running  7    0/1      0/0     0   0         0       0\n";
  response["supervisor"] = {{"reexec", {{"phase", "idle"}, {"count", 0}, {"last_error", nullptr}}}};
  EXPECT_EQ(FormatStatusTable(response).value(), table);
  response["supervisor"]["reexec"]["phase"] = "settling";
  EXPECT_EQ(FormatStatusTable(response).value(), table + "\nre-exec under way: settling\n");
  response["supervisor"]["reexec"]["waiting_for"] = {
      "cells.b: it is starting (...)", "cells.c: its start waits for the cells it needs"};
  EXPECT_EQ(FormatStatusTable(response).value(),
            table +
                "\nre-exec under way: settling\n"
                "  waiting for cells.b: it is starting (...)\n"
                "  waiting for cells.c: its start waits for the cells it needs\n");
  response["supervisor"]["reexec"]["waiting_for"] = nlohmann::json::array();
  response["supervisor"]["reexec"]["phase"] = "idle";
  response["supervisor"]["reexec"]["last_error"] = "cells.b: it is starting (...)";
  EXPECT_EQ(FormatStatusTable(response).value(),
            table + "\nlast re-exec failed: cells.b: it is starting (...)\n");
}

// A binary replaced on disk (a package upgrade without a re-exec) is said with its path and how
// to run it; a supervisor that does not say (older bulkheadd), or says false, adds nothing.
TEST(StatusTable, SaysWhenTheBinaryWasReplacedOnDiskSinceStart) {
  nlohmann::json response = Response({Cell("a", 7, 0, 1, 0, 0, 0, 0, 0, 0)});
  const std::string table =
      "CELL  STATE    PID  RUNNING  QUEUED  OK  REJECTED  FAILED  RESTARTS\n"
      "a     running  7    0/1      0/0     0   0         0       0\n";
  response["supervisor"] = {
      {"reexec", {{"phase", "idle"}, {"count", 0}, {"binary", "/usr/sbin/bulkheadd"}}}};
  EXPECT_EQ(FormatStatusTable(response).value(), table);
  response["supervisor"]["reexec"]["binary_replaced"] = false;
  EXPECT_EQ(FormatStatusTable(response).value(), table);
  response["supervisor"]["reexec"]["binary_replaced"] = true;
  EXPECT_EQ(FormatStatusTable(response).value(),
            table +
                "\nbinary: /usr/sbin/bulkheadd replaced on disk since start; `bulkheadctl reexec` "
                "runs it\n");
}

// A start held for a need in backoff says when that need starts next, as `bulkheadctl start`
// does; the state detail itself stays without the countdown.
TEST(StatusTable, AHeldStartSaysWhenItsNeedInBackoffStartsNext) {
  nlohmann::json front = Cell("front", nullptr, 0, 1, 0, 0, 0, 0, 0, 0);
  front["state"] = "waiting";
  front["state_detail"] = "waiting for catalog (backoff)";
  front["waiting_for"] = nlohmann::json::parse(
      R"([{"cell":"catalog","state":"backoff","next_start_in_ms":45000}])");
  Result<std::string> table = FormatStatusTable(Response({front}));
  ASSERT_TRUE(table.ok()) << table.status().message();
  EXPECT_THAT(*table, ::testing::HasSubstr(
                          "\nfront: waiting for catalog (backoff); catalog's next start in 45s\n"));
}

TEST(StatusTable, ErrorsNameTheField) {
  EXPECT_EQ(FormatStatusTable(nlohmann::json{{"ok", true}}).status().message(),
            "status response: no \"cells\" array");

  nlohmann::json missing = Response({Cell("a", 1, 0, 1, 0, 0, 0, 0, 0, 0)});
  missing["cells"][0].erase("running");
  EXPECT_EQ(FormatStatusTable(missing).status().message(),
            "status response: cells[0].running: missing");

  nlohmann::json wrong_type =
      Response({Cell("a", 1, 0, 1, 0, 0, 0, 0, 0, 0), Cell("b", 2, 0, 1, 0, 0, 0, 0, 0, 0)});
  wrong_type["cells"][1]["ok"] = "three";
  EXPECT_EQ(FormatStatusTable(wrong_type).status().message(),
            "status response: cells[1].ok: not an unsigned integer");

  nlohmann::json negative = Response({Cell("a", 1, 0, 1, 0, 0, 0, 0, 0, 0)});
  negative["cells"][0]["failed"] = -1;
  EXPECT_FALSE(FormatStatusTable(negative).ok());

  nlohmann::json not_object = Response({42});
  EXPECT_EQ(FormatStatusTable(not_object).status().message(),
            "status response: cells[0]: not an object");
}

TEST(StatusTable, CompartmentTableShowsKernelFigures) {
  nlohmann::json enforced = Cell("payments", 41234, 0, 2, 0, 1, 3, 0, 0, 1);
  enforced["limits_enforced"] = true;
  enforced["oom_kills"] = 1;
  enforced["limits"] = {{"cpu_quota_us", 20000}, {"cpu_period_us", 100000}};
  enforced["cgroup"] = {{"memory_current", 12 * 1024 * 1024},
                        {"memory_max", 64 * 1024 * 1024},
                        {"cpu_usage_usec", 3100000},
                        {"cpu_throttled_usec", 800000},
                        {"pids_current", 4},
                        {"pids_max", nullptr}};
  nlohmann::json open = Cell("catalog", 41236, 0, 2, 0, 0, 1, 0, 0, 0);
  open["limits_enforced"] = false;
  open["limits_note"] = "cgroup v2 not mounted";
  open["oom_kills"] = 0;
  open["limits"] = {{"cpu_quota_us", nullptr}, {"cpu_period_us", 100000}};
  open["cgroup"] = nullptr;
  Result<std::string> table = FormatStatusTable(Response({enforced, open}));
  ASSERT_TRUE(table.ok()) << table.status().message();
  EXPECT_EQ(*table,
            "CELL      STATE    PID    RUNNING  QUEUED  OK  REJECTED  FAILED  RESTARTS\n"
            "payments  running  41234  0/2      0/1     3   0         0       1\n"
            "catalog   running  41236  0/2      0/0     1   0         0       0\n"
            "\n"
            "CELL      MEMORY        CPU       THROTTLED  TASKS  OOM KILLS\n"
            "payments  12M/64M       3.1s/20%  0.8s       4/max  1\n"
            "catalog   not enforced  -         -          -      -\n"
            "limits not enforced: cgroup v2 not mounted\n");
}

TEST(StatusTable, CompartmentTableNamesLimitsNotInForce) {
  nlohmann::json hog = Cell("hog", 41234, 0, 2, 0, 1, 3, 0, 0, 0);
  hog["limits_enforced"] = false;
  hog["limits_note"] =
      "memory_max: write \"67108864\" to /sys/fs/cgroup/cells/hog/memory.max: gone";
  hog["limits_enforcement"] = {{"cpu_max", "unlimited"},         {"cpu_weight", "unlimited"},
                               {"memory_max", "not enforced"},   {"memory_high", "unlimited"},
                               {"memory_swap_max", "unlimited"}, {"pids_max", "enforced"}};
  hog["oom_kills"] = 0;
  hog["limits"] = {{"cpu_quota_us", nullptr}, {"cpu_period_us", 100000}};
  hog["cgroup"] = {{"memory_current", nullptr}, {"memory_max", nullptr}, {"cpu_usage_usec", 100000},
                   {"cpu_throttled_usec", 0},   {"pids_current", 4},     {"pids_max", 16}};
  nlohmann::json steady = Cell("steady", 41236, 0, 2, 0, 0, 1, 0, 0, 0);
  steady["limits_enforced"] = true;
  steady["oom_kills"] = 0;
  steady["limits"] = {{"cpu_quota_us", nullptr}, {"cpu_period_us", 100000}};
  steady["cgroup"] = {
      {"memory_current", 1024 * 1024}, {"memory_max", nullptr}, {"cpu_usage_usec", 0},
      {"cpu_throttled_usec", 0},       {"pids_current", 1},     {"pids_max", nullptr}};
  Result<std::string> table = FormatStatusTable(Response({hog, steady}));
  ASSERT_TRUE(table.ok()) << table.status().message();
  EXPECT_THAT(*table, ::testing::HasSubstr(
                          "CELL    MEMORY    CPU       THROTTLED  TASKS  OOM KILLS  NOT ENFORCED\n"
                          "hog     -         0.1s/max  0.0s       4/16   0          memory_max\n"
                          "steady  1.0M/max  0.0s/max  0.0s       1/max  0          -\n"
                          "limits not enforced: hog: memory_max: write \"67108864\" to "
                          "/sys/fs/cgroup/cells/hog/memory.max: gone\n"));
}

}  // namespace
}  // namespace bulkhead::ctl
