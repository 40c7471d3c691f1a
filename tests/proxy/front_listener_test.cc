// SPDX-License-Identifier: MIT
// FrontListener on a real libuv loop with a fake Owner that answers every request itself: the Unix
// socket and the TCP addresses of `listen` side by side, one connection limit over all of them,
// the TCP client's peer address, a bind error that names the address, and an adopting listener
// that binds afresh a socket handed over as an empty fd (a re-exec's failure 6).
#include "proxy/front_listener.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <uv.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "config/listen_address.h"
#include "ipc/client.h"
#include "ipc/frame.h"
#include "ipc/listen_socket.h"
#include "proxy/front_connection.h"
#include "tests/helpers/simulated_time_source.h"
#include "tests/helpers/test_support.h"

namespace bulkhead::proxy {
namespace {

using bulkhead::testing::ConnectTcp;
using bulkhead::testing::TempDir;
using bulkhead::testing::WaitFor;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// Answers each request OK with its own payload at once, and notes what it saw of each client.
struct EchoOwner : ClientOwner {
  std::string cell = "t";
  std::vector<Client*> connected;
  // Of each connection, in order: the peer address as text ("" for a Unix client).
  std::vector<std::string> peers;
  admission::CellCounters counters;
  std::function<void(Client*)> on_connected;

  const std::string& name() const override { return cell; }
  loop::TimeSource* time() override { return time_source; }
  void OnClientConnected(Client* conn) override {
    connected.push_back(conn);
    // A frame cell's listener makes FrontConnections only.
    const sockaddr* peer = static_cast<FrontConnection*>(conn)->peer_address();
    peers.push_back(peer == nullptr ? "" : config::ListenAddressFromSockaddr(peer)->ToString());
    if (on_connected) on_connected(conn);
  }
  void OnClientDisconnected(Client* conn) override {
    std::erase(connected, conn);
    if (on_disconnected) on_disconnected(conn);
  }
  void OnRequest(Client* conn, const RequestInfo& info, std::string_view payload) override {
    Exchange exchange;
    exchange.info = info;
    conn->Attach(&exchange);
    conn->Detach(&exchange);
    conn->OnOutcome(&exchange, Outcome::Ok(payload), &counters.ok);
  }
  void OnClientGone(Exchange*) override {}
  void OnBadRequest(const std::string&) override {}
  void OnRepliesWaiting(Client*) override {}
  void CountDelivered(uint64_t* outcome) override { ++*outcome; }
  void CountUndelivered(uint64_t) override {}
  void CountIdleClosed() override {}

  std::function<void(Client*)> on_disconnected;
  loop::TimeSource* time_source = nullptr;
};

bool Readable(int fd) {
  pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
}

// The reply's payload, or "error: ..." when there is none.
std::string Payload(const Result<ipc::Client::Reply>& reply) {
  return reply.ok() ? reply->payload : "error: " + reply.status().message();
}

class FrontListenerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(uv_loop_init(&loop_), 0);
    owner_.time_source = &time_;
    config_.name = "t";
    config_.socket = dir_.path() + "/t.sock";
  }

  void TearDown() override {
    if (listener_) {
      listener_->DisconnectAll();
      bool closed = false;
      listener_->Close([&] { closed = true; });
      uv_run(&loop_, UV_RUN_DEFAULT);
      EXPECT_TRUE(closed);
      listener_.reset();
    }
    EXPECT_EQ(uv_loop_close(&loop_), 0) << "a handle was left open";
  }

  // Makes a listener on config_ (with `listen`); the owner tracks its clients for it.
  void Make(const std::vector<std::string>& listen) {
    for (const std::string& text : listen) {
      config_.listen.push_back(config::ParseListenAddress(text).value());
    }
    listener_.emplace(&loop_, &time_, &config_, ipc::kDefaultMaxPayload, &owner_, &bulkhead_,
                      &owner_.counters);
    owner_.on_connected = [this](Client* conn) { listener_->Opened(conn); };
    owner_.on_disconnected = [this](Client* conn) { listener_->Closed(conn); };
  }
  // Make, then Bind.
  Status Bind(const std::vector<std::string>& listen) {
    Make(listen);
    return listener_->Bind(ipc::SocketAccess{});
  }

