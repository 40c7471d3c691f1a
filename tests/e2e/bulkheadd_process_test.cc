// SPDX-License-Identifier: MIT
// bulkheadd's life as a process: SIGTERM answers what is pending, stops every worker (even one
// that ignores SIGTERM), removes the sockets and exits 0; a second instance on the same config is
// refused while the first keeps serving; socket files left by a SIGKILLed supervisor are reclaimed;
// a bad config is refused with file:line:col errors before anything starts. Instances never take
// each other's files: the runtime_dir lock (bulkheadd.pid) refuses a second one at once, a live
// socket is never replaced, and shutdown removes only the socket files this instance bound.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <string>
#include <thread>

#include "base/exit_status.h"
#include "tests/e2e/e2e_test.h"

namespace bulkhead::e2e {
namespace {

using ipc::Reason;
using ipc::ReplyStatus;
using ::testing::HasSubstr;
using ::testing::StartsWith;

bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

// No process with this pid, not even a zombie.
bool Gone(pid_t pid) { return ::kill(pid, 0) != 0 && errno == ESRCH; }

std::vector<std::string> SocketFiles(const Harness& h, const std::vector<std::string>& cells) {
  std::vector<std::string> paths = {h.control_socket()};
  for (const std::string& cell : cells) {
    paths.push_back(h.CellSocket(cell));
    paths.push_back(h.WorkerSocket(cell));
  }
  return paths;
}

TEST(BulkheaddProcess, SigtermAnswersPendingRequestsStopsWorkersAndRemovesSockets) {
  // stop_timeout bounds the whole stop (docs/config.md, "Restarts"): in-flight requests may finish
  // within it, and a request that never finishes uses all of it, so the worker gets SIGKILL at the
  // deadline.
  Harness h(TestOptions({CellSpec{.name = "a",
                                  .max_concurrent = 2,
                                  .max_queue = 1,
                                  .queue_timeout = "30s",
                                  .extra_toml = "stop_timeout = \"1s\"\n"},
                         CellSpec{.name = "b", .max_concurrent = 2}}));
  ASSERT_STARTED(h);
  const pid_t a_pid = h.Cell("a")["pid"].get<pid_t>();
  const pid_t b_pid = h.Cell("b")["pid"].get<pid_t>();
  for (const std::string& path : SocketFiles(h, {"a", "b"})) EXPECT_TRUE(Exists(path)) << path;

  // In flight at SIGTERM: one request that finishes within stop_timeout (once the test creates
  // `go`, after the SIGTERM), one that never does.
  const std::string go = h.dir() + "/go.flag";
  Result<ipc::Client> finishing = h.Connect("a");
  ASSERT_TRUE(finishing.ok()) << finishing.status().message();
  ASSERT_TRUE(finishing->Send(1, "wait-file " + go).ok());
  Result<ipc::Client> hanging = h.Connect("a");
  ASSERT_TRUE(hanging.ok()) << hanging.status().message();
  ASSERT_TRUE(hanging->Send(2, "hang").ok());
  ASSERT_TRUE(h.WaitForCell("a", [](const nlohmann::json& c) { return c["running"] == 2; }));
  Result<ipc::Client> queued = h.Connect("a");
  ASSERT_TRUE(queued.ok()) << queued.status().message();
  ASSERT_TRUE(queued->Send(3, "echo never").ok());
  ASSERT_TRUE(h.WaitForCell("a", [](const nlohmann::json& c) { return c["queued"] == 1; }));

  // SIGTERM, then `go` once bulkheadd is stopping (a second SIGTERM, Stop's, changes nothing).
  ASSERT_EQ(::kill(h.pid(), SIGTERM), 0);
  ASSERT_TRUE(WaitFor([&] {
    return h.Log().find("received SIGTERM: stopping every cell") != std::string::npos;
  })) << h.Log();
  testing::CreateFlag(go);
  Result<int> stopped = h.Stop();
  ASSERT_TRUE(stopped.ok()) << stopped.status().message();
  EXPECT_TRUE(WIFEXITED(*stopped) && WEXITSTATUS(*stopped) == 0)
      << DescribeWaitStatus(*stopped) << "\n"
      << h.Log();

  // Every request got its one reply before the connections closed.
  for (ipc::Client* client : {&*finishing, &*hanging, &*queued}) {
    ASSERT_TRUE(client->SetTimeout(std::chrono::seconds(5)).ok());
  }
  EXPECT_OK_REPLY(finishing->Receive(), "found " + go);
  Result<ipc::Client::Reply> died = hanging->Receive();
  ASSERT_TRUE(IsReply(died, ReplyStatus::kFailed, Reason::kWorkerDied)) << Describe(died);
  EXPECT_EQ(died->payload, "signal 9");
  Result<ipc::Client::Reply> refused = queued->Receive();
  EXPECT_TRUE(IsReply(refused, ReplyStatus::kRejected, Reason::kUnavailable)) << Describe(refused);

  EXPECT_TRUE(Gone(a_pid)) << "worker " << a_pid << " outlived bulkheadd";
  EXPECT_TRUE(Gone(b_pid)) << "worker " << b_pid << " outlived bulkheadd";
  for (const std::string& path : SocketFiles(h, {"a", "b"})) EXPECT_FALSE(Exists(path)) << path;
}

// Answers the worker gave before SIGTERM, still waiting in bulkheadd for a client that reads
// slowly, reach it whole: the shutdown lets the client read them (up to the stop_timeout, counted
// from SIGTERM) before it closes the connections, as HAProxy's soft stop and Envoy's drain let open
// connections finish. Before, bulkheadd exited at once and the client got a cut first answer.
TEST(BulkheaddProcess, SigtermLetsAClientReadTheAnswersAlreadyMade) {
  Harness h(TestOptions({CellSpec{.name = "a", .max_concurrent = 4}}));
  ASSERT_STARTED(h);
  Result<ipc::Client> client = h.Connect("a");
  ASSERT_TRUE(client.ok()) << client.status().message();
  const std::string big(size_t{1} << 20, 'x');
  for (uint64_t id = 1; id <= 4; ++id) ASSERT_TRUE(client->Send(id, "echo " + big).ok());
  // Every answer made, most of their bytes held by bulkheadd: the client reads nothing yet.
  ASSERT_TRUE(h.WaitForCell("a", [](const nlohmann::json& c) {
    return c["running"] == 0 && c["unsent_bytes"].is_number() && c["unsent_bytes"] > (1u << 20);
  }));

  Result<int> stopped = Status::Error("not stopped");
  std::thread stopper([&] { stopped = h.Stop(); });
  const bool waited =
      WaitFor([&] { return h.Log().find("for clients to read") != std::string::npos; });
  EXPECT_TRUE(waited) << "bulkheadd did not wait for the client:\n" << h.Log();
  ASSERT_TRUE(client->SetTimeout(std::chrono::seconds(5)).ok());
  for (uint64_t id = 1; id <= 4; ++id) {
    Result<ipc::Client::Reply> reply = client->Receive();
    ASSERT_TRUE(IsReply(reply, ReplyStatus::kOk, Reason::kNone))
        << "answer " << id << ": " << Describe(reply);
    EXPECT_EQ(reply->payload.size(), big.size());
  }
  stopper.join();
  ASSERT_TRUE(stopped.ok()) << stopped.status().message();
  EXPECT_TRUE(WIFEXITED(*stopped) && WEXITSTATUS(*stopped) == 0) << DescribeWaitStatus(*stopped);
}

TEST(BulkheaddProcess, WorkerIgnoringSigtermIsKilled) {
  Harness h(TestOptions({CellSpec{.name = "stubborn",
                                  .command = {TestWorkerPath(), "--ignore-sigterm"},
                                  .extra_toml = kQuickStop}}));
  ASSERT_STARTED(h);
  // An answer proves the worker is past its signal(SIGTERM, SIG_IGN), which precedes serving.
  EXPECT_OK_REPLY(h.Call("stubborn", "echo ready"), "ready");
  const pid_t worker = h.Cell("stubborn")["pid"].get<pid_t>();
  Result<int> stopped = h.Stop();
  ASSERT_TRUE(stopped.ok()) << stopped.status().message();
  EXPECT_TRUE(WIFEXITED(*stopped) && WEXITSTATUS(*stopped) == 0)
      << DescribeWaitStatus(*stopped) << "\n"
      << h.Log();
  EXPECT_TRUE(Gone(worker));
  EXPECT_THAT(h.Log(), HasSubstr("worker exited: signal 9"));
}

TEST(BulkheaddProcess, SecondInstanceIsRefusedAndTheFirstKeepsServing) {
  Harness h(TestOptions({CellSpec{.name = "a"}}));
  ASSERT_STARTED(h);
  Result<ProcessResult> second =
      RunProcess({BulkheaddPath(), "--config", h.config_path()}, "", std::chrono::seconds(10));
  ASSERT_TRUE(second.ok()) << second.status().message();
  EXPECT_FALSE(second->timed_out) << "the second bulkheadd kept running";
  EXPECT_EQ(second->exit_code(), kExitFailure) << second->Describe();
  EXPECT_THAT(second->err, HasSubstr("is in use by bulkheadd pid " + std::to_string(h.pid())))
      << second->Describe();

  // The first instance still owns and serves every socket.
  for (const std::string& path : SocketFiles(h, {"a"})) {
    EXPECT_TRUE(Exists(path)) << path << " was removed by the refused instance";
  }
  EXPECT_EQ(h.Status().value("ok", false), true) << h.Status().dump();
  EXPECT_OK_REPLY(h.Call("a", "echo still here"), "still here");
}

// The inode a path names now ({0, 0} when nothing is there): tells a file from its replacement.
std::pair<dev_t, ino_t> Inode(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return {0, 0};
  return {st.st_dev, st.st_ino};
}

std::string Quoted(const std::string& text) { return "\"" + text + "\""; }

// Runs another bulkheadd on `runtime_dir` with cell "a", its control socket and access log (and,
// when `own_front_socket`, the cell's front socket) in `dir`, not in `runtime_dir`. It must be
// refused: exit status 1 at once. Returns its output.
ProcessResult RunRefusedInstance(const TempDir& dir, const std::string& runtime_dir,
                                 bool own_front_socket) {
  const std::string config = dir.Join("other.toml");
  std::ofstream(config) << "[supervisor]\nruntime_dir = " << Quoted(runtime_dir)
                        << "\ncontrol_socket = " << Quoted(dir.Join("control.sock"))
                        << "\naccess_log = " << Quoted(dir.Join("access.log"))
                        << "\n[cells.a]\ncommand = [" << Quoted(TestWorkerPath())
                        << "]\nmax_concurrent = 1\n"
                        << (own_front_socket ? "socket = " + Quoted(dir.Join("a.sock")) + "\n"
                                             : "");
  Result<ProcessResult> run =
      RunProcess({BulkheaddPath(), "--config", config}, "", std::chrono::seconds(10));
  EXPECT_TRUE(run.ok()) << run.status().message();
  if (!run.ok()) return ProcessResult{};
  EXPECT_FALSE(run->timed_out) << "the second bulkheadd kept running";
  EXPECT_EQ(run->exit_code(), kExitFailure) << run->Describe();
  EXPECT_FALSE(Exists(dir.Join("control.sock"))) << "the refused instance left its control socket";
  EXPECT_FALSE(Exists(dir.Join("a.sock"))) << "the refused instance left its front socket";
  return std::move(run).value();
}

// Cell "a" of `h` still has the worker socket it had (`worker_socket`), and after a restart, whose
// new worker links connect by path, it still answers: with its own worker.
void ExpectWorkerSocketKept(Harness& h, std::pair<dev_t, ino_t> worker_socket) {
  EXPECT_EQ(Inode(h.WorkerSocket("a")), worker_socket) << "the worker socket was replaced";
  Result<ProcessResult> restart = h.Ctl({"restart", "a"});
  ASSERT_TRUE(restart.ok() && restart->exit_code() == kExitOk) << restart->Describe();
  ASSERT_TRUE(h.WaitForCell(
      "a", [](const nlohmann::json& c) { return c["state"] == "running" && c["starts"] == 2; }));
  EXPECT_OK_REPLY(h.Call("a", "echo still here"), "still here");
}

// The case: its own control socket, the same runtime_dir and cell name. The lock on
// <runtime_dir>/bulkheadd.pid refuses it before it touches a socket or a file, naming the running
// pid.
TEST(BulkheaddProcess, SecondInstanceOnTheSameRuntimeDirIsRefusedWithThePidOfTheFirst) {
  Harness h(TestOptions({CellSpec{.name = "a"}}));
  ASSERT_STARTED(h);
  const std::string lock = h.runtime_dir() + "/bulkheadd.pid";
  EXPECT_EQ(testing::ReadFile(lock), std::to_string(h.pid()) + "\n");
  const auto worker_socket = Inode(h.WorkerSocket("a"));
  TempDir other;
  ProcessResult second = RunRefusedInstance(other, h.runtime_dir(), false);
  EXPECT_THAT(second.err, HasSubstr("supervisor.runtime_dir: runtime_dir " + h.runtime_dir() +
                                    " is in use by bulkheadd pid " + std::to_string(h.pid()) +
                                    " (it holds the lock on " + lock + ")"))
      << second.Describe();
  // Refused before it opened (created) a file of its own.
  EXPECT_FALSE(Exists(other.Join("access.log"))) << "the refused instance created its access log";
  EXPECT_EQ(testing::ReadFile(lock), std::to_string(h.pid()) + "\n");
  ExpectWorkerSocketKept(h, worker_socket);
  Result<int> stopped = h.Stop();
  ASSERT_TRUE(stopped.ok()) << stopped.status().message();
  EXPECT_FALSE(Exists(lock)) << "a clean shutdown leaves its lock file";
}

// Without the lock (its file removed behind the first instance's back), the claim alone still
// refuses a live worker socket: a connect(2) to it is accepted, so it is not stale.
TEST(BulkheaddProcess, LiveWorkerSocketIsNeverReplaced) {
  Harness h(TestOptions({CellSpec{.name = "a"}}));
  ASSERT_STARTED(h);
  EXPECT_EQ(::unlink((h.runtime_dir() + "/bulkheadd.pid").c_str()), 0) << "no lock file";
  const auto worker_socket = Inode(h.WorkerSocket("a"));
  TempDir other;
  ProcessResult second = RunRefusedInstance(other, h.runtime_dir(), true);
  EXPECT_THAT(second.err,
              HasSubstr("cells.a: socket " + h.WorkerSocket("a") + " is in use by another process"))
      << second.Describe();
  ExpectWorkerSocketKept(h, worker_socket);
}

// A's files (sockets and lock) are removed behind its back; B starts on the same config and binds
// the same paths. SIGTERM to A must leave B's files alone: A removes only the inodes it bound.
TEST(BulkheaddProcess, ShutdownRemovesOnlyTheFilesItBound) {
  Harness h(TestOptions({CellSpec{.name = "a"}}));
  ASSERT_STARTED(h);
  const std::vector<std::string> files = {h.control_socket(), h.CellSocket("a"),
                                          h.WorkerSocket("a"), h.runtime_dir() + "/a.notify",
                                          h.runtime_dir() + "/bulkheadd.pid"};
  // EXPECT, not ASSERT: the test goes on to what shutdown removes even if one is missing.
  for (const std::string& path : files) EXPECT_EQ(::unlink(path.c_str()), 0) << path;

  const std::string b_log = h.dir() + "/b.log";
  const int log = ::open(b_log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  ASSERT_GE(log, 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, log, 1);
  posix_spawn_file_actions_adddup2(&actions, log, 2);
  const std::string binary = BulkheaddPath();
  const std::string config = h.config_path();
  char* argv[] = {const_cast<char*>(binary.c_str()), const_cast<char*>("--config"),
                  const_cast<char*>(config.c_str()), nullptr};
  pid_t b_pid = -1;
  const int spawned = ::posix_spawn(&b_pid, argv[0], &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(log);
  ASSERT_EQ(spawned, 0);
  testing::ChildGuard b(b_pid);
  // A's control socket is gone: whatever answers on its path is B.
  ASSERT_TRUE(WaitFor([&] {
    nlohmann::json status = h.Status();
    return status.value("ok", false) && status["supervisor"]["pid"] == b_pid &&
           status["cells"][0]["state"] == "running";
  })) << testing::ReadFile(b_log).value_or("");
  std::vector<std::pair<dev_t, ino_t>> b_files;
  for (const std::string& path : files) {
    b_files.push_back(Inode(path));
    EXPECT_TRUE(Exists(path)) << path << " was not made by B";
  }

  Result<int> stopped = h.Stop();  // SIGTERM to A
  ASSERT_TRUE(stopped.ok()) << stopped.status().message();
  EXPECT_TRUE(WIFEXITED(*stopped) && WEXITSTATUS(*stopped) == 0) << h.Log();
  for (size_t i = 0; i < files.size(); ++i) {
    EXPECT_EQ(Inode(files[i]), b_files[i]) << files[i] << " of B was removed by A's shutdown";
  }
  EXPECT_OK_REPLY(h.Call("a", "echo B answers"), "B answers");
  EXPECT_EQ(h.Status()["supervisor"]["pid"], b_pid);

  ASSERT_EQ(::kill(b_pid, SIGTERM), 0);
  std::optional<int> b_exit = b.WaitExit(std::chrono::seconds(15));
  ASSERT_TRUE(b_exit.has_value()) << "B did not stop on SIGTERM";
  EXPECT_TRUE(WIFEXITED(*b_exit) && WEXITSTATUS(*b_exit) == 0) << DescribeWaitStatus(*b_exit);
  for (const std::string& path : files) EXPECT_FALSE(Exists(path)) << path << " outlived B";
}

TEST(BulkheaddProcess, StaleSocketsOfAKilledSupervisorAreReclaimed) {
  Harness h(TestOptions({CellSpec{.name = "a"}}));
  ASSERT_STARTED(h);
  const pid_t old_worker = h.Cell("a")["pid"].get<pid_t>();
  h.Kill();
  for (const std::string& path : SocketFiles(h, {"a"})) {
    ASSERT_TRUE(Exists(path)) << path << " vanished with SIGKILL: nothing stale to reclaim";
  }
  // The orphaned worker was adopted by the test (subreaper): kill and reap it by pid.
  h.KillOrphanedWorkers();
  EXPECT_TRUE(Gone(old_worker));

  ASSERT_STARTED(h);
  EXPECT_OK_REPLY(h.Call("a", "echo again"), "again");
  EXPECT_THAT(h.Log(), HasSubstr("reclaimed stale socket " + h.control_socket()));
  EXPECT_THAT(h.Log(), HasSubstr("reclaimed stale socket " + h.CellSocket("a")));
}

// Without cgroups, a worker whose supervisor was SIGKILLed must not keep running unnoticed: the
// launcher asks for PR_SET_PDEATHSIG, so the kernel kills it with its supervisor.
TEST(BulkheaddProcess, WorkerDiesWithAKilledSupervisor) {
  Harness h(TestOptions({CellSpec{.name = "a"}}));
  ASSERT_STARTED(h);
  const pid_t worker = h.Cell("a")["pid"].get<pid_t>();
  h.Kill();
  // The test process is the subreaper: the orphaned worker is its child now, and reaping it here
  // tells how it ended. The test does not signal it.
  int wait_status = 0;
  bool reaped = WaitFor([&] { return ::waitpid(worker, &wait_status, WNOHANG) == worker; });
  ASSERT_TRUE(reaped) << "worker " << worker << " outlived its SIGKILLed supervisor";
  EXPECT_TRUE(WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGKILL)
      << "wait status " << wait_status;
}

// A stray SIGUSR1/SIGUSR2 (default action: terminate) must not end the supervisor.
// (SIGUSR2 re-executes bulkheadd: tests/e2e/reexec_test.cc.)
TEST(BulkheaddProcess, StraySignalsAreLoggedAndIgnored) {
  Harness h(TestOptions({CellSpec{.name = "a"}}));
  ASSERT_STARTED(h);
  ASSERT_EQ(::kill(h.pid(), SIGUSR1), 0);
  EXPECT_TRUE(WaitFor([&] {
    return h.Log().find("SIGUSR1 has no meaning to bulkheadd: ignored") != std::string::npos;
  })) << h.Log();
  EXPECT_OK_REPLY(h.Call("a", "echo still here"), "still here");
}

// docs/reexec.md, "Before the exec": what a running bulkheadd asks of a new binary before it
// re-executes into it, answered without a config file.
TEST(BulkheaddProcess, ReexecStateVersionsPrintsTheVersionsItReadsWithoutAConfig) {
  Result<ProcessResult> run = RunProcess(
      {BulkheaddPath(), "--config", "/nonexistent/bulkhead.toml", "--reexec-state-versions"}, "",
      std::chrono::seconds(10));
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->exit_code(), kExitOk) << run->Describe();
  EXPECT_EQ(run->out, "1 2 3 4\n");
}

// systemd's halt and poweroff requests, which podman's systemd mode sends a container's PID 1
// (`podman stop`): an orderly shutdown, exit 0, the worker stopped, not a 10 s wait for SIGKILL.
TEST(BulkheaddProcess, SystemdHaltAndPoweroffSignalsStopInOrder) {
  for (int offset : {3, 4}) {
    SCOPED_TRACE("SIGRTMIN+" + std::to_string(offset));
    Harness h(TestOptions({CellSpec{.name = "a"}}));
    ASSERT_STARTED(h);
    const pid_t worker = h.Cell("a")["pid"].get<pid_t>();
    Result<int> status = h.Stop(SIGRTMIN + offset);
    ASSERT_TRUE(status.ok()) << status.status().message() << h.Log();
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << *status << h.Log();
    EXPECT_THAT(h.Log(), HasSubstr("received SIGRTMIN+" + std::to_string(offset)));
    EXPECT_TRUE(WaitFor([&] { return Gone(worker); }));
    EXPECT_FALSE(Exists(h.CellSocket("a")));
  }
}

// Runs bulkheadd on `toml`; it must refuse it.
ProcessResult RunOnConfig(const TempDir& dir, const std::string& toml) {
  const std::string path = dir.Join("bad.toml");
  std::ofstream(path) << toml;
  Result<ProcessResult> run =
      RunProcess({BulkheaddPath(), "--config", path}, "", std::chrono::seconds(10));
  EXPECT_TRUE(run.ok()) << run.status().message();
  return run.ok() ? std::move(run).value() : ProcessResult{};
}

TEST(BulkheaddProcess, BadConfigIsRefusedWithPositionedErrors) {
  TempDir dir;
  const std::string file = dir.Join("bad.toml");
  const std::string runtime = dir.Join("run");
  ProcessResult invalid = RunOnConfig(dir,
                                      "[supervisor]\n"
                                      "runtime_dir = \"" +
                                          runtime +
                                          "\"\n"
                                          "[cells.x]\n"
                                          "command = [\"/bin/true\"]\n"
                                          "max_concurrent = 0\n"
                                          "max_queu = 3\n");
  EXPECT_EQ(invalid.exit_code(), kExitConfigInvalid) << invalid.Describe();
  EXPECT_THAT(invalid.err, StartsWith(file + ":5:18: cells.x.max_concurrent: "));
  EXPECT_THAT(invalid.err, HasSubstr(file + ":6:1: cells.x.max_queu: "));
  EXPECT_THAT(invalid.err, HasSubstr("max_queue"));  // the suggestion
  EXPECT_FALSE(Exists(runtime)) << "bulkheadd created its runtime dir for a refused config";

  ProcessResult syntax = RunOnConfig(dir, "[cells.x\ncommand = 1\n");
  EXPECT_EQ(syntax.exit_code(), kExitConfigInvalid) << syntax.Describe();
  EXPECT_THAT(syntax.err, StartsWith(file + ":1:"));

  ProcessResult missing = RunOnConfig(dir, "[cells.x]\nmax_concurrent = 1\n");
  EXPECT_EQ(missing.exit_code(), kExitConfigInvalid) << missing.Describe();
  EXPECT_THAT(missing.err, StartsWith(file + ":1:1: cells.x.command: missing required key"));
}

// Issue 11 item 7 and issue 13: likely mistakes are warned about with file:line:col and key, by
// --check-config (which still exits 0) and in the log at startup.
TEST(BulkheaddProcess, WarningsNameTheKeyAndNeverRefuseTheFile) {
  TempDir dir;
  const std::string file = dir.Join("warn.toml");
  std::ofstream(file) << "[supervisor]\n"
                         "runtime_dir = \""
                      << dir.Join("run")
                      << "\"\n"
                         "[cells.x]\n"
                         "command = [\"bulkhead-no-such-program\", \"app.py\"]\n"
                         "max_concurrent = 1\n"
                         "request_timeout = \"2s\"\n";
  Result<ProcessResult> check = RunProcess({BulkheaddPath(), "--check-config", "--config", file},
                                           "", std::chrono::seconds(10));
  ASSERT_TRUE(check.ok()) << check.status().message();
  EXPECT_EQ(check->exit_code(), kExitOk) << check->Describe();
  EXPECT_EQ(check->out, file + ": ok (1 cell, 3 warnings)\n") << check->Describe();
  EXPECT_THAT(check->err,
              StartsWith("warning: " + file +
                         ":4:12: cells.x.command[0]: \"bulkhead-no-such-program\" is not an "
                         "executable file in any directory of the worker's PATH"));
  EXPECT_THAT(check->err, HasSubstr("warning: " + file +
                                    ":4:40: cells.x.command[1]: relative path \"app.py\" is "
                                    "opened by the worker from its working_directory \"/\""));
  EXPECT_THAT(check->err, HasSubstr("warning: " + file +
                                    ":6:19: cells.x.request_timeout: set without stall_timeout"));

  Harness h(TestOptions({CellSpec{.name = "a", .extra_toml = "request_timeout = \"2s\"\n"}}));
  ASSERT_STARTED(h);
  EXPECT_THAT(h.Log(), HasSubstr(h.config_path() + ":"));
  EXPECT_THAT(h.Log(), HasSubstr(": cells.a.request_timeout: set without stall_timeout"));
}

// A refused file's warnings (of its cells without errors) come with its errors, in one round.
TEST(BulkheaddProcess, CheckConfigShowsTheWarningsOfARefusedFileWithItsErrors) {
  TempDir dir;
  const std::string file = dir.Join("mixed.toml");
  std::ofstream(file) << "[cells.x]\n"
                         "command = [\"/bin/true\"]\n"
                         "max_concurrent = 0\n"
                         "[cells.y]\n"
                         "command = [\"/bin/true\"]\n"
                         "max_concurrent = 1\n"
                         "request_timeout = \"2s\"\n";
  Result<ProcessResult> check = RunProcess({BulkheaddPath(), "--check-config", "--config", file},
                                           "", std::chrono::seconds(10));
  ASSERT_TRUE(check.ok()) << check.status().message();
  EXPECT_EQ(check->exit_code(), kExitConfigInvalid) << check->Describe();
  EXPECT_THAT(check->err, StartsWith("warning: " + file +
                                     ":7:19: cells.y.request_timeout: set without stall_timeout"))
      << check->Describe();
  EXPECT_THAT(check->err, HasSubstr("\n" + file + ":3:18: cells.x.max_concurrent: "))
      << check->Describe();
  EXPECT_THAT(check->err, HasSubstr("bulkheadd: 1 error(s) and 1 warning(s) in " + file +
                                    "; configuration refused\n"))
      << check->Describe();
}

// Under a unit, a refused config must reach `journalctl -p err`: every line at priority 3, and the
// last says what did (not) happen for the kind of run.
TEST(BulkheaddProcess, ConfigErrorsAreAtPriorityErrWhenStderrIsTheJournal) {
  TempDir dir;
  const std::string file = dir.Join("bad.toml");
  std::ofstream(file) << "[cells.x]\ncommand = [\"/bin/true\"]\nmax_concurrent = 0\n";
  for (bool check_only : {false, true}) {
    std::vector<std::string> argv = {BulkheaddPath(), "--config", file};
    if (check_only) argv.push_back("--check-config");
    Result<ProcessResult> run = RunProcess(WithStderrAsJournal(argv), "", std::chrono::seconds(10));
    ASSERT_TRUE(run.ok()) << run.status().message();
    EXPECT_EQ(run->exit_code(), kExitConfigInvalid) << run->Describe();
    EXPECT_THAT(run->err, StartsWith("<3>" + file + ":3:18: cells.x.max_concurrent: "));
    const std::string last =
        check_only
            ? "<3>bulkheadd: 1 error(s) in " + file + "; configuration refused\n"
            : "<3>bulkheadd: 1 error(s) in " + file + "; configuration refused, nothing started\n";
    EXPECT_THAT(run->err, ::testing::EndsWith(last)) << run->Describe();
    EXPECT_THAT(run->err, ::testing::Not(HasSubstr("\n<6>")));
  }
  // At a terminal (no $JOURNAL_STREAM) the lines stay plain.
  Result<ProcessResult> plain = RunProcess({BulkheaddPath(), "--check-config", "--config", file});
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_THAT(plain->err, StartsWith(file + ":3:18: cells.x.max_concurrent: "));
}

}  // namespace
}  // namespace bulkhead::e2e
