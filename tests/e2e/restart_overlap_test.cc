// SPDX-License-Identifier: MIT
// `bulkheadctl restart` with restart_overlap (the default) under steady load, end to end: the
// next worker starts beside the serving one, takes new requests once ready, and the previous one
// finishes what it has (lifecycle/worker_swap.h). Counts outcomes, never durations: every request
// sent gets exactly one reply, and it is its own (request ids on one persistent connection per
// client thread for frames; one response per request, in order, for HTTP keep-alive), none
// failed, none rejected, and the worker's pid changed at every restart.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/exit_status.h"
#include "tests/e2e/e2e_test.h"
#include "tests/e2e/http_conn.h"

namespace bulkhead::e2e {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Back-to-back restarts per test: each waits for the one before to finish (its previous worker
// reaped), since a restart during a swap is answered "restart in progress".
constexpr int kRestarts = 50;
// The HTTP cell's worker is Python (http_worker.py), whose start takes ~0.4 s here and several
// times that on a loaded machine: fewer restarts keep the test well inside its timeout.
// bulkhead-bench-restart runs 50 on an HTTP cell with a C worker.
constexpr int kHttpRestarts = 20;
constexpr int kClients = 3;

struct Tally {
  std::atomic<uint64_t> sent{0};
  std::atomic<uint64_t> ok{0};
  std::atomic<uint64_t> wrong{0};  // a reply not OK, not its own, twice, or missing
  std::mutex mu;                   // guards first_wrong
  std::vector<std::string> first_wrong;
};

// `bulkheadctl restart CELL`, then waits until that swap is over: the worker serving now has
// another pid than `before` and no swap runs. Returns the new pid, 0 on failure.
pid_t RestartAndWait(Harness& h, const std::string& cell, pid_t before) {
  Result<ProcessResult> ctl = h.Ctl({"restart", cell});
  if (!ctl.ok() || ctl->exit_code() != 0) {
    ADD_FAILURE() << "restart: " << (ctl.ok() ? ctl->Describe() : ctl.status().message());
    return 0;
  }
  pid_t now = 0;
  const bool done = h.WaitForCell(cell, [&](const nlohmann::json& c) {
    if (!c["pid"].is_number() || !c["swap"].is_null()) return false;
    now = c["pid"].get<pid_t>();
    return now != before;
  });
  if (!done) ADD_FAILURE() << "no swap finished: " << h.Cell(cell).dump();
  return done ? now : 0;
}

// Restarts `cell` `restarts` times while `load` runs, then checks the counts and the pids.
void RestartUnderLoad(Harness& h, const std::string& cell, Tally& tally,
                      const std::function<void(std::atomic<bool>&, int)>& load,
                      int restarts = kRestarts) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) clients.emplace_back([&, i] { load(stop, i); });
  ASSERT_TRUE(WaitFor([&] { return tally.ok.load() >= 20; }, std::chrono::seconds(10)));
  std::set<pid_t> pids;
  pid_t pid = h.Cell(cell)["pid"].get<pid_t>();
  pids.insert(pid);
  for (int i = 0; i < restarts; ++i) {
    pid = RestartAndWait(h, cell, pid);
    if (pid == 0) break;
    pids.insert(pid);
  }
  // Some load after the last restart too.
  const uint64_t after = tally.ok.load();
  EXPECT_TRUE(WaitFor([&] { return tally.ok.load() >= after + 20; }, std::chrono::seconds(10)));
  stop = true;
  for (std::thread& t : clients) t.join();

  EXPECT_EQ(pids.size(), static_cast<size_t>(restarts + 1)) << "the pid changed at each restart";
  EXPECT_EQ(tally.wrong.load(), 0u) << (tally.first_wrong.empty() ? "" : tally.first_wrong[0]);
  EXPECT_EQ(tally.ok.load(), tally.sent.load()) << "every request got exactly one reply";
  nlohmann::json c = h.Cell(cell);
  EXPECT_EQ(c["rejected"], 0) << c.dump();
  EXPECT_EQ(c["failed"], 0) << c.dump();
  EXPECT_EQ(c["ok"], tally.ok.load()) << c.dump();
  EXPECT_EQ(c["restarts"], restarts);
  EXPECT_TRUE(c["restart_failed"].is_null()) << c.dump();
  EXPECT_THAT(h.Log(), HasSubstr("restart: next worker ready (first accept)"));
}