  bool RunUntil(const std::function<bool()>& done) {
    return WaitFor([&] {
      uv_run(&loop_, UV_RUN_NOWAIT);
      return done();
    });
  }

  // Sends one request on `client` and runs the loop until its reply comes.
  Result<ipc::Client::Reply> Call(ipc::Client& client, std::string_view payload) {
    Status sent = client.Send(1, payload);
    if (!sent.ok()) return sent;
    if (!RunUntil([&] { return Readable(client.fd()); })) return Status::Error("no reply");
    return client.Receive();
  }

  ipc::Client TcpClient(size_t index) {
    Result<UniqueFd> fd = ConnectTcp(listener_->tcp_addresses().at(index));
    EXPECT_TRUE(fd.ok()) << fd.status().message();
    return ipc::Client::FromFd(fd.ok() ? std::move(fd).value() : UniqueFd(), "tcp");
  }

  TempDir dir_;
  uv_loop_t loop_{};
  bulkhead::testing::SimulatedTimeSource time_;
  config::CellConfig config_;
  admission::Bulkhead bulkhead_{admission::Bulkhead::Limits{}};
  EchoOwner owner_;
  std::optional<FrontListener> listener_;
};

TEST_F(FrontListenerTest, ServesTcpAddressesBesideTheUnixSocket) {
  Status bound = Bind({"127.0.0.1:0", "[::1]:0"});
  ASSERT_TRUE(bound.ok()) << bound.message();
  ASSERT_EQ(listener_->tcp_addresses().size(), 2u);
  // Port 0 is reported as the port the kernel picked.
  EXPECT_THAT(listener_->tcp_addresses()[0], StartsWith("127.0.0.1:"));
  EXPECT_NE(listener_->tcp_addresses()[0], "127.0.0.1:0");
  EXPECT_THAT(listener_->tcp_addresses()[1], StartsWith("[::1]:"));
  EXPECT_NE(listener_->tcp_addresses()[1], "[::1]:0");

  for (size_t i = 0; i < 2; ++i) {
    ipc::Client tcp = TcpClient(i);
    Result<ipc::Client::Reply> reply = Call(tcp, "over tcp");
    ASSERT_TRUE(reply.ok()) << reply.status().message();
    EXPECT_EQ(reply->payload, "over tcp");
  }
  Result<ipc::Client> unix_client = ipc::Client::Connect(config_.socket);
  ASSERT_TRUE(unix_client.ok()) << unix_client.status().message();
  Result<ipc::Client::Reply> reply = Call(*unix_client, "over unix");
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  EXPECT_EQ(reply->payload, "over unix");
  EXPECT_EQ(owner_.counters.ok, 3u);
}

TEST_F(FrontListenerTest, ATcpClientsPeerAddressIsItsOwn) {
  ASSERT_TRUE(Bind({"127.0.0.1:0"}).ok());
  ipc::Client tcp = TcpClient(0);
  sockaddr_storage local{};
  socklen_t len = sizeof local;
  ASSERT_EQ(::getsockname(tcp.fd(), reinterpret_cast<sockaddr*>(&local), &len), 0);
  const std::string client_address =
      config::ListenAddressFromSockaddr(reinterpret_cast<const sockaddr*>(&local))->ToString();
  Result<ipc::Client> unix_client = ipc::Client::Connect(config_.socket);
  ASSERT_TRUE(unix_client.ok());
  ASSERT_TRUE(RunUntil([&] { return owner_.peers.size() == 2; }));
  // The loop accepts from either socket first; a Unix client has no peer address.
  EXPECT_THAT(owner_.peers, ::testing::UnorderedElementsAre(client_address, ""));
}

TEST_F(FrontListenerTest, TcpClientsGetTcpNoDelay) {
  ASSERT_TRUE(Bind({"127.0.0.1:0"}).ok());
  int nodelay = -1;
  owner_.on_connected = [&](Client* conn) {
    listener_->Opened(conn);
    // The accepted socket is the newest descriptor of this process bound to our port: find it by
    // the peer address the owner just recorded.
    for (int fd = 3; fd < 1024; ++fd) {
      sockaddr_storage peer{};
      socklen_t len = sizeof peer;
      if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) continue;
      if (peer.ss_family != AF_INET) continue;
      if (config::ListenAddressFromSockaddr(reinterpret_cast<const sockaddr*>(&peer))->ToString() !=
          owner_.peers.back()) {
        continue;
      }
      socklen_t size = sizeof nodelay;
      ::getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &nodelay, &size);
    }
  };
  ipc::Client tcp = TcpClient(0);
  ASSERT_TRUE(RunUntil([&] { return nodelay != -1; }));
  EXPECT_NE(nodelay, 0);
}

