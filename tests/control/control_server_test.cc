// SPDX-License-Identifier: MIT
// ControlServer on a real libuv loop with simulated time, driven from the test thread: one
// response line per request line, the idle timeout (an idle control connection was held forever
// before issue 14), a connection that keeps asking is not cut, and a request that waited in the
// socket while the loop was stalled is answered rather than cut.
#include "control/control_server.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "tests/control/unix_client.h"
#include "tests/helpers/simulated_time_source.h"
#include "tests/helpers/test_support.h"

namespace bulkhead::control {
namespace {

using bulkhead::testing::SimulatedTimeSource;
using bulkhead::testing::TempDir;
using bulkhead::testing::WaitFor;
using testing::ConnectUnix;
using testing::ReadNow;

class ControlServerTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(uv_loop_init(&loop_), 0); }
  void TearDown() override { EXPECT_EQ(uv_loop_close(&loop_), 0) << "a handle was left open"; }

  // Starts a server answering every request line with {"echo":LINE} and the peer's uid.
  void Serve(ControlServer& server) {
    Status status = server.Listen(socket_path_);
    ASSERT_TRUE(status.ok()) << status.message();
  }
  static std::string Echo(const std::string& line, const ControlPeer&) {
    return "{\"echo\":" + line + "}";
  }

  // A client connected to the server, non-blocking, once the server has accepted it.
  UniqueFd Connect(const ControlServer& server) {
    UniqueFd fd = ConnectUnix(socket_path_);
    const size_t before = server.connections();
    EXPECT_TRUE(WaitFor([&] {
      uv_run(&loop_, UV_RUN_NOWAIT);
      return server.connections() > before;
    }));
    return fd;
  }

  // Runs the loop until the server has closed `fd`'s connection (false if it did not within the
  // default deadline), gathering what it sent.
  bool RunUntilClosed(int fd, std::string* received) {
    return WaitFor([&] {
      uv_run(&loop_, UV_RUN_NOWAIT);
      return ReadNow(fd, received);
    });
  }

  void CloseServer(ControlServer& server) {
    bool closed = false;
    server.Close([&] { closed = true; });
    uv_run(&loop_, UV_RUN_DEFAULT);
    EXPECT_TRUE(closed);
  }

  // Runs the loop until `fd` has received `expected` (false if not within the default deadline),
  // gathering what came into `received`; the server must not close the connection meanwhile.
  bool RunUntilReceived(int fd, const std::string& expected, std::string* received) {
    return WaitFor([&] {
      uv_run(&loop_, UV_RUN_NOWAIT);
      EXPECT_FALSE(ReadNow(fd, received)) << "closed after " << *received;
      return received->size() >= expected.size();
    });
  }

  uv_loop_t loop_{};
  SimulatedTimeSource time_;
  TempDir dir_;
  std::string socket_path_ = dir_.path() + "/control.sock";
};

TEST_F(ControlServerTest, AnswersEachRequestLineWithOneResponseLine) {
  ControlServer server(&loop_, &time_, &Echo);
  Serve(server);
  UniqueFd client = Connect(server);
  const std::string requests = "1\n\n2\n3";
  ASSERT_EQ(::write(client.get(), requests.data(), requests.size()),
            static_cast<ssize_t>(requests.size()));
  std::string received;
  ASSERT_TRUE(WaitFor([&] {
    uv_run(&loop_, UV_RUN_NOWAIT);
    EXPECT_FALSE(ReadNow(client.get(), &received)) << "closed early";
    return received.size() >= std::string("{\"echo\":1}\n{\"echo\":2}\n").size();
  }));
  EXPECT_EQ(received, "{\"echo\":1}\n{\"echo\":2}\n");  // "3" waits for its newline
  CloseServer(server);
}

// An idle control connection (connected, nothing sent) is closed by the server once the idle
// timeout has passed; before issue 14 it was held until bulkheadd exited.
TEST_F(ControlServerTest, ClosesAnIdleConnection) {
  ControlServer server(&loop_, &time_, &Echo);
  Serve(server);
  UniqueFd client = Connect(server);
  std::string received;
  time_.Advance(ControlServer::kIdleTimeoutMs - 1);
  uv_run(&loop_, UV_RUN_NOWAIT);
  EXPECT_FALSE(ReadNow(client.get(), &received)) << "closed before the idle timeout";
  EXPECT_EQ(server.connections(), 1u);
  time_.Advance(1);
  EXPECT_TRUE(RunUntilClosed(client.get(), &received)) << "the idle connection is still open";
  EXPECT_EQ(received, "");
  EXPECT_TRUE(WaitFor([&] {
    uv_run(&loop_, UV_RUN_NOWAIT);
    return server.connections() == 0;
  }));
  CloseServer(server);
}

