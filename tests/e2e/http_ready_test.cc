// SPDX-License-Identifier: MIT
// ready = "http:/healthz" end to end, with Python's http.server on fd 3 as the worker
// (tests/helpers/http_health_worker.py): the cell runs only once the probe got a 2xx, a worker
// that never answers 2xx fails to start within start_timeout, and with stall_timeout the same
// probe is the liveness check: a worker that stops answering 2xx is stalled and replaced.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "tests/e2e/e2e_test.h"

namespace bulkhead::e2e {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::StartsWith;

std::string HealthWorker() {
  return std::string(BULKHEAD_SOURCE_DIR) + "/tests/helpers/http_health_worker.py";
}

// A cell whose worker is the health worker with `args`, logging each probe's answer to `log`.
CellSpec HealthCell(const std::string& log, std::vector<std::string> args, std::string extra) {
  std::vector<std::string> command = {"python3", HealthWorker(), "--log", log};
  command.insert(command.end(), args.begin(), args.end());
  return CellSpec{.name = "web",
                  .command = command,
                  .extra_toml = "protocol = \"http\"\nready = \"http:/healthz\"\n" + extra};
}

TEST(HttpReady, TheCellRunsOnceHealthzAnswers2xx) {
  TempDir dir;
  const std::string log = dir.Join("probes");
  Harness h(TestOptions({HealthCell(log, {"--fail-first", "3"}, "start_timeout = \"20s\"\n")}));
  ASSERT_STARTED(h);  // waits for "running"
  // The 503s came first (at least three: an attempt abandoned after 1 s while the worker was still
  // starting is answered too), then the 200 that made it ready, and nothing after it (no
  // stall_timeout: no liveness probing).
  const std::string probes = testing::ReadFile(log).value_or("");
  EXPECT_THAT(probes, MatchesRegex("(503\n){3,}200\n")) << probes;
  nlohmann::json cell = h.Cell("web");
  EXPECT_EQ(cell["policy"]["ready"], "http:/healthz") << cell.dump();
  EXPECT_THAT(h.Log(), HasSubstr("worker ready (GET /healthz answered 200)"));
  EXPECT_EQ(cell["restarts"], 0);
}

// A worker that sends READY=1 besides (gunicorn's arbiter does, before its app answers) is ready
// only once the probe gets its 2xx, and the log says so; READY=1 used to open admission at once,
// logged as "worker ready (READY=1)".
TEST(HttpReady, ReadyOneFromTheWorkerDoesNotStandInForTheProbe) {
  TempDir dir;
  const std::string log = dir.Join("probes");
  Harness h(TestOptions(
      {HealthCell(log, {"--notify-ready", "--fail-first", "3"}, "start_timeout = \"20s\"\n")}));
  ASSERT_STARTED(h);  // waits for "running"
  const std::string probes = testing::ReadFile(log).value_or("");
  EXPECT_THAT(probes, MatchesRegex("(503\n){3,}200\n")) << probes << "\n" << h.Log();
  EXPECT_THAT(h.Log(), HasSubstr("worker ready (GET /healthz answered 200)"));
  EXPECT_THAT(h.Log(), ::testing::Not(HasSubstr("worker ready (READY=1)")));
}

TEST(HttpReady, AWorkerThatNeverAnswers2xxFailsToStartWithinStartTimeout) {
  TempDir dir;
  const std::string log = dir.Join("probes");
  CellSpec cell =
      HealthCell(log, {"--fail-first", "1000000"},
                 "start_timeout = \"4s\"\nrestart = \"never\"\n" + std::string(kQuickStop));
  cell.wait_running = false;
  Harness h(TestOptions({cell}));
  ASSERT_STARTED(h);
  ASSERT_TRUE(h.WaitForCell(
      "web", [](const nlohmann::json& c) { return c["state"] == "failed"; },
      std::chrono::seconds(20)))
      << h.Cell("web").dump() << "\n"
      << h.Log();
  nlohmann::json c = h.Cell("web");
  EXPECT_THAT(c["last_exit"].get<std::string>(),
              StartsWith("start timeout: no 2xx to GET /healthz"))
      << c.dump();
  EXPECT_THAT(h.Log(), HasSubstr("health probe GET /healthz: last answer 503"));
  const std::string probes = testing::ReadFile(log).value_or("");
  EXPECT_THAT(probes, MatchesRegex("(503\n)+")) << probes;
}

TEST(HttpReady, WithStallTimeoutAWorkerThatStopsAnsweringIsStalledAndReplaced) {
  for (const char* then : {"503", "hang"}) {
    SCOPED_TRACE(then);
    TempDir dir;
    const std::string log = dir.Join("probes");
    // stall_timeout is wall-clock time here: long enough that a Python worker slowed by a loaded
    // machine still answers each of its first three probes well within it (a 600 ms one stalled
    // a worker that was still answering 200, and the probe log began with a new worker's 200s).
    // When the probe stalls a worker, to the millisecond: HealthProbe's unit tests.
    Harness h(TestOptions({HealthCell(log, {"--ok-for", "3", "--then", then},
                                      "stall_timeout = \"4s\"\n" + std::string(kQuickStop))}));
    ASSERT_STARTED(h);
    ASSERT_TRUE(h.WaitForCell(
        "web", [](const nlohmann::json& c) { return c["restarts"] >= 1; },
        std::chrono::seconds(60)))
        << h.Cell("web").dump() << "\n"
        << h.Log();
    nlohmann::json c = h.Cell("web");
    EXPECT_EQ(c["restarts_by_reason"]["stall"], c["restarts"]) << c.dump();
    EXPECT_THAT(h.Log(), HasSubstr("stalled: health probe GET /healthz: no 2xx for"));
    // Probed while it ran: the ready 200 and two more, then what stopped the 2xx.
    EXPECT_THAT(testing::ReadFile(log).value_or(""),
                StartsWith("200\n200\n200\n" + std::string(then)));
  }
}

// The probe reads each answer to its end before it closes: a worker still writing the body when
// the probe had closed after the status line failed with EPIPE (Python's http.server logged a
// BrokenPipeError traceback for about one probe in nine).
TEST(HttpReady, TheProbeReadsTheWholeAnswerBeforeItCloses) {
  TempDir dir;
  const std::string log = dir.Join("probes");
  Harness h(TestOptions({HealthCell(log, {"--slow-body"}, "stall_timeout = \"2s\"\n")}));
  ASSERT_STARTED(h);
  // The ready probe, then liveness probes every 500 ms (a quarter of stall_timeout, as the trial's
  // worker was probed).
  constexpr size_t kProbes = 10;
  auto answered = [&] {
    const std::string probes = testing::ReadFile(log).value_or("");
    return static_cast<size_t>(std::count(probes.begin(), probes.end(), '\n'));
  };
  ASSERT_TRUE(testing::WaitFor([&] { return answered() >= kProbes; }, std::chrono::seconds(30)))
      << testing::ReadFile(log).value_or("") << "\n"
      << h.Log();
  const std::string probes = testing::ReadFile(log).value_or("");
  EXPECT_THAT(probes, MatchesRegex("(200\n)+")) << probes;
  EXPECT_EQ(h.Cell("web")["restarts"], 0) << h.Log();
}

}  // namespace
}  // namespace bulkhead::e2e
