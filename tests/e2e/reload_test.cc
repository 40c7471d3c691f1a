// SPDX-License-Identifier: MIT
// Live reload (`bulkheadctl reload`, SIGHUP) with real processes: every kind of change applied in
// one reload with untouched cells keeping their worker and connections; queued requests kept while
// the caps change and while a cell restarts for a new environment; a refused file (invalid, or a
// [supervisor] key that needs a restart) changing nothing; SIGHUP applying and refusing; a removed
// cell draining and its socket file going away; a new cell answering.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "base/exit_status.h"
#include "tests/e2e/e2e_test.h"

namespace bulkhead::e2e {
namespace {

using ipc::Reason;
using ipc::ReplyStatus;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

bool FileExists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

pid_t PidOf(Harness& h, const std::string& cell) {
  nlohmann::json c = h.Cell(cell);
  return c.is_object() && c["pid"].is_number() ? c["pid"].get<pid_t>() : 0;
}

// `bulkheadctl reload`, which must succeed; returns its stdout.
std::string ReloadOk(Harness& h) {
  Result<ProcessResult> run = h.Ctl({"reload"});
  EXPECT_TRUE(run.ok()) << run.status().message();
  if (!run.ok()) return "";
  EXPECT_EQ(run->exit_code(), kExitOk) << run->Describe() << "\nlog:\n" << h.Log();
  return run->out;
}

// Sends `payload` on a new connection of `cell` without waiting for the reply; nullopt (and a
// test failure) when that fails.
std::optional<ipc::Client> SendOnNewConnection(Harness& h, const std::string& cell,
                                               const std::string& payload) {
  Result<ipc::Client> client = h.Connect(cell);
  EXPECT_TRUE(client.ok()) << client.status().message();
  if (!client.ok() || !client->Send(1, payload).ok()) return std::nullopt;
  return std::move(client).value();
}

TEST(Reload, EachKindOfChangeTouchesOnlyItsCell) {
  const CellSpec same{.name = "same", .extra_toml = kQuickStop};
  const CellSpec limits{.name = "limits", .max_queue = 1, .extra_toml = kQuickStop};
  const CellSpec worker{.name = "worker", .extra_toml = kQuickStop};
  const CellSpec gone{.name = "gone", .extra_toml = kQuickStop};
  Harness h(TestOptions({same, limits, worker, gone}));
  ASSERT_STARTED(h);

  // A client of the untouched cell, connected across the reload.
  Result<ipc::Client> kept = h.Connect("same");
  ASSERT_TRUE(kept.ok()) << kept.status().message();
  ASSERT_TRUE(kept->Send(1, "echo before").ok());
  Result<ipc::Client::Reply> before = kept->Receive();
  ASSERT_TRUE(before.ok() && before->payload == "before") << Describe(before);
  const nlohmann::json same_before = h.Cell("same");
  const pid_t limits_pid = PidOf(h, "limits");
  const pid_t worker_pid = PidOf(h, "worker");

  CellSpec limits2 = limits;
  limits2.max_concurrent = 3;
  limits2.max_queue = 5;
  limits2.extra_toml += "request_timeout = \"20s\"\nmemory_max = \"256M\"\npids_max = 100\n";
  const std::string ready_file = h.dir() + "/worker.ready";
  CellSpec worker2 = worker;
  worker2.command = {TestWorkerPath(), "--ready-file", ready_file};
  const CellSpec added{.name = "added", .extra_toml = kQuickStop};
  h.RewriteConfig({same, limits2, worker2, added});

  EXPECT_EQ(ReloadOk(h),
            "reloaded: same unchanged, limits updated (max_concurrent, max_queue, "
            "request_timeout, memory_max, pids_max changed), worker restarted (command changed), "
            "added added, gone removed\n");

  // The untouched cell: same worker, same client connection, same worker connections.
  nlohmann::json same_after = h.Cell("same");
  EXPECT_EQ(same_after["pid"], same_before["pid"]);
  EXPECT_EQ(same_after["starts"], same_before["starts"]);
  EXPECT_EQ(same_after["worker_connections"], same_before["worker_connections"]);
  EXPECT_EQ(same_after["clients"], 1);
  ASSERT_TRUE(kept->Send(2, "echo after").ok());
  Result<ipc::Client::Reply> after = kept->Receive();
  EXPECT_TRUE(after.ok() && after->payload == "after") << Describe(after);

  // Live keys: same worker, new figures.
  nlohmann::json l = h.Cell("limits");
  EXPECT_EQ(l["pid"], limits_pid);
  EXPECT_EQ(l["max_concurrent"], 3);
  EXPECT_EQ(l["max_queue"], 5);
  EXPECT_EQ(l["policy"]["request_timeout_ms"], 20000);
  EXPECT_EQ(l["limits"]["memory_max"], 256u * 1024 * 1024);
  EXPECT_EQ(l["limits"]["pids_max"], 100);

  // The changed command runs in a new worker.
  ASSERT_TRUE(h.WaitForCell("worker", [&](const nlohmann::json& c) {
    return c["state"] == "running" && c["pid"].is_number() && c["pid"] != worker_pid;
  })) << h.Status().dump();
  ASSERT_TRUE(WaitFor([&] { return FileExists(ready_file); }));
  EXPECT_EQ(testing::ReadFile(ready_file).value_or(""), std::to_string(PidOf(h, "worker")) + "\n");
  EXPECT_OK_REPLY(h.Call("worker", "echo new"), "new");

  // The new cell answers; the removed one is gone with its socket files.
  ASSERT_TRUE(
      h.WaitForCell("added", [](const nlohmann::json& c) { return c["state"] == "running"; }));
  EXPECT_OK_REPLY(h.Call("added", "echo hi"), "hi");
  EXPECT_TRUE(WaitFor(
      [&] { return !FileExists(h.CellSocket("gone")) && !FileExists(h.WorkerSocket("gone")); }));
  EXPECT_EQ(h.Status("gone").value("error", ""), "no cell named gone");
}

// worker_connections is told to the worker at its start: a reload that changes it restarts the
// cell, and the next worker serves the new mode (docs/config.md, "Reload").
TEST(Reload, WorkerConnectionsRestartsTheCellInTheNewMode) {
  CellSpec m{.name = "m", .max_concurrent = 2, .extra_toml = kQuickStop};
  Harness h(TestOptions({m}));
  ASSERT_STARTED(h);
  const pid_t pid = PidOf(h, "m");
  EXPECT_OK_REPLY(h.Call("m", "env BULKHEAD_WORKER_CONNECTIONS"), "<unset>");

  m.worker_connections = "multiplex";
  h.RewriteConfig({m});
  EXPECT_EQ(ReloadOk(h), "reloaded: m restarted (worker_connections changed)\n");
  ASSERT_TRUE(h.WaitForCell("m", [&](const nlohmann::json& c) {
    return c["state"] == "running" && c["pid"].is_number() && c["pid"] != pid;
  }));
  EXPECT_EQ(h.Cell("m")["policy"]["worker_connections"], "multiplex");
  EXPECT_OK_REPLY(h.Call("m", "env BULKHEAD_WORKER_CONNECTIONS"), "multiplex");
  EXPECT_OK_REPLY(h.Call("m", "echo on one connection"), "on one connection");
  EXPECT_EQ(h.Cell("m")["worker_connections"], 1);

  m.worker_connections = "one-per-request";
  h.RewriteConfig({m});
  EXPECT_EQ(ReloadOk(h), "reloaded: m restarted (worker_connections changed)\n");
  ASSERT_TRUE(h.WaitForCell("m", [&](const nlohmann::json& c) {
    return c["state"] == "running" && c["policy"]["worker_connections"] == "one-per-request" &&
           c["starts"] == 3;
  }));
  EXPECT_OK_REPLY(h.Call("m", "env BULKHEAD_WORKER_CONNECTIONS"), "<unset>");
}

TEST(Reload, CapsChangeWithoutLosingQueuedRequests) {
  CellSpec q{.name = "q",
             .max_concurrent = 1,
             .max_queue = 3,
             .queue_timeout = "60s",
             .extra_toml = kQuickStop};
  Harness h(TestOptions({q}));
  ASSERT_STARTED(h);
  const pid_t pid = PidOf(h, "q");

  std::optional<ipc::Client> hang = SendOnNewConnection(h, "q", "hang");
  ASSERT_TRUE(hang);
  ASSERT_TRUE(h.WaitForCell("q", [](const nlohmann::json& c) { return c["running"] == 1; }));
  std::vector<ipc::Client> queued;
  for (const char* payload : {"echo b", "echo c", "echo d"}) {
    std::optional<ipc::Client> client = SendOnNewConnection(h, "q", payload);
    ASSERT_TRUE(client);
    queued.push_back(std::move(*client));
  }
  ASSERT_TRUE(h.WaitForCell("q", [](const nlohmann::json& c) { return c["queued"] == 3; }));

  // A lower max_queue keeps the 3 queued and admits no more while above it.
  q.max_queue = 1;
  h.RewriteConfig({q});
  EXPECT_EQ(ReloadOk(h), "reloaded: q updated (max_queue changed)\n");
  nlohmann::json c = h.Cell("q");
  EXPECT_EQ(c["queued"], 3);
  EXPECT_EQ(c["max_queue"], 1);
  Result<ipc::Client::Reply> refused = h.Call("q", "echo e");
  EXPECT_TRUE(IsReply(refused, ReplyStatus::kRejected, Reason::kFull)) << Describe(refused);

  // A higher max_concurrent opens more worker links and starts the queued requests now.
  q.max_concurrent = 4;
  h.RewriteConfig({q});
  EXPECT_EQ(ReloadOk(h), "reloaded: q updated (max_concurrent changed)\n");
  const char* expected[] = {"b", "c", "d"};
  for (size_t i = 0; i < queued.size(); ++i) {
    Result<ipc::Client::Reply> reply = queued[i].Receive();
    EXPECT_OK_REPLY(reply, expected[i]);
  }
  c = h.Cell("q");
  EXPECT_EQ(c["pid"], pid);
  EXPECT_EQ(c["running"], 1);  // the hanging one
  EXPECT_EQ(c["queued"], 0);
  EXPECT_GE(c["worker_connections"].get<int>(), 4);
  EXPECT_EQ(c["ok"], 3);
  EXPECT_EQ(c["rejected"], 1);
}

// Issue 26: a reload switches a cell between a fixed and an adaptive limit live, same worker.
// Adaptive starts at the floor: the request running above it finishes, a new one queues; back to
// fixed, the queued one starts at once.
TEST(Reload, ConcurrencySwitchesBetweenFixedAndAdaptiveLive) {
  CellSpec a{.name = "a",
             .max_concurrent = 4,
             .max_queue = 2,
             .queue_timeout = "60s",
             .extra_toml = kQuickStop};
  Harness h(TestOptions({a}));
  ASSERT_STARTED(h);
  const pid_t pid = PidOf(h, "a");
  EXPECT_EQ(h.Cell("a")["concurrency"], nlohmann::json({{"mode", "fixed"}, {"limit", 4}}));
  std::optional<ipc::Client> hang = SendOnNewConnection(h, "a", "hang");
  ASSERT_TRUE(hang);
  ASSERT_TRUE(h.WaitForCell("a", [](const nlohmann::json& c) { return c["running"] == 1; }));

  a.extra_toml = std::string(kQuickStop) + "concurrency = \"adaptive\"\n";
  h.RewriteConfig({a});
  EXPECT_EQ(ReloadOk(h), "reloaded: a updated (concurrency changed)\n");
  nlohmann::json c = h.Cell("a");
  EXPECT_EQ(c["pid"], pid);
  EXPECT_EQ(c["running"], 1) << "the running request was touched";
  EXPECT_EQ(c["concurrency"]["mode"], "adaptive");
  EXPECT_EQ(c["concurrency"]["limit"], 1);
  EXPECT_EQ(c["concurrency"]["floor"], 1);
  EXPECT_EQ(c["concurrency"]["ceiling"], 4);
  EXPECT_EQ(c["concurrency"]["signals"], nlohmann::json::array({"service_time"}));
  EXPECT_EQ(c["max_concurrent"], 4);
  std::optional<ipc::Client> waiting = SendOnNewConnection(h, "a", "echo waited");
  ASSERT_TRUE(waiting);
  ASSERT_TRUE(h.WaitForCell("a", [](const nlohmann::json& c) { return c["queued"] == 1; }))
      << "a request started above the adaptive limit";

  a.extra_toml = kQuickStop;
  h.RewriteConfig({a});
  EXPECT_EQ(ReloadOk(h), "reloaded: a updated (concurrency changed)\n");
  EXPECT_OK_REPLY(waiting->Receive(), "waited");
  c = h.Cell("a");
  EXPECT_EQ(c["pid"], pid);
  EXPECT_EQ(c["concurrency"], nlohmann::json({{"mode", "fixed"}, {"limit", 4}}));
  EXPECT_EQ(c["running"], 1);  // the hanging one
  EXPECT_EQ(c["failed"], 0);
}

TEST(Reload, ChangedEnvironmentRestartsTheCellAndServesItsQueue) {
  CellSpec a{.name = "a",
             .max_concurrent = 1,
             .max_queue = 4,
             .queue_timeout = "60s",
             .environment = {{"MODE", "old"}},
             .extra_toml = kQuickStop};
  const CellSpec b{.name = "b", .extra_toml = kQuickStop};
  Harness h(TestOptions({a, b}));
  ASSERT_STARTED(h);
  const pid_t a_pid = PidOf(h, "a");
  const pid_t b_pid = PidOf(h, "b");
  EXPECT_OK_REPLY(h.Call("a", "env MODE"), "old");

  // One request holds the slot, two wait in the queue.
  std::optional<ipc::Client> hang = SendOnNewConnection(h, "a", "hang");
  ASSERT_TRUE(hang);
  ASSERT_TRUE(h.WaitForCell("a", [](const nlohmann::json& c) { return c["running"] == 1; }));
  std::optional<ipc::Client> q1 = SendOnNewConnection(h, "a", "env MODE");
  std::optional<ipc::Client> q2 = SendOnNewConnection(h, "a", "env MODE");
  ASSERT_TRUE(q1 && q2);
  ASSERT_TRUE(h.WaitForCell("a", [](const nlohmann::json& c) { return c["queued"] == 2; }));

  a.environment = {{"MODE", "new"}};
  h.RewriteConfig({a, b});
  EXPECT_EQ(ReloadOk(h), "reloaded: a restarted (environment changed), b unchanged\n");

  // The running request could not finish within stop_timeout: its worker was replaced. The queued
  // ones were kept and served by the new worker, with the new environment.
  Result<ipc::Client::Reply> hung = hang->Receive();
  EXPECT_TRUE(IsReply(hung, ReplyStatus::kFailed, Reason::kWorkerDied)) << Describe(hung);
  EXPECT_OK_REPLY(q1->Receive(), "new");
  EXPECT_OK_REPLY(q2->Receive(), "new");
  nlohmann::json c = h.Cell("a");
  EXPECT_NE(c["pid"], a_pid);
  EXPECT_EQ(c["rejected"], 0);
  EXPECT_EQ(PidOf(h, "b"), b_pid);
  EXPECT_EQ(h.Cell("b")["starts"], 1);
}

TEST(Reload, RefusedFileChangesNothing) {
  const CellSpec a{.name = "a", .max_queue = 2, .extra_toml = kQuickStop};
  Harness h(TestOptions({a}));
  ASSERT_STARTED(h);
  const pid_t pid = PidOf(h, "a");
  const std::string original = testing::ReadFile(h.config_path()).value_or("");

  // An invalid value: the error comes back with its place, and nothing changes.
  CellSpec broken = a;
  broken.max_queue = 5;
  broken.max_concurrent = 0;
  h.RewriteConfig({broken, CellSpec{.name = "new"}});
  Result<ProcessResult> run = h.Ctl({"reload"});
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->exit_code(), kExitConfigInvalid) << run->Describe();
  EXPECT_EQ(run->out, "");
  EXPECT_THAT(run->err, StartsWith(h.config_path() + ":"));
  EXPECT_THAT(run->err, HasSubstr(": cells.a.max_concurrent: "));
  EXPECT_THAT(run->err, HasSubstr("bulkheadctl: reload refused; nothing changed\n"));

