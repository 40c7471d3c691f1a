// SPDX-License-Identifier: MIT
// Spawn's privilege drop (SpawnOptions::credentials, umask, no_new_privileges): the test worker
// reports what it started with (`self`: /proc/self/status, its descriptors and its environment).
// Changing credentials needs root: those tests skip otherwise. nobody/nogroup (65534) exist on
// every Debian system.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cell/process.h"
#include "tests/cell/worker_fixture.h"
#include "tests/helpers/test_support.h"

namespace bulkhead::cell {
namespace {

using ::bulkhead::testing::ChildGuard;
using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

constexpr uid_t kNobody = 65534;
constexpr gid_t kNogroup = 65534;

#define SKIP_UNLESS_ROOT()                                       \
  if (::geteuid() != 0)                                          \
  GTEST_SKIP() << "changing a worker's credentials needs root; " \
                  "run the tests as root to cover it"

// What `self` answered: "Uid" -> "65534\t65534\t65534\t65534", ..., and the "Env" lines.
struct StartedWith {
  std::map<std::string, std::string> fields;
  std::vector<std::string> environment;
};

StartedWith Parse(const std::string& text) {
  StartedWith parsed;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    size_t colon = line.find(":\t");
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    std::string value = line.substr(colon + 2);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.pop_back();
    if (key == "Env") {
      parsed.environment.push_back(value);
    } else {
      parsed.fields[key] = value;
    }
  }
  return parsed;
}

// Spawns the test worker with `options` (the fixture of worker_fixture.h) and asks it `self`.
class SpawnedWorker {
 public:
  explicit SpawnedWorker(SpawnOptions options) : worker_(WithTestWorker(std::move(options))) {}
  std::string error() const { return worker_.error(); }

  StartedWith Self() {
    ipc::Client client = worker_.Connect();
    Result<ipc::Client::Reply> reply = client.Call("self");
    EXPECT_TRUE(reply.ok()) << reply.status().message();
    if (!reply.ok()) return {};
    EXPECT_EQ(reply->header.status, ipc::ReplyStatus::kOk) << reply->payload;
    return Parse(reply->payload);
  }

 private:
  static SpawnOptions WithTestWorker(SpawnOptions options) {
    options.argv = {testing::TestWorkerPath()};
    return options;
  }

  testing::RunningWorker worker_;
};

TEST(SpawnCredentials, WorkerRunsAsTheConfiguredUserWithACleanSlate) {
  SKIP_UNLESS_ROOT();
  SpawnOptions options;
  options.environment = {"PATH=/usr/bin:/bin", "GREETING=hello"};
  options.credentials = Credentials{kNobody, kNogroup, {}};
  options.umask = 0027;
  // Whatever the parent holds must not reach the worker: a blocked and an ignored signal, a
  // supplementary group, an inheritable descriptor.
  sigset_t block;
  sigset_t saved_mask;
  sigemptyset(&block);
  sigaddset(&block, SIGUSR1);
  ASSERT_EQ(::sigprocmask(SIG_BLOCK, &block, &saved_mask), 0);
  struct sigaction ignore = {};
  struct sigaction saved_usr2 = {};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGUSR2, &ignore, &saved_usr2), 0);
  UniqueFd leaked(::open("/dev/null", O_RDONLY));

  SpawnedWorker worker(options);
  ::sigaction(SIGUSR2, &saved_usr2, nullptr);
  ::sigprocmask(SIG_SETMASK, &saved_mask, nullptr);
  ASSERT_EQ(worker.error(), "");

  StartedWith self = worker.Self();
  EXPECT_EQ(self.fields["Uid"], "65534\t65534\t65534\t65534");
  EXPECT_EQ(self.fields["Gid"], "65534\t65534\t65534\t65534");
  EXPECT_EQ(self.fields["Groups"], "");
  EXPECT_EQ(self.fields["Umask"], "0027");
  EXPECT_EQ(self.fields["NoNewPrivs"], "1");
  EXPECT_EQ(self.fields["SigBlk"], "0000000000000000");
  EXPECT_EQ(self.fields["SigIgn"], "0000000000000000");
  EXPECT_EQ(self.fields["Fds"], "0 1 2 3");
  EXPECT_THAT(self.environment,
              UnorderedElementsAre("PATH=/usr/bin:/bin", "GREETING=hello", "LISTEN_FDS=1",
                                   "LISTEN_FDNAMES=worker", ::testing::StartsWith("LISTEN_PID=")));
}