// One client of a frames cell: request ids in order on one connection, each reply checked to be
// its own, until `stop`.
std::function<void(std::atomic<bool>&, int)> FramesLoad(Harness& h, const std::string& cell,
                                                        Tally& tally) {
  return [&h, cell, &tally](std::atomic<bool>& stop, int client) {
    Result<ipc::Client> conn = h.Connect(cell);
    if (!conn.ok()) {
      ++tally.wrong;
      return;
    }
    (void)conn->SetTimeout(std::chrono::seconds(30));
    for (uint64_t id = 1; !stop; ++id) {
      const std::string payload = "echo " + std::to_string(client) + "-" + std::to_string(id);
      ++tally.sent;
      if (!conn->Send(id, payload).ok()) {
        ++tally.wrong;
        return;
      }
      Result<ipc::Client::Reply> reply = conn->Receive();
      if (reply.ok() && reply->header.status == ipc::ReplyStatus::kOk &&
          reply->header.request_id == id && "echo " + reply->payload == payload) {
        ++tally.ok;
        continue;
      }
      ++tally.wrong;
      std::lock_guard lock(tally.mu);
      tally.first_wrong.push_back(payload + ": " + Describe(reply));
      return;
    }
  };
}

TEST(RestartOverlap, FramesCellUnderLoadLosesNothingAcrossBackToBackRestarts) {
  const CellSpec cell{.name = "f",
                      .max_concurrent = 4,
                      // No queue: a request that found admission closed for the restart
                      // would be rejected, so the count shows that it never closed.
                      .max_queue = 0,
                      .extra_toml = "stop_timeout = \"10s\"\n"};
  Harness h(TestOptions({cell}));
  ASSERT_STARTED(h);
  Tally tally;
  RestartUnderLoad(h, "f", tally, FramesLoad(h, "f", tally));
}

TEST(RestartOverlap, HttpCellUnderLoadLosesNothingAcrossBackToBackRestarts) {
  const CellSpec cell{.name = "web",
                      .command = {"python3", BULKHEAD_HTTP_WORKER},
                      .max_concurrent = 4,
                      // No queue: a request that found admission closed for the restart
                      // would be rejected, so the count shows that it never closed.
                      .max_queue = 0,
                      .extra_toml = "protocol = \"http\"\nstop_timeout = \"10s\"\n"};
  Harness h(TestOptions({cell}));
  ASSERT_STARTED(h);
  Tally tally;
  RestartUnderLoad(
      h, "web", tally,
      [&](std::atomic<bool>& stop, int client) {
        std::optional<HttpConn> conn = HttpConn::Open(h.CellSocket("web"));
        if (!conn) {
          ++tally.wrong;
          return;
        }
        for (uint64_t n = 1; !stop; ++n) {
          ++tally.sent;
          if (!conn->Send("GET /hello HTTP/1.1\r\nHost: t\r\n\r\n")) {
            ++tally.wrong;
            return;
          }
          std::optional<Response> response = conn->Read(std::chrono::seconds(30));
          if (response && response->status == 200 && response->body == "hello") {
            ++tally.ok;
            continue;
          }
          ++tally.wrong;
          std::lock_guard lock(tally.mu);
          tally.first_wrong.push_back("client " + std::to_string(client) + " request " +
                                      std::to_string(n) + ": " + Describe(response));
          return;
        }
      },
      kHttpRestarts);
}