  // A [supervisor] key that needs a restart refuses the whole reload by name.
  CellSpec bigger = a;
  bigger.max_queue = 5;
  h.RewriteConfig({bigger}, std::string("max_payload_bytes = 1024\n"));
  run = h.Ctl({"reload"});
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->exit_code(), kExitConfigInvalid) << run->Describe();
  // At the value's file:line:col.
  const std::string payload_place = PlaceInConfig(h.config_path(), "max_payload_bytes = ");
  ASSERT_NE(payload_place, "");
  EXPECT_THAT(run->err, HasSubstr(payload_place +
                                  ": supervisor.max_payload_bytes: changed, and only log_level of "
                                  "[supervisor] applies live; restart bulkheadd to change it\n"));

  // So is a cell's socket.
  CellSpec moved = a;
  moved.extra_toml += "socket = \"" + h.dir() + "/elsewhere.sock\"\n";
  h.RewriteConfig({moved}, std::string());
  run = h.Ctl({"reload"});
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->exit_code(), kExitConfigInvalid) << run->Describe();
  const std::string socket_place = PlaceInConfig(h.config_path(), "socket = ");
  ASSERT_NE(socket_place, "");
  EXPECT_THAT(run->err,
              HasSubstr(socket_place + ": cells.a.socket: a running cell's socket cannot change"));
  EXPECT_FALSE(FileExists(h.dir() + "/elsewhere.sock"));

  nlohmann::json status = h.Status();
  ASSERT_EQ(status["cells"].size(), 1u) << status.dump();
  nlohmann::json c = status["cells"][0];
  EXPECT_EQ(c["pid"], pid);
  EXPECT_EQ(c["max_queue"], 2);
  EXPECT_EQ(c["max_concurrent"], 1);
  EXPECT_OK_REPLY(h.Call("a", "echo still"), "still");
  EXPECT_FALSE(FileExists(h.CellSocket("new")));

  // The original file applies again as "unchanged".
  std::ofstream(h.config_path()) << original;
  EXPECT_EQ(ReloadOk(h), "reloaded: a unchanged\n");
}

