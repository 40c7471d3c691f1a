// SPDX-License-Identifier: MIT
#include "cell/process.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <linux/capability.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "base/unique_fd.h"
#include "tests/cell/worker_fixture.h"
#include "tests/helpers/test_support.h"

namespace bulkhead::cell {
namespace {

using ::bulkhead::testing::ChildGuard;
using ::bulkhead::testing::ListenUnix;
using ::bulkhead::testing::ReadFile;
using ::bulkhead::testing::RunningWorker;
using ::bulkhead::testing::TempDir;
using ::testing::HasSubstr;

SpawnOptions ShellOptions(const std::string& script) {
  SpawnOptions options;
  options.argv = {"/bin/sh", "-c", script};
  options.environment = {"PATH=/usr/bin:/bin"};
  return options;
}

// Runs `options` to completion and returns the DescribeWaitStatus of its end.
std::string RunToExit(const SpawnOptions& options) {
  Result<pid_t> pid = Spawn(options);
  if (!pid.ok()) return "spawn failed: " + pid.status().message();
  ChildGuard child(*pid);
  std::optional<int> wait_status = child.WaitExit();
  if (!wait_status) return "did not exit";
  return DescribeWaitStatus(*wait_status);
}

// True when the calling process has no child left to reap (so Spawn reaped its failed child).
bool NoChildrenLeft() { return ::waitpid(-1, nullptr, WNOHANG) < 0 && errno == ECHILD; }

TEST(Spawn, ArgvEnvironmentAndWorkingDirectoryReachTheChild) {
  TempDir dir;
  ASSERT_EQ(::setenv("BULKHEAD_TEST_INHERITED", "leak", 1), 0);
  SpawnOptions options = ShellOptions(
      "printf '%s\\n' \"$0\" \"$1\" \"$GREETING\" \"${BULKHEAD_TEST_INHERITED-unset}\" "
      "\"$(pwd -P)\" \"$(readlink /proc/$$/fd/0)\" > out");
  options.argv.push_back("zero");
  options.argv.push_back("one two");
  options.environment.push_back("GREETING=hello world");
  options.working_directory = dir.path();

  EXPECT_EQ(RunToExit(options), "exit 0");
  ::unsetenv("BULKHEAD_TEST_INHERITED");
  std::string real_dir = std::filesystem::canonical(dir.path()).string();
  // "out" is relative: it lands in the working directory only if the child changed into it.
  EXPECT_EQ(ReadFile(dir.Join("out")).value_or("<missing>"),
            "zero\none two\nhello world\nunset\n" + real_dir + "\n/dev/null\n");
}

TEST(Spawn, BareNameIsSearchedInTheEnvironmentsPath) {
  SpawnOptions options;
  options.argv = {"sh", "-c", "exit 7"};
  options.environment = {"PATH=/nonexistent-bulkhead-dir:/bin:/usr/bin"};
  EXPECT_EQ(RunToExit(options), "exit 7");

  options.environment = {};  // no PATH: kDefaultSearchPath
  EXPECT_EQ(RunToExit(options), "exit 7");
}

// Checks LISTEN_* and fd 3 with the parent's copy of the listening socket at `parent_fd`.
void ExpectListenFdPassed(int parent_fd) {
  TempDir dir;
  Result<UniqueFd> listener = ListenUnix(dir.Join("s"));
  ASSERT_TRUE(listener.ok()) << listener.status().message();
  UniqueFd placed;
  if (listener->get() == parent_fd) {
    placed = std::move(listener).value();
  } else {
    // dup3 keeps the parent's copy close-on-exec, as the supervisor's sockets are.
    ASSERT_EQ(::fcntl(parent_fd, F_GETFD), -1) << "fd " << parent_fd << " is in use";
    ASSERT_EQ(::dup3(listener->get(), parent_fd, O_CLOEXEC), parent_fd);
    placed.Reset(parent_fd);
  }
  struct stat socket_stat {};
  ASSERT_EQ(::fstat(placed.get(), &socket_stat), 0);

  SpawnOptions options = ShellOptions(
      "echo \"$LISTEN_PID $LISTEN_FDS $LISTEN_FDNAMES $$\" > env; readlink /proc/$$/fd/3 > fd3");
  // Stale entries from the caller are replaced by Spawn's own.
  options.environment.push_back("LISTEN_PID=1");
  options.environment.push_back("LISTEN_FDS=9");
  options.working_directory = dir.path();
  options.listen_fd = placed.get();
  options.listen_fd_name = "front";
  Result<pid_t> pid = Spawn(options);
  ASSERT_TRUE(pid.ok()) << pid.status().message();
  ChildGuard child(*pid);
  std::optional<int> wait_status = child.WaitExit();
  ASSERT_TRUE(wait_status.has_value());
  EXPECT_EQ(DescribeWaitStatus(*wait_status), "exit 0");

  std::string pid_text = std::to_string(*pid);
  EXPECT_EQ(ReadFile(dir.Join("env")).value_or("<missing>"),
            pid_text + " 1 front " + pid_text + "\n");
  EXPECT_EQ(ReadFile(dir.Join("fd3")).value_or("<missing>"),
            "socket:[" + std::to_string(socket_stat.st_ino) + "]\n");
  // The parent's copy stays open and close-on-exec.
  EXPECT_EQ(::fcntl(placed.get(), F_GETFD), FD_CLOEXEC);
}

TEST(Spawn, ListenFdBecomesFd3WithListenVariables) { ExpectListenFdPassed(57); }

TEST(Spawn, ListenFdAlreadyAt3StaysOpenAcrossExec) {
  testing::ScopedFdSlot slot(3);
  ExpectListenFdPassed(3);
}

TEST(Spawn, ChildHasOnlyStdioAndTheListenFd) {
  // Descriptors the parent left inheritable: the child must not see them.
  UniqueFd leaked_file(::open("/dev/null", O_RDONLY));
  int leaked_pipe[2];
  ASSERT_EQ(::pipe(leaked_pipe), 0);
  UniqueFd pipe_read(leaked_pipe[0]);
  UniqueFd pipe_write(leaked_pipe[1]);
  ASSERT_TRUE(leaked_file.valid());

  RunningWorker worker({testing::TestWorkerPath()});
  ASSERT_TRUE(worker.ok()) << worker.error();
  ipc::Client client = worker.Connect();
  Result<ipc::Client::Reply> reply = client.Call("fds");
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  // 0-2 stdio, 3 the listening socket, 4 the connection this request arrived on.
  EXPECT_EQ(reply->payload, "0 1 2 3 4");
}

// Reads `fd` until EOF.
std::string ReadAll(int fd) {
  std::string text;
  char buffer[256];
  ssize_t n;
  while ((n = ::read(fd, buffer, sizeof buffer)) > 0) text.append(buffer, static_cast<size_t>(n));
  return text;
}

// Spawns a shell writing to stdout and stderr with SpawnOptions::stdout_fd / stderr_fd set to the
// write ends of two pipes, the stdout pipe's write end placed on `stdout_slot` (-1: anywhere).
void ExpectOutputCaptured(int stdout_slot) {
  std::optional<testing::ScopedFdSlot> slot;
  // A placeholder holds the slot, so that the pipes land elsewhere; dup3 below replaces it.
  UniqueFd placeholder;
  if (stdout_slot >= 0) {
    slot.emplace(stdout_slot);
    placeholder.Reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    ASSERT_EQ(placeholder.get(), stdout_slot);
  }
  int out[2];
  int err[2];
  ASSERT_EQ(::pipe2(out, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(err, O_CLOEXEC), 0);
  UniqueFd out_read(out[0]);
  UniqueFd out_write(out[1]);
  UniqueFd err_read(err[0]);
  UniqueFd err_write(err[1]);
  if (stdout_slot >= 0 && out_write.get() != stdout_slot) {
    ASSERT_EQ(::dup3(out_write.get(), stdout_slot, O_CLOEXEC), stdout_slot);
    placeholder.Release();
    out_write.Reset(stdout_slot);
  }
  SpawnOptions options = ShellOptions("echo to-out; echo to-err >&2");
  options.stdout_fd = out_write.get();
  options.stderr_fd = err_write.get();
  // A listening socket goes to 3 in the child: it must not overwrite an output descriptor there.
  UniqueFd listen(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(listen.valid());
  options.listen_fd = listen.get();
  EXPECT_EQ(RunToExit(options), "exit 0");
  // The parent's copies stay open (and close-on-exec): closed here, so EOF comes.
  EXPECT_EQ(::fcntl(out_write.get(), F_GETFD), FD_CLOEXEC);
  out_write.Reset();
  err_write.Reset();
  EXPECT_EQ(ReadAll(out_read.get()), "to-out\n");
  EXPECT_EQ(ReadAll(err_read.get()), "to-err\n");
}

TEST(Spawn, StdoutAndStderrFdsBecomeDescriptors1And2) { ExpectOutputCaptured(-1); }

// Given on 3, the listening socket's number, the output descriptor must survive the child's setup.
TEST(Spawn, OutputFdOnDescriptor3IsMovedOutOfTheWay) { ExpectOutputCaptured(3); }

TEST(Spawn, SignalMaskAndDispositionsAreReset) {
  // The parent blocks SIGTERM and ignores SIGINT; both survive execve unless Spawn resets them.
  sigset_t block;
  sigset_t saved_mask;
  sigemptyset(&block);
  sigaddset(&block, SIGTERM);
  ASSERT_EQ(::sigprocmask(SIG_BLOCK, &block, &saved_mask), 0);
  struct sigaction ignore = {};
  struct sigaction saved_int = {};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGINT, &ignore, &saved_int), 0);

  SpawnOptions options;
  options.argv = {"sleep", "60"};
  options.environment = {"PATH=/usr/bin:/bin"};
  Result<pid_t> first = Spawn(options);
  Result<pid_t> second = Spawn(options);

  ::sigaction(SIGINT, &saved_int, nullptr);
  ::sigprocmask(SIG_SETMASK, &saved_mask, nullptr);
  ASSERT_TRUE(first.ok()) << first.status().message();
  ASSERT_TRUE(second.ok()) << second.status().message();
  ChildGuard term_child(*first);
  ChildGuard int_child(*second);

  ASSERT_EQ(::kill(*first, SIGTERM), 0);
  ASSERT_EQ(::kill(*second, SIGINT), 0);
  std::optional<int> term_status = term_child.WaitExit();
  std::optional<int> int_status = int_child.WaitExit();
  ASSERT_TRUE(term_status.has_value()) << "SIGTERM did not end the child";
  ASSERT_TRUE(int_status.has_value()) << "SIGINT did not end the child";
  EXPECT_EQ(DescribeWaitStatus(*term_status), "signal 15");
  EXPECT_EQ(DescribeWaitStatus(*int_status), "signal 2");

  // Spawn leaves SIGCHLD alone: the supervisor reaps by pid.
  struct sigaction chld = {};
  ASSERT_EQ(::sigaction(SIGCHLD, nullptr, &chld), 0);
  EXPECT_EQ(chld.sa_handler, SIG_DFL);
}

// Signals 32 and 33 are glibc's own (its sigaction refuses them), but a parent that is not glibc
// may leave them ignored, and an ignored signal survives execve.
TEST(Spawn, SignalsGlibcKeepsForItselfAreResetToo) {
  struct KernelSigaction {
    uintptr_t handler;
    unsigned long flags;
    uintptr_t restorer;
    uint64_t mask;
  };
  KernelSigaction ignore = {reinterpret_cast<uintptr_t>(SIG_IGN), 0, 0, 0};
  KernelSigaction saved[2] = {};
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(::syscall(SYS_rt_sigaction, 32 + i, &ignore, &saved[i], sizeof ignore.mask), 0)
        << std::strerror(errno);
  }
  SpawnOptions options;
  options.argv = {"sleep", "60"};
  options.environment = {"PATH=/usr/bin:/bin"};
  Result<pid_t> pid = Spawn(options);
  for (int i = 0; i < 2; ++i) {
    ::syscall(SYS_rt_sigaction, 32 + i, &saved[i], nullptr, sizeof ignore.mask);
  }
  ASSERT_TRUE(pid.ok()) << pid.status().message();
  ChildGuard child(*pid);

