// SPDX-License-Identifier: MIT
// CellStatusJson and MetricsText render every CellCounters counter from one table
// (kCellCounterFields): each counter set to its own value is found in the status JSON under its
// name, and in the metrics text as a sample (except the counters the table marks as status-only).
// That every member is in the table is also a static_assert in control/cell_counter_fields.h.
#include "control/status_json.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "control/cell_counter_fields.h"
#include "control/metrics_text.h"

namespace bulkhead::control {
namespace {

constexpr size_t kCounterCount = sizeof(admission::CellCounters) / sizeof(uint64_t);

// Counter i holds 7001 + 13 * i: values no other figure of the snapshot takes.
uint64_t DistinctValue(size_t i) { return 7001 + 13 * i; }

CellSnapshot SnapshotWithDistinctCounters() {
  CellSnapshot s;
  s.name = "payments";
  s.state = lifecycle::Lifecycle::State::kRunning;
  s.limits.max_concurrent = 4;
  s.limits.max_queue = 8;
  s.limits.queue_timeout_ms = 1000;
  s.pid = 4242;
  s.running = 2;
  s.queued = 1;
  s.in_flight = 3;
  uint64_t values[kCounterCount];
  for (size_t i = 0; i < kCounterCount; ++i) values[i] = DistinctValue(i);
  static_assert(sizeof values == sizeof s.counters);
  std::memcpy(&s.counters, values, sizeof values);
  return s;
}

config::CellConfig Config() {
  config::CellConfig c;
  c.name = "payments";
  return c;
}

// The field of kCellCounterFields for counter `index` of CellCounters (as an array of uint64_t).
const CellCounterField* FieldAt(size_t index) {
  admission::CellCounters c;
  const auto* base = reinterpret_cast<const char*>(&c);
  for (const CellCounterField& field : kCellCounterFields) {
    if (reinterpret_cast<const char*>(&(c.*field.member)) - base ==
        static_cast<ptrdiff_t>(index * sizeof(uint64_t))) {
      return &field;
    }
  }
  return nullptr;
}

// Each counter, set to its own value, is in the status JSON under its documented name: found by
// value, so that a counter the renderer skipped or put under another counter's name fails.
TEST(StatusJson, ShowsEveryCounterUnderItsName) {
  nlohmann::json j = CellStatusJson(SnapshotWithDistinctCounters(), Config());
  for (size_t i = 0; i < kCounterCount; ++i) {
    const CellCounterField* field = FieldAt(i);
    ASSERT_NE(field, nullptr) << "CellCounters member " << i << " is not in kCellCounterFields";
    const std::string name(field->json_name);
    const std::string parent(field->json_object);
    ASSERT_TRUE(parent.empty() || j.contains(parent)) << parent;
    const nlohmann::json& object = parent.empty() ? j : j.at(parent);
    ASSERT_TRUE(object.contains(name)) << name;
    EXPECT_EQ(object.at(name), DistinctValue(i)) << name;
  }
  // The sums, and the names the documentation (docs/control.md) and bulkheadctl rely on.
  const admission::CellCounters c = SnapshotWithDistinctCounters().counters;
  EXPECT_EQ(j.at("rejected"), c.rejected());
  EXPECT_EQ(j.at("failed"), c.failed());
  EXPECT_EQ(j.at("ok"), c.ok);
  EXPECT_EQ(j.at("rejected_by_reason").at("queue_timeout"), c.rejected_queue_timeout);
  EXPECT_EQ(j.at("failed_by_reason").at("stalled"), c.failed_stalled);
  EXPECT_EQ(j.at("bad_request"), c.bad_request);
  EXPECT_EQ(j.at("admitted"), c.admitted);
  EXPECT_EQ(j.at("rejected_at_admission"), c.rejected_at_admission);
  EXPECT_EQ(j.at("connections_refused"), c.refused_connections);
}

// The cell's protocol, and for an HTTP cell its header_timeout with the rest of the policy
// (bulkheadctl status CELL prints both); they were missing.
TEST(StatusJson, ShowsACrashLoopAndTheStartLimitAction) {
  CellSnapshot s = SnapshotWithDistinctCounters();
  config::CellConfig c = Config();
  nlohmann::json j = CellStatusJson(s, c);
  EXPECT_EQ(j["crash_looping"], false);
  EXPECT_EQ(j["policy"]["start_limit_action"], "backoff");
  s.crash_looping = true;
  c.start_limit_action = config::StartLimitAction::kFail;
  j = CellStatusJson(s, c);
  EXPECT_EQ(j["crash_looping"], true);
  EXPECT_EQ(j["policy"]["start_limit_action"], "fail");
}

// A held start's needs: each with its state, and one in backoff with its next start, which
// `bulkheadctl start` of the held cell prints (and gives up on when it comes after its wait).
TEST(StatusJson, AHeldStartsNeedInBackoffSaysWhenItStartsNext) {
  CellSnapshot s = SnapshotWithDistinctCounters();
  s.waiting_for = {{"catalog", "backoff", 45'000, ""},
                   {"search", "starting", 0, ""},
                   {"front", "waiting", 0, "db"}};
  s.state_since_ms = 7'200'000;  // stopped since bulkheadd began, two hours ago
  s.held_for_ms = 3'000;         // the start held three seconds ago
  nlohmann::json j = CellStatusJson(s, Config());
  EXPECT_EQ(j["state"], "waiting");
  EXPECT_EQ(j["state_since_ms"], 3'000) << "waiting since the start was held";
  EXPECT_EQ(j["waiting_for"],
            nlohmann::json::parse(R"([{"cell":"catalog","state":"backoff","next_start_in_ms":45000},
                                      {"cell":"search","state":"starting"},
                                      {"cell":"front","state":"waiting","held_by":"db"}])"));
  // The human status names the cell that holds a chain too, not only the JSON.
  EXPECT_EQ(j["state_detail"],
            "waiting for catalog (backoff), search (starting), front (waiting, held by db)");
}

// Issue 26: the limit in force, the mode, the bounds and the controller's last changes with their
// cause and wall time (docs/control.md).
TEST(StatusJson, ShowsTheConcurrencyModeTheLimitAndItsLastChangesWithTheirCause) {
  CellSnapshot s = SnapshotWithDistinctCounters();
  s.concurrency.limit = 7;
  nlohmann::json j = CellStatusJson(s, Config());
  EXPECT_EQ(j.at("concurrency"), nlohmann::json({{"mode", "fixed"}, {"limit", 7}}));

  s.concurrency.adaptive = true;
  s.concurrency.limit = 6;
  s.concurrency.floor = 1;
  s.concurrency.ceiling = 64;
  s.concurrency.phase = admission::AdaptiveLimit::Phase::kAvoidance;
  s.concurrency.hold = admission::GrowthHold::kCpuThrottled;
  s.concurrency.signals[static_cast<size_t>(admission::Signal::kServiceTime)] = true;
  s.concurrency.base_us = 10'234;
  s.concurrency.base_age_ms = 12'000;
  s.concurrency.ratio_permille = 1'310;
  s.concurrency.memory_fit = 8;
  s.concurrency.memory_ceiling = 7;
  s.concurrency.memory_ceiling_left_ms = 21'000;
  s.concurrency.wall_now_ms = 1'735'740'135'000;  // 2025-01-01T14:02:15Z
  s.concurrency.changes = {{4'000, 14, 6, admission::LimitCause::kMemoryPressure, 0},
                           {9'000, 7, 14, admission::LimitCause::kSlowStart, 0}};
  s.concurrency.changes_by_cause[static_cast<size_t>(admission::LimitCause::kLatency)] = 3;
  s.concurrency.cpu_pressure_spared = 5;
  s.concurrency.signals_off[static_cast<size_t>(admission::Signal::kCpuPressure)] =
      "no cgroup for the cell: limits not enforced (cgroup = \"off\" in the config)";
  s.concurrency.signals_off[static_cast<size_t>(admission::Signal::kMemoryUsage)] = "no memory_max";
  j = CellStatusJson(s, Config());
  const nlohmann::json& c = j.at("concurrency");
  EXPECT_EQ(c.at("mode"), "adaptive");
  EXPECT_EQ(c.at("limit"), 6);
  EXPECT_EQ(c.at("floor"), 1);
  EXPECT_EQ(c.at("ceiling"), 64);
  EXPECT_EQ(c.at("phase"), "avoidance");
  EXPECT_EQ(c.at("hold"), "cpu_throttled");
  EXPECT_EQ(c.at("signals"), nlohmann::json::array({"service_time"}));
  EXPECT_EQ(c.at("signals_off"),
            nlohmann::json({{"cpu_pressure",
                             "no cgroup for the cell: limits not enforced (cgroup = \"off\" in "
                             "the config)"},
                            {"memory_usage", "no memory_max"}}));
  EXPECT_EQ(c.at("base_us"), 10'234);
  EXPECT_EQ(c.at("base_age_ms"), 12'000);
  EXPECT_DOUBLE_EQ(c.at("ratio").get<double>(), 1.31);
  EXPECT_EQ(c.at("memory_fit"), 8);
  EXPECT_EQ(c.at("memory_ceiling"), 7);
  EXPECT_EQ(c.at("memory_ceiling_left_ms"), 21'000);
  ASSERT_EQ(c.at("changes").size(), 2u);
  EXPECT_EQ(c.at("changes")[0], nlohmann::json({{"at", "2025-01-01T14:02:11Z"},
                                                {"ago_ms", 4'000},
                                                {"from", 14},
                                                {"to", 6},
                                                {"cause", "memory_pressure"},
                                                {"text", "memory pressure trigger"}}));
  EXPECT_EQ(c.at("changes")[1].at("cause"), "slow_start");
  EXPECT_EQ(c.at("changes_by_cause").at("latency"), 3);
  EXPECT_EQ(c.at("changes_by_cause").size(), admission::kLimitCauseCount);
  EXPECT_EQ(c.at("cpu_pressure_spared"), 5);

  // While the base is measured, it has no age either (not the clock's reading since boot).
  s.concurrency.base_us.reset();
  s.concurrency.base_age_ms.reset();
  s.concurrency.memory_fit.reset();  // no memory reading with a request running yet
  s.concurrency.memory_ceiling.reset();  // no memory cut holds growth
  s.concurrency.memory_ceiling_left_ms = 0;
  j = CellStatusJson(s, Config());
  EXPECT_TRUE(j.at("concurrency").at("base_us").is_null());
  EXPECT_TRUE(j.at("concurrency").at("base_age_ms").is_null());
  EXPECT_TRUE(j.at("concurrency").at("memory_fit").is_null());
  EXPECT_TRUE(j.at("concurrency").at("memory_ceiling").is_null());
  EXPECT_EQ(j.at("concurrency").at("memory_ceiling_left_ms"), 0);
}

TEST(StatusJson, ShowsTheProtocolAndAnHttpCellsHeaderTimeout) {
  config::CellConfig frames = Config();
  nlohmann::json j = CellStatusJson(SnapshotWithDistinctCounters(), frames);
  EXPECT_EQ(j.at("protocol"), "frames");
  EXPECT_FALSE(j.at("policy").contains("header_timeout_ms")) << "a frames cell has none";
  config::CellConfig http = Config();
  http.protocol = config::Protocol::kHttp;
  http.header_timeout = std::chrono::milliseconds(2500);
  j = CellStatusJson(SnapshotWithDistinctCounters(), http);
  EXPECT_EQ(j.at("protocol"), "http");
  EXPECT_EQ(j.at("policy").at("header_timeout_ms"), 2500);
}

// Each counter, set to its own value, is a sample of the metrics text (for every cell), unless the
// table marks it as status-only; a status-only value is nowhere in the text.
TEST(StatusJson, EveryCounterIsAMetricSampleUnlessStatusOnly) {
  CellSnapshot a = SnapshotWithDistinctCounters();
  CellSnapshot b = SnapshotWithDistinctCounters();
  b.name = "catalog";
  const std::string text = MetricsText({a, b});
  for (size_t i = 0; i < kCounterCount; ++i) {
    const CellCounterField* field = FieldAt(i);
    ASSERT_NE(field, nullptr);
    const std::string value = " " + std::to_string(DistinctValue(i)) + "\n";
    if (field->metric == nullptr) {
      EXPECT_EQ(text.find(value), std::string::npos) << field->json_name;
      continue;
    }
    for (const char* cell : {"payments", "catalog"}) {
      std::string sample = std::string(field->metric->name) + "{cell=\"" + cell + "\"";
      if (!field->outcome.empty()) {
        sample += ",outcome=\"" + std::string(field->outcome) + "\",reason=\"" +
                  std::string(field->reason) + "\"";
      }
      sample += "}" + value;
      EXPECT_NE(text.find(sample), std::string::npos) << sample;
    }
  }
  // A family's HELP and TYPE, as docs/metrics.md lists them.
  EXPECT_NE(text.find("# HELP bulkhead_requests_total Requests that reached an outcome, by outcome "
                      "(ok, rejected, failed, cancelled, dropped, undelivered) and reason.\n"
                      "# TYPE bulkhead_requests_total counter\n"),
            std::string::npos);
  EXPECT_NE(text.find("bulkhead_requests_total{cell=\"catalog\",outcome=\"undelivered\",reason="
                      "\"client_gone\"} " +
                      std::to_string(b.counters.undelivered) + "\n"),
            std::string::npos);
}

}  // namespace
}  // namespace bulkhead::control