// `bulkheadctl reload` as a unit's ExecReload=: a refusal's lines reach `journalctl -p err`.
TEST(Reload, RefusalIsAtPriorityErrWhenStderrIsTheJournal) {
  const CellSpec a{.name = "a", .extra_toml = kQuickStop};
  Harness h(TestOptions({a}));
  ASSERT_STARTED(h);
  CellSpec broken = a;
  broken.max_concurrent = 0;
  h.RewriteConfig({broken});
  Result<ProcessResult> run = RunProcess(
      WithStderrAsJournal({BulkheadctlPath(), "--socket", h.control_socket(), "reload"}));
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->exit_code(), kExitConfigInvalid) << run->Describe();
  EXPECT_THAT(run->err, StartsWith("<3>" + h.config_path() + ":"));
  EXPECT_THAT(run->err, HasSubstr(": cells.a.max_concurrent: "));
  EXPECT_THAT(run->err, HasSubstr("\n<3>bulkheadctl: reload refused; nothing changed\n"));
}

TEST(Reload, SighupAppliesTheFileOrLogsWhyNot) {
  CellSpec a{.name = "a", .extra_toml = kQuickStop};
  Harness h(TestOptions({a}));
  ASSERT_STARTED(h);
  const pid_t pid = PidOf(h, "a");

  a.max_queue = 7;
  h.RewriteConfig({a, CellSpec{.name = "b", .extra_toml = kQuickStop}});
  ASSERT_EQ(::kill(h.pid(), SIGHUP), 0);
  ASSERT_TRUE(h.WaitForCell("b", [](const nlohmann::json& c) { return c["state"] == "running"; }))
      << h.Log();
  EXPECT_OK_REPLY(h.Call("b", "echo b"), "b");
  EXPECT_EQ(h.Cell("a")["max_queue"], 7);
  EXPECT_EQ(PidOf(h, "a"), pid);
  EXPECT_THAT(h.Log(), HasSubstr("reloaded: a updated (max_queue changed), b added"));

  // A broken file: logged with its place, nothing changes.
  std::ofstream(h.config_path()) << "[cells.a\n";
  ASSERT_EQ(::kill(h.pid(), SIGHUP), 0);
  EXPECT_TRUE(WaitFor([&] { return h.Log().find("nothing changed") != std::string::npos; }))
      << h.Log();
  EXPECT_THAT(h.Log(), HasSubstr("reload: " + h.config_path() + ":1:"));
  EXPECT_EQ(PidOf(h, "a"), pid);
  EXPECT_EQ(h.Status()["cells"].size(), 2u);
  EXPECT_OK_REPLY(h.Call("a", "echo a"), "a");
}

