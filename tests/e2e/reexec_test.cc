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

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/exit_status.h"
#include "tests/e2e/e2e_test.h"

namespace bulkhead::e2e {
namespace {

using ::testing::HasSubstr;

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
void Load(Harness& h, std::atomic<bool>& stop, int client, Tally& tally) {
  for (uint64_t i = 0; !stop.load(); ++i) {
    const bool sleeper = i % 4 == 0;
    const std::string text = "c" + std::to_string(client) + "-" + std::to_string(i);
    Result<ipc::Client::Reply> reply = h.Call("a", sleeper ? "sleep 2" : "echo " + text);
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

uint64_t Counter(const nlohmann::json& cell, const char* name) {
  return cell[name].is_number() ? cell[name].get<uint64_t>() : UINT64_MAX;
}

TEST(Reexec, UnderLoadLosesNothingKeepsEveryPidAndTheCountersContinue) {
  Harness h(TestOptions({CellSpec{.name = "a", .max_concurrent = 4, .max_queue = 64}}));
  ASSERT_STARTED(h);
  const pid_t supervisor = h.pid();
  const pid_t worker = h.Cell("a")["pid"].get<pid_t>();

  Tally tally;
  std::atomic<bool> stop{false};
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] { Load(h, stop, i, tally); });
  }
  ASSERT_TRUE(WaitFor([&] { return tally.ok.load() >= 20; }, std::chrono::seconds(10)));
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
  stop = true;
  for (std::thread& t : clients) t.join();

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
  for (int client = 0; client < kClients; ++client) {
    clients.emplace_back([&, client] {
      Result<ipc::Client> conn = h.Connect("a");
      if (!conn.ok()) {
        ++tally.wrong;
        return;
      }
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
        ++tally.wrong;
        std::lock_guard lock(tally.mu);
        tally.first_wrong.push_back(text + ": " + Describe(reply));
        return;
      }
    });
  }
  ASSERT_TRUE(WaitFor([&] { return tally.ok.load() >= 20; }, std::chrono::seconds(10)));
  for (int i = 1; i <= kReexecs; ++i) {
    Result<ProcessResult> ctl = h.Ctl({"reexec"});
    ASSERT_TRUE(ctl.ok()) << ctl.status().message();
    ASSERT_EQ(ctl->exit_code(), kExitOk) << ctl->Describe() << h.Log();
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

TEST(Reexec, Sigusr2ReexecutesAsTheCommandDoes) {
  Harness h(TestOptions({CellSpec{.name = "a"}}));
  ASSERT_STARTED(h);
  const pid_t worker = h.Cell("a")["pid"].get<pid_t>();
  ASSERT_EQ(::kill(h.pid(), SIGUSR2), 0);
  EXPECT_TRUE(WaitFor([&] {
    const nlohmann::json status = h.Status();
    return status["supervisor"]["reexec"]["count"] == 1;
  })) << h.Log();
  EXPECT_EQ(h.Cell("a")["pid"], worker);
  EXPECT_OK_REPLY(h.Call("a", "echo still here"), "still here");
}

// docs/reexec.md, failure 1: a binary that does not read our state version (a newer bulkhead
// that dropped it, a build too old to know the flag, not bulkheadd at all) is refused before
// anything changes; the binary put back, the re-exec goes ahead. The replaced file also shows
// that the binary on disk is the one executed, not the deleted one still running.
TEST(Reexec, ABinaryThatCannotReadTheStateIsRefusedAndNothingChanges) {
  TempDir bin;
  const std::string binary = bin.Join("bulkheadd");
  std::filesystem::copy_file(BulkheaddPath(), binary);
  HarnessOptions options = TestOptions({CellSpec{.name = "a"}});
  options.binary = binary;
  Harness h(std::move(options));
  ASSERT_STARTED(h);
  const pid_t worker = h.Cell("a")["pid"].get<pid_t>();

  auto replace = [&](const std::string& script) {
    const std::string next = bin.Join("bulkheadd.next");
    std::ofstream(next) << script;
    ::chmod(next.c_str(), 0755);
    std::filesystem::rename(next, binary);
  };
  replace("#!/bin/sh\necho 9\n");
  Result<ProcessResult> newer = h.Ctl({"reexec"});
  ASSERT_TRUE(newer.ok());
  EXPECT_EQ(newer->exit_code(), kExitFailure) << newer->Describe();
  EXPECT_THAT(newer->err, HasSubstr("reads 9, this bulkheadd writes 1")) << newer->err;

  replace("#!/bin/sh\necho \"unknown option\" >&2\nexit 2\n");
  Result<ProcessResult> older = h.Ctl({"reexec"});
  ASSERT_TRUE(older.ok());
  EXPECT_EQ(older->exit_code(), kExitFailure) << older->Describe();
  EXPECT_THAT(older->err, HasSubstr("exit 2")) << older->err;

  const nlohmann::json status = h.Status();
  EXPECT_EQ(status["supervisor"]["reexec"]["count"], 0);
  EXPECT_EQ(status["supervisor"]["reexec"]["phase"], "idle");
  EXPECT_EQ(h.Cell("a")["pid"], worker);
  EXPECT_OK_REPLY(h.Call("a", "echo still here"), "still here");

  std::filesystem::remove(binary);
  std::filesystem::copy_file(BulkheaddPath(), binary);
  Result<ProcessResult> good = h.Ctl({"reexec"});
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(good->exit_code(), kExitOk) << good->Describe() << h.Log();
  EXPECT_EQ(h.Cell("a")["pid"], worker);
  EXPECT_OK_REPLY(h.Call("a", "echo after"), "after");
}

// A re-exec needs every cell running or stopped: one in backoff is refused with the reason, and
// nothing changes.
TEST(Reexec, ACellInBackoffRefusesTheReexecAndSaysWhy) {
  Harness h(TestOptions(
      {CellSpec{.name = "a"},
       CellSpec{
           .name = "b", .command = {"/bin/false"}, .restart_delay = "1h", .wait_running = false}}));
  ASSERT_STARTED(h);
  ASSERT_TRUE(h.WaitForCell("b", [](const nlohmann::json& c) { return c["state"] == "backoff"; }));
  Result<ProcessResult> ctl = h.Ctl({"reexec"});
  ASSERT_TRUE(ctl.ok());
  EXPECT_EQ(ctl->exit_code(), kExitFailure) << ctl->Describe();
  EXPECT_THAT(ctl->err, HasSubstr("cells.b: it is backoff")) << ctl->err;
  EXPECT_EQ(h.Status()["supervisor"]["reexec"]["count"], 0);
  EXPECT_OK_REPLY(h.Call("a", "echo still here"), "still here");
}

}  // namespace
}  // namespace bulkhead::e2e
