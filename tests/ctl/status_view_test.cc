// SPDX-License-Identifier: MIT
// The activity table and the long form of `bulkheadctl status` (ctl/status_view.h): the exact
// table, durations and latencies as printed, and errors that name the field.
#include "ctl/status_view.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace bulkhead::ctl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

nlohmann::json Recent(nlohmann::json p50, nlohmann::json p99) {
  return {{"window_s", 60},        {"requests", 7},   {"latency_p50_ms", p50},
          {"latency_p99_ms", p99}, {"dispatched", 7}, {"queue_wait_p50_ms", 0.25},
          {"queue_wait_p99_ms", 3}};
}

nlohmann::json Cell() {
  return {
      {"name", "payments"},  {"state", "running"},       {"state_since_ms", 312000}, {"pid", 41234},
      {"uptime_ms", 312000}, {"in_flight", 3},           {"cancelled", 0},           {"dropped", 1},
      {"undelivered", 2},    {"recent", Recent(1.2, 12)}};
}

TEST(StatusView, ActivityTableMatchesTheDocumentedExample) {
  Result<std::string> table = FormatActivityTable({{"cells", {Cell()}}});
  ASSERT_TRUE(table.ok()) << table.status().message();
  EXPECT_EQ(*table,
            "CELL      IN STATE FOR  WORKER UPTIME  IN FLIGHT  CANCELLED  DROPPED  UNDELIVERED  "
            "P50    P99   WAIT P50  WAIT P99\n"
            "payments  5m12s         5m12s          3          0          1        2            "
            "1.2ms  12ms  0.25ms    3ms\n");
}

TEST(StatusView, ActivityTableIsLeftOutForOlderSupervisors) {
  nlohmann::json old = Cell();
  old.erase("recent");
  Result<std::string> table = FormatActivityTable({{"cells", {old}}});
  ASSERT_TRUE(table.ok());
  EXPECT_EQ(*table, "");
}

TEST(StatusView, EmptyWindowAndNoWorkerAreDashes) {
  nlohmann::json cell = Cell();
  cell["pid"] = nullptr;
  cell["recent"] = Recent(nullptr, nullptr);
  Result<std::string> table = FormatActivityTable({{"cells", {cell}}});
  ASSERT_TRUE(table.ok());
  EXPECT_THAT(
      *table,
      HasSubstr(
          "payments  5m12s         -              3          0          1        2            -  "
          "  -    0.25ms"));
}

// A cell stopped since bulkheadd made it, that never had a worker, has no age to show: its
// "stopped for" would count from bulkheadd's start.
TEST(StatusView, ACellThatNeverStartedShowsNoAge) {
  nlohmann::json cell = Cell();
  cell["state"] = "stopped";
  cell["pid"] = nullptr;
  cell["starts"] = 0;
  Result<std::string> table = FormatActivityTable({{"cells", {cell}}});
  ASSERT_TRUE(table.ok()) << table.status().message();
  EXPECT_THAT(*table, HasSubstr("payments  -             -              3"));
  cell["starts"] = 1;
  table = FormatActivityTable({{"cells", {cell}}});
  ASSERT_TRUE(table.ok()) << table.status().message();
  EXPECT_THAT(*table, HasSubstr("payments  5m12s         -              3"));
}

TEST(StatusView, ErrorsNameTheField) {
  nlohmann::json cell = Cell();
  cell.erase("in_flight");
  Result<std::string> table = FormatActivityTable({{"cells", {cell}}});
  ASSERT_FALSE(table.ok());
  EXPECT_EQ(table.status().message(), "status response: cells[0].in_flight: missing");
  Result<std::string> long_form = FormatCellLong(cell);
  ASSERT_FALSE(long_form.ok());
}

TEST(StatusView, AgesAndLatencies) {
  EXPECT_EQ(FormatAge(1234), "1.2s");
  // A wait left is rounded up, as bulkheadd's state detail rounds it ("next start in 7.6 s" on
  // the line above read "7.5s" here).
  EXPECT_EQ(FormatTimeLeft(7510), "7.6s");
  EXPECT_EQ(FormatTimeLeft(7500), "7.5s");
  EXPECT_EQ(FormatTimeLeft(1), "0.1s");
  EXPECT_EQ(FormatTimeLeft(9901), "10s");
  EXPECT_EQ(FormatTimeLeft(12001), "13s");
  EXPECT_EQ(FormatTimeLeft(124001), "2m5s");
  EXPECT_EQ(FormatAge(75000), "1m15s");
  EXPECT_EQ(FormatAge(3600000), "1h0m");
  EXPECT_EQ(FormatAge(90061000), "1d1h");
  EXPECT_EQ(FormatLatency(0.075), "0.075ms");
  EXPECT_EQ(FormatLatency(1500.0), "1.5s");
  EXPECT_EQ(FormatLatency(nullptr), "-");
}

// Issue 26: the limit in force, its bounds and the last change with its cause, at the JSON's time.
// `running` is over the limit in force: an adaptive cell's current limit, with its ceiling beside.
TEST(StatusView, RunningIsOverTheLimitInForce) {
  nlohmann::json cell = {{"running", 3}, {"max_concurrent", 16}};
  EXPECT_EQ(FormatRunning(cell), "3/16");  // an older bulkheadd: no "concurrency"
  cell["concurrency"] = {{"mode", "fixed"}, {"limit", 16}};
  EXPECT_EQ(FormatRunning(cell), "3/16");
  cell["concurrency"] = {{"mode", "adaptive"}, {"limit", 4}, {"floor", 1}, {"ceiling", 16}};
  EXPECT_EQ(FormatRunning(cell), "3/4 (adaptive limit; ceiling 16)");
}

