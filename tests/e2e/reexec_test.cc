// SPDX-License-Identifier: MIT
// bulkheadd re-executing itself in place (docs/reexec.md), end to end: under steady load, N
// re-execs lose no request (0 failed, 0 rejected: each client request on a connection of its
// own), keep the supervisor's pid and the worker's, and the counters continue (what the status
// counts adds up with what the clients saw). A binary that cannot read the state is refused before
// anything changes. Counts outcomes, never durations.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
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

constexpr int kReexecs = 5;
constexpr int kClients = 3;

struct Tally {
  std::atomic<uint64_t> ok{0};
  std::atomic<uint64_t> wrong{0};  // not OK, not its own text, or no reply
  std::mutex mu;
  std::vector<std::string> first_wrong;
};

// One request per connection, as many as it can until `stop`: "sleep 2" keeps some in flight when
// a re-exec begins, "echo" checks each reply is its own.
void Load(Harness& h, const std::string& cell, std::atomic<bool>& stop, int client,
          Tally& tally) {
  for (uint64_t i = 0; !stop.load(); ++i) {
    const bool sleeper = i % 4 == 0;
    const std::string text = "c" + std::to_string(client) + "-" + std::to_string(i);
    Result<ipc::Client::Reply> reply = h.Call(cell, sleeper ? "sleep 2" : "echo " + text);
    const bool good = IsReply(reply, ipc::ReplyStatus::kOk, ipc::Reason::kNone) &&
                      reply->payload == (sleeper ? "slept 2" : text);
    if (good) {
      ++tally.ok;
      continue;
    }
    ++tally.wrong;
    std::lock_guard lock(tally.mu);
    if (tally.first_wrong.size() < 5) tally.first_wrong.push_back(Describe(reply));
  }
}

// kClients clients of Load on one cell, from StartLoad until Stop (or the end of the test).
class RunningLoad {
 public:
  RunningLoad(Harness& h, const std::string& cell) {
    for (int i = 0; i < kClients; ++i) {
      clients_.emplace_back([this, &h, cell, i] { Load(h, cell, stop_, i, tally_); });
    }
  }
  ~RunningLoad() { Stop(); }
  RunningLoad(const RunningLoad&) = delete;
  RunningLoad& operator=(const RunningLoad&) = delete;
  // Ends every client once its request under way is answered.
  void Stop() {
    stop_ = true;
    for (std::thread& t : clients_) {
      if (t.joinable()) t.join();
    }
  }
  Tally& tally() { return tally_; }

 private:
  Tally tally_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> clients_;
};

// Starts the load on `cell` and waits until its clients saw 20 answers (null when they did not
// within 10 s: the test fails).
std::unique_ptr<RunningLoad> StartLoad(Harness& h, const std::string& cell) {
  auto load = std::make_unique<RunningLoad>(h, cell);
  if (!WaitFor([&] { return load->tally().ok.load() >= 20; }, std::chrono::seconds(10))) {
    return nullptr;
  }
  return load;
}

uint64_t Counter(const nlohmann::json& cell, const char* name) {
  return cell[name].is_number() ? cell[name].get<uint64_t>() : UINT64_MAX;
}

void Wrong(Tally& tally, const std::string& what) {
  ++tally.wrong;
  std::lock_guard lock(tally.mu);
  if (tally.first_wrong.size() < 5) tally.first_wrong.push_back(what);
}

// One keep-alive client of a frames cell: one connection (counted in `connected` once open), its
// request ids in order, each reply checked to be its own, until `stop` or the first wrong one.
void KeepAliveFrames(Harness& h, const std::string& cell, int client, std::atomic<bool>& stop,
                     Tally& tally, std::atomic<uint64_t>& sent, std::atomic<int>& connected) {
  Result<ipc::Client> conn = h.Connect(cell);
  ++connected;
  if (!conn.ok()) return Wrong(tally, cell + ": connect: " + conn.status().message());
  (void)conn->SetTimeout(std::chrono::seconds(30));
  for (uint64_t id = 1; !stop.load(); ++id) {
    const std::string text = std::to_string(client) + "-" + std::to_string(id);
    ++sent;
    Result<ipc::Client::Reply> reply =
        conn->Send(id, "echo " + text).ok() ? conn->Receive() : Status::Error("send failed");
    if (IsReply(reply, ipc::ReplyStatus::kOk, ipc::Reason::kNone) &&
        reply->header.request_id == id && reply->payload == text) {
      ++tally.ok;
      continue;
    }
    return Wrong(tally, cell + " " + text + ": " + Describe(reply));
  }
}

// The cell "starting": its worker says READY=1 only after 10 min, so it stays starting for the
// whole test (a re-exec waits for it, or is refused past its settling's bound).
CellSpec StaysStarting() {
  return CellSpec{.name = "starting",
                  .command = {TestWorkerPath(), "--notify-ready-after-ms", "600000"},
                  .extra_toml = "ready = \"notify\"\n",
                  .wait_running = false};
}

// Cell "a" still runs `worker` (a re-exec kept it, or a refused one changed nothing) and answers.
void ExpectTheSameWorkerServes(Harness& h, pid_t worker) {
  EXPECT_EQ(h.Cell("a")["pid"], worker) << "the worker was replaced";
  EXPECT_OK_REPLY(h.Call("a", "echo still here"), "still here");
}

// `bulkheadctl reexec` went ahead: it exited 0 (else what it said, and bulkheadd's log).
::testing::AssertionResult Reexecs(Harness& h) {
  Result<ProcessResult> ctl = h.Ctl({"reexec"});
  if (!ctl.ok()) return ::testing::AssertionFailure() << ctl.status().message();
  if (ctl->exit_code() != kExitOk) {
    return ::testing::AssertionFailure() << ctl->Describe() << h.Log();
  }
  return ::testing::AssertionSuccess();
}

// `bulkheadctl reexec` fails (exit 1), saying `why` on stderr.
void ExpectReexecFails(Harness& h, const std::string& why) {
  Result<ProcessResult> ctl = h.Ctl({"reexec"});
  ASSERT_TRUE(ctl.ok()) << ctl.status().message();
  EXPECT_EQ(ctl->exit_code(), kExitFailure) << ctl->Describe() << h.Log();
  EXPECT_THAT(ctl->err, HasSubstr(why)) << ctl->err;
}

// A copy of bulkheadd in a directory of the test's, for the harness to run: the binary on disk
// that a re-exec executes, which a test replaces (by rename, as a package upgrade does).
class ReplaceableBinary {
 public:
  ReplaceableBinary() { std::filesystem::copy_file(BulkheaddPath(), path_); }
  const std::string& path() const { return path_; }
  std::string Join(const std::string& name) const { return dir_.Join(name); }
  HarnessOptions Options() const {
    HarnessOptions options = TestOptions({CellSpec{.name = "a"}});
    options.binary = path_;
    return options;
  }
  void ReplaceWithFile(const std::string& file) const {
    const std::string next = Join("bulkheadd.next");
    std::filesystem::copy_file(file, next);
    std::filesystem::rename(next, path_);
  }
  void ReplaceWithScript(const std::string& text) const {
    const std::string next = Join("bulkheadd.next");
    std::ofstream(next) << text;
    ::chmod(next.c_str(), 0755);
    std::filesystem::rename(next, path_);
  }

 private:
  TempDir dir_;
  std::string path_ = dir_.Join("bulkheadd");
};

