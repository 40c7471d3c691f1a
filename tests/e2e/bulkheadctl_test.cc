// SPDX-License-Identifier: MIT
// bulkheadctl against a live bulkheadd: the status table and --json schema, and `call` output and
// exit codes for OK, each REJECTED reason, FAILED, BAD_REQUEST, an unreachable socket, a timeout
// and usage errors (docs/control.md).
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <regex>
#include <string>

#include "base/exit_status.h"
#include "base/unique_fd.h"
#include "ctl/status_table.h"
#include "tests/e2e/e2e_test.h"

namespace bulkhead::e2e {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// Runs bulkheadctl; a test failure when it could not be run at all.
ProcessResult RunCtl(Harness& h, const std::vector<std::string>& args,
                     std::string_view input = "") {
  Result<ProcessResult> run = h.Ctl(args, input);
  if (!run.ok()) {
    ADD_FAILURE() << "cannot run bulkheadctl: " << run.status().message();
    return ProcessResult{};
  }
  return std::move(run).value();
}

CellSpec Cell(std::string name, uint32_t max_concurrent, uint32_t max_queue) {
  return CellSpec{
      .name = std::move(name), .max_concurrent = max_concurrent, .max_queue = max_queue};
}

TEST(Bulkheadctl, StatusTableShowsTheSupervisorsFigures) {
  Harness h(TestOptions({Cell("payments", 2, 1), Cell("catalog", 2, 0)}));
  ASSERT_STARTED(h);
  EXPECT_OK_REPLY(h.Call("payments", "echo hi"), "hi");
  EXPECT_TRUE(
      IsReply(h.Call("payments", "fail no"), ipc::ReplyStatus::kFailed, ipc::Reason::kWorkerError));

  ProcessResult run = RunCtl(h, {"status"});
  ASSERT_EQ(run.exit_code(), kExitOk) << run.Describe();
  EXPECT_EQ(run.err, "");
  nlohmann::json response = h.Status();
  Result<std::string> expected = ctl::FormatStatusTable(response);
  ASSERT_TRUE(expected.ok()) << expected.status().message();
  // The activity table (ctl/status_view.h) follows; its ages move between two queries.
  EXPECT_THAT(run.out, StartsWith(*expected + "\n"));

  // The figures themselves, read off the table.
  const std::string payments_pid = std::to_string(h.Cell("payments")["pid"].get<int>());
  const std::string catalog_pid = std::to_string(h.Cell("catalog")["pid"].get<int>());
  std::regex table(
      "CELL +STATE +PID +RUNNING +QUEUED +OK +REJECTED +FAILED +RESTARTS\n"
      "payments +running +" +
      payments_pid +
      " +0/2 +0/1 +1 +0 +1 +0\n"
      "catalog +running +" +
      catalog_pid +
      " +0/2 +0/0 +0 +0 +0 +0\n"
      "\nCELL +MEMORY +CPU +THROTTLED +TASKS +OOM KILLS\n"
      "payments +not enforced( +-){4}\n"
      "catalog +not enforced( +-){4}\n"
      "limits not enforced: .*\n"
      "\nCELL +IN STATE FOR +WORKER UPTIME +IN FLIGHT +CANCELLED +DROPPED +UNDELIVERED +P50 +P99 "
      "+WAIT P50 +WAIT "
      "P99\n"
      "payments +[0-9.smhd]+ +[0-9.smhd]+ +0 +0 +0 +0 +[0-9.]+m?s +[0-9.]+m?s +[0-9.]+m?s +"
      "[0-9.]+m?s\n"
      "catalog +[0-9.smhd]+ +[0-9.smhd]+ +0 +0 +0 +0 +- +- +- +-\n");
  EXPECT_TRUE(std::regex_match(run.out, table)) << run.out;

  // One cell: its long form (ctl/status_view.h).
  ProcessResult one = RunCtl(h, {"status", "catalog"});
  ASSERT_EQ(one.exit_code(), kExitOk) << one.Describe();
  EXPECT_THAT(one.out, StartsWith("● catalog - running for "));
  EXPECT_THAT(one.out, Not(HasSubstr("payments")));
}

TEST(Bulkheadctl, StatusTableShowsLastExitOnceAWorkerExited) {
  Harness h(TestOptions({Cell("payments", 1, 0)}));
  ASSERT_STARTED(h);
  EXPECT_TRUE(
      IsReply(h.Call("payments", "exit 3"), ipc::ReplyStatus::kFailed, ipc::Reason::kWorkerDied));
  ASSERT_TRUE(h.WaitForCell("payments", [](const nlohmann::json& c) {
    return c["restarts"] == 1 && c["state"] == "running";
  }));
  ProcessResult run = RunCtl(h, {"status"});
  ASSERT_EQ(run.exit_code(), kExitOk) << run.Describe();
  std::regex table(
      "CELL +STATE +PID +RUNNING +QUEUED +OK +REJECTED +FAILED +RESTARTS +LAST EXIT\n"
      "payments +running +[0-9]+ +0/1 +0/0 +0 +0 +1 +1 +exit 3\n"
      // The compartment table; this host enforces no limits (cgroup v1).
      "\nCELL +MEMORY +CPU +THROTTLED +TASKS +OOM KILLS\n"
      "payments +not enforced +- +- +- +-\n"
      "limits not enforced: .*\n"
      "\nCELL +IN STATE FOR +WORKER UPTIME .*\n"
      "payments .*\n");
  EXPECT_TRUE(std::regex_match(run.out, table)) << run.out;
}

// Every field docs/control.md marks stable, with its type.
void ExpectDocumentedCellSchema(const nlohmann::json& cell) {
  SCOPED_TRACE(cell.dump());
  for (const char* key : {"name", "state", "socket", "worker_socket"}) {
    EXPECT_TRUE(cell.contains(key) && cell[key].is_string()) << key;
  }
  for (const char* key : {"max_concurrent", "running", "max_queue", "queued", "queue_timeout_ms",
                          "clients", "worker_connections", "ok", "rejected", "failed", "cancelled",
                          "bad_request", "starts", "restarts", "uptime_ms", "next_start_in_ms"}) {
    EXPECT_TRUE(cell.contains(key) && cell[key].is_number_unsigned()) << key;
  }
  EXPECT_TRUE(cell.contains("pid") && (cell["pid"].is_null() || cell["pid"].is_number_integer()));
  EXPECT_TRUE(cell.contains("listen") && cell["listen"].is_array());
  EXPECT_TRUE(cell.contains("last_exit") &&
              (cell["last_exit"].is_null() || cell["last_exit"].is_string()));
  for (const char* key : {"full", "queue_timeout", "unavailable"}) {
    EXPECT_TRUE(cell["rejected_by_reason"][key].is_number_unsigned()) << key;
  }
  for (const char* key : {"worker_error", "worker_died"}) {
    EXPECT_TRUE(cell["failed_by_reason"][key].is_number_unsigned()) << key;
  }
  EXPECT_THAT(cell["state"].get<std::string>(),
              ::testing::AnyOf("starting", "running", "stopping", "backoff", "stopped", "failed"));
}

TEST(Bulkheadctl, StatusJsonIsTheDocumentedSchema) {
  Harness h(TestOptions({Cell("payments", 2, 1), Cell("catalog", 2, 0)}));
  ASSERT_STARTED(h);
  ProcessResult run = RunCtl(h, {"status", "--json"});
  ASSERT_EQ(run.exit_code(), kExitOk) << run.Describe();
  ASSERT_EQ(std::count(run.out.begin(), run.out.end(), '\n'), 1) << "one line: " << run.out;
  nlohmann::json response = nlohmann::json::parse(run.out, nullptr, false);
  ASSERT_TRUE(response.is_object()) << run.out;
  EXPECT_EQ(response["ok"], true);
  const nlohmann::json& supervisor = response["supervisor"];
  EXPECT_EQ(supervisor["pid"], h.pid());
  EXPECT_TRUE(supervisor["version"].is_string());
  EXPECT_TRUE(supervisor["uptime_ms"].is_number_unsigned());
  EXPECT_EQ(supervisor["config"], h.config_path());
  EXPECT_TRUE(supervisor["live_requests"].is_number_unsigned());
  EXPECT_EQ(supervisor["max_payload_bytes"], 4 * 1024 * 1024);
  ASSERT_TRUE(response["cells"].is_array());
  ASSERT_EQ(response["cells"].size(), 2u);
  EXPECT_EQ(response["cells"][0]["name"], "payments");
  EXPECT_EQ(response["cells"][1]["name"], "catalog");
  for (const nlohmann::json& cell : response["cells"]) ExpectDocumentedCellSchema(cell);
  const nlohmann::json& payments = response["cells"][0];
  EXPECT_EQ(payments["socket"], h.CellSocket("payments"));
  EXPECT_EQ(payments["worker_socket"], h.WorkerSocket("payments"));
  EXPECT_EQ(payments["listen"], nlohmann::json::array()) << "no TCP address configured";
  EXPECT_EQ(payments["max_concurrent"], 2);
  EXPECT_EQ(payments["max_queue"], 1);
  EXPECT_EQ(payments["queue_timeout_ms"], 1000);

  ProcessResult one = RunCtl(h, {"status", "catalog", "--json"});
  ASSERT_EQ(one.exit_code(), kExitOk) << one.Describe();
  nlohmann::json catalog = nlohmann::json::parse(one.out, nullptr, false);
  ASSERT_EQ(catalog["cells"].size(), 1u) << one.out;
  EXPECT_EQ(catalog["cells"][0]["name"], "catalog");
}

TEST(Bulkheadctl, StatusOfAnUnknownCellFails) {
  Harness h(TestOptions({Cell("payments", 1, 0)}));
  ASSERT_STARTED(h);
  for (std::vector<std::string> args : {std::vector<std::string>{"status", "nosuch"},
                                        std::vector<std::string>{"status", "nosuch", "--json"}}) {
    ProcessResult run = RunCtl(h, args);
    EXPECT_EQ(run.exit_code(), kExitFailure) << run.Describe();
    EXPECT_EQ(run.out, "");
    EXPECT_EQ(run.err, "bulkheadctl: no cell named nosuch\n");
  }
  ProcessResult call = RunCtl(h, {"call", "nosuch", "--data", "echo x"});
  EXPECT_EQ(call.exit_code(), kExitFailure) << call.Describe();
  EXPECT_EQ(call.err, "bulkheadctl: no cell named nosuch\n");
}

TEST(Bulkheadctl, CallPrintsTheOkPayload) {
  Harness h(TestOptions({Cell("payments", 1, 0)}));
  ASSERT_STARTED(h);
  ProcessResult data = RunCtl(h, {"call", "payments", "--data", "echo hello"});
  EXPECT_EQ(data.exit_code(), kExitOk) << data.Describe();
  EXPECT_EQ(data.out, "hello\n");
  EXPECT_EQ(data.err, "");

  // From stdin; the payload's own newline is not doubled.
  ProcessResult in = RunCtl(h, {"call", "payments"}, "echo from stdin\n");
  EXPECT_EQ(in.exit_code(), kExitOk) << in.Describe();
  EXPECT_EQ(in.out, "from stdin\n");

  ProcessResult raw = RunCtl(h, {"call", "payments", "--raw", "--data", "echo exact"});
  EXPECT_EQ(raw.exit_code(), kExitOk) << raw.Describe();
  EXPECT_EQ(raw.out, "exact");

  // Options may come before the subcommand.
  ProcessResult before =
      RunCtl(h, {"--timeout", "10s", "call", "payments", "--data", "echo before"});
  EXPECT_EQ(before.exit_code(), kExitOk) << before.Describe();
  EXPECT_EQ(before.out, "before\n");
}

// `call CELL < /dev/zero` must not read stdin without limit: bulkheadctl reads at most the
// supervisor's max_payload_bytes (from status) and refuses a longer input without sending it.
TEST(Bulkheadctl, CallReadsStdinOnlyUpToMaxPayloadBytes) {
  Harness h(TestOptions({Cell("payments", 1, 0)}, "max_payload_bytes = 1024\n"));
  ASSERT_STARTED(h);
  const std::string exact = "echo " + std::string(1024 - 5, 'x');
  ProcessResult fits = RunCtl(h, {"call", "payments", "--raw"}, exact);
  EXPECT_EQ(fits.exit_code(), kExitOk) << fits.Describe();
  EXPECT_EQ(fits.out, std::string(1024 - 5, 'x'));

  ProcessResult over = RunCtl(h, {"call", "payments"}, exact + "x");
  EXPECT_EQ(over.exit_code(), kExitUsage) << over.Describe();
  EXPECT_EQ(over.err,
            "bulkheadctl: the request on stdin is longer than max_payload_bytes (1024 bytes): "
            "not sent\n");
  ProcessResult huge = RunCtl(h, {"call", "payments"}, std::string(8 << 20, '\0'));
  EXPECT_EQ(huge.exit_code(), kExitUsage) << huge.Describe();
  const nlohmann::json cell = h.Cell("payments");
  EXPECT_EQ(cell["ok"], 1);
  EXPECT_EQ(cell["bad_request"], 0);
}

TEST(Bulkheadctl, CallRejectedFull) {
  Harness h(TestOptions({CellSpec{.name = "tight", .extra_toml = kQuickStop}}));
  ASSERT_STARTED(h);
  Result<ipc::Client> holder = h.Connect("tight");
  ASSERT_TRUE(holder.ok()) << holder.status().message();
  ASSERT_TRUE(holder->Send(1, "hang").ok());
  ASSERT_TRUE(h.WaitForCell("tight", [](const nlohmann::json& c) { return c["running"] == 1; }));

  ProcessResult run = RunCtl(h, {"call", "tight", "--data", "echo x"});
  EXPECT_EQ(run.exit_code(), kExitRejected) << run.Describe();
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.err, "rejected: tight full (running 1, queued 0)\n");
}