  // Spawn returns once exec closed the status pipe: the dispositions are final by then.
  std::ifstream status("/proc/" + std::to_string(*pid) + "/status");
  std::string line;
  std::string ignored;
  while (std::getline(status, line)) {
    if (line.rfind("SigIgn:", 0) == 0) ignored = line.substr(line.find_first_not_of(" \t", 7));
  }
  EXPECT_EQ(ignored, "0000000000000000");
}

TEST(Spawn, ChildLeadsItsOwnSessionAndProcessGroup) {
  SpawnOptions options;
  options.argv = {"sleep", "60"};
  options.environment = {"PATH=/usr/bin:/bin"};
  Result<pid_t> pid = Spawn(options);
  ASSERT_TRUE(pid.ok()) << pid.status().message();
  ChildGuard child(*pid);
  EXPECT_EQ(::getpgid(*pid), *pid);
  EXPECT_EQ(::getsid(*pid), *pid);
  EXPECT_NE(::getpgid(*pid), ::getpgrp());
}

TEST(Spawn, MissingBinaryNamesPathAndErrno) {
  SpawnOptions options;
  options.argv = {"/nonexistent-bulkhead-dir/worker"};
  Result<pid_t> pid = Spawn(options);
  ASSERT_FALSE(pid.ok());
  EXPECT_EQ(pid.status().message(),
            "exec /nonexistent-bulkhead-dir/worker: No such file or directory");
  EXPECT_EQ(pid.status().error_number(), ENOENT);
  EXPECT_TRUE(NoChildrenLeft()) << "the failed child was not reaped";
}

TEST(Spawn, BareNameNotInPathNamesTheSearchPath) {
  SpawnOptions options;
  options.argv = {"bulkhead-no-such-worker"};
  options.environment = {"PATH=/usr/bin:/bin"};
  Result<pid_t> pid = Spawn(options);
  ASSERT_FALSE(pid.ok());
  EXPECT_THAT(pid.status().message(), HasSubstr("exec bulkhead-no-such-worker"));
  EXPECT_THAT(pid.status().message(), HasSubstr("PATH=/usr/bin:/bin"));
  EXPECT_THAT(pid.status().message(), HasSubstr("No such file or directory"));
  EXPECT_EQ(pid.status().error_number(), ENOENT);
  EXPECT_TRUE(NoChildrenLeft());
}

TEST(Spawn, NonExecutableFileIsPermissionDenied) {
  TempDir dir;
  std::string script = dir.Join("not-executable");
  std::ofstream(script) << "#!/bin/sh\nexit 0\n";
  ASSERT_EQ(::chmod(script.c_str(), 0644), 0);
  SpawnOptions options;
  options.argv = {script};
  Result<pid_t> pid = Spawn(options);
  ASSERT_FALSE(pid.ok());
  EXPECT_EQ(pid.status().message(), "exec " + script + ": Permission denied");
  EXPECT_EQ(pid.status().error_number(), EACCES);
  EXPECT_TRUE(NoChildrenLeft());
}

TEST(Spawn, BadWorkingDirectoryNamesChdir) {
  TempDir dir;
  SpawnOptions options = ShellOptions("exit 0");
  options.working_directory = dir.Join("missing");
  Result<pid_t> pid = Spawn(options);
  ASSERT_FALSE(pid.ok());
  EXPECT_EQ(pid.status().message(), "chdir " + dir.Join("missing") + ": No such file or directory");
  EXPECT_TRUE(NoChildrenLeft());
}

// SpawnStarted returns at the fork; the exec's outcome comes through PendingExec, which never
// blocks: waited for here with poll(2) on its descriptor, as an event loop does.
std::optional<Status> WaitForExec(PendingExec& exec) {
  for (int round = 0; round < 10'000; ++round) {
    if (std::optional<Status> outcome = exec.Poll()) return outcome;
    pollfd p{.fd = exec.fd(), .events = POLLIN, .revents = 0};
    if (::poll(&p, 1, 10'000) != 1) return std::nullopt;
  }
  return std::nullopt;
}

TEST(SpawnStarted, TheExecIsConfirmedThroughItsDescriptor) {
  Result<StartedChild> started = SpawnStarted(ShellOptions("exit 4"));
  ASSERT_TRUE(started.ok()) << started.status().message();
  ChildGuard child(started->pid);
  ASSERT_GE(started->exec.fd(), 0);
  EXPECT_NE(::fcntl(started->exec.fd(), F_GETFL) & O_NONBLOCK, 0);
  std::optional<Status> outcome = WaitForExec(started->exec);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_TRUE(outcome->ok()) << outcome->message();
  EXPECT_EQ(started->exec.fd(), -1);
  EXPECT_TRUE(started->exec.Poll().value().ok());  // the same answer again
  std::optional<int> wait_status = child.WaitExit();
  ASSERT_TRUE(wait_status.has_value());
  EXPECT_EQ(DescribeWaitStatus(*wait_status), "exit 4");
}

TEST(SpawnStarted, AFailedStepComesThroughItsDescriptorWordedAsSpawns) {
  SpawnOptions options;
  options.argv = {"/nonexistent-bulkhead-dir/worker"};
  Result<StartedChild> started = SpawnStarted(options);
  ASSERT_TRUE(started.ok()) << started.status().message();
  ChildGuard child(started->pid);  // SpawnStarted reaps nothing: the caller does
  std::optional<Status> outcome = WaitForExec(started->exec);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->message(), "exec /nonexistent-bulkhead-dir/worker: No such file or directory");
  EXPECT_EQ(outcome->error_number(), ENOENT);
  EXPECT_EQ(started->exec.Poll().value().message(), outcome->message());
  std::optional<int> wait_status = child.WaitExit();
  ASSERT_TRUE(wait_status.has_value());
  EXPECT_EQ(DescribeWaitStatus(*wait_status), "exit 127");

  TempDir dir;
  SpawnOptions chdir = ShellOptions("exit 0");
  chdir.working_directory = dir.Join("missing");
  Result<StartedChild> second = SpawnStarted(chdir);
  ASSERT_TRUE(second.ok());
  ChildGuard second_child(second->pid);
  outcome = WaitForExec(second->exec);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->message(), "chdir " + dir.Join("missing") + ": No such file or directory");
}

TEST(PendingExec, ADefaultOneIsConfirmed) {
  PendingExec exec;
  EXPECT_EQ(exec.fd(), -1);
  ASSERT_TRUE(exec.Poll().has_value());
  EXPECT_TRUE(exec.Poll()->ok());
}

TEST(Spawn, EmptyArgvIsRefusedWithoutForking) {
  SpawnOptions options;
  Result<pid_t> pid = Spawn(options);
  ASSERT_FALSE(pid.ok());
  EXPECT_EQ(pid.status().message(), "spawn: argv[0] is empty");
}

// Writes `value` to this process's /proc/self/oom_score_adj; true on success.
bool SetOwnOomScoreAdj(int value) {
  std::ofstream file("/proc/self/oom_score_adj");
  file << value;
  file.flush();
  return file.good();
}

// Sets the test process's oom_score_adj (a supervisor started at a non-zero score) and puts it
// back to what it was.
class ScopedOwnOomScoreAdj {
 public:
  explicit ScopedOwnOomScoreAdj(int value)
      : saved_(std::stoi(ReadFile("/proc/self/oom_score_adj").value_or("0"))) {
    ok_ = SetOwnOomScoreAdj(value);
  }
  ~ScopedOwnOomScoreAdj() { SetOwnOomScoreAdj(saved_); }
  bool ok() const { return ok_; }