TEST(Reexec, UnderLoadLosesNothingKeepsEveryPidAndTheCountersContinue) {
  Harness h(TestOptions({CellSpec{.name = "a", .max_concurrent = 4, .max_queue = 64}}));
  ASSERT_STARTED(h);
  const pid_t supervisor = h.pid();
  const pid_t worker = h.Cell("a")["pid"].get<pid_t>();

  std::unique_ptr<RunningLoad> load = StartLoad(h, "a");
  ASSERT_NE(load, nullptr) << h.Log();
  Tally& tally = load->tally();
  const uint64_t ok_before = Counter(h.Cell("a"), "ok");
  for (int i = 1; i <= kReexecs; ++i) {
    Result<ProcessResult> ctl = h.Ctl({"reexec"});
    ASSERT_TRUE(ctl.ok()) << ctl.status().message();
    ASSERT_EQ(ctl->exit_code(), kExitOk) << ctl->Describe() << h.Log();
    EXPECT_THAT(ctl->out, HasSubstr("re-exec " + std::to_string(i))) << ctl->out;
    const nlohmann::json status = h.Status();
    EXPECT_EQ(status["supervisor"]["pid"], supervisor);
    EXPECT_EQ(status["supervisor"]["reexec"]["count"], i);
    EXPECT_EQ(h.Cell("a")["pid"], worker) << "the worker was replaced";
    // Requests go on between two re-execs.
    const uint64_t ok_now = tally.ok.load();
    ASSERT_TRUE(WaitFor([&] { return tally.ok.load() >= ok_now + 10; }, std::chrono::seconds(10)));
  }
  load->Stop();

  EXPECT_EQ(tally.wrong.load(), 0u) << ::testing::PrintToString(tally.first_wrong) << h.Log();
  const nlohmann::json cell = h.Cell("a");
  EXPECT_EQ(cell["pid"], worker);
  EXPECT_EQ(cell["starts"], 1) << "a worker was started again";
  // Every request the clients saw answered is counted once, across every image.
  EXPECT_EQ(Counter(cell, "ok"), tally.ok.load()) << cell.dump();
  EXPECT_GE(Counter(cell, "ok"), ok_before);
  EXPECT_EQ(Counter(cell, "rejected"), 0u) << cell.dump();
  EXPECT_EQ(Counter(cell, "failed"), 0u) << cell.dump();
  EXPECT_THAT(h.Log(), HasSubstr("worker adopted from the previous bulkheadd image"));
}

