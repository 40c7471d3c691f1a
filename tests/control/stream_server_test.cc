// SPDX-License-Identifier: MIT
// StreamServer on a real libuv loop with simulated time, as the metrics endpoint uses it: a
// timeout counted from the accept closes a connection that trickles bytes, the connection cap
// closes the connection above it at once, CloseWhenSent delivers what was sent, and Close leaves
// no handle open.
#include "control/stream_server.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <uv.h>

#include <memory>
#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "ipc/listen_socket.h"
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

// Answers "bye\n" and closes once it has read a '!'; otherwise only reads.
class ByeProtocol : public ConnectionProtocol {
 public:
  void OnBytes(StreamConnection& conn, std::string_view bytes) override {
    if (bytes.find('!') == std::string_view::npos) return;
    conn.Send("bye\n");
    conn.CloseWhenSent();
  }
};

class StreamServerTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(uv_loop_init(&loop_), 0); }
  void TearDown() override { EXPECT_EQ(uv_loop_close(&loop_), 0) << "a handle was left open"; }

  std::unique_ptr<StreamServer> Serve(StreamServer::Limits limits) {
    auto server = std::make_unique<StreamServer>(
        &loop_, &time_, "test server", limits,
        [](StreamConnection&) -> std::unique_ptr<ConnectionProtocol> {
          return std::make_unique<ByeProtocol>();
        });
    Result<ipc::ListeningSocket> socket = ipc::ClaimListeningSocket(path_, 16);
    EXPECT_TRUE(socket.ok()) << socket.status().message();
    Status status = server->ListenUnix(std::move(socket).value(), 16);
    EXPECT_TRUE(status.ok()) << status.message();
    return server;
  }

  UniqueFd Connect() { return ConnectUnix(path_); }

  void CloseServer(StreamServer& server) {
    bool closed = false;
    server.Close([&] { closed = true; });
    uv_run(&loop_, UV_RUN_DEFAULT);
    EXPECT_TRUE(closed);
    EXPECT_NE(::access(path_.c_str(), F_OK), 0) << "the socket file was left behind";
  }

  uv_loop_t loop_{};
  SimulatedTimeSource time_;
  TempDir dir_;
  std::string path_ = dir_.path() + "/s.sock";
};

// The metrics endpoint's rule: a client that sends a line every half timeout, never a whole
// request, is closed anyway once the timeout has passed since the accept.
TEST_F(StreamServerTest, TimeoutFromTheAcceptClosesAConnectionThatTrickles) {
  constexpr uint64_t kTimeoutMs = 100;
  std::unique_ptr<StreamServer> server =
      Serve({.timeout_ms = kTimeoutMs, .timeout_from = StreamServer::TimeoutFrom::kAccept});
  UniqueFd client = Connect();
  ASSERT_TRUE(WaitFor([&] {
    uv_run(&loop_, UV_RUN_NOWAIT);
    return server->connections() == 1;
  }));
  std::string received;
  for (uint64_t elapsed = 0; elapsed < kTimeoutMs; elapsed += kTimeoutMs / 2) {
    ASSERT_EQ(::write(client.get(), "x", 1), 1);
    uv_run(&loop_, UV_RUN_NOWAIT);
    EXPECT_FALSE(ReadNow(client.get(), &received)) << "closed after " << elapsed << " ms";
    time_.Advance(kTimeoutMs / 2);
  }
  ASSERT_EQ(::write(client.get(), "x", 1), 1);  // a byte sent as the timeout runs out
  EXPECT_TRUE(WaitFor([&] {
    uv_run(&loop_, UV_RUN_NOWAIT);
    return ReadNow(client.get(), &received);
  }));
  EXPECT_EQ(received, "");
  CloseServer(*server);
}

// Above max_connections a new connection is closed at once; the others are served.
TEST_F(StreamServerTest, ClosesTheConnectionAboveTheCap) {
  std::unique_ptr<StreamServer> server = Serve({.max_connections = 2});
  std::vector<UniqueFd> clients;
  for (int i = 0; i < 2; ++i) {
    clients.push_back(Connect());
    ASSERT_TRUE(WaitFor([&] {
      uv_run(&loop_, UV_RUN_NOWAIT);
      return server->connections() == clients.size();
    }));
  }
  UniqueFd third = Connect();
  std::string received;
  EXPECT_TRUE(WaitFor([&] {
    uv_run(&loop_, UV_RUN_NOWAIT);
    return ReadNow(third.get(), &received);
  }));
  EXPECT_EQ(received, "");
  ASSERT_EQ(::write(clients[0].get(), "!", 1), 1);
  received.clear();
  EXPECT_TRUE(WaitFor([&] {
    uv_run(&loop_, UV_RUN_NOWAIT);
    return ReadNow(clients[0].get(), &received);
  }));
  EXPECT_EQ(received, "bye\n");
  EXPECT_EQ(server->connections(), 1u);
  CloseServer(*server);
}

// Close ends the connections still open, removes the socket file, and leaves no handle open
// (TearDown checks uv_loop_close).
TEST_F(StreamServerTest, CloseEndsOpenConnections) {
  std::unique_ptr<StreamServer> server = Serve({});
  UniqueFd client = Connect();
  ASSERT_TRUE(WaitFor([&] {
    uv_run(&loop_, UV_RUN_NOWAIT);
    return server->connections() == 1;
  }));
  CloseServer(*server);
  EXPECT_EQ(server->connections(), 0u);
  std::string received;
  EXPECT_TRUE(ReadNow(client.get(), &received));
}

}  // namespace
}  // namespace bulkhead::control
