// SPDX-License-Identifier: MIT
// sd_notify(3) on NOTIFY_SOCKET (issue 4): with ready = "notify" requests wait in the queue until
// the worker sends READY=1, STATUS= text shows in the status, a datagram from outside the cell is
// ignored; with a watchdog, a worker that keeps sending WATCHDOG=1 is left alone and one that
// stops is restarted as stalled.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "tests/lifecycle/lifecycle_fixture.h"

namespace bulkhead::lifecycle_test {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// Sends `text` to the datagram socket at `path` from the test process (not part of any cell).
void SendDatagram(const std::string& path, std::string_view text) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  ASSERT_LT(path.size(), sizeof address.sun_path);
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  ssize_t sent = ::sendto(fd, text.data(), text.size(), 0,
                          reinterpret_cast<const sockaddr*>(&address), sizeof address);
  int error = errno;
  ::close(fd);
  ASSERT_EQ(sent, static_cast<ssize_t>(text.size())) << path << ": " << std::strerror(error);
}

// Cell `name` with ready = "notify": its worker sends READY=1 `ready_after_ms` after its start, and
// requests wait for it in the queue (4 places, 20 s). Start does not wait for it to run.
CellSpec NotifyCell(const std::string& name, const std::string& ready_after_ms) {
  return CellSpec{.name = name,
                  .command = {e2e::TestWorkerPath(), "--notify-ready-after-ms", ready_after_ms},
                  .max_concurrent = 1,
                  .max_queue = 4,
                  .queue_timeout = "20s",
                  .extra_toml = "ready = \"notify\"\n",
                  .wait_running = false};
}

// Waits until the cell's worker is spawned but has not sent READY=1 yet ("starting").
::testing::AssertionResult SpawnedNotReady(Harness& h, const std::string& cell) {
  if (h.WaitForCell(cell, [](const nlohmann::json& c) {
        return c["state"] == "starting" && c["pid"].is_number_integer();
      })) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << h.Status().dump();
}

TEST(Notify, RequestsWaitForReadyThenStatusTextShows) {
  e2e::TempDir flags;
  const std::string ready = flags.Join("ready");
  CellSpec cell = NotifyCell("late", "0");
  cell.command = {e2e::TestWorkerPath(), "--notify-ready-when-file", ready};
  Harness h(TestOptions({cell}));
  ASSERT_STARTED(h);
  Tally tally;

  // Spawned, not ready (the worker sends READY=1 once the test creates `ready`): "starting", and
  // a request waits in the queue.
  ASSERT_TRUE(SpawnedNotReady(h, "late"));
  const int pid = WorkerPid(h, "late");
  Result<ipc::Client> early = SendThenWaitFor(h, "late", 1, "echo early", "queued", 1);
  ASSERT_TRUE(early.ok()) << early.status().message();
  nlohmann::json c = h.Cell("late");
  EXPECT_EQ(c["state"], "starting") << c.dump();
  EXPECT_EQ(c["running"], 0) << c.dump();

  // READY=1: the queued request is served by the same worker.
  CreateFlag(ready);
  Result<ipc::Client::Reply> served = early->Receive();
  tally.Count(served);
  EXPECT_OK_REPLY(served, "early");
  c = h.Cell("late");
  EXPECT_EQ(c["state"], "running") << c.dump();
  EXPECT_EQ(c["pid"], pid) << c.dump();
  EXPECT_EQ(CellLogEvents(h.Log(), "late", "worker started").size(), 1u) << h.Log();
  EXPECT_EQ(CellLogEvents(h.Log(), "late", "worker ready (READY=1)").size(), 1u) << h.Log();

  // STATUS= shows in the status, and the latest one wins.
  for (const std::string text : {"warming up", "serving"}) {
    EXPECT_TRUE(Served(h, "late", "notify STATUS=" + text, "notified", tally));
    EXPECT_TRUE(h.WaitForCell("late", [&](const nlohmann::json& c) {
      return c["status_text"] == text;
    })) << h.Cell("late").dump();
  }

  // Only the cell's own processes speak for it.
  SendDatagram(h.runtime_dir() + "/late.notify", "STATUS=spoofed");
  ASSERT_TRUE(e2e::WaitFor([&] {
    return !CellLogEvents(h.Log(), "late", "outside the cell").empty();
  })) << h.Log();
  EXPECT_EQ(h.Cell("late")["status_text"], "serving");

  ExpectCountersMatch(h, "late", tally);
}