 private:
  int saved_;
  bool ok_ = false;
};

// What the spawned child reads from its own /proc/self/oom_score_adj, or the spawn's error.
std::string ChildOomScoreAdj(std::optional<int> oom_score_adj) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return "pipe failed";
  UniqueFd out_read(out[0]);
  UniqueFd out_write(out[1]);
  SpawnOptions options = ShellOptions("cat /proc/self/oom_score_adj");
  options.stdout_fd = out_write.get();
  options.oom_score_adj = oom_score_adj;
  std::string end = RunToExit(options);
  out_write.Reset();
  std::string text = ReadAll(out_read.get());
  if (end != "exit 0") return end;
  return text;
}

// The worker never inherits the supervisor's oom_score_adj unless asked to (issue 12: a bulkheadd
// started at -1000 made every worker unkillable by the OOM killer).
TEST(Spawn, OomScoreAdjIsSetInTheChildBeforeExec) {
  ScopedOwnOomScoreAdj own(500);
  ASSERT_TRUE(own.ok());
  EXPECT_EQ(ChildOomScoreAdj(std::nullopt), "500\n");  // unset: inherited
  EXPECT_EQ(ChildOomScoreAdj(0), "0\n");
  EXPECT_EQ(ChildOomScoreAdj(700), "700\n");
  EXPECT_EQ(ChildOomScoreAdj(500), "500\n");  // the parent's own value: nothing to write
  EXPECT_EQ(ReadFile("/proc/self/oom_score_adj"), "500\n");  // the parent is untouched
}