// A client that keeps using its connection (as a long exchange does: a request every half
// timeout, eight in a row, four timeouts in all) is not cut: the timeout counts from the last
// byte moved, not from the accept.
TEST_F(ControlServerTest, DoesNotCutAConnectionThatKeepsAsking) {
  constexpr uint64_t kIdleMs = 100;
  ControlServer server(&loop_, &time_, &Echo, kIdleMs);
  Serve(server);
  UniqueFd client = Connect(server);
  std::string received;
  std::string expected;
  for (int i = 1; i <= 8; ++i) {
    time_.Advance(kIdleMs / 2);
    const std::string request = std::to_string(i) + "\n";
    // MSG_NOSIGNAL: a connection the server cut fails the test, not the test binary (SIGPIPE).
    ASSERT_EQ(::send(client.get(), request.data(), request.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(request.size()))
        << "cut after " << received;
    expected += "{\"echo\":" + std::to_string(i) + "}\n";
    ASSERT_TRUE(RunUntilReceived(client.get(), expected, &received)) << received;
  }
  EXPECT_EQ(received, expected);
  // Once it stops asking, it is idle: closed a whole timeout after the last byte it got.
  time_.Advance(kIdleMs - 1);
  uv_run(&loop_, UV_RUN_NOWAIT);
  EXPECT_FALSE(ReadNow(client.get(), &received));
  time_.Advance(1);
  EXPECT_TRUE(RunUntilClosed(client.get(), &received));
  CloseServer(server);
}

// Above kMaxConnections a new control connection is closed at once (there was no cap: every
// local client that may connect could take a descriptor of bulkheadd's); the others are served.
TEST_F(ControlServerTest, ClosesAConnectionAboveTheCap) {
  ControlServer server(&loop_, &time_, &Echo);
  Serve(server);
  std::vector<UniqueFd> clients;
  for (size_t i = 0; i < ControlServer::kMaxConnections; ++i) clients.push_back(Connect(server));
  ASSERT_EQ(server.connections(), ControlServer::kMaxConnections);
  UniqueFd extra = ConnectUnix(socket_path_);
  std::string received;
  EXPECT_TRUE(RunUntilClosed(extra.get(), &received)) << "the connection above the cap is open";
  EXPECT_EQ(received, "");
  ASSERT_EQ(::write(clients.front().get(), "1\n", 2), 2);
  ASSERT_TRUE(WaitFor([&] {
    uv_run(&loop_, UV_RUN_NOWAIT);
    EXPECT_FALSE(ReadNow(clients.front().get(), &received)) << "closed";
    return received == "{\"echo\":1}\n";
  }));
  CloseServer(server);
}

// A request that reached the socket while the loop was not running (bulkheadd stopped, frozen or
// starved) for longer than the idle timeout is read and answered before the idle verdict: libuv
// runs expired timers before it polls, so the timer alone would have cut it.
TEST_F(ControlServerTest, AnswersARequestThatWaitedWhileTheLoopWasStalled) {
  ControlServer server(&loop_, &time_, &Echo, /*idle_timeout_ms=*/1);
  Serve(server);
  UniqueFd client = Connect(server);
  ASSERT_EQ(::write(client.get(), "7\n", 2), 2);
  // The stall: the idle timer fires before the loop has read the request.
  time_.Advance(5);
  std::string received;
  ASSERT_TRUE(RunUntilReceived(client.get(), "{\"echo\":7}\n", &received));
  EXPECT_EQ(received, "{\"echo\":7}\n");
  // Idle from then on: closed.
  time_.Advance(1);
  EXPECT_TRUE(RunUntilClosed(client.get(), &received));
  CloseServer(server);
}

// The heap a control answer freed goes back to the kernel once, kReleaseHeapDelayMs after the
// first answer since the last release, however many answers came in between; an idle server
// releases nothing. malloc_trim(0) ran after each answer before: a syscall-heavy walk of the heap
// on the loop thread per control request.
TEST_F(ControlServerTest, ReleasesTheFreedHeapOnceADelayAfterAnswersNotAfterEach) {
  int releases = 0;
  ControlServer server(&loop_, &time_, &Echo, ControlServer::kIdleTimeoutMs,
                       [&releases] { ++releases; });
  Serve(server);
  UniqueFd client = Connect(server);
  const size_t idle_timers = time_.armed_timers();
  std::string received;
  ASSERT_EQ(::write(client.get(), "1\n2\n3\n", 6), 6);
  ASSERT_TRUE(
      RunUntilReceived(client.get(), "{\"echo\":1}\n{\"echo\":2}\n{\"echo\":3}\n", &received));
  EXPECT_EQ(releases, 0) << "released at the answer";
  time_.Advance(ControlServer::kReleaseHeapDelayMs / 2);
  ASSERT_EQ(::write(client.get(), "4\n", 2), 2);
  ASSERT_TRUE(RunUntilReceived(client.get(), received + "{\"echo\":4}\n", &received));
  time_.Advance(ControlServer::kReleaseHeapDelayMs / 2 - 1);
  EXPECT_EQ(releases, 0);
  time_.Advance(1);
  EXPECT_EQ(releases, 1) << "one release for the four answers, the delay after the first";
  // Nothing asked: nothing armed, nothing released.
  EXPECT_EQ(time_.armed_timers(), idle_timers);
  time_.Advance(3 * ControlServer::kReleaseHeapDelayMs);
  EXPECT_EQ(releases, 1);
  ASSERT_EQ(::write(client.get(), "5\n", 2), 2);
  ASSERT_TRUE(RunUntilReceived(client.get(), received + "{\"echo\":5}\n", &received));
  time_.Advance(ControlServer::kReleaseHeapDelayMs);
  EXPECT_EQ(releases, 2);
  CloseServer(server);
}

}  // namespace
}  // namespace bulkhead::control
