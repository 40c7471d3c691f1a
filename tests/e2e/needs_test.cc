// SPDX-License-Identifier: MIT
// `needs` with real processes (docs/config.md, "Dependencies"): a cell that needs another takes no
// request, and status says what it waits for, until the needed worker is ready (READY=1 once a
// file the test creates exists); once started it keeps running when its need stops; a start of it
// while its need is stopped waits again; at shutdown, and at `bulkheadctl stop --all`, it stops
// before its need; a chain of held starts reads "waiting"; a reload that adds a cycle or an
// unknown name is refused at the need's file:line:col with the running cells untouched.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "base/exit_status.h"
#include "tests/e2e/e2e_test.h"

namespace bulkhead::e2e {
namespace {

using ipc::Reason;
using ipc::ReplyStatus;
using ::testing::HasSubstr;
using ::testing::Not;

std::string StateOf(const nlohmann::json& cell) {
  return cell.is_object() && cell["state"].is_string() ? cell["state"].get<std::string>() : "";
}

// The number of the first line of `log` after the one holding `marker` that holds both `a` and
// `b`; SIZE_MAX when none does.
size_t LineAfter(const std::string& log, std::string_view marker, std::string_view a,
                 std::string_view b) {
  std::istringstream lines(log);
  std::string line;
  bool seen_marker = false;
  for (size_t n = 0; std::getline(lines, line); ++n) {
    if (!seen_marker) {
      seen_marker = line.find(marker) != std::string::npos;
    } else if (line.find(a) != std::string::npos && line.find(b) != std::string::npos) {
      return n;
    }
  }
  return SIZE_MAX;
}

// catalog becomes ready only once `go_file` exists; front needs it.
std::vector<CellSpec> CatalogAndFront(const std::string& go_file) {
  CellSpec catalog{.name = "catalog",
                   .command = {TestWorkerPath(), "--notify-ready-when-file", go_file},
                   .extra_toml = "ready = \"notify\"\n",
                   .wait_running = false};
  CellSpec front{.name = "front", .extra_toml = "needs = [\"catalog\"]\n", .wait_running = false};
  return {catalog, front};
}

TEST(Needs, DependentTakesNoRequestUntilItsNeedIsReady) {
  TempDir go_dir;
  const std::string go_file = go_dir.Join("go");
  Harness h(TestOptions(CatalogAndFront(go_file)));
  ASSERT_STARTED(h);

  ASSERT_TRUE(h.WaitForCell("catalog", [](const nlohmann::json& c) {
    return StateOf(c) == "starting";
  })) << h.Status().dump();
  ASSERT_TRUE(h.WaitForCell("front", [](const nlohmann::json& c) {
    return StateOf(c) == "waiting";
  })) << h.Status().dump();
  nlohmann::json front = h.Cell("front");
  EXPECT_EQ(front["state_detail"], "waiting for catalog (starting)") << front.dump();
  EXPECT_EQ(front["waiting_for"],
            nlohmann::json::parse(R"([{"cell":"catalog","state":"starting"}])"));
  EXPECT_EQ(front["needs"], nlohmann::json::parse(R"(["catalog"])"));
  EXPECT_TRUE(front["pid"].is_null()) << front.dump();
  EXPECT_TRUE(IsReply(h.Call("front", "echo early"), ReplyStatus::kRejected, Reason::kUnavailable))
      << Describe(h.Call("front", "echo early"));
  Result<ProcessResult> shown = h.Ctl({"status", "front"});
  ASSERT_TRUE(shown.ok()) << shown.status().message();
  EXPECT_THAT(shown->out, HasSubstr("waiting for catalog (starting)")) << shown->Describe();

  // The need is ready: the held start goes.
  std::ofstream(go_file) << "go\n";
  ASSERT_TRUE(h.WaitForCell("front", [](const nlohmann::json& c) {
    return StateOf(c) == "running";
  })) << h.Status().dump();
  EXPECT_OK_REPLY(h.Call("front", "echo served"), "served");
  EXPECT_EQ(h.Cell("front")["waiting_for"], nlohmann::json::array());

  // Once started, front keeps running when catalog stops (Kubernetes' answer, not Requires=).
  const nlohmann::json pid = h.Cell("front")["pid"];
  Result<ProcessResult> stop = h.Ctl({"stop", "catalog"});
  ASSERT_TRUE(stop.ok()) << stop.status().message();
  ASSERT_TRUE(h.WaitForCell("catalog", [](const nlohmann::json& c) {
    return StateOf(c) == "stopped";
  })) << h.Status().dump();
  EXPECT_EQ(h.Cell("front")["pid"], pid);
  EXPECT_OK_REPLY(h.Call("front", "echo still"), "still");

  // But a start of front now waits again, until catalog is started and ready.
  ASSERT_TRUE(h.Ctl({"stop", "front"}).ok());
  ASSERT_TRUE(h.WaitForCell("front", [](const nlohmann::json& c) {
    return StateOf(c) == "stopped";
  })) << h.Status().dump();
  // `bulkheadctl start` does not wait for a need that does not start by itself: it says so and
  // fails at once, and the start stays held in the supervisor.
  Result<ProcessResult> start = h.Ctl({"start", "front"});
  ASSERT_TRUE(start.ok()) << start.status().message();
  EXPECT_EQ(start->exit_code(), kExitFailure) << start->Describe();
  EXPECT_NE(start->err.find("start front: waiting for catalog (stopped); catalog does not start by "
                            "itself, and this start goes on once it runs (bulkheadctl start "
                            "catalog)"),
            std::string::npos)
      << start->Describe();
  EXPECT_EQ(h.Cell("front")["state_detail"], "waiting for catalog (stopped)") << h.Status().dump();
  // --no-block returns at once, as for any start.
  start = h.Ctl({"start", "--no-block", "front"});
  ASSERT_TRUE(start.ok()) << start.status().message();
  EXPECT_EQ(start->exit_code(), kExitOk) << start->Describe();
  ASSERT_TRUE(h.Ctl({"start", "catalog"}).ok());
  ASSERT_TRUE(h.WaitForCell("front", [](const nlohmann::json& c) {
    return StateOf(c) == "running";
  })) << h.Status().dump();
  EXPECT_OK_REPLY(h.Call("front", "echo again"), "again");

  // At shutdown front stops before catalog.
  Result<int> stopped = h.Stop();
  ASSERT_TRUE(stopped.ok()) << stopped.status().message();
  EXPECT_LT(LineAfter(h.Log(), "stopping every cell", "cell=front", "worker exited"),
            LineAfter(h.Log(), "stopping every cell", "cell=catalog", "worker exited"))
      << h.Log();
}

// A need in a long backoff: the dependent's callers are told to retry when the need starts next,
// and `bulkheadctl start` of the dependent says when that is, and fails at once when that is after
// its wait ends, instead of waiting it out in silence.
TEST(Needs, AStartHeldForANeedInALongBackoffSaysWhenItStartsAndDoesNotWaitPastIt) {
  CellSpec catalog{.name = "catalog",
                   .command = {"/bin/false"},
                   .restart_delay = "60s",
                   .extra_toml = "ready = \"notify\"\n",  // never ready: front is held for it
                   .wait_running = false};
  CellSpec front{.name = "front", .extra_toml = "needs = [\"catalog\"]\n", .wait_running = false};
  Harness h(TestOptions({catalog, front}));
  ASSERT_STARTED(h);
  ASSERT_TRUE(h.WaitForCell("catalog", [](const nlohmann::json& c) {
    return StateOf(c) == "backoff";
  })) << h.Status().dump();
  nlohmann::json need = h.Cell("front")["waiting_for"];
  ASSERT_EQ(need.size(), 1u) << h.Status().dump();
  EXPECT_EQ(need[0]["state"], "backoff") << need.dump();
  EXPECT_GT(need[0]["next_start_in_ms"].get<uint64_t>(), 5'000u) << need.dump();
  // Its callers are told to retry no sooner than catalog's next start (they were told nothing:
  // a time not known, HTTP's Retry-After: 1).
  Result<ProcessResult> call = h.Ctl({"call", "front", "--data", "echo x"});
  ASSERT_TRUE(call.ok()) << call.status().message();
  const size_t hint = call->err.find("rejected: unavailable (retry after ");
  ASSERT_NE(hint, std::string::npos) << call->Describe();
  EXPECT_GT(std::stoull(call->err.substr(hint + 35)), 5'000u) << call->Describe();

  ASSERT_TRUE(h.Ctl({"stop", "front"}).ok());
  Result<ProcessResult> start = h.Ctl({"--timeout", "5s", "start", "front"});
  ASSERT_TRUE(start.ok()) << start.status().message();
  EXPECT_EQ(start->exit_code(), kExitFailure) << start->Describe();
  EXPECT_THAT(start->err, HasSubstr("bulkheadctl: start front: waiting for catalog (backoff); "
                                    "catalog's next start in "))
      << start->Describe();
  EXPECT_THAT(start->err, HasSubstr(" comes after this wait ends (--timeout sets it), and this "
                                    "start goes on once it runs (bulkheadctl status catalog)"))
      << start->Describe();
  EXPECT_THAT(start->err, Not(HasSubstr("timed out"))) << start->Describe();
  // The start stays held in the supervisor.
  EXPECT_EQ(StateOf(h.Cell("front")), "waiting") << h.Status().dump();
}

// A chain edge -> front -> db (db ready 1.5 s after its start): front's start is held for db,
// so edge reads "waiting for front (waiting)", not the lifecycle's "stopped" of a worker-less
// front; and `start --all` after `stop --all` waits for the chain instead of giving up on edge as
// held for a need that does not start by itself.
TEST(Needs, AChainOfHeldStartsReadsWaitingAndStartAllWaitsForIt) {
  CellSpec db{.name = "db",
              .command = {TestWorkerPath(), "--notify-ready-after-ms", "1500"},
              .extra_toml = "ready = \"notify\"\n",
              .wait_running = false};
  CellSpec front{.name = "front", .extra_toml = "needs = [\"db\"]\n", .wait_running = false};
  CellSpec edge{.name = "edge", .extra_toml = "needs = [\"front\"]\n", .wait_running = false};
  // Written dependents first: the starts are asked needs first all the same, so edge's held start
  // is logged as waiting for front (waiting), not for front (stopped) before front's was asked.
  Harness h(TestOptions({edge, front, db}));
  ASSERT_STARTED(h);
  ASSERT_TRUE(h.WaitForCell("edge", [](const nlohmann::json& c) {
    return StateOf(c) == "waiting";
  })) << h.Status().dump();
  EXPECT_THAT(h.Log(), HasSubstr("cell=edge msg=\"start waits for front (waiting)\""));
  EXPECT_THAT(h.Log(), Not(HasSubstr("(stopped)"))) << h.Log();
  const nlohmann::json status = h.Status();
  nlohmann::json front_now;
  nlohmann::json edge_now;
  for (const nlohmann::json& cell : status["cells"]) {
    if (cell["name"] == "front") front_now = cell;
    if (cell["name"] == "edge") edge_now = cell;
  }
  ASSERT_EQ(StateOf(front_now), "waiting") << status.dump();
  EXPECT_EQ(front_now["state_detail"], "waiting for db (starting)") << status.dump();
  EXPECT_EQ(edge_now["state_detail"], "waiting for front (waiting)") << status.dump();
  EXPECT_EQ(edge_now["waiting_for"],
            nlohmann::json::parse(R"([{"cell":"front","state":"waiting"}])"));
  ASSERT_TRUE(h.WaitForCell("edge", [](const nlohmann::json& c) {
    return StateOf(c) == "running";
  })) << h.Status().dump();

  Result<ProcessResult> stop = h.Ctl({"stop", "--all"});
  ASSERT_TRUE(stop.ok()) << stop.status().message();
  ASSERT_EQ(stop->exit_code(), kExitOk) << stop->Describe();
  Result<ProcessResult> start = h.Ctl({"--timeout", "20s", "start", "--all"});
  ASSERT_TRUE(start.ok()) << start.status().message();
  EXPECT_EQ(start->exit_code(), kExitOk) << start->Describe();
  EXPECT_THAT(start->out, HasSubstr("edge: waiting for front (waiting)")) << start->Describe();
  for (const char* name : {"db", "front", "edge"}) {
    EXPECT_EQ(StateOf(h.Cell(name)), "running") << name << ": " << h.Status().dump();
  }
}

// `bulkheadctl stop --all` stops a cell before the cells it needs, as bulkheadd's shutdown does:
// edge ignores SIGTERM (killed at its stop_timeout), and front and db are not signalled until it
// has exited.
TEST(Needs, StopAllStopsEachCellBeforeTheCellsItNeeds) {
  CellSpec db{.name = "db",
              .command = {TestWorkerPath(), "--notify-ready-after-ms", "10"},
              .extra_toml = "ready = \"notify\"\n"};
  CellSpec front{.name = "front", .extra_toml = "needs = [\"db\"]\n"};
  CellSpec edge{.name = "edge",
                .command = {TestWorkerPath(), "--ignore-sigterm"},
                .extra_toml = "needs = [\"front\"]\nstop_timeout = \"1s\"\n"};
  Harness h(TestOptions({db, front, edge}));
  ASSERT_STARTED(h);
  Result<ProcessResult> stop = h.Ctl({"stop", "--all"});
  ASSERT_TRUE(stop.ok()) << stop.status().message();
  EXPECT_EQ(stop->exit_code(), kExitOk) << stop->Describe();
  for (const char* name : {"db", "front", "edge"}) {
    EXPECT_EQ(StateOf(h.Cell(name)), "stopped") << name << ": " << h.Status().dump();
  }
  // The log's first line is the marker: every worker exit comes after it.
  const std::string log = h.Log();
  const size_t edge_exit = LineAfter(log, "", "cell=edge", "worker exited");
  const size_t front_exit = LineAfter(log, "", "cell=front", "worker exited");
  const size_t db_exit = LineAfter(log, "", "cell=db", "worker exited");
  ASSERT_NE(db_exit, SIZE_MAX) << log;
  EXPECT_LT(edge_exit, front_exit) << log;
  EXPECT_LT(front_exit, db_exit) << log;
}

TEST(Needs, ReloadAddingACycleOrAnUnknownNameIsRefusedAtItsPlace) {
  CellSpec a{.name = "a"};
  CellSpec b{.name = "b", .extra_toml = "needs = [\"a\"]\n"};
  Harness h(TestOptions({a, b}));
  ASSERT_STARTED(h);
  const nlohmann::json a_pid = h.Cell("a")["pid"];
  const nlohmann::json b_pid = h.Cell("b")["pid"];

  // a -> b -> a: refused at the need that closes it, b's (written with spaces, to be found).
  CellSpec a_needs_b = a;
  a_needs_b.extra_toml = "needs = [\"b\"]\n";
  CellSpec b_spaced = b;
  b_spaced.extra_toml = "needs = [ \"a\" ]\n";
  h.RewriteConfig({a_needs_b, b_spaced});
  Result<ProcessResult> run = h.Ctl({"reload"});
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->exit_code(), kExitConfigInvalid) << run->Describe();
  const std::string place = PlaceInConfig(h.config_path(), "needs = [ ");
  ASSERT_NE(place, "");
  EXPECT_THAT(run->err, HasSubstr(place + ": cells.b.needs[0]: cycle: a -> b -> a;"))
      << run->Describe();
  EXPECT_THAT(run->err, HasSubstr("reload refused; nothing changed"));

  // An unknown name, likewise.
  CellSpec a_needs_nobody = a;
  a_needs_nobody.extra_toml = "needs = [\"c\"]\n";
  h.RewriteConfig({a_needs_nobody, b});
  run = h.Ctl({"reload"});
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->exit_code(), kExitConfigInvalid) << run->Describe();
  const std::string unknown_place = PlaceInConfig(h.config_path(), "needs = [");
  EXPECT_THAT(run->err, HasSubstr(unknown_place + ": cells.a.needs[0]: no cell named \"c\""))
      << run->Describe();

  // Nothing running was touched.
  EXPECT_EQ(h.Cell("a")["pid"], a_pid);
  EXPECT_EQ(h.Cell("b")["pid"], b_pid);
  EXPECT_EQ(h.Cell("a")["needs"], nlohmann::json::array());
  EXPECT_OK_REPLY(h.Call("a", "echo a"), "a");
  EXPECT_OK_REPLY(h.Call("b", "echo b"), "b");
}

}  // namespace
}  // namespace bulkhead::e2e