// A next worker that exits before it is ready leaves the serving one serving, and status says why.
// A second `bulkheadctl restart` while the first one's previous worker drains (past the handover:
// the next worker already serves) joins it: "restart in progress" on stdout, exit 0 at once,
// as docs/control.md says; it waited for a start after the handover that never came, then timed
// out and failed.
TEST(RestartOverlap, ASecondRestartDuringThePreviousWorkersDrainJoinsTheFirst) {
  TempDir dir;
  const std::string go = dir.Join("go");
  // The drain lasts until the test creates `go`: stop_timeout is far away.
  CellSpec cell{.name = "f", .command = {TestWorkerPath()}};
  cell.extra_toml = "stop_timeout = \"60s\"\n";
  Harness h(TestOptions({cell}));
  ASSERT_STARTED(h);
  Result<ipc::Client> held = h.Connect("f");
  ASSERT_TRUE(held.ok()) << held.status().message();
  ASSERT_TRUE(held->SetTimeout(std::chrono::seconds(30)).ok());
  ASSERT_TRUE(held->Send(1, "wait-file " + go).ok());
  ASSERT_TRUE(h.WaitForCell("f", [](const nlohmann::json& c) { return c["running"] == 1; }))
      << h.Cell("f").dump();

  Result<ProcessResult> first = h.Ctl({"restart", "f"});
  ASSERT_TRUE(first.ok()) << first.status().message();
  ASSERT_EQ(first->exit_code(), 0) << first->Describe();
  nlohmann::json c = h.Cell("f");
  ASSERT_TRUE(c["swap"].is_object()) << c.dump();
  ASSERT_EQ(c["swap"]["phase"], "draining") << c.dump();

  // The wait is bounded so that the failure shows rather than hangs; the outcome is what counts.
  Result<ProcessResult> second = h.Ctl({"--timeout", "20s", "restart", "f"});
  ASSERT_TRUE(second.ok()) << second.status().message();
  EXPECT_EQ(second->exit_code(), 0) << second->Describe();
  EXPECT_EQ(second->out, "f: restart in progress\n") << second->Describe();
  EXPECT_EQ(h.Cell("f")["swap"]["phase"], "draining") << "joined, not waited out";

  testing::CreateFlag(go);
  Result<ipc::Client::Reply> reply = held->Receive();
  EXPECT_OK_REPLY(reply, "found " + go);
}

TEST(RestartOverlap, ANextWorkerThatCannotStartLeavesThePreviousOneServing) {
  TempDir dir;
  const std::string flag = dir.Join("fail-next");
  // The worker exits 7 at start while the flag file exists (sh), else runs the test worker.
  const CellSpec cell{
      .name = "f",
      .command = {"/bin/sh", "-c", "[ -e '" + flag + "' ] && exit 7; exec " + TestWorkerPath()}};
  Harness h(TestOptions({cell}));
  ASSERT_STARTED(h);
  const pid_t pid = h.Cell("f")["pid"].get<pid_t>();
  // A reply proves the serving worker's shell is past its look at the flag (it has exec'd the
  // test worker): written earlier, the flag made the serving worker exit 7 too (1 run in ~20).
  EXPECT_OK_REPLY(h.Call("f", "echo before"), "before");
  ASSERT_TRUE(testing::WriteFileAtomically(flag, "").ok());
  Result<ProcessResult> ctl = h.Ctl({"restart", "f"});
  ASSERT_TRUE(ctl.ok()) << ctl.status().message();
  EXPECT_EQ(ctl->exit_code(), 1) << ctl->Describe();
  EXPECT_THAT(ctl->err, HasSubstr("restart f: restart failed: the next worker exited before it "
                                  "was ready (exit 7); the previous worker serves on"));
  nlohmann::json c = h.Cell("f");
  EXPECT_TRUE(c["swap"].is_null()) << c.dump();
  EXPECT_EQ(c["pid"], pid);
  EXPECT_EQ(c["state"], "running");
  EXPECT_THAT(c["restart_failed"].get<std::string>(),
              HasSubstr("the next worker exited before it was ready (exit 7)"));
  EXPECT_OK_REPLY(h.Call("f", "echo still"), "still");
  // The human status says it too, where restart's message points.
  Result<ProcessResult> shown = h.Ctl({"status", "f"});
  ASSERT_TRUE(shown.ok()) << shown.status().message();
  EXPECT_THAT(shown->out, HasSubstr("    restart failed:    the next worker exited before it was "
                                    "ready (exit 7)"))
      << shown->out;
}