TEST(Bulkheadctl, CallRejectedQueueTimeout) {
  Harness h(TestOptions({CellSpec{.name = "slow",
                                  .max_concurrent = 1,
                                  .max_queue = 1,
                                  .queue_timeout = "200ms",
                                  .extra_toml = kQuickStop}}));
  ASSERT_STARTED(h);
  Result<ipc::Client> holder = h.Connect("slow");
  ASSERT_TRUE(holder.ok()) << holder.status().message();
  ASSERT_TRUE(holder->Send(1, "hang").ok());
  ASSERT_TRUE(h.WaitForCell("slow", [](const nlohmann::json& c) { return c["running"] == 1; }));

  ProcessResult run = RunCtl(h, {"call", "slow", "--data", "echo x"});
  EXPECT_EQ(run.exit_code(), kExitRejected) << run.Describe();
  EXPECT_EQ(run.err, "rejected: queue timeout\n");
}

TEST(Bulkheadctl, CallRejectedUnavailableGivesTheRetryHint) {
  Harness h(TestOptions({CellSpec{.name = "broken",
                                  .command = {"/nonexistent/worker"},
                                  .restart_delay = "60s",
                                  .wait_running = false}}));
  ASSERT_STARTED(h);
  ASSERT_TRUE(
      h.WaitForCell("broken", [](const nlohmann::json& c) { return c["state"] == "backoff"; }));

  ProcessResult run = RunCtl(h, {"call", "broken", "--data", "echo x"});
  EXPECT_EQ(run.exit_code(), kExitRejected) << run.Describe();
  std::smatch match;
  ASSERT_TRUE(std::regex_match(run.err, match,
                               std::regex("rejected: unavailable \\(retry after ([0-9]+) ms\\)\n")))
      << run.err;
  int retry_after_ms = std::stoi(match[1]);
  EXPECT_GT(retry_after_ms, 0);
  EXPECT_LE(retry_after_ms, 60000);
}