TEST(SpawnCredentials, SupplementaryGroupsAreExactlyTheGivenList) {
  SKIP_UNLESS_ROOT();
  SpawnOptions options;
  options.credentials = Credentials{kNobody, kNogroup, {4, 24}};
  SpawnedWorker worker(options);
  ASSERT_EQ(worker.error(), "");
  EXPECT_EQ(worker.Self().fields["Groups"], "4 24");
}

TEST(SpawnCredentials, WithoutCredentialsTheUmaskAndNoNewPrivsStillApply) {
  // The parent's umask is not inherited: the worker gets SpawnOptions::umask.
  mode_t saved = ::umask(0077);
  SpawnOptions options;
  SpawnedWorker worker(options);
  ::umask(saved);
  ASSERT_EQ(worker.error(), "");
  StartedWith self = worker.Self();
  EXPECT_EQ(self.fields["Umask"], "0022");
  EXPECT_EQ(self.fields["NoNewPrivs"], "1");
  EXPECT_EQ(self.fields["Uid"].substr(0, self.fields["Uid"].find('\t')),
            std::to_string(::getuid()));

  SpawnOptions allowed;
  allowed.no_new_privileges = false;
  SpawnedWorker privileged(allowed);
  ASSERT_EQ(privileged.error(), "");
  EXPECT_EQ(privileged.Self().fields["NoNewPrivs"], "0");
}

TEST(SpawnCredentials, ParentDeathSignalSurvivesTheUserChange) {
  // The kernel clears PR_SET_PDEATHSIG when the credentials change (prctl(2)): Spawn must ask
  // for it after setresuid, or a worker of a killed supervisor would keep running as nobody.
  SKIP_UNLESS_ROOT();
  ASSERT_TRUE(testing::BecomeSubreaper());
  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  UniqueFd read_end(pipe_fds[0]);
  UniqueFd write_end(pipe_fds[1]);
  pid_t parent = ::fork();
  ASSERT_GE(parent, 0);
  if (parent == 0) {
    // The stand-in supervisor: spawns the worker, reports its pid and dies.
    SpawnOptions options;
    options.argv = {"/bin/sleep", "60"};
    options.credentials = Credentials{kNobody, kNogroup, {}};
    options.parent_death_signal = SIGKILL;
    Result<pid_t> worker = Spawn(options);
    pid_t reported = worker.ok() ? *worker : -1;
    ssize_t ignored = ::write(write_end.get(), &reported, sizeof reported);
    (void)ignored;
    ::_exit(0);
  }
  ChildGuard parent_guard(parent);
  write_end.Reset();
  pid_t worker_pid = -1;
  ASSERT_EQ(::read(read_end.get(), &worker_pid, sizeof worker_pid),
            static_cast<ssize_t>(sizeof worker_pid));
  ASSERT_GT(worker_pid, 0) << "spawn failed in the stand-in supervisor";
  ChildGuard worker(worker_pid);  // adopted by this subreaper once the parent dies
  ASSERT_TRUE(parent_guard.WaitExit().has_value());
  std::optional<int> status = worker.WaitExit();
  ASSERT_TRUE(status.has_value()) << "the worker outlived its parent";
  EXPECT_EQ(DescribeWaitStatus(*status), "signal 9");
}

TEST(SpawnCredentials, RefusedCredentialsAreASpawnErrorNamingTheStep) {
  // Only a process without CAP_SETGID is refused: a child that dropped to nobody first.
  SKIP_UNLESS_ROOT();
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(kNogroup) != 0 || ::setuid(kNobody) != 0) {
      ::_exit(10);
    }
    SpawnOptions options;
    options.argv = {"/bin/true"};
    options.credentials = Credentials{0, 0, {}};
    Result<pid_t> pid = Spawn(options);
    if (pid.ok()) ::_exit(11);
    if (pid.status().message() != "setgroups (0 supplementary groups): Operation not permitted") {
      ::_exit(12);
    }
    ::_exit(pid.status().error_number() == EPERM ? 0 : 13);
  }
  ChildGuard guard(child);
  std::optional<int> status = guard.WaitExit();
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(DescribeWaitStatus(*status), "exit 0");
}

}  // namespace
}  // namespace bulkhead::cell