// Keep-alive clients: each sends its requests one after another on one connection it opened
// before the first re-exec. During the drain its reads stop at a request boundary, and at the
// exec the connection is handed over open: every request gets its own reply, on the same
// connection, across every re-exec.
TEST(Reexec, ConnectionsOpenBeforeAreServedAfterOnTheSameConnection) {
  Harness h(TestOptions({CellSpec{.name = "a", .max_concurrent = 4, .max_queue = 64}}));
  ASSERT_STARTED(h);
  const pid_t worker = h.Cell("a")["pid"].get<pid_t>();
  Tally tally;
  std::atomic<uint64_t> sent{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> clients;
  clients.reserve(kClients);
  std::atomic<int> connected{0};
  for (int client = 0; client < kClients; ++client) {
    clients.emplace_back(
        [&, client] { KeepAliveFrames(h, "a", client, stop, tally, sent, connected); });
  }
  ASSERT_TRUE(WaitFor([&] { return tally.ok.load() >= 20; }, std::chrono::seconds(10)));
  for (int i = 1; i <= kReexecs; ++i) {
    ASSERT_TRUE(Reexecs(h));
    const uint64_t ok_now = tally.ok.load();
    ASSERT_TRUE(WaitFor([&] { return tally.ok.load() >= ok_now + 10; }, std::chrono::seconds(10)))
        << h.Log();
  }
  stop = true;
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(tally.wrong.load(), 0u) << ::testing::PrintToString(tally.first_wrong) << h.Log();
  EXPECT_EQ(tally.ok.load(), sent.load()) << "every request got exactly one reply";
  const nlohmann::json cell = h.Cell("a");
  EXPECT_EQ(cell["pid"], worker);
  EXPECT_EQ(Counter(cell, "ok"), tally.ok.load()) << cell.dump();
  EXPECT_EQ(Counter(cell, "failed"), 0u) << cell.dump();
  EXPECT_EQ(Counter(cell, "rejected"), 0u) << cell.dump();
}

// An overlapping restart binds its next worker's socket at the next path and renames it onto the
// worker socket; getsockname keeps the next path. The new image took that for another socket and
// refused the whole state, and bulkheadd exited with every worker (a new user's trial: restart,
// then reexec). Twice, so that the second swap's socket (bound in the new image) is taken too.
TEST(Reexec, AfterAnOverlappingRestartTheWorkerSocketIsTakenOverAndTheWorkerKept) {
  Harness h(TestOptions({CellSpec{.name = "a"}}));
  ASSERT_STARTED(h);
  pid_t worker = h.Cell("a")["pid"].get<pid_t>();
  for (int round = 1; round <= 2; ++round) {
    Result<ProcessResult> restart = h.Ctl({"restart", "a"});
    ASSERT_TRUE(restart.ok() && restart->exit_code() == kExitOk)
        << (restart.ok() ? restart->Describe() : restart.status().message());
    ASSERT_TRUE(h.WaitForCell("a", [&](const nlohmann::json& c) {
      return c["pid"].is_number() && c["swap"].is_null() && c["pid"].get<pid_t>() != worker;
    })) << h.Cell("a").dump();
    worker = h.Cell("a")["pid"].get<pid_t>();
    ASSERT_TRUE(Reexecs(h));
    EXPECT_EQ(h.Status()["supervisor"]["reexec"]["count"], round);
    EXPECT_EQ(h.Cell("a")["pid"], worker) << "the worker was replaced";
    EXPECT_OK_REPLY(h.Call("a", "echo round " + std::to_string(round)),
                    "round " + std::to_string(round));
  }
}

// A new binary that passes the version check and then exits takes bulkheadd with it:
// `bulkheadctl reexec` says so as soon as nothing listens on the control socket, instead of
// waiting out its whole timeout for an answer that cannot come (a new user's trial).
TEST(Reexec, BulkheadctlSaysAtOnceWhenBulkheaddExitedDuringTheReexec) {
  ReplaceableBinary binary;
  Harness h(binary.Options());
  ASSERT_STARTED(h);
  binary.ReplaceWithScript(
      "#!/bin/sh\n[ \"$1\" = --reexec-state-versions ] && { echo 1 2 3 4; exit 0; }\nexit 7\n");
  Result<ProcessResult> ctl = h.Ctl({"reexec"});
  ASSERT_TRUE(ctl.ok()) << ctl.status().message();
  EXPECT_EQ(ctl->exit_code(), kExitFailure) << ctl->Describe();
  EXPECT_THAT(ctl->err, HasSubstr("bulkheadd exited during the re-exec")) << ctl->Describe();
  // The script's exit is bulkheadd's (same process); its workers died with it (PDEATHSIG).
  Result<int> ended = h.Stop();
  ASSERT_TRUE(ended.ok()) << ended.status().message();
  EXPECT_TRUE(WIFEXITED(*ended) && WEXITSTATUS(*ended) == 7) << *ended;
  h.KillOrphanedWorkers();
}

TEST(Reexec, Sigusr2ReexecutesAsTheCommandDoes) {
  Harness h(TestOptions({CellSpec{.name = "a"}}));
  ASSERT_STARTED(h);
  const pid_t worker = h.Cell("a")["pid"].get<pid_t>();
  ASSERT_EQ(::kill(h.pid(), SIGUSR2), 0);
  EXPECT_TRUE(WaitFor([&] {
    const nlohmann::json status = h.Status();
    return status["supervisor"]["reexec"]["count"] == 1;
  })) << h.Log();
  ExpectTheSameWorkerServes(h, worker);
}

// docs/reexec.md, failure 1: a binary that does not read our state version (a newer bulkhead
// that dropped it, a build too old to know the flag, not bulkheadd at all) is refused before
// anything changes; the binary put back, the re-exec goes ahead. The replaced file also shows
// that the binary on disk is the one executed, not the deleted one still running.
TEST(Reexec, ABinaryThatCannotReadTheStateIsRefusedAndNothingChanges) {
  ReplaceableBinary binary;
  Harness h(binary.Options());
  ASSERT_STARTED(h);
  const pid_t worker = h.Cell("a")["pid"].get<pid_t>();

  binary.ReplaceWithScript("#!/bin/sh\necho 9\n");
  ExpectReexecFails(h, "reads 9, this bulkheadd writes 4");
  binary.ReplaceWithScript("#!/bin/sh\necho \"unknown option\" >&2\nexit 2\n");
  ExpectReexecFails(h, "exit 2");

  const nlohmann::json status = h.Status();
  EXPECT_EQ(status["supervisor"]["reexec"]["count"], 0);
  EXPECT_EQ(status["supervisor"]["reexec"]["phase"], "idle");
  ExpectTheSameWorkerServes(h, worker);

  binary.ReplaceWithFile(BulkheaddPath());
  ASSERT_TRUE(Reexecs(h));
  ExpectTheSameWorkerServes(h, worker);
}

// A binary that cannot be executed at all (no execute bit: a copy that lost its mode, a file
// half-written) is refused at once, and that refusal is how the re-exec ended: status's
// last_error says so and `reexec --join` exits 1 with it, not with the outcome of an earlier
// re-exec that went ahead (it did: "re-exec 1").
TEST(Reexec, ABinaryThatCannotBeExecutedIsRefusedAndJoinReportsThatRefusal) {
  ReplaceableBinary binary;
  Harness h(binary.Options());
  ASSERT_STARTED(h);
  const pid_t worker = h.Cell("a")["pid"].get<pid_t>();
  ASSERT_TRUE(Reexecs(h));

  const std::string next = binary.Join("bulkheadd.next");
  std::ofstream(next) << "not a program\n";
  ::chmod(next.c_str(), 0644);
  std::filesystem::rename(next, binary.path());
  ExpectReexecFails(h, binary.path());
  const nlohmann::json reexec = h.Status()["supervisor"]["reexec"];
  EXPECT_EQ(reexec["count"], 1) << reexec.dump();
  ASSERT_TRUE(reexec["last_error"].is_string()) << reexec.dump();
  EXPECT_THAT(reexec["last_error"].get<std::string>(), HasSubstr(binary.path()));
  Result<ProcessResult> join = h.Ctl({"reexec", "--join"});
  ASSERT_TRUE(join.ok()) << join.status().message();
  EXPECT_EQ(join->exit_code(), kExitFailure) << join->Describe();
  EXPECT_THAT(join->err, HasSubstr(binary.path())) << join->Describe();
  ExpectTheSameWorkerServes(h, worker);
}

// A level given on the command line (`bulkheadd --log-level warning`) wins over the file's at
// every reload, and a re-exec runs the same arguments again: the file without that level is the
// config in force, not a change to reload first (every upgrade by postinst fell back to a
// restart).
TEST(Reexec, ALogLevelGivenOnTheCommandLineIsNoChangeOfTheFile) {
  HarnessOptions options = TestOptions({CellSpec{.name = "a"}});
  options.args = {"--log-level", "warning"};
  Harness h(options);
  ASSERT_STARTED(h);
  const pid_t worker = h.Cell("a")["pid"].get<pid_t>();
  ASSERT_TRUE(Reexecs(h)) << h.Log();
  EXPECT_EQ(h.Status()["supervisor"]["reexec"]["count"], 1);
  ExpectTheSameWorkerServes(h, worker);
  // The file's level changed since: the command line's still wins, in the new image as at a
  // reload, so that is no change either; a cell's change still is one to reload first.
  h.RewriteConfig({CellSpec{.name = "a"}}, "log_level = \"error\"\n");
  ASSERT_TRUE(Reexecs(h)) << h.Log();
  EXPECT_EQ(h.Status()["supervisor"]["reexec"]["count"], 2);
  h.RewriteConfig({CellSpec{.name = "a", .max_concurrent = 2}}, "log_level = \"error\"\n");
  ExpectReexecFails(h, "cells.a updated (reload first)");
  ExpectTheSameWorkerServes(h, worker);
}

// An upgrade that moves the running binary aside and puts the new one in its place (`mv bulkheadd
// bulkheadd.old; cp new bulkheadd`): /proc/self/exe then names bulkheadd.old, and a re-exec of it
// ran the old binary again. The path bulkheadd was first started as is what is executed (here a
// "newer" file that reads only version 9, refused: it was the one asked), and the path is carried
// across a re-exec.
TEST(Reexec, ABinaryMovedAsideIsNotTheOneExecutedThePathItWasStartedAsIs) {
  ReplaceableBinary binary;
  Harness h(binary.Options());
  ASSERT_STARTED(h);
  const pid_t worker = h.Cell("a")["pid"].get<pid_t>();
  const std::string aside = binary.Join("bulkheadd.old");
  for (int round = 1; round <= 2; ++round) {
    std::filesystem::rename(binary.path(), aside);
    binary.ReplaceWithScript("#!/bin/sh\necho 9\n");
    ExpectReexecFails(h, binary.path() + " --reexec-state-versions: reads 9");
    // The real one back in place: the re-exec executes it.
    std::filesystem::remove(binary.path());
    std::filesystem::rename(aside, binary.path());
    ASSERT_TRUE(Reexecs(h));
    EXPECT_EQ(h.Status()["supervisor"]["reexec"]["count"], round);
  }
  EXPECT_EQ(h.Cell("a")["pid"], worker);
}

// Status's state_since_ms ("IN STATE FOR") goes on across a re-exec instead of starting at 0: the
// time the cell entered its state travels as a duration.
TEST(Reexec, TheTimeInStateGoesOnAcrossAReexec) {
  Harness h(TestOptions({CellSpec{.name = "a"}}));
  ASSERT_STARTED(h);
  ASSERT_TRUE(h.WaitForCell(
      "a", [](const nlohmann::json& c) { return c["state_since_ms"].get<uint64_t>() >= 1'500; }));
  const uint64_t before = h.Cell("a")["state_since_ms"].get<uint64_t>();
  ASSERT_TRUE(Reexecs(h));
  EXPECT_GE(h.Cell("a")["state_since_ms"].get<uint64_t>(), before);
}

// The warning that cell limits are not enforced (a host that does not delegate cgroups to the
// test) is logged at the first start, not again by each image a re-exec makes.
TEST(Reexec, TheLimitsWarningIsLoggedAtTheFirstStartOnly) {
  Harness h(TestOptions({CellSpec{.name = "a"}}));
  ASSERT_STARTED(h);
  auto warnings = [&h] {
    const std::string log = h.Log();
    size_t count = 0;
    for (size_t at = log.find("NOT enforced"); at != std::string::npos;
         at = log.find("NOT enforced", at + 1)) {
      ++count;
    }
    return count;
  };
  const size_t at_start = warnings();
  for (int i = 1; i <= 2; ++i) {
    ASSERT_TRUE(Reexecs(h));
  }
  EXPECT_EQ(warnings(), at_start) << h.Log();
  if (at_start == 0) std::fprintf(stderr, "limits are enforced here: the warning is not shown\n");
}

// docs/reexec.md, failure 5: a new binary that claims our version but cannot read the state (a
// bug; here a test build that fails every read) runs the previous binary again, by the fd the
// old image kept open, with the same state: the workers keep their pids and serve, and status and
// bulkheadctl say the fallback ran. The previous binary's file was replaced: it runs from its fd.
TEST(Reexec, ANewBinaryThatCannotReadTheStateRunsThePreviousOneAgainAndKeepsTheWorkers) {
  ReplaceableBinary binary;
  Harness h(binary.Options());
  ASSERT_STARTED(h);
  const pid_t supervisor = h.pid();
  const pid_t worker = h.Cell("a")["pid"].get<pid_t>();
  binary.ReplaceWithFile(BULKHEAD_CANNOT_READ_STATE);

  ExpectReexecFails(h,
                    "could not take the state over, the previous binary runs again: the state "
                    "cannot be read: this build cannot read re-exec states");
  const nlohmann::json status = h.Status();
  EXPECT_EQ(status["supervisor"]["pid"], supervisor);
  EXPECT_EQ(status["supervisor"]["reexec"]["count"], 1);
  EXPECT_EQ(status["supervisor"]["reexec"]["phase"], "idle");
  EXPECT_EQ(h.Cell("a")["pid"], worker) << "the worker was replaced" << h.Log();
  EXPECT_EQ(h.Cell("a")["starts"], 1) << h.Log();
  EXPECT_OK_REPLY(h.Call("a", "echo still here"), "still here");
  EXPECT_THAT(h.Log(), HasSubstr("running the previous binary again with the same state"));

  // The good binary back: the next re-exec goes ahead, and the fallback's reason is gone.
  binary.ReplaceWithFile(BulkheaddPath());
  ASSERT_TRUE(Reexecs(h));
  const nlohmann::json after = h.Status();
  EXPECT_EQ(after["supervisor"]["reexec"]["count"], 2);
  EXPECT_TRUE(after["supervisor"]["reexec"]["last_error"].is_null()) << after.dump();
  ExpectTheSameWorkerServes(h, worker);
}

// The access log across re-execs (docs/reexec.md): the old image closes it before the exec (its
// writer thread writes every line it was handed, then ends) and the new image opens it again, so
// that no line of the last moments before an exec is lost. Under load, the file holds exactly one
// line per request the clients saw answered.
TEST(Reexec, TheAccessLogKeepsEveryLineAcrossReexecsUnderLoad) {
  TempDir logs;
  const std::string path = logs.Join("access.log");
  HarnessOptions options =
      TestOptions({CellSpec{.name = "a", .max_concurrent = 4, .max_queue = 64}});
  options.supervisor_toml = "access_log = \"" + path + "\"\n";
  Harness h(std::move(options));
  ASSERT_STARTED(h);
  std::unique_ptr<RunningLoad> load = StartLoad(h, "a");
  ASSERT_NE(load, nullptr) << h.Log();
  Tally& tally = load->tally();
  for (int i = 1; i <= kReexecs; ++i) {
    ASSERT_TRUE(Reexecs(h));
    const uint64_t ok_now = tally.ok.load();
    ASSERT_TRUE(WaitFor([&] { return tally.ok.load() >= ok_now + 10; }, std::chrono::seconds(10)));
  }
  load->Stop();
  EXPECT_EQ(tally.wrong.load(), 0u) << ::testing::PrintToString(tally.first_wrong) << h.Log();

  auto lines = [&path] {
    const std::string text = testing::ReadFile(path).value_or("");
    return static_cast<uint64_t>(std::count(text.begin(), text.end(), '\n'));
  };
  // The last lines reach the file within the log's flush delay: waited for by their count.
  const uint64_t answered = tally.ok.load();
  (void)WaitFor([&] { return lines() >= answered; }, std::chrono::seconds(10));
  EXPECT_EQ(lines(), answered) << "lines lost (or doubled) across the re-execs\n" << h.Log();
  EXPECT_EQ(Counter(h.Cell("a"), "ok"), answered);
  // Its counters continue across the images too: a scrape after adds up.
  Result<ProcessResult> metrics = h.Ctl({"metrics"});
  ASSERT_TRUE(metrics.ok() && metrics->exit_code() == kExitOk);
  EXPECT_THAT(metrics->out,
              HasSubstr("\nbulkhead_access_log_lines_total " + std::to_string(answered) + "\n"))
      << metrics->out;
  EXPECT_THAT(metrics->out, HasSubstr("\nbulkhead_access_log_dropped_total 0\n")) << metrics->out;
}

// The new binary's version check runs off the loop (ReexecPhase::kChecking): a binary slow to
// answer `--reexec-state-versions` (here a script blocked on a FIFO the test holds) does not stop
// bulkheadd, which answers status and serves requests meanwhile; once it answers, the re-exec
// goes ahead.
TEST(Reexec, ASlowVersionCheckDoesNotStopTheLoop) {
  ReplaceableBinary binary;
  Harness h(binary.Options());
  ASSERT_STARTED(h);
  const pid_t worker = h.Cell("a")["pid"].get<pid_t>();
  // The binary on disk becomes a script that answers the check once the test opens the gate, and
  // is bulkheadd itself otherwise.
  const std::string gate = binary.Join("gate");
  ASSERT_EQ(::mkfifo(gate.c_str(), 0600), 0);
  binary.ReplaceWithScript("#!/bin/sh\nif [ \"$1\" = --reexec-state-versions ]; then read go < " +
                           gate + "; exec " + BulkheaddPath() + " \"$1\"; fi\nexec " +
                           BulkheaddPath() + " \"$@\"\n");

  Result<ProcessResult> asked = h.Ctl({"reexec", "--no-block"});
  ASSERT_TRUE(asked.ok());
  ASSERT_EQ(asked->exit_code(), kExitOk) << asked->Describe() << h.Log();
  // The check is under way, and bulkheadd answers and serves meanwhile.
  const nlohmann::json during = h.Status();
  EXPECT_EQ(during["supervisor"]["reexec"]["phase"], "checking") << during.dump();
  EXPECT_OK_REPLY(h.Call("a", "echo during the check"), "during the check");
  ExpectReexecFails(h, "a re-exec is already under way");

  std::ofstream(gate) << "go\n";  // blocks until the script opened the FIFO
  EXPECT_TRUE(WaitFor([&] { return h.Status()["supervisor"]["reexec"]["count"] == 1; })) << h.Log();
  ExpectTheSameWorkerServes(h, worker);
}

// Cells in backoff and failed are carried across (docs/reexec.md): the one in backoff keeps its
// next start (the time left, not more) and its failures in a row, the failed one its reason;
// their counts continue, and the running cell's worker keeps its pid.
TEST(Reexec, CellsInBackoffAndFailedAreCarriedWithTheirTimeLeftAndReason) {
  Harness h(TestOptions(
      {CellSpec{.name = "a"},
       CellSpec{
           .name = "b", .command = {"/bin/false"}, .restart_delay = "1h", .wait_running = false},
       CellSpec{.name = "c",
                .command = {"/bin/false"},
                .extra_toml = "restart = \"never\"\n",
                .wait_running = false},
       // Crash-looping from its first end (start_limit_burst 1): its next start a minute away.
       CellSpec{.name = "d",
                .command = {"/bin/false"},
                .extra_toml = "start_limit_burst = 1\n",
                .wait_running = false}}));
  ASSERT_STARTED(h);
  ASSERT_TRUE(h.WaitForCell("b", [](const nlohmann::json& c) { return c["state"] == "backoff"; }));
  ASSERT_TRUE(h.WaitForCell("d", [](const nlohmann::json& c) { return c["state"] == "backoff"; }));
  ASSERT_THAT(h.Cell("d")["state_detail"].get<std::string>(), HasSubstr("crash-looping"));
  ASSERT_TRUE(h.WaitForCell("c", [](const nlohmann::json& c) { return c["state"] == "failed"; }));
  const pid_t worker = h.Cell("a")["pid"].get<pid_t>();
  const nlohmann::json b_before = h.Cell("b");
  const nlohmann::json c_before = h.Cell("c");
  ASSERT_TRUE(Reexecs(h));
  EXPECT_EQ(h.Status()["supervisor"]["reexec"]["count"], 1);
  EXPECT_EQ(h.Cell("a")["pid"], worker);

  const nlohmann::json b = h.Cell("b");
  EXPECT_EQ(b["state"], "backoff") << b.dump();
  EXPECT_EQ(b["starts"], b_before["starts"]) << b.dump();
  EXPECT_EQ(b["last_exit"], b_before["last_exit"]) << b.dump();
  // The time left, never more than before the exec (the restart_delay is 1 h).
  EXPECT_GT(b["next_start_in_ms"].get<uint64_t>(), 0u) << b.dump();
  EXPECT_LE(b["next_start_in_ms"].get<uint64_t>(), b_before["next_start_in_ms"].get<uint64_t>())
      << b.dump();
  const nlohmann::json c = h.Cell("c");
  EXPECT_EQ(c["state"], "failed") << c.dump();
  EXPECT_EQ(c["reason"], c_before["reason"]) << c.dump();
  EXPECT_FALSE(c["reason"].is_null()) << c.dump();
  EXPECT_EQ(c["starts"], c_before["starts"]) << c.dump();
  // The crash loop goes on as one (its start limit's window travelled, state version 3).
  const nlohmann::json d = h.Cell("d");
  EXPECT_EQ(d["state"], "backoff") << d.dump();
  EXPECT_THAT(d["state_detail"].get<std::string>(), HasSubstr("crash-looping: 1 start in 60s"))
      << d.dump();
  EXPECT_OK_REPLY(h.Call("a", "echo still here"), "still here");
  EXPECT_THAT(h.Log(), HasSubstr("backoff adopted from the previous bulkheadd image"));
}

// A re-exec asked while a cell is starting (a worker slow to become ready) waits for it to settle
// (phase "settling"), every cell serving meanwhile, and goes ahead once it is ready: the
// starting worker is carried with its pid, and the cell under load meanwhile loses nothing.
TEST(Reexec, AReexecAskedWhileACellStartsWaitsUntilItIsReadyThenGoesAhead) {
  TempDir files;
  const std::string ready = files.Join("ready");
  Harness h(TestOptions(
      {CellSpec{.name = "a", .max_concurrent = 4, .max_queue = 64},
       CellSpec{.name = "slow",
                .command = {TestWorkerPath(), "--notify-ready-when-file", ready},
                .extra_toml = "ready = \"notify\"\n",
                .wait_running = false}}));
  ASSERT_STARTED(h);
  ASSERT_TRUE(
      h.WaitForCell("slow", [](const nlohmann::json& c) { return c["state"] == "starting"; }));
  const pid_t worker = h.Cell("a")["pid"].get<pid_t>();
  const pid_t slow = h.Cell("slow")["pid"].get<pid_t>();
  std::unique_ptr<RunningLoad> load = StartLoad(h, "a");
  ASSERT_NE(load, nullptr) << h.Log();

  std::optional<Result<ProcessResult>> reexec;
  std::thread asker([&] { reexec = h.Ctl({"reexec"}); });
  EXPECT_TRUE(WaitFor([&] { return h.Status()["supervisor"]["reexec"]["phase"] == "settling"; }))
      << h.Log();
  // The cells serve while it waits, and a second re-exec is refused.
  const uint64_t ok_now = load->tally().ok.load();
  EXPECT_TRUE(WaitFor([&] { return load->tally().ok.load() >= ok_now + 10; }));
  ExpectReexecFails(h, "a re-exec is already under way");
  EXPECT_EQ(h.Status()["supervisor"]["reexec"]["count"], 0);

  std::ofstream(ready) << "";
  asker.join();
  ASSERT_TRUE(reexec && reexec->ok()) << h.Log();
  EXPECT_EQ((*reexec)->exit_code(), kExitOk) << (*reexec)->Describe() << h.Log();
  EXPECT_EQ(h.Status()["supervisor"]["reexec"]["count"], 1);
  const uint64_t ok_after = load->tally().ok.load();
  EXPECT_TRUE(WaitFor([&] { return load->tally().ok.load() >= ok_after + 10; }));
  load->Stop();

  EXPECT_EQ(load->tally().wrong.load(), 0u)
      << ::testing::PrintToString(load->tally().first_wrong) << h.Log();
  const nlohmann::json a = h.Cell("a");
  EXPECT_EQ(a["pid"], worker);
  EXPECT_EQ(Counter(a, "ok"), load->tally().ok.load()) << a.dump();
  EXPECT_EQ(Counter(a, "rejected"), 0u) << a.dump();
  EXPECT_EQ(Counter(a, "failed"), 0u) << a.dump();
  const nlohmann::json after = h.Cell("slow");
  EXPECT_EQ(after["state"], "running") << after.dump();
  EXPECT_EQ(after["pid"], slow) << "the slow worker was replaced";
  EXPECT_EQ(after["starts"], 1) << after.dump();
  EXPECT_THAT(h.Log(), HasSubstr("the re-exec waits for the cells to settle"));
}

// The drain ends when its last request is answered (the data path tells the supervisor), not at
// its bound nor at a poll: with a drain bound of 2 min, far past what the test waits, the re-exec
// happens once the held request's answer is written, and nothing is answered as at a deadline.
TEST(Reexec, ADrainEndsWhenItsLastRequestIsAnsweredNotAtItsBound) {
  TempDir files;
  const std::string go = files.Join("go");
  Harness h(TestOptions({CellSpec{.name = "a", .extra_toml = "stop_timeout = \"120s\"\n"}}));
  ASSERT_STARTED(h);
  const pid_t worker = h.Cell("a")["pid"].get<pid_t>();
  Result<ipc::Client> conn = h.Connect("a");
  ASSERT_TRUE(conn.ok()) << conn.status().message();
  ASSERT_TRUE(conn->Send(7, "wait-file " + go).ok());
  ASSERT_TRUE(h.WaitForCell("a", [](const nlohmann::json& c) { return c["in_flight"] == 1; }))
      << h.Cell("a").dump();

  std::optional<Result<ProcessResult>> reexec;
  std::thread asker([&] { reexec = h.Ctl({"reexec"}); });
  EXPECT_TRUE(WaitFor([&] { return h.Status()["supervisor"]["reexec"]["phase"] == "draining"; }))
      << h.Log();
  std::ofstream(go) << "";
  Result<ipc::Client::Reply> reply = conn->Receive();
  EXPECT_TRUE(IsReply(reply, ipc::ReplyStatus::kOk, ipc::Reason::kNone)) << Describe(reply);
  EXPECT_TRUE(WaitFor([&] { return h.Status()["supervisor"]["reexec"]["count"] == 1; }))
      << h.Log();
  asker.join();
  ASSERT_TRUE(reexec && reexec->ok()) << h.Log();
  EXPECT_EQ((*reexec)->exit_code(), kExitOk) << (*reexec)->Describe() << h.Log();
  EXPECT_THAT(h.Log(), ::testing::Not(HasSubstr("still in flight at the deadline")));
  ExpectTheSameWorkerServes(h, worker);
}

// A start held for the cells it needs is carried across the re-exec (the state's start_held), not
// waited for: the re-exec settles only for the cell that is starting, status names that one (JSON
// and the table), and once it is ready the re-exec goes ahead and the held start runs, in
// whichever image it comes to.
TEST(Reexec, AStartHeldForTheCellsItNeedsIsNotWaitedForAndStatusNamesWhatTheReexecWaitsFor) {
  TempDir files;
  const std::string ready = files.Join("ready");
  Harness h(TestOptions(
      {CellSpec{.name = "catalog",
                .command = {TestWorkerPath(), "--notify-ready-when-file", ready},
                .extra_toml = "ready = \"notify\"\n",
                .wait_running = false},
       CellSpec{.name = "front", .extra_toml = "needs = [\"catalog\"]\n", .wait_running = false}}));
  ASSERT_STARTED(h);
  ASSERT_TRUE(h.WaitForCell("front", [](const nlohmann::json& c) {
    return c["state"] == "waiting";
  })) << h.Status().dump();

  std::optional<Result<ProcessResult>> reexec;
  std::thread asker([&] { reexec = h.Ctl({"reexec"}); });
  EXPECT_TRUE(WaitFor([&] { return h.Status()["supervisor"]["reexec"]["phase"] == "settling"; }))
      << h.Log();
  const nlohmann::json waiting = h.Status()["supervisor"]["reexec"]["waiting_for"];
  EXPECT_THAT(waiting.dump(), HasSubstr("cells.catalog: it is starting")) << waiting.dump();
  EXPECT_THAT(waiting.dump(), Not(HasSubstr("cells.front"))) << waiting.dump();
  Result<ProcessResult> table = h.Ctl({"status"});
  ASSERT_TRUE(table.ok());
  EXPECT_THAT(table->out, HasSubstr("re-exec under way: settling\n"
                                    "  waiting for cells.catalog: it is starting"))
      << table->out;

  std::ofstream(ready) << "";
  asker.join();
  ASSERT_TRUE(reexec && reexec->ok()) << h.Log();
  EXPECT_EQ((*reexec)->exit_code(), kExitOk) << (*reexec)->Describe() << h.Log();
  const nlohmann::json status = h.Status();
  EXPECT_EQ(status["supervisor"]["reexec"]["count"], 1) << status.dump();
  EXPECT_EQ(status["supervisor"]["reexec"]["waiting_for"], nlohmann::json::array());
  ASSERT_TRUE(h.WaitForCell("front", [](const nlohmann::json& c) {
    return c["state"] == "running";
  })) << h.Status().dump();
  EXPECT_OK_REPLY(h.Call("front", "echo after"), "after");
}

// A start held behind a cell that does not start by itself (stopped, or crash-looping) would
// never settle: it is carried as it is. The re-exec goes ahead at once; in the new image the
// start is still held, behind the same cell, and runs once an operator starts that cell.
TEST(Reexec, AStartHeldBehindAStoppedCellIsCarriedAndRunsOnceThatCellStarts) {
  Harness h(TestOptions({CellSpec{.name = "catalog"},
                         CellSpec{.name = "front", .extra_toml = "needs = [\"catalog\"]\n"}}));
  ASSERT_STARTED(h);
  for (const char* cell : {"front", "catalog"}) {
    ASSERT_TRUE(h.Ctl({"stop", cell}).ok());
    ASSERT_TRUE(h.WaitForCell(cell, [](const nlohmann::json& c) {
      return c["state"] == "stopped";
    })) << h.Status().dump();
  }
  ASSERT_TRUE(h.Ctl({"start", "--no-block", "front"}).ok());
  ASSERT_TRUE(h.WaitForCell("front", [](const nlohmann::json& c) {
    return c["state"] == "waiting";
  })) << h.Status().dump();

  Result<ProcessResult> reexec = h.Ctl({"reexec"});
  ASSERT_TRUE(reexec.ok());
  EXPECT_EQ(reexec->exit_code(), kExitOk) << reexec->Describe() << h.Log();
  EXPECT_EQ(h.Status()["supervisor"]["reexec"]["count"], 1);
  const nlohmann::json front = h.Cell("front");
  EXPECT_EQ(front["state"], "waiting") << front.dump();
  EXPECT_THAT(front["waiting_for"].dump(), HasSubstr("\"catalog\"")) << front.dump();
  EXPECT_EQ(h.Cell("catalog")["state"], "stopped");

  ASSERT_TRUE(h.Ctl({"start", "catalog"}).ok());
  ASSERT_TRUE(h.WaitForCell("front", [](const nlohmann::json& c) {
    return c["state"] == "running";
  })) << h.Status().dump();
  EXPECT_OK_REPLY(h.Call("front", "echo after"), "after");
}

// `bulkheadctl --timeout` shorter than the settling: it exits 75 (kExitReexecUnderWay) saying the
// re-exec is still under way and what it waits for, not 1 as for a failure; bulkheadd goes on
// with it, and once the cell settles (here: stopped) the re-exec happens.
TEST(Reexec, ATimeoutShorterThanTheSettlingExitsSayingTheReexecIsStillUnderWay) {
  Harness h(TestOptions({CellSpec{.name = "a"}, StaysStarting()}));
  ASSERT_STARTED(h);
  ASSERT_TRUE(
      h.WaitForCell("starting", [](const nlohmann::json& c) { return c["state"] == "starting"; }));
  Result<ProcessResult> ctl = h.Ctl({"--timeout", "300ms", "reexec"});
  ASSERT_TRUE(ctl.ok()) << ctl.status().message();
  EXPECT_EQ(ctl->exit_code(), kExitReexecUnderWay) << ctl->Describe() << h.Log();
  EXPECT_THAT(ctl->err, HasSubstr("still under way")) << ctl->err;
  EXPECT_THAT(ctl->err, HasSubstr("settling, waiting for cells.starting: it is starting"))
      << ctl->err;
  EXPECT_EQ(h.Status()["supervisor"]["reexec"]["phase"], "settling");
  EXPECT_EQ(h.Status()["supervisor"]["reexec"]["count"], 0);

  Result<ProcessResult> stop = h.Ctl({"stop", "starting"});
  ASSERT_TRUE(stop.ok());
  ASSERT_EQ(stop->exit_code(), kExitOk) << stop->Describe();
  EXPECT_TRUE(WaitFor([&] { return h.Status()["supervisor"]["reexec"]["count"] == 1; })) << h.Log();
  EXPECT_TRUE(h.Status()["supervisor"]["reexec"]["last_error"].is_null()) << h.Status().dump();
  EXPECT_OK_REPLY(h.Call("a", "echo after"), "after");
}

// `bulkheadctl reexec --join` (what postinst runs after a reexec that exited 75): a second
// `reexec` is refused while one is under way, a join waits for it instead (here its --timeout
// ends first: 75 again, with where it stands), and once the cell settled a join says the re-exec
// went ahead, whether it ended before the join looked or while it waited. Status says how long
// the re-exec under way may still last. On a bulkheadd that never re-executed a join fails.
TEST(Reexec, AJoinWaitsForTheReexecUnderWayWhichASecondReexecIsRefused) {
  Harness h(TestOptions({CellSpec{.name = "a"}, StaysStarting()}));
  ASSERT_STARTED(h);
  Result<ProcessResult> none = h.Ctl({"reexec", "--join"});
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_EQ(none->exit_code(), kExitFailure) << none->Describe();
  EXPECT_THAT(none->err, HasSubstr("has not re-executed since it started")) << none->err;
  EXPECT_TRUE(h.Status()["supervisor"]["reexec"]["ends_within_ms"].is_null());

  ASSERT_TRUE(
      h.WaitForCell("starting", [](const nlohmann::json& c) { return c["state"] == "starting"; }));
  Result<ProcessResult> first = h.Ctl({"--timeout", "300ms", "reexec"});
  ASSERT_TRUE(first.ok()) << first.status().message();
  ASSERT_EQ(first->exit_code(), kExitReexecUnderWay) << first->Describe() << h.Log();
  // The settling's time left (the cells' longest start_timeout + stop_timeout from the request),
  // then the check, the drain and its grace.
  const nlohmann::json within = h.Status()["supervisor"]["reexec"]["ends_within_ms"];
  ASSERT_TRUE(within.is_number_unsigned()) << h.Status().dump();
  EXPECT_GT(within.get<uint64_t>(), 0u);

  Result<ProcessResult> second = h.Ctl({"reexec"});
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->exit_code(), kExitFailure) << second->Describe();
  EXPECT_THAT(second->err, HasSubstr("a re-exec is already under way")) << second->err;
  Result<ProcessResult> joined = h.Ctl({"--timeout", "300ms", "reexec", "--join"});
  ASSERT_TRUE(joined.ok());
  EXPECT_EQ(joined->exit_code(), kExitReexecUnderWay) << joined->Describe();
  EXPECT_THAT(joined->err, HasSubstr("settling, waiting for cells.starting: it is starting"))
      << joined->err;

  Result<ProcessResult> stop = h.Ctl({"stop", "starting"});
  ASSERT_TRUE(stop.ok());
  ASSERT_EQ(stop->exit_code(), kExitOk) << stop->Describe();
  Result<ProcessResult> done = h.Ctl({"reexec", "--join"});
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->exit_code(), kExitOk) << done->Describe() << h.Log();
  EXPECT_THAT(done->out, HasSubstr(", re-exec 1")) << done->out;
  EXPECT_EQ(h.Status()["supervisor"]["reexec"]["count"], 1);
  EXPECT_OK_REPLY(h.Call("a", "echo after"), "after");
}

// A cell that stays starting, stopping or swapping workers past the settling's bound (here
// `--settle-timeout 1s`) refuses the re-exec, naming the cell and what it is doing; nothing
// changes.
TEST(Reexec, ACellStartingStoppingOrSwappingPastTheSettleTimeoutRefusesTheReexecAndSaysWhy) {
  // The swapping cell's workers are ready once their file exists: the first one's does, the one a
  // reload starts beside it (another file) never comes up, so its swap stays under way.
  TempDir files;
  const std::string ready = files.Join("ready");
  std::ofstream(ready) << "";
  auto swapping = [](const std::string& ready_file) {
    return CellSpec{.name = "swapping",
                    .command = {TestWorkerPath(), "--notify-ready-when-file", ready_file},
                    .extra_toml = "ready = \"notify\"\n"};
  };
  std::vector<CellSpec> cells = {
      CellSpec{.name = "a"}, StaysStarting(),
      CellSpec{.name = "stopping",
               .command = {TestWorkerPath(), "--ignore-sigterm"},
               .extra_toml = "stop_timeout = \"4s\"\nrestart_overlap = false\n"},
      swapping(ready)};
  Harness h(TestOptions(cells));
  ASSERT_STARTED(h);
  auto refused = [&](const std::string& why) {
    Result<ProcessResult> ctl = h.Ctl({"reexec", "--settle-timeout", "1s"});
    ASSERT_TRUE(ctl.ok()) << ctl.status().message();
    EXPECT_EQ(ctl->exit_code(), kExitFailure) << ctl->Describe() << h.Log();
    EXPECT_THAT(ctl->err, HasSubstr(why)) << ctl->err;
    EXPECT_THAT(ctl->err, HasSubstr("ms of waiting for the cells to settle")) << ctl->err;
    EXPECT_EQ(h.Status()["supervisor"]["reexec"]["count"], 0);
  };
  ASSERT_TRUE(
      h.WaitForCell("starting", [](const nlohmann::json& c) { return c["state"] == "starting"; }));
  refused("cells.starting: it is starting");
  Result<ProcessResult> stop = h.Ctl({"stop", "starting"});
  ASSERT_TRUE(stop.ok());
  ASSERT_EQ(stop->exit_code(), kExitOk) << stop->Describe();

  cells.back() = swapping(files.Join("never"));
  h.RewriteConfig(cells);
  Result<ProcessResult> reload = h.Ctl({"reload", "--no-block"});
  ASSERT_TRUE(reload.ok());
  ASSERT_EQ(reload->exit_code(), kExitOk) << reload->Describe() << h.Log();
  ASSERT_TRUE(h.WaitForCell("swapping", [](const nlohmann::json& c) {
    return !c["swap"].is_null();
  })) << h.Cell("swapping").dump();
  refused("cells.swapping: a worker swap (overlapping restart) is under way");

  EXPECT_OK_REPLY(h.Call("stopping", "echo ready"), "ready");  // it ignores SIGTERM from here
  // Its stop lasts stop_timeout (4 s, then SIGKILL): the re-exec's 1 s of settling ends well
  // within it.
  Result<ProcessResult> stopping = h.Ctl({"stop", "--no-block", "stopping"});
  ASSERT_TRUE(stopping.ok());
  ASSERT_TRUE(
      h.WaitForCell("stopping", [](const nlohmann::json& c) { return c["state"] == "stopping"; }));
  refused("cells.stopping: it is stopping");
  EXPECT_OK_REPLY(h.Call("a", "echo still here"), "still here");
}

// Issue 24's measure, on three kinds of cell at once: frames one-per-request, frames multiplexed
// and HTTP, each with keep-alive clients (one connection per client, opened before the first
// re-exec): 20 re-execs in a row under load lose nothing (0 failed, 0 rejected, every request one
// reply, its own), keep every worker's pid, and the counters continue (ok counted = ok seen).
TEST(Reexec, ThreeKindsOfCellWithKeepAliveClientsLoseNothingAcrossTwentyReexecs) {
  constexpr int kManyReexecs = 20;
  const std::string quick = "stop_timeout = \"10s\"\n";
  Harness h(
      TestOptions({CellSpec{.name = "f", .max_concurrent = 4, .max_queue = 64, .extra_toml = quick},
                   CellSpec{.name = "m",
                            .max_concurrent = 4,
                            .max_queue = 64,
                            .worker_connections = "multiplex",
                            .extra_toml = quick},
                   CellSpec{.name = "web",
                            .command = {"python3", BULKHEAD_HTTP_WORKER},
                            .max_concurrent = 4,
                            .max_queue = 64,
                            .extra_toml = "protocol = \"http\"\n" + quick}}));
  ASSERT_STARTED(h);
  const std::vector<std::string> names = {"f", "m", "web"};
  std::map<std::string, pid_t> workers;
  for (const std::string& name : names) workers[name] = h.Cell(name)["pid"].get<pid_t>();
  std::map<std::string, Tally> tallies;
  std::map<std::string, std::atomic<uint64_t>> sent;
  for (const std::string& name : names) {
    tallies[name];
    sent[name];
  }
  std::atomic<bool> stop{false};
  std::atomic<int> connected{0};
  auto frames = [&](const std::string& cell, int client) {
    KeepAliveFrames(h, cell, client, stop, tallies.at(cell), sent.at(cell), connected);
  };
  auto http = [&](int client) {
    Tally& tally = tallies.at("web");
    std::optional<HttpConn> conn = HttpConn::Open(h.CellSocket("web"));
    ++connected;
    if (!conn) return Wrong(tally, "connect web");
    for (uint64_t n = 1; !stop.load(); ++n) {
      ++sent.at("web");
      if (!conn->Send("GET /hello HTTP/1.1\r\nHost: t\r\n\r\n")) {
        return Wrong(tally, "web send " + std::to_string(n));
      }
      std::optional<Response> response = conn->Read(std::chrono::seconds(30));
      if (response && response->status == 200 && response->body == "hello") {
        ++tally.ok;
        continue;
      }
      return Wrong(tally, "web client " + std::to_string(client) + " request " + std::to_string(n) +
                              ": " + Describe(response));
    }
  };
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] { frames("f", i); });
    clients.emplace_back([&, i] { frames("m", i); });
    clients.emplace_back([&, i] { http(i); });
  }
  auto each_served = [&](const std::map<std::string, uint64_t>& floor, uint64_t more) {
    return WaitFor(
        [&] {
          for (const std::string& name : names) {
            if (tallies.at(name).ok.load() < floor.at(name) + more) return false;
          }
          return true;
        },
        std::chrono::seconds(20));
  };
  auto oks = [&] {
    std::map<std::string, uint64_t> now;
    for (const std::string& name : names) now[name] = tallies.at(name).ok.load();
    return now;
  };
  ASSERT_TRUE(WaitFor([&] { return connected.load() == 3 * kClients; }));
  ASSERT_TRUE(each_served(oks(), 10));
  for (int i = 1; i <= kManyReexecs; ++i) {
    ASSERT_TRUE(Reexecs(h));
    // Every cell serves between two re-execs, on the connections opened before the first.
    ASSERT_TRUE(each_served(oks(), 5)) << "after re-exec " << i << h.Log();
  }
  stop = true;
  for (std::thread& t : clients) t.join();

  EXPECT_EQ(h.Status()["supervisor"]["reexec"]["count"], kManyReexecs);
  for (const std::string& name : names) {
    Tally& tally = tallies[name];
    EXPECT_EQ(tally.wrong.load(), 0u)
        << name << ": " << ::testing::PrintToString(tally.first_wrong) << h.Log();
    EXPECT_EQ(tally.ok.load(), sent[name].load()) << name << ": every request one reply";
    const nlohmann::json cell = h.Cell(name);
    EXPECT_EQ(cell["pid"], workers[name]) << name << " worker replaced: " << cell.dump();
    EXPECT_EQ(cell["starts"], 1) << cell.dump();
    EXPECT_EQ(Counter(cell, "ok"), tally.ok.load()) << cell.dump();
    EXPECT_EQ(Counter(cell, "rejected"), 0u) << cell.dump();
    EXPECT_EQ(Counter(cell, "failed"), 0u) << cell.dump();
  }
}