// A reload that changes what needs a new worker (here its environment) overlaps as `restart`
// does: under load, with no queue, every request is answered OK while the worker is replaced,
// and the new worker has the new environment.
TEST(RestartOverlap, AReloadThatNeedsANewWorkerOverlapsToo) {
  constexpr int kReloads = 5;
  auto cell_with = [](int generation) {
    return CellSpec{.name = "f",
                    .max_concurrent = 4,
                    .max_queue = 0,
                    .extra_toml = "stop_timeout = \"10s\"\nenvironment = { GEN = \"" +
                                  std::to_string(generation) + "\" }\n"};
  };
  Harness h(TestOptions({cell_with(0)}));
  ASSERT_STARTED(h);
  Tally tally;
  std::atomic<bool> stop{false};
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i, load = FramesLoad(h, "f", tally)] { load(stop, i); });
  }
  ASSERT_TRUE(WaitFor([&] { return tally.ok.load() >= 20; }, std::chrono::seconds(10)));
  pid_t pid = h.Cell("f")["pid"].get<pid_t>();
  for (int generation = 1; generation <= kReloads; ++generation) {
    h.RewriteConfig({cell_with(generation)});
    Result<ProcessResult> reload = h.Ctl({"reload"});
    ASSERT_TRUE(reload.ok()) << reload.status().message();
    ASSERT_EQ(reload->exit_code(), 0) << reload->Describe() << "\n" << h.Log();
    pid_t now = 0;
    ASSERT_TRUE(h.WaitForCell("f", [&](const nlohmann::json& c) {
      if (!c["pid"].is_number() || !c["swap"].is_null()) return false;
      now = c["pid"].get<pid_t>();
      return now != pid;
    })) << h.Cell("f").dump();
    pid = now;
  }
  const uint64_t after = tally.ok.load();
  EXPECT_TRUE(WaitFor([&] { return tally.ok.load() >= after + 20; }, std::chrono::seconds(10)));
  stop = true;
  for (std::thread& t : clients) t.join();

  EXPECT_EQ(tally.wrong.load(), 0u) << (tally.first_wrong.empty() ? "" : tally.first_wrong[0]);
  EXPECT_EQ(tally.ok.load(), tally.sent.load()) << "every request got exactly one reply";
  nlohmann::json c = h.Cell("f");
  EXPECT_EQ(c["rejected"], 0) << c.dump();
  EXPECT_EQ(c["failed"], 0) << c.dump();
  EXPECT_EQ(c["restarts"], kReloads);
  EXPECT_OK_REPLY(h.Call("f", "env GEN"), std::to_string(kReloads));
  EXPECT_THAT(h.Log(), HasSubstr("restart: next worker started beside pid"));
}

// A reload onto a worker that cannot exec overlaps too: the next worker's failed step (watched on
// the loop, not waited for) ends the swap with its words, the previous worker serves on, and a
// reload back onto the good command overlaps again.
TEST(RestartOverlap, AReloadOntoAWorkerThatCannotExecLeavesThePreviousOneServing) {
  const CellSpec good{.name = "f"};
  CellSpec bad = good;
  bad.command = {"/nonexistent-bulkhead-dir/worker"};
  Harness h(TestOptions({good}));
  ASSERT_STARTED(h);
  const pid_t pid = h.Cell("f")["pid"].get<pid_t>();
  h.RewriteConfig({bad});
  Result<ProcessResult> reload = h.Ctl({"reload"});
  ASSERT_TRUE(reload.ok()) << reload.status().message();
  ASSERT_TRUE(h.WaitForCell("f", [](const nlohmann::json& c) {
    return c["swap"].is_null() && c["restart_failed"].is_string();
  })) << h.Cell("f").dump();
  nlohmann::json c = h.Cell("f");
  EXPECT_EQ(c["restart_failed"],
            "the next worker exited before it was ready (start failed: exec "
            "/nonexistent-bulkhead-dir/worker: No such file or directory); the previous worker "
            "serves on")
      << c.dump();
  EXPECT_EQ(c["pid"], pid);
  EXPECT_EQ(c["state"], "running");
  EXPECT_OK_REPLY(h.Call("f", "echo still"), "still");

  h.RewriteConfig({good});
  reload = h.Ctl({"reload"});
  ASSERT_TRUE(reload.ok()) << reload.status().message();
  ASSERT_TRUE(h.WaitForCell("f", [&](const nlohmann::json& now) {
    return now["swap"].is_null() && now["pid"].is_number() && now["pid"] != pid &&
           now["state"] == "running";
  })) << h.Cell("f").dump();
  EXPECT_OK_REPLY(h.Call("f", "echo again"), "again");
  EXPECT_EQ(h.Cell("f")["failed"], 0);
}

