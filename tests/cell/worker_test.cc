// SPDX-License-Identifier: MIT
// The worker SDK end to end: bulkhead-test-worker (built on cell/worker.h) spawned as bulkheadd
// would, spoken to with ipc::Client. Also covers the test worker's own commands and switches,
// which the supervisor's integration tests rely on.
#include "cell/worker.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ipc/frame.h"
#include "tests/cell/worker_fixture.h"
#include "tests/helpers/blob_pattern.h"
#include "tests/helpers/test_support.h"

namespace bulkhead::cell {
namespace {

using ::bulkhead::testing::ChildGuard;
using ::bulkhead::testing::ProcessExists;
using ::bulkhead::testing::ReadFile;
using ::bulkhead::testing::RunningWorker;
using ::bulkhead::testing::TestWorkerPath;
using ::bulkhead::testing::WaitFor;
using ::testing::HasSubstr;

TEST(Worker, EchoAnswersOkWithTheSameRequestId) {
  RunningWorker worker({TestWorkerPath()});
  ASSERT_TRUE(worker.ok()) << worker.error();
  ipc::Client client = worker.Connect();
  ASSERT_TRUE(client.Send(41, "echo hello world").ok());
  Result<ipc::Client::Reply> reply = client.Receive();
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  EXPECT_EQ(reply->header.type, ipc::FrameType::kReply);
  EXPECT_EQ(reply->header.status, ipc::ReplyStatus::kOk);
  EXPECT_EQ(reply->header.reason, ipc::Reason::kNone);
  EXPECT_EQ(reply->header.request_id, 41u);
  EXPECT_EQ(reply->payload, "hello world");
}

TEST(Worker, HandlerErrorIsFailedWorkerError) {
  RunningWorker worker({TestWorkerPath()});
  ASSERT_TRUE(worker.ok()) << worker.error();
  ipc::Client client = worker.Connect();
  Result<ipc::Client::Reply> reply = client.Call("fail card declined");
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  EXPECT_EQ(reply->header.status, ipc::ReplyStatus::kFailed);
  EXPECT_EQ(reply->header.reason, ipc::Reason::kWorkerError);
  EXPECT_EQ(reply->payload, "card declined");

  reply = client.Call("no-such-command");
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  EXPECT_EQ(reply->header.status, ipc::ReplyStatus::kFailed);
  EXPECT_EQ(reply->payload, "unknown command: no-such-command");
}

TEST(Worker, PipelinedRequestsOnOneConnectionAreAnsweredInOrder) {
  RunningWorker worker({TestWorkerPath()});
  ASSERT_TRUE(worker.ok()) << worker.error();
  ipc::Client client = worker.Connect();
  ASSERT_TRUE(client.Send(10, "sleep 20").ok());
  ASSERT_TRUE(client.Send(11, "echo b").ok());
  ASSERT_TRUE(client.Send(12, "fail c").ok());
  ASSERT_TRUE(client.Send(13, "").ok());
  struct Expected {
    uint64_t id;
    ipc::ReplyStatus status;
    std::string payload;
  };
  for (const Expected& expected :
       std::vector<Expected>{{10, ipc::ReplyStatus::kOk, "slept 20"},
                             {11, ipc::ReplyStatus::kOk, "b"},
                             {12, ipc::ReplyStatus::kFailed, "c"},
                             {13, ipc::ReplyStatus::kFailed, "unknown command: "}}) {
    Result<ipc::Client::Reply> reply = client.Receive();
    ASSERT_TRUE(reply.ok()) << reply.status().message();
    EXPECT_EQ(reply->header.request_id, expected.id);
    EXPECT_EQ(reply->header.status, expected.status);
    EXPECT_EQ(reply->payload, expected.payload);
  }
}

TEST(Worker, ConnectionsAreServedInParallel) {
  constexpr int kConnections = 4;
  RunningWorker worker({TestWorkerPath()});
  ASSERT_TRUE(worker.ok()) << worker.error();
  std::vector<ipc::Client> busy;
  for (int i = 0; i < kConnections; ++i) {
    busy.push_back(worker.Connect());
    // Long enough to outlive the test: the worker is killed in teardown.
    ASSERT_TRUE(busy.back().Send(1, "sleep 600000").ok());
  }
  // A worker serving connections one at a time would never report more than 2.
  ipc::Client probe = worker.Connect();
  std::string last;
  bool all_running = WaitFor([&] {
    Result<ipc::Client::Reply> reply = probe.Call("peak");
    last = reply.ok() ? reply->payload : reply.status().message();
    return last == std::to_string(kConnections + 1);
  });
  EXPECT_TRUE(all_running) << "peak stayed at " << last;
}

// BULKHEAD_WORKER_CONNECTIONS=multiplex (docs/protocol.md, "Multiplexed worker connections"): the
// requests of one connection run concurrently and each reply leaves as soon as it is ready, in
// any order.
TEST(Worker, MultiplexedConnectionRunsItsRequestsConcurrentlyAndAnswersOutOfOrder) {
  testing::TempDir gates;
  const std::string gate = gates.Join("gate");
  RunningWorker worker({TestWorkerPath()},
                       {"PATH=/usr/bin:/bin", std::string(kWorkerConnectionsEnv) + "=multiplex"});
  ASSERT_TRUE(worker.ok()) << worker.error();
  ipc::Client client = worker.Connect();
  ASSERT_TRUE(client.Send(10, "wait-file " + gate).ok());
  ASSERT_TRUE(client.Send(11, "sleep 20").ok());
  ASSERT_TRUE(client.Send(12, "fail c").ok());
  ASSERT_TRUE(client.Send(13, "peak").ok());
  // 10 waits for the gate; the three behind it on the same connection are answered meanwhile.
  std::vector<uint64_t> ids;
  for (int i = 0; i < 3; ++i) {
    Result<ipc::Client::Reply> reply = client.Receive();
    ASSERT_TRUE(reply.ok()) << reply.status().message();
    ids.push_back(reply->header.request_id);
    if (reply->header.request_id == 12) {
      EXPECT_EQ(reply->header.status, ipc::ReplyStatus::kFailed);
      EXPECT_EQ(reply->payload, "c");
    }
    if (reply->header.request_id == 13) {
      EXPECT_GE(std::stoi(reply->payload), 2) << "requests of the connection ran one at a time";
    }
  }
  EXPECT_THAT(ids, ::testing::UnorderedElementsAre(11, 12, 13));
  ASSERT_TRUE(testing::WriteFileAtomically(gate, "open\n").ok());
  Result<ipc::Client::Reply> last = client.Receive();
  ASSERT_TRUE(last.ok()) << last.status().message();
  EXPECT_EQ(last->header.request_id, 10u);
  EXPECT_EQ(last->payload, "found " + gate);
  Result<ipc::Client::Reply> env = client.Call("env " + std::string(kWorkerConnectionsEnv));
  ASSERT_TRUE(env.ok()) << env.status().message();
  EXPECT_EQ(env->payload, "multiplex");
}

TEST(Worker, MalformedBytesCloseOnlyThatConnection) {
  RunningWorker worker({TestWorkerPath()});
  ASSERT_TRUE(worker.ok()) << worker.error();
  ipc::Client healthy = worker.Connect();
  ASSERT_TRUE(healthy.Call("echo before").ok());

  ipc::Client broken = worker.Connect();
  // Protocol version 7: the decoder refuses the header.
  const char garbage[16] = {0, 0, 0, 12, 7, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  ASSERT_EQ(::write(broken.fd(), garbage, sizeof garbage), static_cast<ssize_t>(sizeof garbage));
  Result<ipc::Client::Reply> closed = broken.Receive();
  ASSERT_FALSE(closed.ok());
  EXPECT_THAT(closed.status().message(), HasSubstr("connection closed"));

  Result<ipc::Client::Reply> reply = healthy.Call("echo after");
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  EXPECT_EQ(reply->payload, "after");
  Result<ipc::Client::Reply> fresh = worker.Connect().Call("echo fresh");
  ASSERT_TRUE(fresh.ok()) << fresh.status().message();
  EXPECT_EQ(fresh->payload, "fresh");
}

TEST(Worker, OversizedRequestClosesThatConnection) {
  RunningWorker worker({TestWorkerPath()});
  ASSERT_TRUE(worker.ok()) << worker.error();
  ipc::Client client = worker.Connect();
  char header[ipc::kHeaderSize];
  ipc::FrameHeader oversized;
  oversized.request_id = 5;
  oversized.payload_size = ipc::kDefaultMaxPayload + 1;
  ipc::EncodeHeader(oversized, header);
  ASSERT_EQ(::write(client.fd(), header, sizeof header), static_cast<ssize_t>(sizeof header));
  EXPECT_FALSE(client.Receive().ok());
  EXPECT_TRUE(worker.Connect().Call("echo alive").ok());
}

TEST(Worker, ListenVariablesAreNotPassedOnToTheWorkersChildren) {
  RunningWorker worker({TestWorkerPath()});
  ASSERT_TRUE(worker.ok()) << worker.error();
  ipc::Client client = worker.Connect();
  for (const char* name : {"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"}) {
    Result<ipc::Client::Reply> reply = client.Call(std::string("env ") + name);
    ASSERT_TRUE(reply.ok()) << reply.status().message();
    EXPECT_EQ(reply->payload, "<unset>") << name;
  }
  Result<ipc::Client::Reply> path = client.Call("env PATH");
  ASSERT_TRUE(path.ok());
  EXPECT_EQ(path->payload, "/usr/bin:/bin");
}

TEST(Worker, WithoutAListeningSocketExits1) {
  cell::SpawnOptions options;
  options.argv = {TestWorkerPath()};
  Result<pid_t> pid = cell::Spawn(options);
  ASSERT_TRUE(pid.ok()) << pid.status().message();
  ChildGuard child(*pid);
  std::optional<int> wait_status = child.WaitExit();
  ASSERT_TRUE(wait_status.has_value());
  EXPECT_EQ(DescribeWaitStatus(*wait_status), "exit 1");
}

// Restores LISTEN_* of the test process after a ListenFdFromEnv test.
class ListenFdFromEnvTest : public ::testing::Test {
 protected:
  void TearDown() override {
    ::unsetenv("LISTEN_PID");
    ::unsetenv("LISTEN_FDS");
    ::unsetenv("LISTEN_FDNAMES");
  }
  static bool ListenVariablesUnset() {
    return std::getenv("LISTEN_PID") == nullptr && std::getenv("LISTEN_FDS") == nullptr &&
           std::getenv("LISTEN_FDNAMES") == nullptr;
  }
};

TEST_F(ListenFdFromEnvTest, MissingListenPid) {
  ::setenv("LISTEN_FDS", "1", 1);
  Result<int> fd = ListenFdFromEnv();
  ASSERT_FALSE(fd.ok());
  EXPECT_THAT(fd.status().message(), HasSubstr("LISTEN_PID is not set"));
  EXPECT_TRUE(ListenVariablesUnset());
}

TEST_F(ListenFdFromEnvTest, ListenPidOfAnotherProcess) {
  ::setenv("LISTEN_PID", "1", 1);
  ::setenv("LISTEN_FDS", "1", 1);
  ::setenv("LISTEN_FDNAMES", "front", 1);
  Result<int> fd = ListenFdFromEnv();
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(fd.status().message(),
            "LISTEN_PID=1 is not this process (pid " + std::to_string(::getpid()) + ")");
  EXPECT_TRUE(ListenVariablesUnset());
}

TEST_F(ListenFdFromEnvTest, ListenPidNotANumber) {
  ::setenv("LISTEN_PID", "12abc", 1);
  Result<int> fd = ListenFdFromEnv();
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(fd.status().message(), "LISTEN_PID=12abc is not a pid");
}

TEST_F(ListenFdFromEnvTest, MoreThanOneSocket) {
  ::setenv("LISTEN_PID", std::to_string(::getpid()).c_str(), 1);
  ::setenv("LISTEN_FDS", "2", 1);
  Result<int> fd = ListenFdFromEnv();
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(fd.status().message(), "LISTEN_FDS=2: expected exactly 1 listening socket");
  EXPECT_TRUE(ListenVariablesUnset());
}

TEST_F(ListenFdFromEnvTest, MissingListenFds) {
  ::setenv("LISTEN_PID", std::to_string(::getpid()).c_str(), 1);
  Result<int> fd = ListenFdFromEnv();
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(fd.status().message(), "LISTEN_FDS is not set");
}

TEST_F(ListenFdFromEnvTest, Fd3MustBeAListeningSocket) {
  testing::ScopedFdSlot slot(3);
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  UniqueFd other(pair[1]);
  UniqueFd at_three;
  if (pair[0] == 3) {
    at_three.Reset(pair[0]);
  } else {
    ASSERT_EQ(::dup2(pair[0], 3), 3);
    ::close(pair[0]);
    at_three.Reset(3);
  }
  ::setenv("LISTEN_PID", std::to_string(::getpid()).c_str(), 1);
  ::setenv("LISTEN_FDS", "1", 1);
  Result<int> fd = ListenFdFromEnv();
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(fd.status().message(), "fd 3 (LISTEN_FDS=1) is not listening");
}

TEST_F(ListenFdFromEnvTest, AcceptsAListeningSocketAtFd3AndSetsCloexec) {
  testing::ScopedFdSlot slot(3);
  testing::TempDir dir;
  Result<UniqueFd> listener = testing::ListenUnix(dir.Join("s"));
  ASSERT_TRUE(listener.ok()) << listener.status().message();
  UniqueFd at_three;
  if (listener->get() == 3) {
    at_three = std::move(listener).value();
  } else {
    ASSERT_EQ(::dup2(listener->get(), 3), 3);  // dup2: not close-on-exec
    at_three.Reset(3);
  }
  ::fcntl(3, F_SETFD, 0);
  ::setenv("LISTEN_PID", std::to_string(::getpid()).c_str(), 1);
  ::setenv("LISTEN_FDS", "1", 1);
  Result<int> fd = ListenFdFromEnv();
  ASSERT_TRUE(fd.ok()) << fd.status().message();
  EXPECT_EQ(*fd, 3);
  EXPECT_EQ(::fcntl(3, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  EXPECT_TRUE(ListenVariablesUnset());
}

// ---- The test worker's commands and switches, as the supervisor's tests use them. ----

TEST(TestWorker, ExitAndCrashEndTheProcessMidRequest) {
  RunningWorker exits({TestWorkerPath()});
  ASSERT_TRUE(exits.ok()) << exits.error();
  ipc::Client client = exits.Connect();
  EXPECT_FALSE(client.Call("exit 3").ok());
  std::optional<int> exit_status = exits.child().WaitExit();
  ASSERT_TRUE(exit_status.has_value());
  EXPECT_EQ(DescribeWaitStatus(*exit_status), "exit 3");

  RunningWorker crashes({TestWorkerPath()});
  ASSERT_TRUE(crashes.ok()) << crashes.error();
  ipc::Client crash_client = crashes.Connect();
  EXPECT_FALSE(crash_client.Call("crash").ok());
  std::optional<int> crash_status = crashes.child().WaitExit();
  ASSERT_TRUE(crash_status.has_value());
  EXPECT_EQ(DescribeWaitStatus(*crash_status), "signal 11");
}

// The chaos soak's `exit-mid-reply`: the supervisor sees the header and exactly half the payload,
// then end of stream, and the worker exits 3, whatever the size (not a race with the write).
TEST(TestWorker, ExitMidReplyWritesHalfAReplyThenExits3) {
  constexpr size_t kSize = 1000000;
  RunningWorker worker({TestWorkerPath()});
  ASSERT_TRUE(worker.ok()) << worker.error();
  ipc::Client client = worker.Connect();
  ASSERT_TRUE(client.SetTimeout(std::chrono::seconds(10)).ok());
  ASSERT_TRUE(client.Send(9, "exit-mid-reply " + std::to_string(kSize)).ok());
  std::string received;
  char buffer[65536];
  for (ssize_t n; (n = ::read(client.fd(), buffer, sizeof buffer)) != 0;) {
    ASSERT_GT(n, 0) << std::strerror(errno);
    received.append(buffer, static_cast<size_t>(n));
  }
  ipc::FrameHeader header;
  header.type = ipc::FrameType::kReply;
  header.request_id = 9;
  std::string expected;
  ipc::AppendFrame(&expected, header, testing::BlobPattern(kSize));
  expected.resize(ipc::kHeaderSize + kSize / 2);
  EXPECT_EQ(received.size(), expected.size());
  EXPECT_TRUE(received == expected) << "not the header and first half of the blob";
  std::optional<int> exit_status = worker.child().WaitExit();
  ASSERT_TRUE(exit_status.has_value());
  EXPECT_EQ(DescribeWaitStatus(*exit_status), "exit 3");
}

TEST(TestWorker, PidMatchesTheSpawnedPid) {
  RunningWorker worker({TestWorkerPath()});
  ASSERT_TRUE(worker.ok()) << worker.error();
  Result<ipc::Client::Reply> reply = worker.Connect().Call("pid");
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  EXPECT_EQ(reply->payload, std::to_string(worker.pid()));
}

TEST(TestWorker, ReadyFileHoldsThePid) {
  testing::TempDir dir;
  std::string ready = dir.Join("ready");
  RunningWorker worker({TestWorkerPath(), "--ready-file", ready});
  ASSERT_TRUE(worker.ok()) << worker.error();
  std::string content;
  EXPECT_TRUE(WaitFor([&] {
    content = ReadFile(ready).value_or("");
    return !content.empty();
  }));
  EXPECT_EQ(content, std::to_string(worker.pid()) + "\n");
}

TEST(TestWorker, ExitAfterMs) {
  RunningWorker worker({TestWorkerPath(), "--exit-after-ms", "20"});
  ASSERT_TRUE(worker.ok()) << worker.error();
  std::optional<int> wait_status = worker.child().WaitExit();
  ASSERT_TRUE(wait_status.has_value());
  EXPECT_EQ(DescribeWaitStatus(*wait_status), "exit 0");
}

TEST(TestWorker, IgnoreSigterm) {
  RunningWorker worker({TestWorkerPath(), "--ignore-sigterm"});
  ASSERT_TRUE(worker.ok()) << worker.error();
  ipc::Client client = worker.Connect();
  ASSERT_TRUE(client.Call("pid").ok());  // serving, so the switch has been applied
  // SigIgn shows the disposition directly; a SIGTERM sent below would kill a worker that does not
  // ignore it, failing the call after it.
  std::string status = ReadFile("/proc/" + std::to_string(worker.pid()) + "/status").value_or("");
  size_t at = status.find("SigIgn:\t");
  ASSERT_NE(at, std::string::npos);
  unsigned long long ignored = std::stoull(status.substr(at + 8, 16), nullptr, 16);
  EXPECT_NE(ignored & (1ull << (SIGTERM - 1)), 0u);
  ASSERT_EQ(::kill(worker.pid(), SIGTERM), 0);
  EXPECT_TRUE(client.Call("echo still here").ok());
}

// The parent pid of `pid` from /proc/<pid>/stat ("pid (comm) state ppid ..."), or -1.
pid_t ParentOf(pid_t pid) {
  std::optional<testing::ProcStat> stat = testing::ReadProcStat(pid);
  return stat ? stat->ppid : -1;
}

TEST(TestWorker, SpawnGrandchildLeavesASessionLeaderBehind) {
  ASSERT_TRUE(testing::BecomeSubreaper());
  RunningWorker worker({TestWorkerPath()});
  ASSERT_TRUE(worker.ok()) << worker.error();
  Result<ipc::Client::Reply> reply = worker.Connect().Call("spawn-grandchild");
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  ASSERT_EQ(reply->header.status, ipc::ReplyStatus::kOk) << reply->payload;
  // Orphaned when its parent exited; as subreaper this process inherited it and reaps it by pid.
  ChildGuard grandchild_guard(std::stoi(reply->payload));
  pid_t grandchild = grandchild_guard.pid();
  EXPECT_TRUE(ProcessExists(grandchild));
  EXPECT_EQ(ParentOf(grandchild), ::getpid());
  EXPECT_EQ(::getsid(grandchild), grandchild);
  EXPECT_NE(::getpgid(grandchild), worker.pid());
}

}  // namespace
}  // namespace bulkhead::cell