// The new image reads the config file again, so a file changed since the last reload refuses
// the re-exec. A change a reload applies (a cell's key, log_level) says "reload first"; one a
// reload refuses as well (a [supervisor] key fixed at start) must not send the operator to a
// reload that fails: it gives the reload's own refusal and says to put the file back. Nothing
// changes either way.
TEST(Reexec, AConfigFileChangedSinceTheLastReloadIsRefusedWithAdviceThatWorks) {
  Harness h(TestOptions({CellSpec{.name = "a"}}));
  ASSERT_STARTED(h);
  const pid_t worker = h.Cell("a")["pid"].get<pid_t>();

  h.RewriteConfig({CellSpec{.name = "a", .max_concurrent = 2}});
  ExpectReexecFails(h, "cells.a updated (reload first)");
  // The one [supervisor] key a reload applies live: without the check the new image took it.
  h.RewriteConfig({CellSpec{.name = "a"}}, "log_level = \"error\"\n");
  ExpectReexecFails(h, "supervisor.log_level changed (reload first)");
  h.RewriteConfig({CellSpec{.name = "a"}}, "max_payload_bytes = 4096\n");
  Result<ProcessResult> ctl = h.Ctl({"reexec"});
  ASSERT_TRUE(ctl.ok()) << ctl.status().message();
  EXPECT_EQ(ctl->exit_code(), kExitFailure) << ctl->Describe();
  EXPECT_THAT(ctl->err, HasSubstr("supervisor.max_payload_bytes"));
  EXPECT_THAT(ctl->err, HasSubstr("restart bulkheadd to change it"));
  EXPECT_THAT(ctl->err, HasSubstr("put the file back to re-execute"));
  EXPECT_THAT(ctl->err, Not(HasSubstr("reload first"))) << ctl->err;

  h.RewriteConfig({CellSpec{.name = "a"}}, "");
  Result<ProcessResult> good = h.Ctl({"reexec"});
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(good->exit_code(), kExitOk) << good->Describe() << h.Log();
  EXPECT_EQ(h.Cell("a")["pid"], worker);
  EXPECT_EQ(h.Status()["supervisor"]["reexec"]["count"], 1);
}

