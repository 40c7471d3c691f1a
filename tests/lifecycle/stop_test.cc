// SPDX-License-Identifier: MIT
// Stopping (issue 4): `stop` refuses what waits, lets what runs finish, sends stop_signal and
// SIGKILLs a worker that ignores it after stop_timeout; a second restart during a slow stop is
// answered "restart in progress" and there is never a second worker beside the first.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <set>

#include "tests/lifecycle/lifecycle_fixture.h"

namespace bulkhead::lifecycle_test {
namespace {

using ::testing::HasSubstr;

CellSpec Stubborn() {
  return CellSpec{.name = "stubborn",
                  .command = {e2e::TestWorkerPath(), "--ignore-sigterm"},
                  .max_concurrent = 1,
                  .max_queue = 1,
                  .queue_timeout = "10s",
                  // The restart that stops first (the overlapping one: restart_overlap_test).
                  // stop_timeout is wall-clock time here: long enough that no step of a test
                  // (a status read, a request the test lets finish) can lose a race with it on a
                  // loaded machine; when it fires to the millisecond is WorkerRunnerTest's, in
                  // simulated time.
                  .extra_toml = "stop_timeout = \"3s\"\nrestart_overlap = false\n"};
}

TEST(Stop, DrainsThenEscalatesFromSigtermToSigkill) {
  Harness h(TestOptions({Stubborn()}));
  ASSERT_STARTED(h);
  Tally tally;
  const int pid = WorkerPid(h, "stubborn");

  // One request running (it finishes once the test creates `go`, within stop_timeout), one
  // queued (refused at once).
  const std::string go = h.dir() + "/go.flag";
  Result<ipc::Client> running = SendThenWaitFor(h, "stubborn", 1, "wait-file " + go, "running", 1);
  ASSERT_TRUE(running.ok()) << running.status().message();
  Result<ipc::Client> queued = SendThenWaitFor(h, "stubborn", 2, "echo never", "queued", 1);
  ASSERT_TRUE(queued.ok()) << queued.status().message();

  nlohmann::json answer = Control(h, "stop", "stubborn");
  EXPECT_EQ(answer["ok"], true) << answer.dump();
  EXPECT_EQ(answer["result"], "ok") << answer.dump();

  Result<ipc::Client::Reply> refused = queued->Receive();
  tally.Count(refused);
  EXPECT_TRUE(IsReply(refused, ReplyStatus::kRejected, Reason::kUnavailable)) << Describe(refused);
  testing::CreateFlag(go);
  Result<ipc::Client::Reply> finished = running->Receive();
  tally.Count(finished);
  EXPECT_OK_REPLY(finished, "found " + go);

  // A second stop while the worker ignores SIGTERM.
  nlohmann::json again = Control(h, "stop", "stubborn");
  if (h.Cell("stubborn")["state"] == "stopping") {
    EXPECT_EQ(again["result"], "stop in progress") << again.dump();
    EXPECT_EQ(again["ok"], false) << again.dump();
  }

  // The worker ignores SIGTERM: SIGKILL at stop_timeout ends it (when, to the millisecond, with the
  // drain sharing stop_timeout: WorkerRunnerTest.AStopDrainsWhatRunsWithinTheSameStopTimeout).
  ASSERT_TRUE(CellShows(h, "stubborn", "state", "stopped"));
  nlohmann::json c = h.Cell("stubborn");
  EXPECT_TRUE(c["pid"].is_null()) << c.dump();
  EXPECT_EQ(c["last_exit"], "signal 9") << c.dump();
  EXPECT_FALSE(bulkhead::testing::ProcessExists(pid));
  const std::string log = h.Log();
  EXPECT_FALSE(CellLogEvents(log, "stubborn", "stopping worker (SIGTERM)").empty()) << log;
  EXPECT_FALSE(CellLogEvents(log, "stubborn", "sending SIGKILL").empty()) << log;

  // Stopped: requests are refused, a second stop is a no-op, start brings it back.
  Result<ipc::Client::Reply> while_stopped = h.Call("stubborn", "echo anyone");
  tally.Count(while_stopped);
  EXPECT_TRUE(IsReply(while_stopped, ReplyStatus::kRejected, Reason::kUnavailable))
      << Describe(while_stopped);
  EXPECT_EQ(Control(h, "stop", "stubborn")["result"], "already stopped");
  answer = Control(h, "start", "stubborn");
  EXPECT_EQ(answer["result"], "ok") << answer.dump();
  ASSERT_TRUE(NewWorkerRuns(h, "stubborn", pid));
  EXPECT_TRUE(Served(h, "stubborn", "echo back", "back", tally));
  EXPECT_EQ(Control(h, "start", "stubborn")["result"], "already started");
  ExpectCountersMatch(h, "stubborn", tally);
  EXPECT_EQ(h.Cell("stubborn")["rejected_by_reason"]["unavailable"], 2);
}

TEST(Stop, SecondRestartDuringASlowStopIsInProgressAndNeverTwoWorkers) {
  Harness h(TestOptions({Stubborn()}));
  ASSERT_STARTED(h);
  Tally tally;
  const int old_pid = WorkerPid(h, "stubborn");

  // A request queued across the restart is served by the next worker; the one running finishes
  // once the test creates `go`.
  const std::string go = h.dir() + "/go.flag";
  Result<ipc::Client> running = SendThenWaitFor(h, "stubborn", 1, "wait-file " + go, "running", 1);
  ASSERT_TRUE(running.ok()) << running.status().message();

  nlohmann::json first = Control(h, "restart", "stubborn");
  EXPECT_EQ(first["ok"], true) << first.dump();
  EXPECT_EQ(first["result"], "ok") << first.dump();
  Result<ipc::Client> queued = SendOn(h, "stubborn", 2, "pid");
  ASSERT_TRUE(queued.ok()) << queued.status().message();

  // The old worker drains its request, then ignores SIGTERM until stop_timeout. Meanwhile further
  // restarts and starts are refused.
  for (const char* command : {"restart", "start", "restart"}) {
    nlohmann::json again = Control(h, command, "stubborn");
    // The request runs until the test creates `go`: the old worker is still there.
    nlohmann::json c = h.Cell("stubborn");
    EXPECT_EQ(c["pid"], old_pid) << c.dump();
    EXPECT_EQ(again["ok"], false) << command << ": " << again.dump();
    EXPECT_EQ(again["result"], "restart in progress") << command << ": " << again.dump();
    EXPECT_EQ(c["state"], "stopping") << c.dump();
  }
  testing::CreateFlag(go);

  // Every status read until the new worker runs: one worker at most, and the old one is gone
  // (reaped) before a new pid shows.
  std::set<int> pids;
  nlohmann::json last;
  ASSERT_TRUE(h.WaitForCell("stubborn",
                            [&](const nlohmann::json& c) {
                              last = c;
                              if (c["pid"].is_number_integer()) {
                                const int pid = c["pid"].get<int>();
                                pids.insert(pid);
                                if (pid != old_pid) {
                                  EXPECT_FALSE(bulkhead::testing::ProcessExists(old_pid))
                                      << "new worker " << pid << " beside the old one " << old_pid;
                                }
                              }
                              return c["state"] == "running" && c["pid"].is_number_integer() &&
                                     c["pid"] != old_pid;
                            }))
      << last.dump() << "\n"
      << h.Log();
  EXPECT_EQ(pids.size(), 2u);
  nlohmann::json c = h.Cell("stubborn");
  EXPECT_EQ(c["starts"], 2) << c.dump();
  EXPECT_EQ(c["restarts"], 1) << c.dump();
  EXPECT_EQ(c["last_exit"], "signal 9") << c.dump();

  Result<ipc::Client::Reply> finished = running->Receive();
  tally.Count(finished);
  EXPECT_OK_REPLY(finished, "found " + go);
  Result<ipc::Client::Reply> served = queued->Receive();
  tally.Count(served);
  EXPECT_OK_REPLY(served, std::to_string(c["pid"].get<int>()));
  ExpectCountersMatch(h, "stubborn", tally);
}

TEST(Stop, StopDuringARestartCancelsTheNewStart) {
  Harness h(TestOptions({Stubborn()}));
  ASSERT_STARTED(h);
  Tally tally;
  const int pid = WorkerPid(h, "stubborn");
  // An answer proves the worker got past main()'s signal(SIGTERM, SIG_IGN): "running" alone
  // (ready = "exec") only says it was exec'd.
  EXPECT_TRUE(Served(h, "stubborn", "pid", std::to_string(pid), tally));

  EXPECT_EQ(Control(h, "restart", "stubborn")["result"], "ok");
  nlohmann::json stop = Control(h, "stop", "stubborn");
  if (h.Cell("stubborn")["pid"] == pid) {
    EXPECT_EQ(stop["result"], "ok") << stop.dump();
  }
  // Stopped, never started again (that no timer starts it later is
  // WorkerRunnerTest.AStopDuringARestartCancelsTheNewStart's, in simulated time).
  ASSERT_TRUE(CellShows(h, "stubborn", "state", "stopped"));
  nlohmann::json c = h.Cell("stubborn");
  EXPECT_TRUE(c["pid"].is_null()) << c.dump();
  EXPECT_EQ(c["starts"], 1) << c.dump();
  EXPECT_EQ(c["last_exit"], "signal 9") << c.dump();
  EXPECT_EQ(Control(h, "stop", "stubborn")["result"], "already stopped");
  ExpectCountersMatch(h, "stubborn", tally);
}

TEST(Stop, StartDuringAStopTurnsItIntoARestart) {
  Harness h(TestOptions({Stubborn()}));
  ASSERT_STARTED(h);
  Tally tally;
  const int old_pid = WorkerPid(h, "stubborn");
  EXPECT_TRUE(Served(h, "stubborn", "pid", std::to_string(old_pid), tally));

  EXPECT_EQ(Control(h, "stop", "stubborn")["result"], "ok");
  nlohmann::json start = Control(h, "start", "stubborn");
  nlohmann::json c = h.Cell("stubborn");
  ASSERT_EQ(c["pid"], old_pid) << "the stop ended before the test could look: " << c.dump();
  EXPECT_EQ(start["ok"], true) << start.dump();
  EXPECT_EQ(start["result"], "ok") << start.dump();
  EXPECT_EQ(Control(h, "start", "stubborn")["result"], "restart in progress");

  ASSERT_TRUE(NewWorkerRuns(h, "stubborn", old_pid));
  EXPECT_FALSE(bulkhead::testing::ProcessExists(old_pid));
  c = h.Cell("stubborn");
  EXPECT_EQ(c["starts"], 2) << c.dump();
  EXPECT_EQ(c["last_exit"], "signal 9") << c.dump();
  EXPECT_TRUE(Served(h, "stubborn", "echo again", "again", tally));
  ExpectCountersMatch(h, "stubborn", tally);
}

TEST(Stop, UsesTheConfiguredStopSignal) {
  // The worker ignores SIGTERM but not SIGINT: with stop_signal = "SIGINT" it ends on it, before
  // stop_timeout would escalate to SIGKILL.
  CellSpec spec = Stubborn();
  spec.extra_toml = "stop_signal = \"SIGINT\"\nstop_timeout = \"5s\"\n";
  Harness h(TestOptions({spec}));
  ASSERT_STARTED(h);
  Tally tally;
  const int pid = WorkerPid(h, "stubborn");
  EXPECT_TRUE(Served(h, "stubborn", "pid", std::to_string(pid), tally));

  EXPECT_EQ(Control(h, "stop", "stubborn")["result"], "ok");
  ASSERT_TRUE(CellShows(h, "stubborn", "state", "stopped"));
  // Ended by SIGINT, not by the SIGKILL of stop_timeout.
  EXPECT_EQ(h.Cell("stubborn")["last_exit"], "signal 2");
  EXPECT_FALSE(CellLogEvents(h.Log(), "stubborn", "stopping worker (SIGINT)").empty()) << h.Log();
  EXPECT_TRUE(CellLogEvents(h.Log(), "stubborn", "SIGKILL").empty()) << h.Log();
  ExpectCountersMatch(h, "stubborn", tally);
}

}  // namespace
}  // namespace bulkhead::lifecycle_test