TEST(Spawn, OomScoreAdjOutOfRangeNamesTheFileAndErrno) {
  SpawnOptions options = ShellOptions("exit 0");
  options.oom_score_adj = 5000;
  Result<pid_t> pid = Spawn(options);
  ASSERT_FALSE(pid.ok());
  EXPECT_EQ(pid.status().message(), "write 5000 to /proc/self/oom_score_adj: Invalid argument");
  EXPECT_EQ(pid.status().error_number(), EINVAL);
  EXPECT_TRUE(NoChildrenLeft());
}

// Going below the oom_score_adj a privileged process set for the supervisor (its
// oom_score_adj_min) needs CAP_SYS_RESOURCE (proc(5), the kernel's __set_oom_adj): a supervisor
// without it cannot start the worker, and the error says why. A helper process plays the
// supervisor: with CAP_SYS_RESOURCE it sets 300 (the minimum becomes 300), gives the capability up
// and asks for 0; without it (a container), it asks for -1000, below the inherited minimum.
TEST(Spawn, OomScoreAdjBelowThePrivilegedMinimumNeedsCapSysResource) {
  int report[2];
  ASSERT_EQ(::pipe2(report, O_CLOEXEC), 0);
  UniqueFd report_read(report[0]);
  UniqueFd report_write(report[1]);
  pid_t helper = ::fork();
  ASSERT_GE(helper, 0);
  if (helper == 0) {
    std::string result = "setup failed";
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct caps[2] = {};
    std::optional<int> target;
    if (::syscall(SYS_capget, &header, caps) == 0) {
      const bool privileged =
          (caps[CAP_TO_INDEX(CAP_SYS_RESOURCE)].effective & CAP_TO_MASK(CAP_SYS_RESOURCE)) != 0;
      if (!privileged) {
        target = -1000;
      } else if (SetOwnOomScoreAdj(300)) {
        caps[CAP_TO_INDEX(CAP_SYS_RESOURCE)].effective &= ~CAP_TO_MASK(CAP_SYS_RESOURCE);
        if (::syscall(SYS_capset, &header, caps) == 0) target = 0;
      }
    }
    if (target) {
      SpawnOptions options = ShellOptions("exit 0");
      options.oom_score_adj = target;
      Result<pid_t> pid = Spawn(options);
      result = pid.ok() ? "spawned at " + std::to_string(*target) : pid.status().message();
      if (pid.ok()) ::waitpid(*pid, nullptr, 0);
    }
    ssize_t ignored = ::write(report_write.get(), result.data(), result.size());
    (void)ignored;
    ::_exit(0);
  }
  ChildGuard guard(helper);
  report_write.Reset();
  std::string result = ReadAll(report_read.get());
  ASSERT_TRUE(guard.WaitExit().has_value());
  if (result == "spawned at -1000") {
    GTEST_SKIP() << "this process may go to -1000 without CAP_SYS_RESOURCE (a privileged "
                    "ancestor set its oom_score_adj_min to -1000)";
  }
  EXPECT_THAT(result, ::testing::MatchesRegex(
                          "write (0|-1000) to /proc/self/oom_score_adj \\(going below the "
                          "oom_score_adj a privileged process set for the supervisor needs "
                          "CAP_SYS_RESOURCE\\): Permission denied"));
}