TEST(Bulkheadctl, CallFailed) {
  Harness h(TestOptions({Cell("payments", 1, 0)}));
  ASSERT_STARTED(h);
  ProcessResult error = RunCtl(h, {"call", "payments", "--data", "fail boom"});
  EXPECT_EQ(error.exit_code(), kExitFailed) << error.Describe();
  EXPECT_EQ(error.out, "");
  EXPECT_EQ(error.err, "failed: worker_error: boom\n");

  ProcessResult died = RunCtl(h, {"call", "payments", "--data", "exit 3"});
  EXPECT_EQ(died.exit_code(), kExitFailed) << died.Describe();
  EXPECT_EQ(died.err, "failed: worker_died: exit 3\n");
}

TEST(Bulkheadctl, CallBadRequest) {
  Harness h(TestOptions({Cell("payments", 1, 0)}, "max_payload_bytes = 1024\n"));
  ASSERT_STARTED(h);
  ProcessResult run = RunCtl(h, {"call", "payments", "--data", std::string(2000, 'x')});
  EXPECT_EQ(run.exit_code(), kExitBadRequest) << run.Describe();
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.err, "bad request: too_large: payload of 2000 bytes exceeds the maximum of 1024\n");
}

// A payload far beyond the limit: bulkheadd answers BAD_REQUEST from the header and closes while
// bulkheadctl is still sending (EPIPE). The reply that came first must still be read and shown.
// Given with --data (stdin stops at the limit: CallReadsStdinOnlyUpToMaxPayloadBytes), a payload
// far over max_payload_bytes is sent and the supervisor's BAD_REQUEST is shown. 100 KiB: one
// argument may hold at most 128 KiB (execve(2), MAX_ARG_STRLEN).
TEST(Bulkheadctl, CallFarOverTheLimitStillShowsTheBadRequest) {
  Harness h(TestOptions({Cell("payments", 1, 0)}, "max_payload_bytes = 1024\n"));
  ASSERT_STARTED(h);
  std::string huge(100 * 1024, 'x');
  ProcessResult run = RunCtl(h, {"call", "payments", "--data", huge});
  EXPECT_EQ(run.exit_code(), kExitBadRequest) << run.Describe();
  EXPECT_EQ(run.err, "bad request: too_large: payload of " + std::to_string(huge.size()) +
                         " bytes exceeds the maximum of 1024\n");
}

TEST(Bulkheadctl, UnreachableSocketNamesThePath) {
  TempDir dir;
  const std::string missing = dir.Join("control.sock");
  for (std::vector<std::string> args :
       {std::vector<std::string>{"status"}, std::vector<std::string>{"call", "x", "--data", "y"}}) {
    std::vector<std::string> argv = {BulkheadctlPath(), "--socket", missing};
    argv.insert(argv.end(), args.begin(), args.end());
    Result<ProcessResult> run = RunProcess(argv);
    ASSERT_TRUE(run.ok()) << run.status().message();
    EXPECT_EQ(run->exit_code(), kExitUnreachable) << run->Describe();
    EXPECT_THAT(run->err, StartsWith("bulkheadctl: cannot reach bulkheadd at " + missing + ": "));
    EXPECT_THAT(run->err, HasSubstr("No such file or directory"));
  }
  // $BULKHEAD_SOCKET when there is no --socket.
  Result<ProcessResult> env = RunProcess({BulkheadctlPath(), "status"}, "",
                                         std::chrono::seconds(30), {"BULKHEAD_SOCKET=" + missing});
  ASSERT_TRUE(env.ok()) << env.status().message();
  EXPECT_EQ(env->exit_code(), kExitUnreachable) << env->Describe();
  EXPECT_THAT(env->err, HasSubstr(missing));
}

// A cell's socket given as the control socket (a slip between two paths of the same runtime
// dir) answers the JSON line with a frame: named as no control socket, not as a cut response.
TEST(Bulkheadctl, ACellsSocketGivenAsTheControlSocketIsNamedAsNoControlSocket) {
  Harness h(TestOptions({Cell("payments", 1, 0)}));
  ASSERT_STARTED(h);
  Result<ProcessResult> run =
      RunProcess({BulkheadctlPath(), "-s", h.CellSocket("payments"), "status"});
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->exit_code(), kExitUnreachable) << run->Describe();
  EXPECT_THAT(run->err,
              StartsWith("bulkheadctl: cannot reach bulkheadd at " + h.CellSocket("payments") +
                         ": did not answer as a bulkheadd control socket: "))
      << run->Describe();
  EXPECT_THAT(run->err, HasSubstr("(is it a cell's socket? ")) << run->Describe();
  EXPECT_EQ(h.Cell("payments")["state"], "running") << "the cell serves on";
}

TEST(Bulkheadctl, CallTimeoutBoundsTheWait) {
  Harness h(TestOptions({CellSpec{.name = "payments", .extra_toml = kQuickStop}}));
  ASSERT_STARTED(h);
  // The worker never answers: only --timeout ends the wait (outcome and exit code, no duration).
  ProcessResult run = RunCtl(h, {"call", "payments", "--timeout", "300ms", "--data", "hang"});
  EXPECT_EQ(run.exit_code(), kExitFailure) << run.Describe();
  EXPECT_THAT(run.err, HasSubstr("timed out waiting for the reply"));
}