TEST(Reload, RemovedCellDrainsThenItsSocketGoes) {
  const CellSpec a{.name = "a", .extra_toml = kQuickStop};
  const CellSpec b{.name = "b", .extra_toml = "stop_timeout = \"30s\"\n"};
  Harness h(TestOptions({a, b}));
  ASSERT_STARTED(h);
  const pid_t a_pid = PidOf(h, "a");

  std::optional<ipc::Client> running = SendOnNewConnection(h, "b", "sleep 1500");
  ASSERT_TRUE(running);
  ASSERT_TRUE(h.WaitForCell("b", [](const nlohmann::json& c) { return c["running"] == 1; }));
  h.RewriteConfig({a});
  EXPECT_EQ(ReloadOk(h), "reloaded: a unchanged, b removed\n");
  EXPECT_EQ(h.Status("b").value("error", ""), "no cell named b");

  // While it drains, new requests are refused (or, once it is gone, cannot connect).
  Result<ipc::Client::Reply> late = h.Call("b", "echo late");
  EXPECT_TRUE(!late.ok() || IsReply(late, ReplyStatus::kRejected, Reason::kUnavailable))
      << Describe(late);
  // The request in flight finishes normally.
  EXPECT_OK_REPLY(running->Receive(), "slept 1500");
  // The files go when the sockets are closed; the line is written a loop iteration later, once
  // the close callbacks ran: wait for the line, then both files are gone.
  EXPECT_TRUE(WaitFor([&] {
    return h.Log().find("cell closed: worker stopped, sockets removed") != std::string::npos;
  })) << h.Log();
  EXPECT_FALSE(FileExists(h.CellSocket("b")));
  EXPECT_FALSE(FileExists(h.WorkerSocket("b")));
  EXPECT_EQ(PidOf(h, "a"), a_pid);
  EXPECT_OK_REPLY(h.Call("a", "echo a"), "a");
}

