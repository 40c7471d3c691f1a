// SPDX-License-Identifier: MIT
// bulkheadd under a service manager (sd_notify(3)): with $NOTIFY_SOCKET pointing at a datagram
// socket this test owns, READY=1 comes once every cell has left `starting` and not before,
// STATUS= summarises the cells, STOPPING=1 comes on SIGTERM, and no worker sees the supervisor's
// NOTIFY_SOCKET. A NOTIFY_SOCKET nobody listens on breaks nothing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "tests/e2e/e2e_test.h"
#include "tests/helpers/notify_listener.h"

namespace bulkhead::e2e {
namespace {

using ::testing::Contains;
using ::testing::Not;
using testing::NotifyListener;

// Index of the first message equal to `message`, or -1.
int IndexOf(const std::vector<std::string>& messages, const std::string& message) {
  auto it = std::find(messages.begin(), messages.end(), message);
  return it == messages.end() ? -1 : static_cast<int>(it - messages.begin());
}

TEST(ServiceManager, ReadyOnceEveryCellLeftStartingThenStatusAndStopping) {
  TempDir dir;
  Result<NotifyListener> manager = NotifyListener::Bind(dir.Join("notify"));
  ASSERT_TRUE(manager.ok()) << manager.status().message();
  const std::string gate = dir.Join("gate");
  // "late" (ready = "notify") sends READY=1 only once the test creates the gate file: until
  // then it stays in `starting`, and so must bulkheadd's own READY=1 wait.
  HarnessOptions options = TestOptions({
      CellSpec{.name = "early"},
      CellSpec{.name = "late",
               .command = {"/bin/sh", "-c",
                           "while [ ! -e \"$1\" ]; do sleep 0.02; done; "
                           "exec \"$2\" --notify-ready-after-ms 0",
                           "sh", gate, TestWorkerPath()},
               .extra_toml = "ready = \"notify\"\n",
               .wait_running = false},
  });
  options.env = {"NOTIFY_SOCKET=" + manager->path()};
  Harness h(std::move(options));
  ASSERT_STARTED(h);

  ASSERT_TRUE(h.WaitForCell("late", [](const nlohmann::json& c) {
    return c["state"] == "starting" && !c["pid"].is_null();
  }));
  // What bulkheadd sent before this status answer is in the socket's queue by now.
  manager->Drain();
  EXPECT_THAT(manager->messages(), Not(Contains("READY=1")));
  EXPECT_TRUE(manager->WaitFor([](const std::string& m) {
    return m == "STATUS=2 cells: 1 starting, 1 running";
  })) << ::testing::PrintToString(manager->messages());

  { std::ofstream(gate) << "go\n"; }
  ASSERT_TRUE(manager->WaitForField("READY=1"))
      << ::testing::PrintToString(manager->messages()) << h.Log();
  EXPECT_TRUE(
      h.WaitForCell("late", [](const nlohmann::json& c) { return c["state"] == "running"; }));
  const std::vector<std::string>& messages = manager->messages();
  int all_running = IndexOf(messages, "STATUS=2 cells: 2 running");
  EXPECT_GE(all_running, 0) << ::testing::PrintToString(messages);
  EXPECT_LT(all_running, IndexOf(messages, "READY=1")) << ::testing::PrintToString(messages);

  // A worker sees its cell's NOTIFY_SOCKET, never the supervisor's.
  Result<ipc::Client::Reply> env = h.Call("early", "env NOTIFY_SOCKET");
  EXPECT_OK_REPLY(env, h.runtime_dir() + "/early.notify");

  Result<int> stopped = h.Stop();
  ASSERT_TRUE(stopped.ok()) << stopped.status().message();
  ASSERT_TRUE(manager->WaitForField("STOPPING=1")) << ::testing::PrintToString(manager->messages());
  EXPECT_GT(IndexOf(manager->messages(), "STOPPING=1"), IndexOf(manager->messages(), "READY=1"));
  EXPECT_EQ(std::count(manager->messages().begin(), manager->messages().end(), "READY=1"), 1);
}

TEST(ServiceManager, ACellThatCannotStartDoesNotHoldBackReady) {
  TempDir dir;
  Result<NotifyListener> manager = NotifyListener::Bind(dir.Join("notify"));
  ASSERT_TRUE(manager.ok()) << manager.status().message();
  HarnessOptions options = TestOptions({
      CellSpec{.name = "good"},
      CellSpec{.name = "broken", .command = {dir.Join("no-such-worker")}, .wait_running = false},
  });
  options.env = {"NOTIFY_SOCKET=" + manager->path()};
  Harness h(std::move(options));
  ASSERT_STARTED(h);

  // `broken` failed its first start: backoff (or failed, once the start limit is reached).
  ASSERT_TRUE(manager->WaitForField("READY=1"))
      << ::testing::PrintToString(manager->messages()) << h.Log();
  EXPECT_TRUE(manager->WaitFor([](const std::string& m) {
    return m == "STATUS=2 cells: 1 running, 1 backoff" ||
           m == "STATUS=2 cells: 1 running, 1 failed";
  })) << ::testing::PrintToString(manager->messages());
}

// Issues 11 (item 7) and 13: a ready = "notify" worker that never sends READY=1 used to hold its
// cell in `starting`, and so bulkheadd's own READY=1, forever. start_timeout stops it, counts a
// failed start, and status says why the cell refuses.
TEST(ServiceManager, AWorkerThatNeverSendsReadyIsStoppedAtStartTimeoutAndReadyIsSent) {
  TempDir dir;
  Result<NotifyListener> manager = NotifyListener::Bind(dir.Join("notify"));
  ASSERT_TRUE(manager.ok()) << manager.status().message();
  HarnessOptions options = TestOptions({
      CellSpec{.name = "good"},
      // The test worker sends no READY=1 without --notify-ready-after-ms.
      CellSpec{.name = "mute",
               .max_queue = 4,
               .queue_timeout = "60s",
               .extra_toml = "ready = \"notify\"\n"
                             // Wall-clock time: each start must stay long enough for
                             // the test's status polls to see it `starting` on a loaded
                             // machine (400 ms, twice, could be missed).
                             "start_timeout = \"2s\"\n"
                             "start_limit_burst = 2\n"
                             "start_limit_interval = \"60s\"\n"
                             "start_limit_action = \"fail\"\n",
               .wait_running = false},
  });
  options.env = {"NOTIFY_SOCKET=" + manager->path()};
  Harness h(std::move(options));
  ASSERT_STARTED(h);

  std::string starting_detail;
  ASSERT_TRUE(h.WaitForCell("mute", [&starting_detail](const nlohmann::json& c) {
    if (c["state"] != "starting" || c["pid"].is_null()) return false;
    starting_detail = c["state_detail"].get<std::string>();
    return true;
  })) << h.Status().dump();
  EXPECT_THAT(starting_detail, ::testing::MatchesRegex(
                                   "starting for [0-9.]+ s, waiting for READY=1 \\(start_timeout "
                                   "2\\.0 s\\); requests queue"));
  EXPECT_EQ(h.Cell("mute")["policy"]["start_timeout_ms"], 2000) << h.Cell("mute").dump();
  // Queued (starting, then a short backoff), then refused when the cell gives up.
  Result<ipc::Client::Reply> refused = h.Call("mute", "echo never", std::chrono::seconds(30));
  EXPECT_TRUE(IsReply(refused, ipc::ReplyStatus::kRejected, ipc::Reason::kUnavailable))
      << Describe(refused);

  ASSERT_TRUE(h.WaitForCell(
      "mute", [](const nlohmann::json& c) { return c["state"] == "failed"; },
      std::chrono::seconds(20)))
      << h.Status().dump() << h.Log();
  const nlohmann::json c = h.Cell("mute");
  EXPECT_EQ(c["starts"], 2) << c.dump();
  EXPECT_EQ(c["restarts_by_reason"]["start_failed"], 1) << c.dump();
  EXPECT_THAT(c["last_exit"].get<std::string>(),
              ::testing::StartsWith("start timeout: no READY=1 within "))
      << c.dump();
  EXPECT_THAT(c["state_detail"].get<std::string>(),
              ::testing::StartsWith("failed: crash-looping and start_limit_action = \"fail\" "
                                    "(gave up: 2 starts in 60s, last start timeout: no READY=1 "
                                    "within "))
      << c.dump();
  EXPECT_THAT(h.Log(), ::testing::HasSubstr("start timeout: no READY=1 within "));
  EXPECT_EQ(h.Cell("good")["state_detail"], nullptr);

  // bulkheadd told the service manager it is ready once `mute` left `starting`.
  ASSERT_TRUE(manager->WaitForField("READY=1"))
      << ::testing::PrintToString(manager->messages()) << h.Log();

  // bulkheadctl shows the why under the table and in the long form.
  Result<ProcessResult> table = h.Ctl({"status"});
  ASSERT_TRUE(table.ok()) << table.status().message();
  EXPECT_THAT(table->out, ::testing::HasSubstr("\nmute: failed: crash-looping and "
                                               "start_limit_action = \"fail\" (gave up: "));
  Result<ProcessResult> long_form = h.Ctl({"status", "mute"});
  ASSERT_TRUE(long_form.ok()) << long_form.status().message();
  EXPECT_THAT(long_form->out,
              ::testing::HasSubstr("state detail:      failed: crash-looping and start_limit"));
}

TEST(ServiceManager, ANotifySocketNobodyListensOnBreaksNothing) {
  TempDir dir;
  HarnessOptions options = TestOptions({CellSpec{.name = "a"}});
  options.env = {"NOTIFY_SOCKET=" + dir.Join("nobody-listens")};
  Harness h(std::move(options));
  ASSERT_STARTED(h);
  EXPECT_OK_REPLY(h.Call("a", "echo still serving"), "still serving");
  Result<int> stopped = h.Stop();
  ASSERT_TRUE(stopped.ok()) << stopped.status().message();
  EXPECT_TRUE(WIFEXITED(*stopped) && WEXITSTATUS(*stopped) == 0) << h.Log();
  EXPECT_THAT(h.Log(), ::testing::HasSubstr("cannot notify the service manager"));
}

}  // namespace
}  // namespace bulkhead::e2e