// Two restarts in one read of the control socket: the second is refused ("restart in progress")
// and must not turn the first, the operator's, into a crash in restarts_by_reason.
TEST(Bulkheadctl, ARefusedSecondRestartKeepsTheFirstAnOperatorRestart) {
  Harness h(TestOptions({Cell("payments", 1, 0)}));
  ASSERT_STARTED(h);
  const int first_pid = h.Cell("payments")["pid"].get<int>();
  UniqueFd control(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(control.valid());
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", h.control_socket().c_str());
  ASSERT_EQ(::connect(control.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const std::string twice =
      "{\"command\":\"restart\",\"cell\":\"payments\"}\n"
      "{\"command\":\"restart\",\"cell\":\"payments\"}\n";
  ASSERT_EQ(::write(control.get(), twice.data(), twice.size()), static_cast<ssize_t>(twice.size()));
  std::string replies;
  char buf[512];
  while (std::count(replies.begin(), replies.end(), '\n') < 2) {
    ssize_t n = ::read(control.get(), buf, sizeof buf);
    ASSERT_GT(n, 0) << std::strerror(errno);
    replies.append(buf, static_cast<size_t>(n));
  }
  EXPECT_THAT(replies, HasSubstr("restart in progress")) << replies;
  ASSERT_TRUE(h.WaitForCell("payments", [&](const nlohmann::json& c) {
    return c["state"] == "running" && c["pid"].is_number_integer() && c["pid"] != first_pid;
  })) << h.Status().dump();
  const nlohmann::json by_reason = h.Cell("payments")["restarts_by_reason"];
  EXPECT_EQ(by_reason["operator"], 1) << by_reason.dump();
  EXPECT_EQ(by_reason["crash"], 0) << by_reason.dump();
}

TEST(Bulkheadctl, StopStartAndRestartACell) {
  Harness h(TestOptions({Cell("payments", 1, 0), Cell("catalog", 1, 0)}));
  ASSERT_STARTED(h);
  const int first_pid = h.Cell("payments")["pid"].get<int>();

  ProcessResult stop = RunCtl(h, {"stop", "payments"});
  EXPECT_EQ(stop.exit_code(), kExitOk) << stop.Describe();
  EXPECT_EQ(stop.out, "");
  ASSERT_TRUE(h.WaitForCell("payments", [](const nlohmann::json& c) {
    return c["state"] == "stopped" && c["pid"].is_null();
  })) << h.Status().dump();
  ProcessResult refused = RunCtl(h, {"call", "payments", "--data", "echo x"});
  EXPECT_EQ(refused.exit_code(), kExitRejected) << refused.Describe();
  EXPECT_EQ(refused.err, "rejected: unavailable\n");
  // The other cell is untouched.
  EXPECT_OK_REPLY(h.Call("catalog", "echo fine"), "fine");
  ProcessResult again = RunCtl(h, {"stop", "payments"});
  EXPECT_EQ(again.exit_code(), kExitOk) << again.Describe();
  EXPECT_EQ(again.out, "payments: already stopped\n");

  ProcessResult start = RunCtl(h, {"start", "payments"});
  EXPECT_EQ(start.exit_code(), kExitOk) << start.Describe();
  ASSERT_TRUE(h.WaitForCell("payments", [](const nlohmann::json& c) {
    return c["state"] == "running" && c["pid"].is_number_integer();
  })) << h.Status().dump();
  const int second_pid = h.Cell("payments")["pid"].get<int>();
  EXPECT_NE(second_pid, first_pid);
  EXPECT_OK_REPLY(h.Call("payments", "echo back"), "back");
  ProcessResult started = RunCtl(h, {"start", "payments"});
  EXPECT_EQ(started.exit_code(), kExitOk) << started.Describe();
  EXPECT_EQ(started.out, "payments: already started\n");

  ProcessResult restart = RunCtl(h, {"restart", "payments"});
  EXPECT_EQ(restart.exit_code(), kExitOk) << restart.Describe();
  ASSERT_TRUE(h.WaitForCell("payments", [&](const nlohmann::json& c) {
    return c["state"] == "running" && c["pid"].is_number_integer() && c["pid"] != second_pid;
  })) << h.Status().dump();
  EXPECT_OK_REPLY(h.Call("payments", "echo renewed"), "renewed");

  // --no-block is an option too: alone it names no cell, and nothing is sent.
  for (const char* command : {"start", "stop", "restart"}) {
    ProcessResult bare = RunCtl(h, {command, "--no-block"});
    EXPECT_EQ(bare.exit_code(), kExitUsage) << bare.Describe();
    EXPECT_EQ(bare.err,
              std::string("bulkheadctl: ") + command + ": name one or more cells, or --all\n");
  }
  ProcessResult unknown = RunCtl(h, {"restart", "nosuch"});
  EXPECT_EQ(unknown.exit_code(), kExitFailure) << unknown.Describe();
  EXPECT_EQ(unknown.err, "bulkheadctl: restart nosuch: no cell named nosuch\n");
}

// `start` of a cell whose worker is still starting (ready = "notify", no READY=1 yet) waits for
// that start to end, as `systemctl start` of an activating unit does: it returned at once with
// "already started" while the cell was not yet running. READY=1 comes 5 s after the spawn, a
// margin for a loaded machine to see the cell starting first.
TEST(Bulkheadctl, StartOfACellStillStartingWaitsUntilItRuns) {
  Harness h(TestOptions({CellSpec{.name = "slow",
                                  .command = {TestWorkerPath(), "--notify-ready-after-ms", "5000"},
                                  .extra_toml = "ready = \"notify\"\n",
                                  .wait_running = false}}));
  ASSERT_STARTED(h);
  ASSERT_TRUE(h.WaitForCell("slow", [](const nlohmann::json& c) {
    return c["state"] == "starting";
  })) << h.Status().dump();
  ProcessResult start = RunCtl(h, {"start", "slow"});
  EXPECT_EQ(start.exit_code(), kExitOk) << start.Describe();
  EXPECT_EQ(start.out, "slow: already started\n");
  EXPECT_EQ(h.Cell("slow")["state"], "running") << h.Status().dump();
}

// The long form shows an unset limit as the kernel's default: cpu.weight has no "max" (its
// default is 100), the other files' default is "max".
TEST(Bulkheadctl, StatusOfACellShowsUnsetLimitsAsTheKernelDefaults) {
  Harness h(TestOptions({Cell("payments", 1, 0)}));
  ASSERT_STARTED(h);
  ProcessResult run = RunCtl(h, {"status", "payments"});
  EXPECT_EQ(run.exit_code(), kExitOk) << run.Describe();
  EXPECT_THAT(run.out, HasSubstr(" cpu_weight=100 ")) << run.out;
  EXPECT_THAT(run.out, HasSubstr(" memory_max=max ")) << run.out;
}

TEST(Bulkheadctl, VersionPrintsTheVersion) {
  Result<ProcessResult> run = RunProcess({BulkheadctlPath(), "--version"});
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->exit_code(), kExitOk) << run->Describe();
  EXPECT_THAT(run->out, ::testing::MatchesRegex("bulkheadctl [0-9]+\\.[0-9]+\\.[0-9]+\n"));
}

// Both programs say who they are, in the same words: "bulkheadd 0.1.0" as "bulkheadctl 0.1.0";
// bulkheadd printed the bare version (issue 25 section 7).
TEST(Bulkheadctl, BulkheaddAndBulkheadctlPrintTheirVersionAlike) {
  Result<ProcessResult> daemon = RunProcess({BulkheaddPath(), "--version"});
  Result<ProcessResult> ctl = RunProcess({BulkheadctlPath(), "--version"});
  ASSERT_TRUE(daemon.ok() && ctl.ok());
  EXPECT_EQ(daemon->exit_code(), kExitOk) << daemon->Describe();
  ASSERT_THAT(ctl->out, StartsWith("bulkheadctl "));
  EXPECT_EQ(daemon->out, "bulkheadd " + ctl->out.substr(std::string("bulkheadctl ").size()));
}

// A cell whose worker cannot run, given up on at its first exit: "failed".
CellSpec FailedCell(std::string name) {
  return CellSpec{.name = std::move(name),
                  .command = {"/bin/false"},
                  .restart_delay = "50ms",
                  .extra_toml = "start_limit_burst = 1\nstart_limit_action = \"fail\"\n",
                  .wait_running = false};
}

// `status CELL` exits as `systemctl status UNIT`: 0 running, 3 otherwise; `status` alone 0.
TEST(Bulkheadctl, StatusOfACellThatIsNotRunningExitsThree) {
  Harness h(TestOptions({Cell("payments", 1, 0), FailedCell("doomed")}));
  ASSERT_STARTED(h);
  ASSERT_TRUE(h.WaitForCell("doomed", [](const nlohmann::json& c) {
    return c["state"] == "failed";
  })) << h.Status().dump();
  for (std::vector<std::string> args : {std::vector<std::string>{"status", "doomed"},
                                        std::vector<std::string>{"status", "doomed", "--json"}}) {
    ProcessResult run = RunCtl(h, args);
    EXPECT_EQ(run.exit_code(), kExitNotRunning) << run.Describe();
    EXPECT_THAT(run.out, HasSubstr("failed")) << run.Describe();
  }
  ProcessResult running = RunCtl(h, {"status", "payments"});
  EXPECT_EQ(running.exit_code(), kExitOk) << running.Describe();
  ProcessResult all = RunCtl(h, {"status"});
  EXPECT_EQ(all.exit_code(), kExitOk) << all.Describe();
  ASSERT_EQ(RunCtl(h, {"stop", "payments"}).exit_code(), kExitOk);
  ProcessResult stopped = RunCtl(h, {"status", "payments"});
  EXPECT_EQ(stopped.exit_code(), kExitNotRunning) << stopped.Describe();
}

TEST(Bulkheadctl, IsActiveAndIsFailedPrintTheStateAndExitAsSystemctl) {
  Harness h(TestOptions({Cell("payments", 1, 0), FailedCell("doomed")}));
  ASSERT_STARTED(h);
  ASSERT_TRUE(h.WaitForCell("doomed", [](const nlohmann::json& c) {
    return c["state"] == "failed";
  })) << h.Status().dump();
  ProcessResult active = RunCtl(h, {"is-active", "payments"});
  EXPECT_EQ(active.exit_code(), kExitOk) << active.Describe();
  EXPECT_EQ(active.out, "running\n");
  ProcessResult inactive = RunCtl(h, {"is-active", "doomed"});
  EXPECT_EQ(inactive.exit_code(), kExitNotRunning) << inactive.Describe();
  EXPECT_EQ(inactive.out, "failed\n");
  // Several cells: a line each, 0 when at least one matches (systemctl's rule).
  ProcessResult both = RunCtl(h, {"is-active", "doomed", "payments", "nosuch"});
  EXPECT_EQ(both.exit_code(), kExitOk) << both.Describe();
  EXPECT_EQ(both.out, "failed\nrunning\nunknown\n");
  ProcessResult failed = RunCtl(h, {"is-failed", "doomed"});
  EXPECT_EQ(failed.exit_code(), kExitOk) << failed.Describe();
  EXPECT_EQ(failed.out, "failed\n");
  ProcessResult not_failed = RunCtl(h, {"is-failed", "--quiet", "payments"});
  EXPECT_EQ(not_failed.exit_code(), kExitFailure) << not_failed.Describe();
  EXPECT_EQ(not_failed.out, "");
  ProcessResult unknown = RunCtl(h, {"is-active", "-q", "nosuch"});
  EXPECT_EQ(unknown.exit_code(), kExitNotRunning) << unknown.Describe();
}

// A worker that ignores SIGTERM makes a stop take its stop_timeout: long enough that a stop which
// did not wait would still find the cell "stopping".
CellSpec SlowToStop(std::string name, std::string stop_timeout) {
  return CellSpec{
      .name = std::move(name),
      .command = {TestWorkerPath(), "--ignore-sigterm"},
      // The restart that stops first (the overlapping one: restart_overlap_test).
      .extra_toml = "stop_timeout = \"" + stop_timeout + "\"\nrestart_overlap = false\n"};
}

TEST(Bulkheadctl, StopAndRestartWaitForTheOutcome) {
  Harness h(TestOptions({SlowToStop("payments", "400ms")}));
  ASSERT_STARTED(h);
  // Once it answers, the worker ignores SIGTERM (it does so before it serves).
  EXPECT_OK_REPLY(h.Call("payments", "echo ready"), "ready");
  const int first_pid = h.Cell("payments")["pid"].get<int>();
  ProcessResult restart = RunCtl(h, {"restart", "payments"});
  ASSERT_EQ(restart.exit_code(), kExitOk) << restart.Describe();
  // No waiting here: the command returned once the new worker ran.
  nlohmann::json cell = h.Cell("payments");
  EXPECT_EQ(cell["state"], "running") << cell.dump();
  EXPECT_NE(cell["pid"], first_pid) << cell.dump();

  ProcessResult stop = RunCtl(h, {"stop", "payments"});
  ASSERT_EQ(stop.exit_code(), kExitOk) << stop.Describe();
  cell = h.Cell("payments");
  EXPECT_EQ(cell["state"], "stopped") << cell.dump();
  EXPECT_TRUE(cell["pid"].is_null()) << cell.dump();

  ProcessResult start = RunCtl(h, {"start", "payments"});
  ASSERT_EQ(start.exit_code(), kExitOk) << start.Describe();
  EXPECT_EQ(h.Cell("payments")["state"], "running") << h.Status().dump();
}

TEST(Bulkheadctl, ARestartWhoseWorkerCannotStartFails) {
  Harness h(TestOptions({Cell("payments", 1, 0)}));
  ASSERT_STARTED(h);
  // The next worker cannot start: it exits before READY=1.
  CellSpec broken = Cell("payments", 1, 0);
  broken.command = {"/bin/false"};
  broken.restart_delay = "30s";
  // Stop, then start: with the overlap the reload's next worker failing would leave the previous
  // one serving (RestartOverlap.*) rather than the cell in backoff.
  broken.extra_toml = "ready = \"notify\"\nrestart_overlap = false\n";
  broken.wait_running = false;
  h.RewriteConfig({broken});
  // The reload waits for the new worker as restart does, and fails the same way.
  ProcessResult reload = RunCtl(h, {"reload"});
  EXPECT_EQ(reload.exit_code(), kExitFailure) << reload.Describe();
  // No success line on stdout: what was applied is said on stderr, after the failure.
  EXPECT_EQ(reload.out, "") << reload.Describe();
  EXPECT_THAT(reload.err, HasSubstr("bulkheadctl: reload: payments: worker did not start: exit 1"))
      << reload.Describe();
  EXPECT_THAT(reload.err, HasSubstr("bulkheadctl: reloaded: payments restarted ("))
      << reload.Describe();
  EXPECT_EQ(h.Cell("payments")["state"], "backoff") << h.Status().dump();
  ProcessResult restart = RunCtl(h, {"restart", "payments"});
  EXPECT_EQ(restart.exit_code(), kExitFailure) << restart.Describe();
  EXPECT_EQ(restart.out, "") << restart.Describe();
  EXPECT_THAT(restart.err, HasSubstr("bulkheadctl: restart payments: worker did not start: exit 1"))
      << restart.Describe();
  // The same file again: the cell is restarted again (its new worker never took over), and the
  // reload fails as the first did, not "payments unchanged".
  ProcessResult again = RunCtl(h, {"reload"});
  EXPECT_EQ(again.exit_code(), kExitFailure) << again.Describe();
  EXPECT_EQ(again.out, "") << again.Describe();
  EXPECT_THAT(again.err, HasSubstr("bulkheadctl: reload: payments: worker did not start: exit 1"))
      << again.Describe();
  EXPECT_THAT(again.err, HasSubstr("reloaded: payments restarted (again: ")) << again.Describe();
}

TEST(Bulkheadctl, NoBlockReturnsOnceAcceptedAndASecondRestartJoinsTheFirst) {
  HarnessOptions options = TestOptions({SlowToStop("payments", "60s")});
  Harness h(std::move(options));
  ASSERT_STARTED(h);
  // Once it answers, the worker ignores SIGTERM (it does so before it serves).
  EXPECT_OK_REPLY(h.Call("payments", "echo ready"), "ready");
  const int first_pid = h.Cell("payments")["pid"].get<int>();
  ProcessResult restart = RunCtl(h, {"restart", "--no-block", "payments"});
  ASSERT_EQ(restart.exit_code(), kExitOk) << restart.Describe();
  EXPECT_EQ(restart.out, "");
  // The old worker ignores SIGTERM for 60 s: the restart is still under way.
  EXPECT_EQ(h.Cell("payments")["state"], "stopping") << h.Status().dump();
  ProcessResult again = RunCtl(h, {"restart", "--no-block", "payments"});
  EXPECT_EQ(again.exit_code(), kExitOk) << again.Describe();
  EXPECT_EQ(again.out, "payments: restart in progress\n");
  // The stop ends now, not in 60 s.
  ASSERT_EQ(::kill(first_pid, SIGKILL), 0);
  ASSERT_TRUE(h.WaitForCell("payments", [&](const nlohmann::json& c) {
    return c["state"] == "running" && c["pid"].is_number_integer() && c["pid"] != first_pid;
  })) << h.Status().dump();
  // A second stop under way joins the first and waits with it; this worker ignores SIGTERM, so
  // the test ends its stop itself.
  const int second_pid = h.Cell("payments")["pid"].get<int>();
  ASSERT_EQ(RunCtl(h, {"stop", "--no-block", "payments"}).exit_code(), kExitOk);
  // It may be gone already: SIGTERM can arrive before the worker has set it to be ignored.
  ::kill(second_pid, SIGKILL);
  ProcessResult stop = RunCtl(h, {"stop", "payments"});
  EXPECT_EQ(stop.exit_code(), kExitOk) << stop.Describe();
  EXPECT_EQ(h.Cell("payments")["state"], "stopped") << h.Status().dump();
}

TEST(Bulkheadctl, SeveralCellsAndAllInOneCommand) {
  Harness h(TestOptions({Cell("a", 1, 0), Cell("b", 1, 0), Cell("c", 1, 0)}));
  ASSERT_STARTED(h);
  auto pids = [&h] {
    std::map<std::string, nlohmann::json> out;
    const nlohmann::json status = h.Status();
    for (const nlohmann::json& cell : status["cells"]) {
      out[cell["name"].get<std::string>()] = cell["pid"];
    }
    return out;
  };
  std::map<std::string, nlohmann::json> before = pids();
  ProcessResult two = RunCtl(h, {"restart", "a", "b"});
  ASSERT_EQ(two.exit_code(), kExitOk) << two.Describe();
  std::map<std::string, nlohmann::json> after = pids();
  EXPECT_NE(after["a"], before["a"]);
  EXPECT_NE(after["b"], before["b"]);
  EXPECT_EQ(after["c"], before["c"]);

  ProcessResult all = RunCtl(h, {"stop", "--all"});
  ASSERT_EQ(all.exit_code(), kExitOk) << all.Describe();
  const nlohmann::json stopped = h.Status();
  for (const nlohmann::json& cell : stopped["cells"]) {
    EXPECT_EQ(cell["state"], "stopped") << cell.dump();
  }
  // One unknown cell fails the command; the others are still done.
  ProcessResult mixed = RunCtl(h, {"start", "a", "nosuch"});
  EXPECT_EQ(mixed.exit_code(), kExitFailure) << mixed.Describe();
  EXPECT_EQ(mixed.err, "bulkheadctl: start nosuch: no cell named nosuch\n");
  EXPECT_EQ(h.Cell("a")["state"], "running") << h.Status().dump();
}

TEST(Bulkheadctl, WatchWritesNoScreenCodesWhenStdoutIsNotATerminal) {
  Harness h(TestOptions({Cell("payments", 1, 0)}));
  ASSERT_STARTED(h);
  // Ends by the time limit (SIGKILL); what it wrote until then is kept.
  Result<ProcessResult> run =
      RunProcess({BulkheadctlPath(), "--socket", h.control_socket(), "status", "--watch", "100ms"},
                 "", milliseconds(1500));
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_THAT(run->out, HasSubstr("CELL")) << run->Describe();
  EXPECT_EQ(run->out.find('\033'), std::string::npos) << run->Describe();
}

// `status --watch payments` watches the cell: a word after --watch that does not start with a
// digit is no interval (it was read as one: "invalid duration", exit 2).
TEST(Bulkheadctl, WatchTakesAWordThatIsNoIntervalAsTheCell) {
  Harness h(TestOptions({Cell("payments", 1, 0)}));
  ASSERT_STARTED(h);
  Result<ProcessResult> run = RunProcess(
      {BulkheadctlPath(), "--socket", h.control_socket(), "status", "--watch", "payments"}, "",
      milliseconds(1500));
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_TRUE(run->timed_out) << run->Describe();
  EXPECT_THAT(run->out, HasSubstr("● payments - running")) << run->Describe();
  EXPECT_EQ(run->err, "") << run->Describe();
}

// Runs bulkheadctl with a pseudo-terminal as stdin, types `typed` there, and returns what it
// wrote on stdout and stderr.
ProcessResult RunCtlOnTerminal(Harness& h, const std::vector<std::string>& args,
                               const std::string& typed) {
  ProcessResult result;
  UniqueFd master(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!master.valid() || ::grantpt(master.get()) != 0 || ::unlockpt(master.get()) != 0) {
    ADD_FAILURE() << "no pseudo-terminal: " << std::strerror(errno);
    return result;
  }
  const std::string slave_name = ::ptsname(master.get());
  testing::TempDir dir;
  const std::string out_path = dir.Join("out");
  const std::string err_path = dir.Join("err");
  std::vector<std::string> argv = {BulkheadctlPath(), "--socket", h.control_socket()};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (std::string& arg : argv) cargv.push_back(arg.data());
  cargv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    int in = ::open(slave_name.c_str(), O_RDWR | O_NOCTTY);
    int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (in < 0 || out < 0 || err < 0) ::_exit(126);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    ::execv(cargv[0], cargv.data());
    ::_exit(127);
  }
  if (pid < 0) {
    ADD_FAILURE() << "fork: " << std::strerror(errno);
    return result;
  }
  testing::ChildGuard guard(pid);
  // Canonical mode: the line, then ^D at the start of a line, which reads as end of file.
  const std::string keys = typed + "\x04";
  EXPECT_EQ(::write(master.get(), keys.data(), keys.size()), static_cast<ssize_t>(keys.size()));
  std::optional<int> status = guard.WaitExit(std::chrono::seconds(30));
  if (!status) {
    ADD_FAILURE() << "bulkheadctl did not exit";
    return result;
  }
  result.wait_status = *status;
  result.out = testing::ReadFile(out_path).value_or("");
  result.err = testing::ReadFile(err_path).value_or("");
  return result;
}

TEST(Bulkheadctl, CallOnATerminalSaysItReadsStdin) {
  Harness h(TestOptions({Cell("payments", 1, 0)}));
  ASSERT_STARTED(h);
  ProcessResult run = RunCtlOnTerminal(h, {"call", "payments"}, "echo typed\n");
  EXPECT_EQ(run.exit_code(), kExitOk) << run.Describe();
  EXPECT_EQ(run.out, "typed\n") << run.Describe();
  EXPECT_EQ(run.err,
            "bulkheadctl: reading the request for payments from stdin; end it with Ctrl-D (or "
            "give it with --data TEXT)\n");
  // Not from a pipe: scripts get nothing on stderr.
  ProcessResult piped = RunCtl(h, {"call", "payments"}, "echo piped");
  EXPECT_EQ(piped.exit_code(), kExitOk) << piped.Describe();
  EXPECT_EQ(piped.err, "");
}

CellSpec Printer(std::string name) { return Cell(std::move(name), 1, 0); }

TEST(Bulkheadctl, LogsPrintsTheCellsRecentLines) {
  Harness h(TestOptions({Printer("payments"), Printer("catalog")}));
  ASSERT_STARTED(h);
  EXPECT_OK_REPLY(h.Call("payments", "print-stdout hello from payments"), "printed");
  EXPECT_OK_REPLY(h.Call("catalog", "print-stderr hello from catalog"), "printed");
  ASSERT_TRUE(WaitFor([&] {
    return RunCtl(h, {"logs", "payments"}).out.find("hello from payments") != std::string::npos;
  })) << h.Log();
  ProcessResult logs = RunCtl(h, {"logs", "payments"});
  EXPECT_EQ(logs.exit_code(), kExitOk) << logs.Describe();
  EXPECT_THAT(logs.out, HasSubstr("cell=payments pid="));
  EXPECT_THAT(logs.out, HasSubstr("stream=stdout msg=\"hello from payments\"\n"));
  // The supervisor's own lines about the cell too, and nothing of the other cell.
  EXPECT_THAT(logs.out, HasSubstr("worker started"));
  EXPECT_EQ(logs.out.find("catalog"), std::string::npos) << logs.out;
  ProcessResult last = RunCtl(h, {"logs", "payments", "-n", "1"});
  EXPECT_EQ(last.exit_code(), kExitOk) << last.Describe();
  EXPECT_EQ(std::count(last.out.begin(), last.out.end(), '\n'), 1) << last.out;
  // -n 0 prints no line, as journalctl -n 0 does (with -f: only lines written from now on).
  ProcessResult none = RunCtl(h, {"logs", "payments", "-n", "0"});
  EXPECT_EQ(none.exit_code(), kExitOk) << none.Describe();
  EXPECT_EQ(none.out, "") << none.Describe();
  ProcessResult unknown = RunCtl(h, {"logs", "nosuch"});
  EXPECT_EQ(unknown.exit_code(), kExitFailure) << unknown.Describe();
  EXPECT_EQ(unknown.err, "bulkheadctl: logs nosuch: no cell named nosuch\n");
}

TEST(Bulkheadctl, LogsFollowPrintsNewLinesUntilInterrupted) {
  Harness h(TestOptions({Printer("payments")}));
  ASSERT_STARTED(h);
  testing::TempDir dir;
  const std::string out_path = dir.Join("out");
  std::vector<std::string> argv = {BulkheadctlPath(), "--socket", h.control_socket(), "logs",
                                   "payments",        "-f"};
  std::vector<char*> cargv;
  for (std::string& arg : argv) cargv.push_back(arg.data());
  cargv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (out < 0) ::_exit(126);
    ::dup2(out, 1);
    ::execv(cargv[0], cargv.data());
    ::_exit(127);
  }
  ASSERT_GT(pid, 0) << std::strerror(errno);
  testing::ChildGuard guard(pid);
  ASSERT_TRUE(WaitFor([&] {
    return testing::ReadFile(out_path).value_or("").find("worker started") != std::string::npos;
  })) << testing::ReadFile(out_path).value_or("");
  EXPECT_OK_REPLY(h.Call("payments", "print-stdout after the follow began"), "printed");
  EXPECT_TRUE(WaitFor([&] {
    return testing::ReadFile(out_path).value_or("").find("after the follow began") !=
           std::string::npos;
  })) << testing::ReadFile(out_path).value_or("");
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  std::optional<int> status = guard.WaitExit(std::chrono::seconds(10));
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << *status;
  // Each line once.
  const std::string out = testing::ReadFile(out_path).value_or("");
  EXPECT_EQ(out.find("after the follow began"), out.rfind("after the follow began")) << out;
}