// A new cell whose socket cannot be bound refuses the reload before anything running is touched,
// and what it had bound already is closed again; a name still held by a draining removed cell is
// refused too.
TEST(Reload, NewCellThatCannotBindChangesNothing) {
  CellSpec a{.name = "a", .extra_toml = kQuickStop};
  const CellSpec b{.name = "b", .extra_toml = "stop_timeout = \"30s\"\n"};
  Harness h(TestOptions({a, b}));
  ASSERT_STARTED(h);
  const pid_t a_pid = PidOf(h, "a");

  const std::string not_a_socket = h.dir() + "/plain-file";
  std::ofstream(not_a_socket) << "x";
  CellSpec a2 = a;
  a2.max_queue = 3;
  // `fresh` binds its sockets, then goes with the refusal that `blocked` causes.
  const CellSpec fresh{.name = "fresh"};
  const CellSpec blocked{.name = "blocked", .extra_toml = "socket = \"" + not_a_socket + "\"\n"};
  h.RewriteConfig({a2, b, fresh, blocked});
  Result<ProcessResult> run = h.Ctl({"reload"});
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->exit_code(), kExitConfigInvalid) << run->Describe();
  // Placed at the new cell's [cells.blocked] header (column 1).
  EXPECT_THAT(run->err,
              ::testing::MatchesRegex("(.|\n)*\\.toml:[0-9]+:1: cells\\.blocked: (.|\n)*"))
      << run->Describe();
  EXPECT_THAT(run->err, HasSubstr(not_a_socket));
  EXPECT_EQ(h.Cell("a")["max_queue"], 0);
  EXPECT_EQ(PidOf(h, "a"), a_pid);
  EXPECT_EQ(h.Status("blocked").value("error", ""), "no cell named blocked");
  EXPECT_TRUE(WaitFor([&] { return !FileExists(h.WorkerSocket("blocked")); }));
  EXPECT_TRUE(WaitFor(
      [&] { return !FileExists(h.CellSocket("fresh")) && !FileExists(h.WorkerSocket("fresh")); }));
  EXPECT_EQ(testing::ReadFile(not_a_socket).value_or(""), "x");
  // The cells of the refused reload never existed: no "cell closed" for them (issue 25 section
  // 7). A control round trip first, so that the loop iteration that closed them is over.
  EXPECT_EQ(h.Status("fresh").value("error", ""), "no cell named fresh");
  EXPECT_THAT(h.Log(), Not(HasSubstr("cell closed")));

  // b drains a long request after its removal; adding it back meanwhile is refused.
  std::optional<ipc::Client> running = SendOnNewConnection(h, "b", "sleep 3000");
  ASSERT_TRUE(running);
  ASSERT_TRUE(h.WaitForCell("b", [](const nlohmann::json& c) { return c["running"] == 1; }));
  h.RewriteConfig({a});
  EXPECT_EQ(ReloadOk(h), "reloaded: a unchanged, b removed\n");
  h.RewriteConfig({a, b});
  run = h.Ctl({"reload"});
  ASSERT_TRUE(run.ok()) << run.status().message();
  if (run->exit_code() == kExitConfigInvalid) {
    // Positioned at the cell's table, with what to wait for.
    EXPECT_THAT(run->err, ::testing::MatchesRegex(
                              "(.|\n)*\\.toml:[0-9]+:[0-9]+: cells\\.b: a removed cell of that "
                              "name is still stopping \\(worker pid [0-9]+\\); reload again once "
                              "it has stopped, within its stop_timeout(.|\n)*"))
        << run->Describe();
  } else {
    // The drain finished before the second reload (a very slow machine): b is simply added.
    EXPECT_EQ(run->out, "reloaded: a unchanged, b added\n") << run->Describe();
  }
  EXPECT_OK_REPLY(running->Receive(), "slept 3000");
  EXPECT_EQ(PidOf(h, "a"), a_pid);
}