// `clients` counts the connections refused over connection_limit and those closed idle.
TEST(StatusView, ClientsShowsRefusedAndIdleClosedConnections) {
  nlohmann::json cell = {{"clients", 3}};
  EXPECT_EQ(FormatClients(cell), "3");  // an older bulkheadd
  cell["connection_limit"] = 1024;
  cell["connections_refused"] = 12;
  EXPECT_EQ(FormatClients(cell), "3/1024 (12 refused)");
  cell["connections_idle_closed"] = 5;
  EXPECT_EQ(FormatClients(cell), "3/1024 (12 refused, 5 closed idle)");
}

// An overlapping restart shows its phase and the other worker: the next one before the handover,
// the previous one after it; nothing when none runs.
TEST(StatusView, SwapShowsItsPhaseAndTheOtherWorker) {
  EXPECT_EQ(FormatSwap({{"swap", nullptr}}), "");
  EXPECT_EQ(FormatSwap(nlohmann::json::object()), "");
  EXPECT_EQ(FormatSwap({{"swap", {{"phase", "starting"}, {"pid", 978}, {"detail", "waiting"}}}}),
            "starting, next worker pid 978: waiting");
  EXPECT_EQ(FormatSwap({{"swap", {{"phase", "draining"}, {"pid", 12}, {"detail", ""}}}}),
            "draining, previous worker pid 12");
}

TEST(StatusView, ConcurrencyShowsTheLimitItsBoundsAndTheLastChange) {
  EXPECT_EQ(FormatConcurrency({{"mode", "fixed"}, {"limit", 8}}), "8 (fixed)");
  nlohmann::json adaptive = {
      {"mode", "adaptive"},
      {"limit", 6},
      {"floor", 1},
      {"ceiling", 64},
      {"phase", "avoidance"},
      {"hold", "none"},
      {"signals", {"service_time", "memory_pressure"}},
      {"base_us", 10200},
      {"base_age_ms", 12000},
      {"ratio", 1.31},
      {"changes", nlohmann::json::array()},
  };
  EXPECT_EQ(FormatConcurrency(adaptive), "6 of 1..64 (adaptive; no change yet)");
  adaptive["changes"] = {{{"at", "2025-01-01T14:02:11Z"},
                          {"from", 14},
                          {"to", 6},
                          {"cause", "memory_pressure"},
                          {"text", "memory pressure trigger"}},
                         {{"at", "2025-01-01T14:01:00Z"},
                          {"from", 7},
                          {"to", 14},
                          {"cause", "slow_start"},
                          {"text", "service time at its minimum"}}};
  EXPECT_EQ(FormatConcurrency(adaptive),
            "6 of 1..64 (adaptive; -8 at 14:02:11: memory pressure trigger)");
  EXPECT_EQ(FormatAdaptiveState(adaptive),
            "avoidance, base 10.2ms (12.0s ago), ratio 1.31, holding none, signals "
            "service_time,memory_pressure");
  // cpu.pressure events that only held growth (no other cell waiting for a CPU).
  adaptive["cpu_pressure_spared"] = 3;
  EXPECT_EQ(FormatAdaptiveState(adaptive),
            "avoidance, base 10.2ms (12.0s ago), ratio 1.31, holding none, signals "
            "service_time,memory_pressure, cpu events spared 3");
  // A memory cut at 7 holds growth at 6 for another 29.5 s.
  adaptive["memory_ceiling"] = 6;
  adaptive["memory_ceiling_left_ms"] = 29'500;
  EXPECT_THAT(FormatAdaptiveState(adaptive),
              HasSubstr("signals service_time,memory_pressure, memory ceiling 6 for 29.5s, cpu "
                        "events spared 3"));
  adaptive["memory_ceiling"] = nullptr;
  EXPECT_THAT(FormatAdaptiveState(adaptive), Not(HasSubstr("memory ceiling")));
  adaptive["base_us"] = nullptr;
  EXPECT_THAT(FormatAdaptiveState(adaptive), HasSubstr("base measuring"));
}

// Why kernel signals are off, one reason once with every signal it holds off.
TEST(StatusView, SignalsOffSayWhyWithTheSignalsOfOneReasonTogether) {
  EXPECT_EQ(FormatSignalsOff({{"mode", "adaptive"}}), "") << "an older bulkheadd";
  EXPECT_EQ(FormatSignalsOff({{"signals_off", nlohmann::json::object()}}), "");
  const std::string no_cgroup =
      "no cgroup for the cell: limits not enforced (cgroup = \"off\" in the config)";
  EXPECT_EQ(
      FormatSignalsOff({{"signals_off",
                         {{"cpu_pressure", no_cgroup},
                          {"cpu_throttling", "no cpu_max"},
                          {"memory_pressure", no_cgroup},
                          {"memory_usage", no_cgroup}}}}),
      "cpu_pressure, memory_pressure, memory_usage: " + no_cgroup + "; cpu_throttling: no cpu_max");
}

}  // namespace
}  // namespace bulkhead::ctl
