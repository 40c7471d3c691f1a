// SPDX-License-Identifier: MIT
// The re-exec state (supervisor/reexec_state.h, docs/reexec.md): its document round-trips, a
// version this build does not read is refused with a line saying which it reads, and it travels
// through a sealed memfd.
#include "supervisor/reexec_state.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "control/cell_counter_fields.h"

namespace bulkhead::supervisor {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

ReexecState SampleState() {
  ReexecState state;
  state.written_by = "0.1.0";
  state.uptime_ms = 123'456;
  state.reexecs = 2;
  state.metrics_bound = "127.0.0.1:29090";
  state.binary = "/usr/sbin/bulkheadd";
  state.reloads = {.applied = 3, .refused = 1, .last_refused = true};
  state.lock_fd = 4;
  state.access_log_lines = 1'234;
  state.access_log_dropped = 5;
  state.connections = {{"payments", 13, false}, {"payments", 14, true}};
  state.listeners = {{"control", "", 5, "/run/bulkhead/control.sock"},
                     {"metrics", "", 6, "127.0.0.1:29090"},
                     {"front", "payments", 7, "/run/bulkhead/payments.sock"},
                     {"listen", "payments", 8, "127.0.0.1:29080"},
                     {"worker", "payments", 9, "/run/bulkhead/payments.worker.sock"},
                     {"notify", "payments", 10, "/run/bulkhead/payments.notify"}};
  ReexecState::Cell payments;
  payments.name = "payments";
  payments.state = "running";
  payments.starts = 4;
  payments.restarts = 3;
  payments.last_exit = "signal 9";
  payments.in_state_ms = 61'000;
  payments.restarts_by_reason = {{"crash", 2}, {"operator", 1}};
  payments.consecutive_failures = 1;
  payments.worker = ReexecState::Worker{.pid = 4242,
                                        .pgid = 4242,
                                        .cgroup_path = "/sys/fs/cgroup/b/cells/payments/gen-3",
                                        .stdout_fd = 11,
                                        .stderr_fd = 12,
                                        .ready = true,
                                        .uptime_ms = 60'000};
  // Every counter a different value, so that a field read into the wrong member shows.
  uint64_t value = 100;
  for (const control::CellCounterField& field : control::kCellCounterFields) {
    payments.counters.*field.member = value++;
  }
  admission::AdaptiveLimit::Carried adaptive;
  adaptive.estimate = 6.5;
  adaptive.phase = admission::AdaptiveLimit::Phase::kAvoidance;
  adaptive.base_us = 10'250.5;
  adaptive.base_samples = 120;
  adaptive.base_age_ms = 4'000;
  adaptive.changes = {{.at_ms = 900,
                       .from = 8,
                       .to = 6,
                       .cause = admission::LimitCause::kMemoryPressure,
                       .permille = 0},
                      {.at_ms = 5'000,
                       .from = 4,
                       .to = 8,
                       .cause = admission::LimitCause::kSlowStart,
                       .permille = 0},
                      {.at_ms = 7'000,
                       .from = 10,
                       .to = 4,
                       .cause = admission::LimitCause::kLatency,
                       .permille = 2'400}};
  for (size_t i = 0; i < admission::kLimitCauseCount; ++i) adaptive.changes_by[i] = 10 + i;
  adaptive.cpu_pressure_spared = 3;
  payments.adaptive = adaptive;
  payments.queue_wait.buckets[0] = 7;
  payments.queue_wait.count = 7;
  payments.queue_wait.sum_ns = 350'000;
  payments.duration.buckets[admission::LatencyHistogram::kBuckets - 1] = 2;
  payments.duration.count = 2;
  payments.duration.sum_ns = 130'000'000'000;
  ReexecState::Cell catalog;
  catalog.name = "catalog";
  catalog.state = "backoff";
  catalog.next_start_in_ms = 1500;
  catalog.start_ages_ms = {50'000, 38'000, 2'000};
  catalog.crash_looping = true;
  catalog.short_runs = 3;
  catalog.crash_loop = "crash-looping: 3 starts in 60s";
  ReexecState::Cell search;
  search.name = "search";
  search.state = "failed";
  search.reason = "gave up: 5 starts in 60s, last exit 1";
  search.gave_up = true;
  search.start_held = true;  // a start asked again, held for a cell it needs
  state.cells = {payments, catalog, search};
  return state;
}

TEST(ReexecState, RoundTripsEveryField) {
  const ReexecState state = SampleState();
  Result<ReexecState> decoded = ReexecState::Decode(state.Encode());
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_EQ(decoded->written_by, "0.1.0");
  EXPECT_EQ(decoded->uptime_ms, 123'456u);
  EXPECT_EQ(decoded->reexecs, 2u);
  EXPECT_EQ(decoded->metrics_bound, "127.0.0.1:29090");
  EXPECT_EQ(decoded->reloads.applied, 3u);
  EXPECT_EQ(decoded->reloads.refused, 1u);
  EXPECT_TRUE(decoded->reloads.last_refused);
  ASSERT_EQ(decoded->listeners.size(), state.listeners.size());
  for (size_t i = 0; i < state.listeners.size(); ++i) {
    EXPECT_EQ(decoded->listeners[i].role, state.listeners[i].role);
    EXPECT_EQ(decoded->listeners[i].cell, state.listeners[i].cell);
    EXPECT_EQ(decoded->listeners[i].fd, state.listeners[i].fd);
    EXPECT_EQ(decoded->listeners[i].address, state.listeners[i].address);
  }
  EXPECT_EQ(decoded->lock_fd, 4);
  ASSERT_EQ(decoded->connections.size(), 2u);
  EXPECT_EQ(decoded->connections[1].cell, "payments");
  EXPECT_EQ(decoded->connections[1].fd, 14);
  EXPECT_TRUE(decoded->connections[1].tcp);
  EXPECT_FALSE(decoded->connections[0].tcp);
  ASSERT_EQ(decoded->cells.size(), 3u);
  const ReexecState::Cell& payments = decoded->cells[0];
  EXPECT_EQ(payments.name, "payments");
  EXPECT_EQ(payments.state, "running");
  EXPECT_EQ(payments.starts, 4u);
  EXPECT_EQ(payments.restarts, 3u);
  EXPECT_EQ(payments.last_exit, "signal 9");
  EXPECT_EQ(payments.in_state_ms, 61'000u);
  EXPECT_EQ(decoded->binary, "/usr/sbin/bulkheadd");
  EXPECT_EQ(payments.restarts_by_reason, state.cells[0].restarts_by_reason);
  EXPECT_EQ(payments.consecutive_failures, 1u);
  ASSERT_TRUE(payments.worker.has_value());
  EXPECT_EQ(payments.worker->pid, 4242);
  EXPECT_EQ(payments.worker->pgid, 4242);
  EXPECT_EQ(payments.worker->cgroup_path, "/sys/fs/cgroup/b/cells/payments/gen-3");
  EXPECT_EQ(payments.worker->stdout_fd, 11);
  EXPECT_EQ(payments.worker->stderr_fd, 12);
  EXPECT_TRUE(payments.worker->ready);
  EXPECT_EQ(payments.worker->uptime_ms, 60'000u);
  for (const control::CellCounterField& field : control::kCellCounterFields) {
    EXPECT_EQ(payments.counters.*field.member, state.cells[0].counters.*field.member)
        << field.json_name;
  }
  EXPECT_EQ(payments.queue_wait.buckets, state.cells[0].queue_wait.buckets);
  EXPECT_EQ(payments.queue_wait.count, 7u);
  EXPECT_EQ(payments.queue_wait.sum_ns, 350'000u);
  EXPECT_EQ(payments.duration.buckets, state.cells[0].duration.buckets);
  EXPECT_EQ(payments.duration.sum_ns, 130'000'000'000u);
  ASSERT_TRUE(payments.adaptive.has_value());
  const admission::AdaptiveLimit::Carried& adaptive = *payments.adaptive;
  EXPECT_EQ(adaptive.estimate, 6.5);
  EXPECT_EQ(adaptive.phase, admission::AdaptiveLimit::Phase::kAvoidance);
  EXPECT_EQ(adaptive.base_us, 10'250.5);
  EXPECT_EQ(adaptive.base_samples, 120u);
  EXPECT_EQ(adaptive.base_age_ms, 4'000u);
  ASSERT_EQ(adaptive.changes.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const admission::LimitChange& want = state.cells[0].adaptive->changes[i];
    EXPECT_EQ(adaptive.changes[i].at_ms, want.at_ms) << i;
    EXPECT_EQ(adaptive.changes[i].from, want.from) << i;
    EXPECT_EQ(adaptive.changes[i].to, want.to) << i;
    EXPECT_EQ(adaptive.changes[i].cause, want.cause) << i;
    EXPECT_EQ(adaptive.changes[i].permille, want.permille) << i;
  }
  EXPECT_EQ(adaptive.changes_by, state.cells[0].adaptive->changes_by);
  EXPECT_EQ(adaptive.cpu_pressure_spared, 3u);
  const ReexecState::Cell& catalog = decoded->cells[1];
  EXPECT_FALSE(catalog.adaptive.has_value()) << "a fixed cell carries no controller";
  EXPECT_EQ(catalog.state, "backoff");
  EXPECT_EQ(catalog.next_start_in_ms, 1500u);
  EXPECT_FALSE(catalog.worker.has_value());
  EXPECT_THAT(catalog.start_ages_ms, ElementsAre(50'000u, 38'000u, 2'000u));
  EXPECT_TRUE(catalog.crash_looping);
  EXPECT_EQ(catalog.short_runs, 3u);
  EXPECT_EQ(catalog.crash_loop, "crash-looping: 3 starts in 60s");
  EXPECT_EQ(decoded->access_log_lines, 1'234u);
  EXPECT_EQ(decoded->access_log_dropped, 5u);
  const ReexecState::Cell& search = decoded->cells[2];
  EXPECT_EQ(search.state, "failed");
  EXPECT_EQ(search.reason, "gave up: 5 starts in 60s, last exit 1");
  EXPECT_TRUE(search.gave_up);
  EXPECT_TRUE(search.start_held);
  EXPECT_FALSE(decoded->cells[1].start_held);
}

TEST(ReexecState, NamesEveryFdThatMustSurviveTheExec) {
  EXPECT_THAT(SampleState().Fds(), ElementsAre(4, 5, 6, 7, 8, 9, 10, 13, 14, 11, 12));
}

TEST(ReexecState, RefusesAVersionItDoesNotReadSayingWhichItReads) {
  nlohmann::json document = nlohmann::json::parse(SampleState().Encode());
  document["version"] = 9;
  Result<ReexecState> decoded = ReexecState::Decode(document.dump());
  ASSERT_FALSE(decoded.ok());
  EXPECT_THAT(decoded.status().message(), HasSubstr("reexec state version 9 is not readable"));
  EXPECT_THAT(decoded.status().message(), HasSubstr("(it reads 1 2 3 4)"));
}

// Versions 1 and 2 (written by the builds before the start limit's window and the access log's
// counters travelled) are read as before: no window (the start limit counts afresh), counters
// from 0. Version 2 carries a cell in backoff; a version 1 state holds none.
TEST(ReexecState, ReadsTheVersionsBeforeItsOwnWithoutTheWindow) {
  for (int version : {1, 2}) {
    nlohmann::json document = nlohmann::json::parse(SampleState().Encode());
    document["version"] = version;
    document.erase("access_log");
    for (nlohmann::json& cell : document["cells"]) {
      for (const char* key :
           {"start_ages_ms", "crash_looping", "short_runs", "crash_loop", "start_held"}) {
        cell.erase(key);
      }
    }
    Result<ReexecState> decoded = ReexecState::Decode(document.dump());
    ASSERT_TRUE(decoded.ok()) << version << ": " << decoded.status().message();
    ASSERT_EQ(decoded->cells.size(), 3u);
    EXPECT_EQ(decoded->cells[0].worker->pid, 4242) << version;
    const ReexecState::Cell& catalog = decoded->cells[1];
    EXPECT_EQ(catalog.state, "backoff") << version;
    EXPECT_EQ(catalog.next_start_in_ms, 1500u) << version;
    EXPECT_TRUE(catalog.start_ages_ms.empty()) << version;
    EXPECT_FALSE(catalog.crash_looping) << version;
    EXPECT_EQ(catalog.short_runs, 0u) << version;
    EXPECT_EQ(catalog.crash_loop, "") << version;
    EXPECT_FALSE(decoded->cells[2].start_held) << version;
    EXPECT_EQ(decoded->access_log_lines, 0u) << version;
  }
}

// Version 3 (written by the builds before an adaptive cell's controller travelled) is read as
// before: no controller, so the cell's starts afresh at its floor.
TEST(ReexecState, ReadsVersionThreeWithoutTheAdaptiveController) {
  nlohmann::json document = nlohmann::json::parse(SampleState().Encode());
  document["version"] = 3;
  for (nlohmann::json& cell : document["cells"]) cell.erase("adaptive");
  Result<ReexecState> decoded = ReexecState::Decode(document.dump());
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_FALSE(decoded->cells[0].adaptive.has_value());
  EXPECT_EQ(decoded->cells[0].worker->pid, 4242);
  EXPECT_EQ(decoded->cells[1].start_ages_ms.size(), 3u) << "version 3's window is still read";
}

// A cause or phase this build does not know is refused by its path, not counted under another.
TEST(ReexecState, RefusesAnAdaptiveCauseItDoesNotKnow) {
  nlohmann::json document = nlohmann::json::parse(SampleState().Encode());
  document["cells"][0]["adaptive"]["changes"][1]["cause"] = "moon_phase";
  Result<ReexecState> decoded = ReexecState::Decode(document.dump());
  ASSERT_FALSE(decoded.ok());
  EXPECT_THAT(decoded.status().message(),
              HasSubstr("cells[0].adaptive.changes[1].cause: not a cause"));
  document = nlohmann::json::parse(SampleState().Encode());
  document["cells"][0]["adaptive"]["phase"] = "lunar";
  decoded = ReexecState::Decode(document.dump());
  ASSERT_FALSE(decoded.ok());
  EXPECT_THAT(decoded.status().message(), HasSubstr("cells[0].adaptive.phase: not a phase"));
}

TEST(ReexecState, RefusesWhatIsNotItsFormat) {
  for (std::string_view document :
       {"", "not json", "[1, 2]", R"({"version": 1})", R"({"format": "other", "version": 1})",
        R"({"format": "bulkheadd-reexec-state"})",
        R"({"format": "bulkheadd-reexec-state", "version": "1"})"}) {
    Result<ReexecState> decoded = ReexecState::Decode(document);
    EXPECT_FALSE(decoded.ok()) << document;
    if (!decoded.ok()) {
      EXPECT_THAT(decoded.status().message(), HasSubstr("reexec state"));
    }
  }
}

TEST(ReexecState, NamesTheFieldOfTheWrongType) {
  nlohmann::json document = nlohmann::json::parse(SampleState().Encode());
  document["cells"][0]["counters"]["ok"] = -1;
  Result<ReexecState> decoded = ReexecState::Decode(document.dump());
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().message(),
            "reexec state: cells[0].counters.ok: not an unsigned integer in range");

  document = nlohmann::json::parse(SampleState().Encode());
  document["listeners"][2]["fd"] = "seven";
  decoded = ReexecState::Decode(document.dump());
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().message(), "reexec state: listeners[2].fd: not an integer in range");

  document = nlohmann::json::parse(SampleState().Encode());
  document["cells"][0]["worker"]["pid"] = 0;
  decoded = ReexecState::Decode(document.dump());
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().message(),
            "reexec state: cells[0].worker.pid: missing or not positive");
}

TEST(ReexecState, IgnoresKeysItDoesNotKnowAndDefaultsMissingOnes) {
  // What a newer build of the same version may add, and an older one may leave out.
  nlohmann::json document = nlohmann::json::parse(SampleState().Encode());
  document["added_later"] = {{"x", 1}};
  document["cells"][0]["counters"]["a_counter_added_later"] = 5;
  document["cells"][0]["restarts_by_reason"]["a_reason_added_later"] = 2;
  document["cells"][1].erase("next_start_in_ms");
  document["cells"][1].erase("counters");
  Result<ReexecState> decoded = ReexecState::Decode(document.dump());
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_EQ(decoded->cells[0].restarts_by_reason.at("a_reason_added_later"), 2u);
  EXPECT_EQ(decoded->cells[1].next_start_in_ms, 0u);
  EXPECT_EQ(decoded->cells[1].counters.ok, 0u);
}

TEST(ReexecState, TravelsThroughASealedMemfd) {
  const std::string document = SampleState().Encode();
  Result<UniqueFd> fd = WriteStateMemfd(document);
  ASSERT_TRUE(fd.ok()) << fd.status().message();
  EXPECT_NE(::fcntl(fd->get(), F_GETFD) & FD_CLOEXEC, 0);
  // Nobody can change it once written.
  EXPECT_EQ(::write(fd->get(), "x", 1), -1);
  Result<std::string> read = ReadStateFd(fd->get());
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(*read, document);
  EXPECT_FALSE(ReadStateFd(-1).ok());
}

TEST(ReexecVersionsLine, PrintsAndParsesTheReadableVersions) {
  EXPECT_EQ(ReadableVersionsLine(), "1 2 3 4");
  Result<std::vector<int>> versions = ParseVersionsLine(ReadableVersionsLine() + "\n");
  ASSERT_TRUE(versions.ok());
  EXPECT_THAT(*versions, ElementsAre(1, 2, 3, ReexecState::kVersion));
  EXPECT_THAT(ParseVersionsLine("1 2 3").value(), ElementsAre(1, 2, 3));
  EXPECT_FALSE(ParseVersionsLine("").ok());
  EXPECT_FALSE(ParseVersionsLine("\n").ok());
  EXPECT_FALSE(ParseVersionsLine("1 x").ok());
  EXPECT_FALSE(ParseVersionsLine("0").ok());
  EXPECT_FALSE(ParseVersionsLine("-1").ok());
}

}  // namespace
}  // namespace bulkhead::supervisor