// The file's warnings reach `bulkheadctl reload` (systemctl reload shows its stderr), whether
// the reload applied or was refused: they went to bulkheadd's log only.
TEST(Reload, WarningsReachBulkheadctlAppliedOrRefused) {
  CellSpec a{.name = "a"};
  Harness h(TestOptions({a}));
  ASSERT_STARTED(h);
  a.extra_toml = "request_timeout = \"2s\"\n";  // without stall_timeout: a warning
  h.RewriteConfig({a});
  Result<ProcessResult> applied = h.Ctl({"reload"});
  ASSERT_TRUE(applied.ok()) << applied.status().message();
  EXPECT_EQ(applied->exit_code(), kExitOk) << applied->Describe();
  EXPECT_THAT(applied->err, HasSubstr("warning: "));
  EXPECT_THAT(applied->err, HasSubstr(": cells.a.request_timeout: set without stall_timeout"));

  // Another cell's error refuses the file; a's warning is still news to the operator.
  const CellSpec b{.name = "b", .extra_toml = "no_such_key = 1\n"};
  h.RewriteConfig({a, b});
  Result<ProcessResult> refused = h.Ctl({"reload"});
  ASSERT_TRUE(refused.ok()) << refused.status().message();
  EXPECT_EQ(refused->exit_code(), kExitConfigInvalid) << refused->Describe();
  EXPECT_THAT(refused->err, HasSubstr(": cells.a.request_timeout: set without stall_timeout"));
  EXPECT_THAT(refused->err, HasSubstr("no_such_key"));
}

}  // namespace
}  // namespace bulkhead::e2e