TEST(Bulkheadctl, UsageErrors) {
  for (std::vector<std::string> args : {
           std::vector<std::string>{},
           std::vector<std::string>{"frobnicate"},
           std::vector<std::string>{"call"},
           std::vector<std::string>{"status", "--timeout", "5"},
           std::vector<std::string>{"status", "--bogus"},
           std::vector<std::string>{"stop"},
           std::vector<std::string>{"restart", "a", "--all"},
           std::vector<std::string>{"is-active"},
           std::vector<std::string>{"logs"},
           std::vector<std::string>{"logs", "a", "-n", "-1"},
           std::vector<std::string>{"status", "--timeout", "0s"},
           std::vector<std::string>{"status", "a", "--watch", "soon"},
           std::vector<std::string>{"status", "--watch", "5"},
           std::vector<std::string>{"status", "--watch", "-1"},
           std::vector<std::string>{"status", "--watch", "1m90s"},
           std::vector<std::string>{"status", "--watch", "0"},
           std::vector<std::string>{"status", "--watch", ""},
           std::vector<std::string>{"status", "--watch="},
           std::vector<std::string>{"status", "--watch", "1ms"},
           std::vector<std::string>{"status", "--watch", "99ms"},
           // An empty bound was taken as none: the default (a new user's trial).
           std::vector<std::string>{"reexec", "--settle-timeout", ""},
           std::vector<std::string>{"reexec", "--settle-timeout", "abc"},
       }) {
    std::vector<std::string> argv = {BulkheadctlPath(), "--socket", "/nonexistent.sock"};
    argv.insert(argv.end(), args.begin(), args.end());
    Result<ProcessResult> run = RunProcess(argv);
    ASSERT_TRUE(run.ok()) << run.status().message();
    EXPECT_EQ(run->exit_code(), kExitUsage) << ::testing::PrintToString(args) << run->Describe();
  }
  // The messages name what is wrong.
  for (auto [args, message] : {
           std::pair{std::vector<std::string>{"start"}, "start: name one or more cells, or --all"},
           // CLI11 said "cell excludes --all".
           std::pair{std::vector<std::string>{"restart", "--all", "a"},
                     "bulkheadctl: restart: name cells or --all, not both\n"},
           std::pair{std::vector<std::string>{"stop", "a", "--all"},
                     "bulkheadctl: stop: name cells or --all, not both\n"},
           std::pair{std::vector<std::string>{"logs", "a", "-n", "-1"},
                     "must be a whole number, 0 or more"},
           // ParseDuration's examples once, not followed by "(e.g. 500ms, 2s)" again.
           std::pair{std::vector<std::string>{"status", "--timeout", "5"},
                     "bulkheadctl: --timeout: invalid duration \"5\": a unit is required, a bare "
                     "number is ambiguous; write \"5s\" for seconds; expected one or more "
                     "<integer><unit> groups, largest unit first, such as \"500ms\", \"2s\" or "
                     "\"1m30s\" (units: h, m, s, ms)\n"},
           std::pair{std::vector<std::string>{"status", "--timeout", "0s"},
                     "bulkheadctl: --timeout: \"0s\" must be more than 0"},
           // A bare 0 was told to write "0s", which was then refused.
           std::pair{std::vector<std::string>{"status", "--watch", "0"},
                     "bulkheadctl: --watch: \"0\" must be more than 0 (a duration such as "
                     "\"500ms\" or \"2s\")\n"},
           // An empty interval was taken as no value: the 2 s default.
           std::pair{std::vector<std::string>{"status", "--watch", ""},
                     "bulkheadctl: --watch: an empty interval (--watch \"\"); give one such as "
                     "\"500ms\" or \"2s\", or no value for 2s\n"},
           // 1ms was accepted: a redraw (and a control query) 1000 times a second.
           std::pair{std::vector<std::string>{"status", "--watch", "1ms"},
                     "bulkheadctl: --watch: \"1ms\" is less than the minimum interval, 100ms "
                     "(a duration such as \"500ms\" or \"2s\")\n"},
           std::pair{std::vector<std::string>{"status", "payments", "-w", "99ms"},
                     "bulkheadctl: --watch: \"99ms\" is less than the minimum interval, 100ms"},
           std::pair{std::vector<std::string>{"reexec", "--settle-timeout", ""},
                     "bulkheadctl: --settle-timeout: an empty duration; give one such as "
                     "\"30s\"\n"},
           std::pair{std::vector<std::string>{"status", "-w="},
                     "bulkheadctl: --watch: an empty interval (-w=)"},
           std::pair{std::vector<std::string>{"status", "a", "--watch", "soon"},
                     "bulkheadctl: --watch: \"soon\" is not an interval (a duration such as "
                     "\"500ms\" or \"2s\"), and the cell is \"a\" already\n"},
           std::pair{std::vector<std::string>{"status", "--watch", "5"},
                     "bulkheadctl: --watch: invalid duration \"5\""},
           // A bare number: the units and the reading as seconds.
           std::pair{std::vector<std::string>{"status", "--watch", "1"},
                     "bulkheadctl: --watch: invalid duration \"1\": a unit is required, a bare "
                     "number is ambiguous; write \"1s\" for seconds; expected one or more "
                     "<integer><unit> groups, largest unit first, such as \"500ms\", \"2s\" or "
                     "\"1m30s\" (units: h, m, s, ms)\n"},
           // No cell name starts with '-': it was taken for the cell "-1".
           std::pair{std::vector<std::string>{"status", "--watch", "-1"},
                     "bulkheadctl: --watch: invalid duration \"-1\": a sign is not allowed"},
           std::pair{std::vector<std::string>{"status", "--watch", "-1", "a"},
                     "bulkheadctl: --watch: invalid duration \"-1\": a sign is not allowed"},
           std::pair{std::vector<std::string>{"status", "--watch", "1m90s"},
                     "bulkheadctl: --watch: invalid duration \"1m90s\": \"90s\" is 1m or more, "
                     "after a group in m (a group must be less than one of the unit before it); "
                     "write \"2m30s\""},
           // CLI11 said only "A subcommand is required".
           std::pair{std::vector<std::string>{"stats"},
                     "bulkheadctl: unknown command \"stats\"; did you mean \"status\"?"},
           std::pair{std::vector<std::string>{"frobnicate", "a"},
                     "bulkheadctl: unknown command \"frobnicate\" (bulkheadctl --help lists"},
       }) {
    std::vector<std::string> argv = {BulkheadctlPath(), "--socket", "/nonexistent.sock"};
    argv.insert(argv.end(), args.begin(), args.end());
    Result<ProcessResult> run = RunProcess(argv);
    ASSERT_TRUE(run.ok()) << run.status().message();
    EXPECT_THAT(run->err, HasSubstr(message)) << run->Describe();
  }
  Result<ProcessResult> help = RunProcess({BulkheadctlPath(), "--help"});
  ASSERT_TRUE(help.ok());
  EXPECT_EQ(help->exit_code(), kExitOk) << help->Describe();
  EXPECT_THAT(help->out, HasSubstr("status"));
}

}  // namespace
}  // namespace bulkhead::e2e