TEST_F(FrontListenerTest, OneConnectionLimitCountsUnixAndTcpClientsTogether) {
  config_.max_connections = 2;
  ASSERT_TRUE(Bind({"127.0.0.1:0"}).ok());
  Result<ipc::Client> unix_client = ipc::Client::Connect(config_.socket);
  ASSERT_TRUE(unix_client.ok());
  ipc::Client tcp = TcpClient(0);
  ASSERT_TRUE(RunUntil([&] { return listener_->clients() == 2; }));

  // Over the limit on either socket: one REJECTED too_many_connections, then the close.
  ipc::Client over_tcp = TcpClient(0);
  Result<ipc::Client> over_unix = ipc::Client::Connect(config_.socket);
  ASSERT_TRUE(over_unix.ok());
  for (ipc::Client* refused : {&over_tcp, &*over_unix}) {
    ASSERT_TRUE(RunUntil([&] { return Readable(refused->fd()); }));
    Result<ipc::Client::Reply> reply = refused->Receive();
    ASSERT_TRUE(reply.ok()) << reply.status().message();
    EXPECT_TRUE(ipc::IsConnectionRefusal(reply->header));
    EXPECT_EQ(reply->header.reason, ipc::Reason::kTooManyConnections);
  }
  EXPECT_EQ(owner_.counters.refused_connections, 2u);
  EXPECT_EQ(listener_->clients(), 2u);

  // The kept ones are served.
  Result<ipc::Client::Reply> reply = Call(tcp, "kept");
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  EXPECT_EQ(reply->payload, "kept");
}

// In an image a re-exec started, a socket the state named wrongly comes as an empty fd
// (docs/reexec.md, failure 6): Adopt binds it afresh, the Unix one over the stale file its closed
// socket left, and serves it beside the TCP socket it was handed.
TEST_F(FrontListenerTest, AdoptBindsAfreshTheSocketsGivenAsEmptyFds) {
  // A listening socket closed, its file left behind.
  ASSERT_TRUE(ipc::ClaimListeningSocket(config_.socket, 4).ok());
  Result<testing::TcpListener> handed = testing::ListenTcpLoopback();
  ASSERT_TRUE(handed.ok()) << handed.status().message();
  Make({handed->address, "127.0.0.1:0"});
  std::vector<UniqueFd> tcp;
  tcp.push_back(std::move(handed->fd));
  tcp.emplace_back();
  Status adopted = listener_->Adopt(UniqueFd(), std::move(tcp), ipc::SocketAccess{});
  ASSERT_TRUE(adopted.ok()) << adopted.message();
  ASSERT_EQ(listener_->tcp_addresses().size(), 2u);
  EXPECT_EQ(listener_->tcp_addresses()[0], handed->address);
  EXPECT_NE(listener_->tcp_addresses()[1], "127.0.0.1:0");
  for (size_t i = 0; i < 2; ++i) {
    ipc::Client client = TcpClient(i);
    EXPECT_EQ(Payload(Call(client, "over tcp")), "over tcp");
  }
  Result<ipc::Client> unix_client = ipc::Client::Connect(config_.socket);
  ASSERT_TRUE(unix_client.ok()) << unix_client.status().message();
  EXPECT_EQ(Payload(Call(*unix_client, "over unix")), "over unix");
}

TEST_F(FrontListenerTest, ABindErrorNamesTheAddress) {
  Result<testing::TcpListener> held = testing::ListenTcpLoopback();  // holds the port
  ASSERT_TRUE(held.ok()) << held.status().message();
  const std::string taken = held->address;

  Status bound = Bind({"127.0.0.1:0", taken});
  ASSERT_FALSE(bound.ok());
  EXPECT_THAT(bound.message(), HasSubstr("listen " + taken + ": "));
  EXPECT_THAT(bound.message(), HasSubstr("address already in use"));
}

}  // namespace
}  // namespace bulkhead::proxy
