// SPDX-License-Identifier: MIT
// MetricsText: HELP and TYPE once per family, the samples of each cell, cumulative histogram
// buckets ending in +Inf = _count, exact seconds, label escaping, and the cgroup families only for
// cells that have a cgroup. RestartReason's classification of Lifecycle::last_exit().
#include "control/metrics_text.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "lifecycle/restart_reason.h"

namespace bulkhead::control {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

CellSnapshot Snapshot(const std::string& name) {
  CellSnapshot s;
  s.name = name;
  s.state = lifecycle::Lifecycle::State::kRunning;
  s.limits.max_concurrent = 4;
  s.limits.max_queue = 8;
  s.running = 2;
  s.queued = 1;
  s.in_flight = 3;
  s.counters.ok = 10;
  s.counters.rejected_full = 2;
  s.counters.failed_worker_died = 1;
  s.counters.admitted = 14;
  s.counters.rejected_at_admission = 2;
  s.restarts_by_reason[static_cast<size_t>(lifecycle::RestartReason::kOom)] = 3;
  admission::LatencyHistogram h;
  h.Record(50'000);           // 50 µs
  h.Record(3'000'000);        // 3 ms
  h.Record(120'000'000'000);  // 120 s: +Inf only
  s.request_duration = h.counts();
  return s;
}

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST(MetricsText, EveryFamilyHasHelpAndTypeOnce) {
  std::string text = MetricsText({Snapshot("a"), Snapshot("b")});
  std::istringstream lines(text);
  std::string line;
  size_t families = 0;
  while (std::getline(lines, line)) {
    if (!line.starts_with("# TYPE ")) continue;
    ++families;
    std::string name = line.substr(7, line.find(' ', 7) - 7);
    EXPECT_EQ(Count(text, "# TYPE " + name + " "), 1u) << name;
    EXPECT_EQ(Count(text, "# HELP " + name + " "), 1u) << name;
  }
  EXPECT_GE(families, 15u);
  EXPECT_EQ(text.back(), '\n');
}

TEST(MetricsText, RequestsByOutcomeAndReason) {
  std::string text = MetricsText({Snapshot("a")});
  EXPECT_THAT(text, HasSubstr("# TYPE bulkhead_requests_total counter\n"));
  EXPECT_THAT(text,
              HasSubstr("bulkhead_requests_total{cell=\"a\",outcome=\"ok\",reason=\"none\"} 10\n"));
  EXPECT_THAT(
      text,
      HasSubstr("bulkhead_requests_total{cell=\"a\",outcome=\"rejected\",reason=\"full\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("bulkhead_requests_total{cell=\"a\",outcome=\"failed\",reason="
                              "\"worker_died\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("bulkhead_requests_admitted_total{cell=\"a\"} 14\n"));
  EXPECT_THAT(text, HasSubstr("bulkhead_requests_in_flight{cell=\"a\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("bulkhead_max_concurrent{cell=\"a\"} 4\n"));
  EXPECT_THAT(text, HasSubstr("bulkhead_up{cell=\"a\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("bulkhead_cell_state{cell=\"a\",state=\"running\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("bulkhead_cell_state{cell=\"a\",state=\"backoff\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("bulkhead_cell_restarts_total{cell=\"a\",reason=\"oom\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("bulkhead_cell_restarts_total{cell=\"a\",reason=\"crash\"} 0\n"));
}

// Connections refused over connection_limit (docs/http.md: "counted as connections_refused") are
// a counter of their own, beside the limit they were refused by; they were in status --json only.
// A crash loop says so, and when the next start is: the gauge for every cell, the time only while
// a start is due (issue 25 section 1).
TEST(MetricsText, CrashLoopingAndTheNextStart) {
  CellSnapshot looping = Snapshot("a");
  looping.state = lifecycle::Lifecycle::State::kBackoff;
  looping.crash_looping = true;
  looping.next_start_in_ms = 12'000;
  CellSnapshot failed = Snapshot("b");
  failed.state = lifecycle::Lifecycle::State::kFailed;
  failed.crash_looping = true;
  const std::string text = MetricsText({looping, failed, Snapshot("c")});
  EXPECT_THAT(text, HasSubstr("# TYPE bulkhead_cell_crash_looping gauge\n"));
  EXPECT_THAT(text, HasSubstr("bulkhead_cell_crash_looping{cell=\"a\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("bulkhead_cell_crash_looping{cell=\"b\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("bulkhead_cell_crash_looping{cell=\"c\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE bulkhead_cell_next_start_seconds gauge\n"));
  EXPECT_THAT(text, HasSubstr("bulkhead_cell_next_start_seconds{cell=\"a\"} 12\n"));
  // Failed (given up) and running: no start is due.
  EXPECT_THAT(text, Not(HasSubstr("bulkhead_cell_next_start_seconds{cell=\"b\"}")));
  EXPECT_THAT(text, Not(HasSubstr("bulkhead_cell_next_start_seconds{cell=\"c\"}")));
}

TEST(MetricsText, TheConcurrencyLimitItsBoundsAndItsChangesByCause) {
  CellSnapshot fixed = Snapshot("a");
  fixed.concurrency.limit = 8;
  CellSnapshot adaptive = Snapshot("b");
  adaptive.concurrency.adaptive = true;
  adaptive.concurrency.limit = 5;
  adaptive.concurrency.floor = 2;
  adaptive.concurrency.ceiling = 64;
  adaptive.concurrency.base_us = 12'500;
  adaptive.concurrency.changes_by_cause[static_cast<size_t>(admission::LimitCause::kLatency)] = 4;
  adaptive.concurrency.cpu_pressure_spared = 3;
  const std::string text = MetricsText({fixed, adaptive});
  EXPECT_THAT(text, HasSubstr("# TYPE bulkhead_concurrency_limit gauge\n"));
  EXPECT_THAT(text, HasSubstr("bulkhead_concurrency_limit{cell=\"a\"} 8\n"));
  EXPECT_THAT(text, HasSubstr("bulkhead_concurrency_limit{cell=\"b\"} 5\n"));
  EXPECT_THAT(text, HasSubstr("bulkhead_concurrency_limit_bound{cell=\"b\",bound=\"floor\"} 2\n"));
  EXPECT_THAT(text,
              HasSubstr("bulkhead_concurrency_limit_bound{cell=\"b\",bound=\"ceiling\"} 64\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE bulkhead_concurrency_limit_changes_total counter\n"));
  EXPECT_THAT(text,
              HasSubstr("bulkhead_concurrency_limit_changes_total{cell=\"b\",cause=\"latency\"} "
                        "4\n"));
  EXPECT_THAT(text,
              HasSubstr("bulkhead_concurrency_limit_changes_total{cell=\"b\",cause=\"bounds\"} "
                        "0\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE bulkhead_concurrency_cpu_pressure_spared_total counter\n"));
  EXPECT_THAT(text, HasSubstr("bulkhead_concurrency_cpu_pressure_spared_total{cell=\"b\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("bulkhead_service_time_base_seconds{cell=\"b\"} 0.0125\n"));
  // A fixed cell has no bounds, changes, spared events or base.
  EXPECT_THAT(text, Not(HasSubstr("bulkhead_concurrency_cpu_pressure_spared_total{cell=\"a\"")));
  EXPECT_THAT(text, Not(HasSubstr("bulkhead_concurrency_limit_bound{cell=\"a\"")));
  EXPECT_THAT(text, Not(HasSubstr("bulkhead_concurrency_limit_changes_total{cell=\"a\"")));
  EXPECT_THAT(text, Not(HasSubstr("bulkhead_service_time_base_seconds{cell=\"a\"")));
}

TEST(MetricsText, RefusedConnectionsAndTheConnectionLimit) {
  CellSnapshot s = Snapshot("a");
  s.counters.refused_connections = 5;
  s.connection_limit = 512;
  std::string text = MetricsText({s});
  EXPECT_THAT(text, HasSubstr("# TYPE bulkhead_connections_refused_total counter\n"));
  EXPECT_THAT(text, HasSubstr("bulkhead_connections_refused_total{cell=\"a\"} 5\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE bulkhead_connection_limit gauge\n"));
  EXPECT_THAT(text, HasSubstr("bulkhead_connection_limit{cell=\"a\"} 512\n"));
}

// What the alert on queue wait compares its p99 with (packaging/prometheus/bulkhead-alerts.yml).
TEST(MetricsText, QueueTimeoutInSeconds) {
  CellSnapshot s = Snapshot("a");
  s.limits.queue_timeout_ms = 1500;
  std::string text = MetricsText({s});
  EXPECT_THAT(text, HasSubstr("# TYPE bulkhead_queue_timeout_seconds gauge\n"));
  EXPECT_THAT(text, HasSubstr("bulkhead_queue_timeout_seconds{cell=\"a\"} 1.5\n"));
}

// The supervisor's reloads, without a cell label: a refused one sets the gauge to 0 until the
// next applied one, as Prometheus' own prometheus_config_last_reload_successful.
TEST(MetricsText, ReloadsByResultAndWhetherTheLastWasRefused) {
  std::string text = MetricsText({Snapshot("a")});
  EXPECT_THAT(text, HasSubstr("# TYPE bulkhead_config_reloads_total counter\n"));
  EXPECT_THAT(text, HasSubstr("bulkhead_config_reloads_total{result=\"applied\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("bulkhead_config_reloads_total{result=\"refused\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE bulkhead_config_last_reload_successful gauge\n"));
  EXPECT_THAT(text, HasSubstr("\nbulkhead_config_last_reload_successful 1\n"));

  text =
      MetricsText({Snapshot("a")}, ReloadCounts{.applied = 2, .refused = 1, .last_refused = true});
  EXPECT_THAT(text, HasSubstr("bulkhead_config_reloads_total{result=\"applied\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("bulkhead_config_reloads_total{result=\"refused\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("\nbulkhead_config_last_reload_successful 0\n"));
  // No cell, and still the supervisor's own families.
  EXPECT_THAT(MetricsText({}), HasSubstr("bulkhead_config_last_reload_successful 1\n"));
}

TEST(MetricsText, HistogramBucketsAreCumulativeInSeconds) {
  std::string text = MetricsText({Snapshot("a")});
  const std::string h = "bulkhead_request_duration_seconds";
  EXPECT_THAT(text, HasSubstr("# TYPE " + h + " histogram\n"));
  EXPECT_THAT(text, HasSubstr(h + "_bucket{cell=\"a\",le=\"0.0001\"} 1\n"));
  EXPECT_THAT(text, HasSubstr(h + "_bucket{cell=\"a\",le=\"0.0025\"} 1\n"));
  EXPECT_THAT(text, HasSubstr(h + "_bucket{cell=\"a\",le=\"0.005\"} 2\n"));
  EXPECT_THAT(text, HasSubstr(h + "_bucket{cell=\"a\",le=\"60\"} 2\n"));
  EXPECT_THAT(text, HasSubstr(h + "_bucket{cell=\"a\",le=\"+Inf\"} 3\n"));
  EXPECT_THAT(text, HasSubstr(h + "_sum{cell=\"a\"} 120.00305\n"));
  EXPECT_THAT(text, HasSubstr(h + "_count{cell=\"a\"} 3\n"));
  // An empty histogram still has every bucket, all 0.
  EXPECT_THAT(text, HasSubstr("bulkhead_queue_wait_seconds_bucket{cell=\"a\",le=\"+Inf\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("bulkhead_queue_wait_seconds_sum{cell=\"a\"} 0\n"));
}

TEST(MetricsText, CgroupFamiliesOnlyForCellsWithACgroup) {
  CellSnapshot without = Snapshot("plain");
  std::string text = MetricsText({without});
  EXPECT_THAT(text, Not(HasSubstr("bulkhead_cell_memory_bytes")));
  CellSnapshot with = Snapshot("boxed");
  with.cgroup.emplace();
  with.cgroup->memory_current = 4096;
  with.cgroup->memory_max = 1 << 20;
  with.cgroup->cpu.usage_usec = 1'500'000;
  with.cgroup_limits.cpu_quota_us = 50'000;
  text = MetricsText({without, with});
  EXPECT_THAT(text, HasSubstr("bulkhead_cell_memory_bytes{cell=\"boxed\"} 4096\n"));
  EXPECT_THAT(text, HasSubstr("bulkhead_cell_memory_max_bytes{cell=\"boxed\"} 1048576\n"));
  EXPECT_THAT(text, HasSubstr("bulkhead_cell_cpu_usage_seconds_total{cell=\"boxed\"} 1.5\n"));
  EXPECT_THAT(text, HasSubstr("bulkhead_cell_cpu_quota_cpus{cell=\"boxed\"} 0.5\n"));
  EXPECT_THAT(text, Not(HasSubstr("bulkhead_cell_memory_bytes{cell=\"plain\"}")));
}

TEST(MetricsText, LimitEnforcedPerSetLimit) {
  CellSnapshot s = Snapshot("hog");
  s.cgroup.emplace();
  s.cgroup->has_memory = false;
  s.cgroup->pids_current = 3;
  s.limit_states.fill(lifecycle::LimitState::kUnlimited);
  s.limit_states[static_cast<size_t>(cell::Limit::kMemoryMax)] =
      lifecycle::LimitState::kNotEnforced;
  s.limit_states[static_cast<size_t>(cell::Limit::kPidsMax)] = lifecycle::LimitState::kEnforced;
  std::string text = MetricsText({s});
  EXPECT_THAT(text,
              HasSubstr("bulkhead_cell_limit_enforced{cell=\"hog\",limit=\"memory_max\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("bulkhead_cell_limit_enforced{cell=\"hog\",limit=\"pids_max\"} 1\n"));
  EXPECT_THAT(text, Not(HasSubstr("limit=\"cpu_max\"")));
  // No memory controller: no memory figure rather than a 0 that looks measured.
  EXPECT_THAT(text, Not(HasSubstr("bulkhead_cell_memory_bytes{cell=\"hog\"}")));
  EXPECT_THAT(text, HasSubstr("bulkhead_cell_tasks{cell=\"hog\"} 3\n"));
}

TEST(MetricsText, EscapesLabelValues) {
  EXPECT_EQ(EscapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_EQ(EscapeLabelValue("payments-1"), "payments-1");
}

TEST(RestartReason, ClassifiesLastExit) {
  EXPECT_EQ(lifecycle::ClassifyLastExit("exit 3"), lifecycle::RestartReason::kCrash);
  EXPECT_EQ(lifecycle::ClassifyLastExit("signal 9"), lifecycle::RestartReason::kCrash);
  EXPECT_EQ(lifecycle::ClassifyLastExit("exit 0"), lifecycle::RestartReason::kExit);
  EXPECT_EQ(lifecycle::ClassifyLastExit("oom-kill"), lifecycle::RestartReason::kOom);
  EXPECT_EQ(lifecycle::ClassifyLastExit("stalled: no reply for 5000 ms (signal 9)"),
            lifecycle::RestartReason::kStall);
  EXPECT_EQ(
      lifecycle::ClassifyLastExit("watchdog timeout: no WATCHDOG=1 within 1000 ms (signal 6)"),
      lifecycle::RestartReason::kWatchdog);
  EXPECT_EQ(lifecycle::ClassifyLastExit("start failed: exec /bin/x: No such file or directory"),
            lifecycle::RestartReason::kStartFailed);
  for (size_t i = 0; i < lifecycle::kRestartReasonCount; ++i) {
    EXPECT_FALSE(lifecycle::RestartReasonName(static_cast<lifecycle::RestartReason>(i)).empty());
  }
  EXPECT_EQ(lifecycle::RestartReasonName(lifecycle::RestartReason::kStartFailed), "start_failed");
}

}  // namespace
}  // namespace bulkhead::control