// A reload waits for the new workers of the cells it restarted and reports each swap's outcome:
// one cell's next worker cannot exec, the other's comes up; the reload fails naming only the one.
TEST(RestartOverlap, AReloadFailsNamingTheCellWhoseNextWorkerDidNotComeUp) {
  const CellSpec good_f{.name = "f"};
  const CellSpec good_g{.name = "g"};
  CellSpec bad_f = good_f;
  bad_f.command = {"/nonexistent-bulkhead-dir/worker"};
  CellSpec new_g = good_g;
  new_g.environment = {{"BULKHEAD_TEST_GENERATION", "2"}};
  Harness h(TestOptions({good_f, good_g}));
  ASSERT_STARTED(h);
  const pid_t f_pid = h.Cell("f")["pid"].get<pid_t>();
  const pid_t g_pid = h.Cell("g")["pid"].get<pid_t>();

  h.RewriteConfig({bad_f, new_g});
  Result<ProcessResult> reload = h.Ctl({"reload"});
  ASSERT_TRUE(reload.ok()) << reload.status().message();
  EXPECT_EQ(reload->exit_code(), kExitFailure) << reload->Describe();
  // No success line on stdout: what was applied is said on stderr, after the failure.
  EXPECT_EQ(reload->out, "") << reload->Describe();
  EXPECT_THAT(reload->err, HasSubstr("bulkheadctl: reloaded: f restarted (command changed)"))
      << reload->Describe();
  const std::string failed =
      "bulkheadctl: reload: f: restart failed: the next worker exited before it was ready (start "
      "failed: exec /nonexistent-bulkhead-dir/worker: No such file or directory); the previous "
      "worker serves on";
  EXPECT_THAT(reload->err, HasSubstr(failed)) << reload->Describe();
  EXPECT_THAT(reload->err, Not(HasSubstr("reload: g"))) << reload->Describe();
  // It returned once the outcome was known: g's new worker runs, f's previous one serves on.
  nlohmann::json f = h.Cell("f");
  nlohmann::json g = h.Cell("g");
  EXPECT_EQ(f["pid"], f_pid) << f.dump();
  EXPECT_EQ(f["state"], "running") << f.dump();
  EXPECT_EQ(g["state"], "running") << g.dump();
  EXPECT_NE(g["pid"], g_pid) << g.dump();
  // The reload returns once g's new worker took over; its previous one may still be finishing
  // (the swap's draining and signalled phases): the swap ends when it is gone. (This test asserted
  // the swap over at the reload's return and failed when the previous worker was slow to exit.)
  EXPECT_TRUE(h.WaitForCell("g", [](const nlohmann::json& c) { return c["swap"].is_null(); }))
      << h.Cell("g").dump();
  EXPECT_OK_REPLY(h.Call("f", "echo f"), "f");
  EXPECT_OK_REPLY(h.Call("g", "echo g"), "g");

  // The same bad file again: f is restarted again (its new worker never took over), and the reload
  // fails as the first did, not "f unchanged"; g's new worker runs, so g is unchanged.
  reload = h.Ctl({"reload"});
  ASSERT_TRUE(reload.ok()) << reload.status().message();
  EXPECT_EQ(reload->exit_code(), kExitFailure) << reload->Describe();
  EXPECT_THAT(reload->err, HasSubstr(failed)) << reload->Describe();
  EXPECT_THAT(reload->err,
              HasSubstr("reloaded: f restarted (again: the new worker of an earlier reload never "
                        "took over), g unchanged"))
      << reload->Describe();
  EXPECT_EQ(h.Cell("f")["pid"], f_pid) << h.Cell("f").dump();

  // Fixed: the reload exits 0 once f's new worker took over.
  h.RewriteConfig({good_f, new_g});
  reload = h.Ctl({"reload"});
  ASSERT_TRUE(reload.ok()) << reload.status().message();
  EXPECT_EQ(reload->exit_code(), kExitOk) << reload->Describe();
  f = h.Cell("f");
  EXPECT_NE(f["pid"], f_pid) << f.dump();
  EXPECT_TRUE(h.WaitForCell("f", [](const nlohmann::json& c) { return c["swap"].is_null(); }))
      << h.Cell("f").dump();
  EXPECT_EQ(h.Cell("g")["starts"], 2) << h.Cell("g").dump();
  EXPECT_OK_REPLY(h.Call("f", "echo again"), "again");

  // --no-block returns at the answer: exit 0 although the next worker cannot exec.
  h.RewriteConfig({bad_f, new_g});
  reload = h.Ctl({"reload", "--no-block"});
  ASSERT_TRUE(reload.ok()) << reload.status().message();
  EXPECT_EQ(reload->exit_code(), kExitOk) << reload->Describe();
}

}  // namespace
}  // namespace bulkhead::e2e