// An adaptive cell's controller travels in the state (version 4): after the re-exec its limit,
// phase, base and changes (each change's size and cause) and its changes by cause are what they
// were, instead of the floor and zeros. Before any request the cell has no base, and no age of
// one either.
TEST(Reexec, AnAdaptiveCellKeepsItsLimitAndItsChangesByCause) {
  Harness h(TestOptions({CellSpec{.name = "a",
                                  .max_concurrent = 16,
                                  .max_queue = 64,
                                  .extra_toml = "concurrency = \"adaptive\"\n"}}));
  ASSERT_STARTED(h);
  const pid_t worker = h.Cell("a")["pid"].get<pid_t>();
  nlohmann::json fresh = h.Cell("a")["concurrency"];
  EXPECT_TRUE(fresh["base_us"].is_null()) << fresh.dump();
  EXPECT_TRUE(fresh["base_age_ms"].is_null()) << fresh.dump();

  // Four callers of 20 ms requests: the service time holds at its minimum, so slow start
  // doubles the limit from 1 to 2 and 4. The load stops before the status is read: no window
  // closes between the two reads.
  Tally tally;
  std::atomic<bool> stop{false};
  std::vector<std::thread> callers;
  callers.reserve(4);
  for (int i = 0; i < 4; ++i) {
    callers.emplace_back([&] {
      while (!stop.load()) {
        Result<ipc::Client::Reply> reply = h.Call("a", "sleep 20");
        if (IsReply(reply, ipc::ReplyStatus::kOk, ipc::Reason::kNone)) {
          ++tally.ok;
        } else {
          Wrong(tally, Describe(reply));
        }
      }
    });
  }
  const bool grew = h.WaitForCell("a", [](const nlohmann::json& c) {
    return c["concurrency"]["changes_by_cause"]["slow_start"].get<uint64_t>() >= 2;
  });
  stop = true;
  for (std::thread& t : callers) t.join();
  ASSERT_TRUE(grew) << h.Cell("a")["concurrency"].dump();
  EXPECT_EQ(tally.wrong.load(), 0u) << ::testing::PrintToString(tally.first_wrong);
  const nlohmann::json before = h.Cell("a")["concurrency"];
  ASSERT_GT(before["limit"].get<uint32_t>(), 1u) << before.dump();
  ASSERT_TRUE(before["base_us"].is_number()) << before.dump();

  Result<ProcessResult> ctl = h.Ctl({"reexec"});
  ASSERT_TRUE(ctl.ok()) << ctl.status().message();
  ASSERT_EQ(ctl->exit_code(), kExitOk) << ctl->Describe() << h.Log();
  const nlohmann::json cell = h.Cell("a");
  EXPECT_EQ(cell["pid"], worker);
  const nlohmann::json& after = cell["concurrency"];
  for (const char* key : {"limit", "floor", "ceiling", "phase", "base_us", "changes_by_cause"}) {
    EXPECT_EQ(after[key], before[key]) << key << ": " << before.dump() << " -> " << after.dump();
  }
  EXPECT_TRUE(after["base_age_ms"].is_number()) << after.dump();
  ASSERT_EQ(after["changes"].size(), before["changes"].size()) << after.dump();
  for (size_t i = 0; i < before["changes"].size(); ++i) {
    for (const char* key : {"from", "to", "cause"}) {
      EXPECT_EQ(after["changes"][i][key], before["changes"][i][key]) << i << " " << key;
    }
  }
  EXPECT_OK_REPLY(h.Call("a", "echo after"), "after");
}