// The watchdog's timing (pings every half period keep a worker, a missed period kills it, a ping
// read after a pause voids the miss) is WorkerRunnerTest's, in simulated time; here, a real worker
// pinging through the SDK's NOTIFY_SOCKET and what a silent one comes to.
TEST(Watchdog, PingingWorkerStaysAndSilentOneIsRestartedAsStalled) {
  Harness h(TestOptions({CellSpec{.name = "dog",
                                  .command = {e2e::TestWorkerPath(), "--watchdog"},
                                  .max_concurrent = 1,
                                  .restart_delay = "100ms",
                                  .extra_toml = "watchdog = \"1s\"\n"}}));
  ASSERT_STARTED(h);
  Tally tally;
  const int pid = WorkerPid(h, "dog");

  EXPECT_TRUE(Served(h, "dog", "env WATCHDOG_USEC", "1000000", tally));
  EXPECT_TRUE(Served(h, "dog", "pid", std::to_string(pid), tally));

  // Silence: the worker is killed as stalled and started again.
  EXPECT_TRUE(Served(h, "dog", "stop-watchdog", "watchdog stopped", tally));
  ASSERT_TRUE(NewWorkerRuns(h, "dog", pid));
  nlohmann::json c = h.Cell("dog");
  ASSERT_TRUE(c["last_exit"].is_string()) << c.dump();
  EXPECT_THAT(c["last_exit"].get<std::string>(),
              StartsWith("watchdog timeout: no WATCHDOG=1 within 1000 ms"));
  EXPECT_THAT(c["last_exit"].get<std::string>(), HasSubstr("(signal 9)"));
  EXPECT_EQ(c["restarts"], 1) << c.dump();
  EXPECT_EQ(c["restarts_by_reason"]["watchdog"], 1) << c.dump();
  EXPECT_FALSE(bulkhead::testing::ProcessExists(pid));

  // The new worker pings again and serves.
  EXPECT_TRUE(Served(h, "dog", "echo good dog", "good dog", tally));
  EXPECT_EQ(h.Cell("dog")["pid"], c["pid"]);
  ExpectCountersMatch(h, "dog", tally);
}

TEST(Notify, QueuedRequestsOutliveWorkersThatDieBeforeReady) {
  e2e::TempDir flags;
  const std::string flag = flags.Join("serve");
  Harness h(TestOptions(
      {CellSpec{.name = "shaky",
                .command = WorkerWhenFlagExists(flag, {"--notify-ready-after-ms", "300"}),
                .max_concurrent = 1,
                .max_queue = 4,
                .queue_timeout = "20s",
                .restart_delay = "100ms",
                .extra_toml = "ready = \"notify\"\nstart_limit_interval = \"0s\"\n",
                .wait_running = false}}));
  ASSERT_STARTED(h);
  Tally tally;

  // Workers exit 1 before READY=1, again and again; the request waits through all of them.
  Result<ipc::Client> waiting = SendOn(h, "shaky", 1, "pid");
  ASSERT_TRUE(waiting.ok()) << waiting.status().message();
  ASSERT_TRUE(h.WaitForCell("shaky", [](const nlohmann::json& c) {
    return c["starts"] >= 3 && c["queued"] == 1;
  })) << h.Status().dump();
  nlohmann::json c = h.Cell("shaky");
  EXPECT_EQ(c["last_exit"], "exit 1") << c.dump();
  EXPECT_EQ(c["failed"], 0) << c.dump();

  CreateFlag(flag);
  Result<ipc::Client::Reply> served = waiting->Receive();
  tally.Count(served);
  ASSERT_TRUE(served.ok()) << served.status().message();
  c = h.Cell("shaky");
  EXPECT_EQ(c["state"], "running") << c.dump();
  EXPECT_OK_REPLY(served, std::to_string(c["pid"].get<int>()));
  EXPECT_EQ(CellLogEvents(h.Log(), "shaky", "worker ready (READY=1)").size(), 1u) << h.Log();
  ExpectCountersMatch(h, "shaky", tally);
}

TEST(Notify, StopBeforeReadyRefusesWhatWaits) {
  Harness h(TestOptions({NotifyCell("never", "600000")}));
  ASSERT_STARTED(h);
  Tally tally;
  ASSERT_TRUE(SpawnedNotReady(h, "never"));
  const int pid = WorkerPid(h, "never");
  Result<ipc::Client> waiting = SendThenWaitFor(h, "never", 1, "echo never", "queued", 1);
  ASSERT_TRUE(waiting.ok()) << waiting.status().message();

  nlohmann::json answer = Control(h, "stop", "never");
  EXPECT_EQ(answer["result"], "ok") << answer.dump();
  Result<ipc::Client::Reply> refused = waiting->Receive();
  tally.Count(refused);
  EXPECT_TRUE(IsReply(refused, ReplyStatus::kRejected, Reason::kUnavailable)) << Describe(refused);
  ASSERT_TRUE(CellShows(h, "never", "state", "stopped"));
  EXPECT_EQ(h.Cell("never")["last_exit"], "signal 15");
  EXPECT_FALSE(bulkhead::testing::ProcessExists(pid));
  ExpectCountersMatch(h, "never", tally);
}

}  // namespace
}  // namespace bulkhead::lifecycle_test