// Spawning into a real cgroup (CLONE_INTO_CGROUP) is proved in the VM (tests/vm/): tests on this
// host must never write into its /sys/fs/cgroup.

TEST(Spawn, CgroupFdThatIsNotACgroupIsAClone3Error) {
  UniqueFd not_cgroup(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(not_cgroup.valid());
  SpawnOptions options;
  options.argv = {"/bin/true"};
  options.cgroup_fd = not_cgroup.get();
  Result<pid_t> pid = Spawn(options);
  ASSERT_FALSE(pid.ok());
  EXPECT_THAT(pid.status().message(),
              HasSubstr("clone3 into cgroup fd " + std::to_string(not_cgroup.get())));
  EXPECT_NE(pid.status().error_number(), 0);
  EXPECT_TRUE(NoChildrenLeft());
}

TEST(DescribeWaitStatus, ExitSignalCoreStopContinue) {
  EXPECT_EQ(DescribeWaitStatus(W_EXITCODE(3, 0)), "exit 3");
  EXPECT_EQ(DescribeWaitStatus(W_EXITCODE(0, 0)), "exit 0");
  EXPECT_EQ(DescribeWaitStatus(W_EXITCODE(0, SIGKILL)), "signal 9");
  EXPECT_EQ(DescribeWaitStatus(W_EXITCODE(0, SIGSEGV) | WCOREFLAG), "signal 11 (core dumped)");
  EXPECT_EQ(DescribeWaitStatus(W_STOPCODE(SIGSTOP)), "stopped by signal 19");
  EXPECT_EQ(DescribeWaitStatus(0xffff), "continued");
}

TEST(DescribeWaitStatus, RealExitAndKill) {
  EXPECT_EQ(RunToExit(ShellOptions("exit 3")), "exit 3");
  EXPECT_EQ(RunToExit(ShellOptions("kill -9 $$")), "signal 9");
}

}  // namespace
}  // namespace bulkhead::cell