// An upgrade that repoints a symlink (current -> a, then current -> b): bulkheadd started through
// the symlink's path re-executes that path, so the new target runs, and `bulkheadctl reexec`,
// status and the log name it. Before, the path was kept resolved and a re-exec ran a again.
TEST(Reexec, StartedThroughASymlinkItReexecutesWhatTheSymlinkNamesNow) {
  TempDir dir;
  for (const char* version : {"a", "b"}) {
    std::filesystem::create_directory(dir.Join(version));
    std::filesystem::copy_file(BulkheaddPath(), dir.Join(version) + "/bulkheadd");
  }
  std::filesystem::create_directory_symlink("a", dir.Join("current"));
  HarnessOptions options = TestOptions({CellSpec{.name = "a"}});
  options.binary = dir.Join("current") + "/bulkheadd";
  Harness h(options);
  ASSERT_STARTED(h);
  const pid_t worker = h.Cell("a")["pid"].get<pid_t>();
  nlohmann::json reexec = h.Status()["supervisor"]["reexec"];
  EXPECT_EQ(reexec["binary"], options.binary) << reexec.dump();
  EXPECT_EQ(reexec["binary_file"], dir.Join("a") + "/bulkheadd") << reexec.dump();

  // The upgrade: the symlink replaced by rename, as `ln -sfn` does.
  std::filesystem::create_directory_symlink("b", dir.Join("current.next"));
  std::filesystem::rename(dir.Join("current.next"), dir.Join("current"));
  EXPECT_EQ(h.Status()["supervisor"]["reexec"]["binary_replaced"], true);
  Result<ProcessResult> ctl = h.Ctl({"reexec"});
  ASSERT_TRUE(ctl.ok()) << ctl.status().message();
  ASSERT_EQ(ctl->exit_code(), kExitOk) << ctl->Describe() << h.Log();
  EXPECT_THAT(ctl->out, HasSubstr("re-exec 1, binary " + options.binary + " -> " + dir.Join("b") +
                                  "/bulkheadd"))
      << ctl->out;
  reexec = h.Status()["supervisor"]["reexec"];
  EXPECT_EQ(reexec["binary"], options.binary) << "the next re-exec follows the symlink again";
  EXPECT_EQ(reexec["binary_file"], dir.Join("b") + "/bulkheadd") << reexec.dump();
  EXPECT_THAT(h.Log(), HasSubstr(", binary " + dir.Join("b") + "/bulkheadd): "));
  EXPECT_EQ(h.Cell("a")["pid"], worker);
  EXPECT_OK_REPLY(h.Call("a", "echo upgraded"), "upgraded");
}

