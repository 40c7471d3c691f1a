// SPDX-License-Identifier: MIT
// The failure paths of a re-exec (docs/reexec.md, "Failure paths" 2, 3, 4, 6 and 7), end to end:
// what each costs and what it must never cost (a running worker, a listening socket, a request
// answered twice). Failures 3, 6 and 7 are driven by bulkheadd-reexec-faults, a test-only build
// whose one fault ($BULKHEAD_TEST_REEXEC_FAULT, tests/e2e/reexec_faults.h) fires at its failure
// point; failure 4 by a binary replaced during the drain. Counts outcomes, never durations: the
// tests wait on answers and on status.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "base/exit_status.h"
#include "ctl/control_client.h"
#include "tests/e2e/e2e_test.h"

namespace bulkhead::e2e {
namespace {

using ::testing::HasSubstr;

// A drain bound far above what the tests hold a request for: only failure 2's test reaches it.
const std::string kLongDrain = "stop_timeout = \"20s\"\n";

// bulkheadd-reexec-faults with `fault`, and `cells` (by default two, a and b).
HarnessOptions FaultOptions(const std::string& fault,
                            std::vector<CellSpec> cells = {CellSpec{.name = "a"},
                                                           CellSpec{.name = "b"}}) {
  HarnessOptions options = TestOptions(std::move(cells));
  options.binary = BULKHEAD_REEXEC_FAULTS;
  options.env = {"BULKHEAD_TEST_REEXEC_FAULT=" + fault};
  return options;
}

pid_t WorkerPid(Harness& h, const std::string& cell) {
  const nlohmann::json c = h.Cell(cell);
  return c["pid"].is_number() ? c["pid"].get<pid_t>() : 0;
}

// Polls until `cell` runs a worker other than `old`.
bool WaitForAnotherWorker(Harness& h, const std::string& cell, pid_t old) {
  return h.WaitForCell(cell, [old](const nlohmann::json& c) {
    return c["state"] == "running" && c["pid"].is_number() && c["pid"].get<pid_t>() != old;
  });
}

// `bulkheadctl reexec` goes ahead: exit 0, the new image answering with re-exec `count`.
void ExpectReexecs(Harness& h, int count) {
  Result<ProcessResult> ctl = h.Ctl({"reexec"});
  ASSERT_TRUE(ctl.ok()) << ctl.status().message();
  ASSERT_EQ(ctl->exit_code(), kExitOk) << ctl->Describe() << h.Log();
  EXPECT_THAT(ctl->out, HasSubstr("re-exec " + std::to_string(count))) << ctl->out;
}

// One request on `conn` (request id `id`), answered OK with `text`.
void ExpectEcho(Result<ipc::Client>& conn, uint64_t id, const std::string& text) {
  ASSERT_TRUE(conn.ok()) << conn.status().message();
  ASSERT_TRUE(conn->Send(id, "echo " + text).ok());
  Result<ipc::Client::Reply> reply = conn->Receive();
  EXPECT_TRUE(IsReply(reply, ipc::ReplyStatus::kOk, ipc::Reason::kNone) &&
              reply->header.request_id == id && reply->payload == text)
      << Describe(reply);
}

// The descriptors above 2 of process `pid` without FD_CLOEXEC (O_CLOEXEC in its fdinfo flags).
std::vector<int> FdsWithoutCloexec(pid_t pid) {
  std::vector<int> found;
  const std::string proc = "/proc/" + std::to_string(pid);
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(proc + "/fd", ec)) {
    const int fd = std::stoi(entry.path().filename().string());
    if (fd <= 2) continue;
    std::ifstream info(proc + "/fdinfo/" + std::to_string(fd));
    for (std::string line; std::getline(info, line);) {
      if (!line.starts_with("flags:")) continue;
      if ((std::stoul(line.substr(6), nullptr, 8) & O_CLOEXEC) == 0) found.push_back(fd);
      break;
    }
  }
  return found;
}

// docs/reexec.md, failure 2: a request that outlasts the drain's bound (the longest
// stop_timeout) does not hold the re-exec up. It is answered once, FAILED worker_died "bulkheadd
// re-executed before the answer"; the exec goes ahead; its connection, handed over, carries the
// next request; every other request is served and the workers keep their pids.
TEST(ReexecFailure, ARequestOutlastingTheDrainIsFailedOnceAndTheReexecGoesAhead) {
  TempDir files;
  const std::string never = files.Join("never");  // created at the end: the worker's thread ends
  const std::string quick = "stop_timeout = \"300ms\"\n";
  Harness h(TestOptions({CellSpec{.name = "a", .max_concurrent = 2, .extra_toml = quick},
                         CellSpec{.name = "b", .extra_toml = quick}}));
  ASSERT_STARTED(h);
  const pid_t a = WorkerPid(h, "a");
  const pid_t b = WorkerPid(h, "b");
  Result<ipc::Client> keep = h.Connect("b");
  ExpectEcho(keep, 1, "b before");

  Result<ipc::Client> stuck = h.Connect("a");
  ASSERT_TRUE(stuck.ok()) << stuck.status().message();
  (void)stuck->SetTimeout(std::chrono::seconds(30));
  ASSERT_TRUE(stuck->Send(1, "wait-file " + never).ok());
  ASSERT_TRUE(h.WaitForCell("a", [](const nlohmann::json& c) { return c["in_flight"] == 1; }))
      << h.Cell("a").dump();

  ExpectReexecs(h, 1);
  Result<ipc::Client::Reply> reply = stuck->Receive();
  EXPECT_TRUE(IsReply(reply, ipc::ReplyStatus::kFailed, ipc::Reason::kWorkerDied) &&
              reply->header.request_id == 1 &&
              reply->payload == "bulkheadd re-executed before the answer")
      << Describe(reply);
  // Its connection was handed over between two requests: the next reply on it is the next
  // request's, not a second answer to the first.
  ExpectEcho(stuck, 2, "a after");
  ExpectEcho(keep, 2, "b after");
  EXPECT_OK_REPLY(h.Call("a", "echo new"), "new");

  const nlohmann::json status = h.Status();
  EXPECT_EQ(status["supervisor"]["reexec"]["count"], 1);
  EXPECT_TRUE(status["supervisor"]["reexec"]["last_error"].is_null()) << status.dump();
  const nlohmann::json cell_a = h.Cell("a");
  EXPECT_EQ(cell_a["pid"], a) << cell_a.dump();
  EXPECT_EQ(cell_a["starts"], 1) << cell_a.dump();
  EXPECT_EQ(cell_a["failed"], 1) << cell_a.dump();
  EXPECT_EQ(cell_a["rejected"], 0) << cell_a.dump();
  EXPECT_EQ(cell_a["ok"], 2) << cell_a.dump();
  EXPECT_EQ(WorkerPid(h, "b"), b);
  EXPECT_THAT(h.Log(), HasSubstr("1 request(s) still in flight at the deadline"));
  std::ofstream(never) << "";
}

// Failures 3 and 4: an exec that does not happen leaves bulkheadd as it was. A request held
// (`wait-file`) keeps the drain going while `during_drain` runs and a client connects (it waits
// in the backlog); then the exec fails with `why`. `bulkheadctl reexec` exits 1 with it, status
// keeps it, the held request, the waiting client and a keep-alive client opened before are all
// served, and so is a new connection; the worker keeps its pid.
void ExpectFailedExecLeavesBulkheaddServing(Harness& h, const std::string& why,
                                            const std::function<void()>& during_drain) {
  TempDir files;
  const std::string gate = files.Join("gate");
  const pid_t worker = WorkerPid(h, "a");
  const std::vector<int> not_cloexec_before = FdsWithoutCloexec(h.pid());
  Result<ipc::Client> keep = h.Connect("a");
  ExpectEcho(keep, 1, "before");
  Result<ipc::Client> held = h.Connect("a");
  ASSERT_TRUE(held.ok()) << held.status().message();
  (void)held->SetTimeout(std::chrono::seconds(30));
  ASSERT_TRUE(held->Send(1, "wait-file " + gate).ok());
  ASSERT_TRUE(h.WaitForCell("a", [](const nlohmann::json& c) { return c["in_flight"] == 1; }));

  Result<ipc::Client> waiting = Status::Error("not connected");
  bool drained = false;
  std::thread drain([&] {
    drained = WaitFor([&] { return h.Status()["supervisor"]["reexec"]["phase"] == "draining"; });
    if (drained) during_drain();
    waiting = h.Connect("a");
    if (waiting.ok()) {
      (void)waiting->SetTimeout(std::chrono::seconds(30));
      (void)waiting->Send(7, "echo waited");
    }
    std::ofstream(gate) << "";
  });
  Result<ProcessResult> ctl = h.Ctl({"reexec"});
  drain.join();
  ASSERT_TRUE(drained) << h.Log();
  ASSERT_TRUE(ctl.ok()) << ctl.status().message();
  EXPECT_EQ(ctl->exit_code(), kExitFailure) << ctl->Describe() << h.Log();
  EXPECT_THAT(ctl->err, HasSubstr(why)) << ctl->Describe();

  EXPECT_OK_REPLY(held->Receive(), "found " + gate);
  ASSERT_TRUE(waiting.ok()) << waiting.status().message();
  Result<ipc::Client::Reply> waited = waiting->Receive();
  EXPECT_TRUE(IsReply(waited, ipc::ReplyStatus::kOk, ipc::Reason::kNone) &&
              waited->header.request_id == 7 && waited->payload == "waited")
      << Describe(waited) << h.Log();
  ExpectEcho(keep, 2, "after");
  EXPECT_OK_REPLY(h.Call("a", "echo new"), "new");

  const nlohmann::json status = h.Status();
  EXPECT_EQ(status["supervisor"]["reexec"]["count"], 0);
  EXPECT_EQ(status["supervisor"]["reexec"]["phase"], "idle");
  EXPECT_THAT(status["supervisor"]["reexec"]["last_error"].dump(), HasSubstr(why));
  const nlohmann::json cell = h.Cell("a");
  EXPECT_EQ(cell["pid"], worker) << cell.dump();
  EXPECT_EQ(cell["starts"], 1) << cell.dump();
  EXPECT_EQ(cell["failed"], 0) << cell.dump();
  EXPECT_EQ(cell["rejected"], 0) << cell.dump();
  // Every descriptor the exec was to keep is close-on-exec again: no worker inherits one.
  EXPECT_EQ(FdsWithoutCloexec(h.pid()), not_cloexec_before);
}

// docs/reexec.md, failure 3: writing the state fails (here memfd_create, by the test build's
// fault): the cells reopen, the reason is answered and kept; a later re-exec goes ahead.
// A raw control client's settle bound past a day overflowed the deadline: the request was taken
// and refused 10 ms later (a new user's trial). Refused at once now, nothing changed.
TEST(ReexecFailure, ASettleBoundPastADayIsRefusedAtOnceAndNothingChanges) {
  Harness h(TestOptions({CellSpec{.name = "a"}}));
  ASSERT_STARTED(h);
  const pid_t a = WorkerPid(h, "a");
  ctl::ControlReply reply = ctl::QueryControl(
      h.control_socket(),
      {{"command", "reexec"}, {"settle_timeout_ms", UINT64_MAX}},
      std::chrono::steady_clock::now() + std::chrono::seconds(10));
  ASSERT_TRUE(reply.response.has_value()) << reply.error;
  EXPECT_EQ(reply.response->value("ok", true), false) << reply.response->dump();
  EXPECT_THAT(reply.response->dump(), HasSubstr("at most 86400000"));
  const nlohmann::json status = h.Status();
  EXPECT_EQ(status["supervisor"]["reexec"]["phase"], "idle") << status.dump();
  EXPECT_EQ(status["supervisor"]["reexec"]["count"], 0) << status.dump();
  EXPECT_EQ(WorkerPid(h, "a"), a);
}

TEST(ReexecFailure, AStateThatCannotBeWrittenLeavesEverythingServingAndALaterReexecWorks) {
  Harness h(FaultOptions("write-state",
                         {CellSpec{.name = "a", .max_concurrent = 2, .extra_toml = kLongDrain}}));
  ASSERT_STARTED(h);
  const pid_t worker = WorkerPid(h, "a");
  ExpectFailedExecLeavesBulkheaddServing(h, "memfd_create: Too many open files (test fault)",
                                         [] {});
  ExpectReexecs(h, 1);
  EXPECT_TRUE(h.Status()["supervisor"]["reexec"]["last_error"].is_null());
  EXPECT_EQ(WorkerPid(h, "a"), worker);
  EXPECT_OK_REPLY(h.Call("a", "echo after"), "after");
}

// docs/reexec.md, failure 4: execve returns. The binary that passed the version check is
// replaced during the drain by a file the kernel cannot execute (ENOEXEC), as an upgrade caught
// between check and exec would: bulkheadd goes on as it was; once a good binary is back, the
// re-exec goes ahead.
TEST(ReexecFailure, AnExecThatReturnsLeavesEverythingServingAndALaterReexecWorks) {
  TempDir dir;
  const std::string binary = dir.Join("bulkheadd");
  std::filesystem::copy_file(BulkheaddPath(), binary);
  auto replace = [&](const std::function<void(const std::string&)>& write) {
    const std::string next = dir.Join("bulkheadd.next");
    write(next);
    ::chmod(next.c_str(), 0755);
    std::filesystem::rename(next, binary);
  };
  HarnessOptions options =
      TestOptions({CellSpec{.name = "a", .max_concurrent = 2, .extra_toml = kLongDrain}});
  options.binary = binary;
  Harness h(std::move(options));
  ASSERT_STARTED(h);
  const pid_t worker = WorkerPid(h, "a");
  ExpectFailedExecLeavesBulkheaddServing(h, "execve " + binary + ": Exec format error", [&] {
    replace([](const std::string& next) { std::ofstream(next) << "not an executable\n"; });
  });
  replace([](const std::string& next) { std::filesystem::copy_file(BulkheaddPath(), next); });
  ExpectReexecs(h, 1);
  EXPECT_TRUE(h.Status()["supervisor"]["reexec"]["last_error"].is_null());
  EXPECT_EQ(WorkerPid(h, "a"), worker);
  EXPECT_OK_REPLY(h.Call("a", "echo after"), "after");
}

// docs/reexec.md, failure 6: a front socket in the state that is not the socket it names (the old
// image put another socket, bound elsewhere, in its fd before the exec) is bound afresh, logged at
// error; the cell's worker is still adopted, and a client connected before is still served on its
// connection. (Before, the new image refused the whole state, and the previous binary, given the
// same state, exited with every worker.)
TEST(ReexecFailure, AFrontSocketThatIsNotTheOneNamedIsBoundAfreshAndTheWorkerKept) {
  Harness h(FaultOptions("swap-front:a"));
  ASSERT_STARTED(h);
  const pid_t a = WorkerPid(h, "a");
  const pid_t b = WorkerPid(h, "b");
  Result<ipc::Client> keep = h.Connect("a");
  ExpectEcho(keep, 1, "before");
  ExpectReexecs(h, 1);
  EXPECT_THAT(h.Log(), HasSubstr("bound afresh"));
  EXPECT_TRUE(h.Status()["supervisor"]["reexec"]["last_error"].is_null());
  EXPECT_EQ(WorkerPid(h, "a"), a) << h.Log();
  EXPECT_EQ(WorkerPid(h, "b"), b);
  EXPECT_EQ(h.Cell("a")["starts"], 1);
  EXPECT_OK_REPLY(h.Call("a", "echo rebound"), "rebound");
  EXPECT_OK_REPLY(h.Call("b", "echo b"), "b");
  ExpectEcho(keep, 2, "after");
}

// docs/reexec.md, failure 6 for the control and metrics sockets: one that is not the socket the
// state names (the old image put another socket in its fd) is bound afresh at the config's path,
// logged at error; the re-exec counts as done (status, through the socket bound afresh, says so
// with no last_error), every worker keeps its pid, both endpoints answer, and a later re-exec
// carries the socket bound afresh.
// (Before, that was failure 5: the previous binary, given the same state, exited with every
// worker.)
TEST(ReexecFailure, AControlOrMetricsSocketThatIsNotTheOneNamedIsBoundAfreshAndTheWorkersKept) {
  for (const char* role : {"control", "metrics"}) {
    SCOPED_TRACE(role);
    TempDir sockets;
    const std::string metrics = sockets.Join("metrics.sock");
    HarnessOptions options = FaultOptions(std::string("swap-") + role);
    options.supervisor_toml = "metrics_listen = \"" + metrics + "\"\n";
    Harness h(options);
    ASSERT_STARTED(h);
    const pid_t a = WorkerPid(h, "a");
    const pid_t b = WorkerPid(h, "b");
    // Between the exec and the new image's bind nothing listens at the control path: a
    // `bulkheadctl reexec` polling then would take bulkheadd for gone, so this one does not wait.
    Result<ProcessResult> ctl = h.Ctl({"reexec", "--no-block"});
    ASSERT_TRUE(ctl.ok() && ctl->exit_code() == kExitOk)
        << (ctl.ok() ? ctl->Describe() : ctl.status().message());
    ASSERT_TRUE(WaitFor([&] {
      nlohmann::json s = h.Status();
      return s.value("ok", false) && s["supervisor"]["reexec"]["count"] == 1;
    })) << h.Log();
    EXPECT_THAT(h.Log(), HasSubstr(std::string(role) + " socket: "));
    EXPECT_THAT(h.Log(), HasSubstr("bound afresh"));
    const nlohmann::json status = h.Status();
    EXPECT_TRUE(status["supervisor"]["reexec"]["last_error"].is_null()) << status.dump();
    EXPECT_EQ(WorkerPid(h, "a"), a) << h.Log();
    EXPECT_EQ(WorkerPid(h, "b"), b);
    EXPECT_EQ(h.Cell("a")["starts"], 1);
    Result<ProcessResult> scrape =
        RunProcess({"/bin/sh", "-c",
                    "exec curl --silent --show-error --max-time 30 --unix-socket \"$0\" "
                    "http://localhost/metrics",
                    metrics},
                   "", std::chrono::seconds(40));
    ASSERT_TRUE(scrape.ok()) << scrape.status().message();
    EXPECT_EQ(scrape->exit_code(), 0) << scrape->Describe();
    EXPECT_THAT(scrape->out, HasSubstr("bulkhead_")) << scrape->Describe();
    EXPECT_OK_REPLY(h.Call("a", "echo a"), "a");
    ExpectReexecs(h, 2);  // and the socket bound afresh is carried by the next re-exec
  }
}

// docs/reexec.md, failure 6: a worker the new image cannot adopt (here refused by the test
// build's fault, as a cgroup path that is not a generation of its cell is) is killed with its
// process group and its cell started afresh, its counts carried (starts goes on from 1); the
// other cell's worker keeps its pid.
TEST(ReexecFailure, AWorkerThatCannotBeAdoptedIsKilledAndItsCellStartedAfresh) {
  Harness h(FaultOptions("refuse-worker:a"));
  ASSERT_STARTED(h);
  const pid_t a = WorkerPid(h, "a");
  const pid_t b = WorkerPid(h, "b");
  ExpectReexecs(h, 1);
  ASSERT_TRUE(WaitForAnotherWorker(h, "a", a)) << h.Cell("a").dump() << h.Log();
  // Killed, and reaped by bulkheadd as an orphan.
  EXPECT_TRUE(WaitFor([&] { return ::kill(a, 0) != 0 && errno == ESRCH; }));
  EXPECT_EQ(h.Cell("a")["starts"], 2) << h.Cell("a").dump();
  EXPECT_EQ(WorkerPid(h, "b"), b);
  EXPECT_EQ(h.Status()["supervisor"]["reexec"]["count"], 1);
  EXPECT_THAT(h.Log(), HasSubstr("worker not adopted, killed and started afresh"));
  EXPECT_OK_REPLY(h.Call("a", "echo fresh"), "fresh");
  EXPECT_OK_REPLY(h.Call("b", "echo b"), "b");
}

// docs/reexec.md, failure 7: a worker that exits during the exec (here SIGKILLed by the old image
// just before execve: a zombie whose SIGCHLD went with the old image's handler) is reaped by the
// new image once it adopted it, and its cell restarts it as for any crash; the other cell's
// worker keeps its pid.
TEST(ReexecFailure, AWorkerThatExitsDuringTheExecIsReapedAndRestartedAsACrash) {
  Harness h(FaultOptions("kill-worker:a"));
  ASSERT_STARTED(h);
  const pid_t a = WorkerPid(h, "a");
  const pid_t b = WorkerPid(h, "b");
  ExpectReexecs(h, 1);
  ASSERT_TRUE(WaitForAnotherWorker(h, "a", a)) << h.Cell("a").dump() << h.Log();
  const nlohmann::json cell = h.Cell("a");
  EXPECT_EQ(cell["restarts_by_reason"]["crash"], 1) << cell.dump();
  EXPECT_EQ(cell["restarts"], 1) << cell.dump();
  EXPECT_EQ(cell["starts"], 2) << cell.dump();
  EXPECT_EQ(WorkerPid(h, "b"), b);
  EXPECT_EQ(h.Cell("b")["restarts"], 0);
  EXPECT_EQ(h.Status()["supervisor"]["reexec"]["count"], 1);
  EXPECT_OK_REPLY(h.Call("a", "echo restarted"), "restarted");
}

}  // namespace
}  // namespace bulkhead::e2e