// A package upgrade replaces the binary by rename (dpkg writes the new file beside it and renames
// it over the path): status says so (reexec.binary_replaced, and a line of `bulkheadctl status`)
// until a re-exec runs the new file.
TEST(Reexec, ABinaryReplacedOnDiskIsSaidUntilAReexecRunsIt) {
  TempDir dir;
  const std::string binary = dir.Join("bulkheadd");
  std::filesystem::copy_file(BulkheaddPath(), binary);
  HarnessOptions options = TestOptions({CellSpec{.name = "a"}});
  options.binary = binary;
  Harness h(options);
  ASSERT_STARTED(h);
  const std::string line =
      "binary: " + binary + " replaced on disk since start; `bulkheadctl reexec` runs it\n";
  nlohmann::json reexec = h.Status()["supervisor"]["reexec"];
  EXPECT_EQ(reexec["binary_replaced"], false) << reexec.dump();
  Result<ProcessResult> table = h.Ctl({"status"});
  ASSERT_TRUE(table.ok()) << table.status().message();
  EXPECT_THAT(table->out, Not(HasSubstr("replaced on disk"))) << table->out;

  std::filesystem::copy_file(BulkheaddPath(), binary + ".dpkg-new");
  std::filesystem::rename(binary + ".dpkg-new", binary);
  reexec = h.Status()["supervisor"]["reexec"];
  EXPECT_EQ(reexec["binary_replaced"], true) << reexec.dump();
  EXPECT_EQ(reexec["binary_file"], binary) << "the file it runs, as named when it started";
  table = h.Ctl({"status"});
  ASSERT_TRUE(table.ok()) << table.status().message();
  EXPECT_THAT(table->out, HasSubstr("\n" + line)) << table->out;

  Result<ProcessResult> ctl = h.Ctl({"reexec"});
  ASSERT_TRUE(ctl.ok()) << ctl.status().message();
  ASSERT_EQ(ctl->exit_code(), kExitOk) << ctl->Describe() << h.Log();
  reexec = h.Status()["supervisor"]["reexec"];
  EXPECT_EQ(reexec["count"], 1) << reexec.dump();
  EXPECT_EQ(reexec["binary_replaced"], false) << reexec.dump();
  table = h.Ctl({"status"});
  ASSERT_TRUE(table.ok()) << table.status().message();
  EXPECT_THAT(table->out, Not(HasSubstr("replaced on disk"))) << table->out;
}

}  // namespace
}  // namespace bulkhead::e2e
