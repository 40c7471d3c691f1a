// SPDX-License-Identifier: MIT
// Tests for the blocking Client (ipc/client.h) and frame I/O (ipc/io.h) against a listening Unix
// socket served by a test thread, or a socketpair. No sleeps: threads meet through the socket.
#include "ipc/client.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ipc/io.h"

namespace bulkhead::ipc {
namespace {

struct OwnedFrame {
  FrameHeader header;
  std::string payload;
};

// Blocks for the next frame on `fd`; nullopt at end of stream or on a decode error.
std::optional<OwnedFrame> ReadFrame(int fd, FrameDecoder* decoder) {
  while (true) {
    FrameView frame;
    DecodeResult result = decoder->Next(&frame);
    if (result == DecodeResult::kFrame) return OwnedFrame{frame.header, std::string(frame.payload)};
    if (result == DecodeResult::kError) return std::nullopt;
    Result<size_t> n = ReadOnce(fd, decoder);
    if (!n.ok() || *n == 0) return std::nullopt;
  }
}

Status Reply(int fd, uint64_t id, std::string_view payload, ReplyStatus status = ReplyStatus::kOk,
             Reason reason = Reason::kNone) {
  return WriteFrame(
      fd,
      FrameHeader{.type = FrameType::kReply, .status = status, .reason = reason, .request_id = id},
      payload);
}

// Waits until the peer closes `fd` (reads and discards everything).
void DrainUntilEof(int fd) {
  char buf[4096];
  while (true) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n == 0 || (n < 0 && errno != EINTR)) return;
  }
}

// A listening socket in a fresh temporary directory; Serve() accepts one connection on a thread
// and runs `handler` on it. The destructor joins the thread, so a handler must end when the
// client closes (declare the Client after the server so that it is destroyed first).
class TestServer {
 public:
  TestServer() {
    std::string tmpl = ::testing::TempDir() + "bulkhead-ipc-XXXXXX";
    BH_CHECK(mkdtemp(tmpl.data()) != nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/front.sock";
    listen_fd_.Reset(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    BH_CHECK(listen_fd_.valid());
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    BH_CHECK(path_.size() < sizeof(addr.sun_path));
    path_.copy(addr.sun_path, path_.size());
    BH_CHECK(bind(listen_fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    BH_CHECK(listen(listen_fd_.get(), 8) == 0);
  }
  ~TestServer() {
    Join();
    listen_fd_.Reset();
    unlink(path_.c_str());
    rmdir(dir_.c_str());
  }

  void Serve(std::function<void(int fd)> handler) {
    thread_ = std::thread([this, handler = std::move(handler)] {
      UniqueFd conn(accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      BH_CHECK(conn.valid());
      handler(conn.get());
    });
  }

  // Waits for the handler to return.
  void Join() {
    if (thread_.joinable()) thread_.join();
  }

  const std::string& path() const { return path_; }

 private:
  std::string dir_;
  std::string path_;
  UniqueFd listen_fd_;
  std::thread thread_;
};

TEST(Client, CallRoundTrip) {
  std::vector<uint64_t> seen_ids;  // outlives the server thread
  TestServer server;
  server.Serve([&seen_ids](int fd) {
    FrameDecoder decoder(FrameType::kRequest);
    while (std::optional<OwnedFrame> request = ReadFrame(fd, &decoder)) {
      seen_ids.push_back(request->header.request_id);
      BH_CHECK(Reply(fd, request->header.request_id, "echo:" + request->payload).ok());
    }
  });
  {
    Result<Client> client = Client::Connect(server.path());
    ASSERT_TRUE(client.ok()) << client.status().message();
    for (const char* payload : {"hello", "", "third"}) {
      Result<Client::Reply> reply = client->Call(payload);
      ASSERT_TRUE(reply.ok()) << reply.status().message();
      EXPECT_EQ(reply->header.type, FrameType::kReply);
      EXPECT_EQ(reply->header.status, ReplyStatus::kOk);
      EXPECT_EQ(reply->header.reason, Reason::kNone);
      EXPECT_EQ(reply->payload, std::string("echo:") + payload);
    }
  }  // The client closes; the server's loop ends.
  server.Join();
  EXPECT_EQ(seen_ids, (std::vector<uint64_t>{1, 2, 3}));
}

TEST(Client, CallIdsIncrementAndMismatchIsAnError) {
  TestServer server;
  server.Serve([](int fd) {
    FrameDecoder decoder(FrameType::kRequest);
    std::optional<OwnedFrame> request = ReadFrame(fd, &decoder);
    BH_CHECK(request.has_value());
    BH_CHECK(Reply(fd, request->header.request_id + 100, "wrong id").ok());
    DrainUntilEof(fd);
  });
  Result<Client> client = Client::Connect(server.path());
  ASSERT_TRUE(client.ok()) << client.status().message();
  Result<Client::Reply> reply = client->Call("x");
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().message(), server.path() + ": reply carries request id 101, expected 1");
}

TEST(Client, PipelinedSendsReceiveRepliesInServerOrder) {
  TestServer server;
  server.Serve([](int fd) {
    FrameDecoder decoder(FrameType::kRequest);
    std::vector<OwnedFrame> requests;
    for (int i = 0; i < 3; ++i) {
      std::optional<OwnedFrame> request = ReadFrame(fd, &decoder);
      BH_CHECK(request.has_value());
      requests.push_back(std::move(*request));
    }
    // All three arrived before any reply: answer them in reverse order, in one write.
    std::string out;
    for (auto it = requests.rbegin(); it != requests.rend(); ++it) {
      AppendFrame(&out, FrameHeader{.type = FrameType::kReply, .request_id = it->header.request_id},
                  "re:" + it->payload);
    }
    const iovec iov{out.data(), out.size()};
    BH_CHECK(WriteAll(fd, std::span<const iovec>(&iov, 1)).ok());
    DrainUntilEof(fd);
  });
  Result<Client> client = Client::Connect(server.path());
  ASSERT_TRUE(client.ok()) << client.status().message();
  ASSERT_TRUE(client->Send(10, "a").ok());
  ASSERT_TRUE(client->Send(11, "b").ok());
  ASSERT_TRUE(client->Send(10, "c").ok());  // ids need not be unique
  std::vector<std::pair<uint64_t, std::string>> replies;
  for (int i = 0; i < 3; ++i) {
    Result<Client::Reply> reply = client->Receive();
    ASSERT_TRUE(reply.ok()) << reply.status().message();
    replies.emplace_back(reply->header.request_id, reply->payload);
  }
  EXPECT_EQ(replies, (std::vector<std::pair<uint64_t, std::string>>{
                         {10, "re:c"}, {11, "re:b"}, {10, "re:a"}}));
}

TEST(Client, PassesNonOkRepliesThrough) {
  std::string detail;  // outlives the server thread
  AppendRejectDetail(&detail, RejectDetail{.cell = "payments", .running = 4, .queued = 16});
  TestServer server;
  server.Serve([&detail](int fd) {
    FrameDecoder decoder(FrameType::kRequest);
    std::optional<OwnedFrame> request = ReadFrame(fd, &decoder);
    BH_CHECK(request.has_value());
    BH_CHECK(
        Reply(fd, request->header.request_id, detail, ReplyStatus::kRejected, Reason::kFull).ok());
    DrainUntilEof(fd);
  });
  Result<Client> client = Client::Connect(server.path());
  ASSERT_TRUE(client.ok()) << client.status().message();
  Result<Client::Reply> reply = client->Call("x");
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  EXPECT_EQ(reply->header.status, ReplyStatus::kRejected);
  EXPECT_EQ(reply->header.reason, Reason::kFull);
  std::optional<RejectDetail> decoded = DecodeRejectDetail(reply->payload);
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(decoded->cell, "payments");
  EXPECT_EQ(decoded->queued, 16u);
}

TEST(Client, EndOfStreamIsAnError) {
  TestServer server;
  server.Serve([](int fd) {
    FrameDecoder decoder(FrameType::kRequest);
    BH_CHECK(ReadFrame(fd, &decoder).has_value());
    // Returning closes the connection without a reply.
  });
  Result<Client> client = Client::Connect(server.path());
  ASSERT_TRUE(client.ok()) << client.status().message();
  Result<Client::Reply> reply = client->Call("x");
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().message(), server.path() + ": connection closed");
}

TEST(Client, EndOfStreamInsideAFrameNamesTheByteCount) {
  TestServer server;
  server.Serve([](int fd) {
    FrameDecoder decoder(FrameType::kRequest);
    std::optional<OwnedFrame> request = ReadFrame(fd, &decoder);
    BH_CHECK(request.has_value());
    std::string out;
    AppendFrame(&out, FrameHeader{.type = FrameType::kReply, .request_id = 1}, "cut short");
    const iovec iov{out.data(), out.size() - 3};
    BH_CHECK(WriteAll(fd, std::span<const iovec>(&iov, 1)).ok());
  });
  Result<Client> client = Client::Connect(server.path());
  ASSERT_TRUE(client.ok()) << client.status().message();
  Result<Client::Reply> reply = client->Call("x");
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().message(),
            server.path() + ": connection closed after 22 bytes of a reply frame");
}

TEST(Client, MalformedReplyIsAnErrorAndSticky) {
  TestServer server;
  server.Serve([](int fd) {
    FrameDecoder decoder(FrameType::kRequest);
    std::optional<OwnedFrame> request = ReadFrame(fd, &decoder);
    BH_CHECK(request.has_value());
    // A REQUEST frame where a REPLY belongs, then a good reply that must not be accepted; one
    // write, so that the client cannot close before the second frame is sent.
    std::string out;
    AppendFrame(&out, FrameHeader{.type = FrameType::kRequest, .request_id = 1}, "?");
    AppendFrame(&out, FrameHeader{.type = FrameType::kReply, .request_id = 1}, "late");
    const iovec iov{out.data(), out.size()};
    BH_CHECK(WriteAll(fd, std::span<const iovec>(&iov, 1)).ok());
    DrainUntilEof(fd);
  });
  Result<Client> client = Client::Connect(server.path());
  ASSERT_TRUE(client.ok()) << client.status().message();
  Result<Client::Reply> reply = client->Call("x");
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().message(),
            server.path() + ": malformed reply: frame type 1 (REQUEST) where REPLY was expected");
  EXPECT_FALSE(client->Receive().ok());
}

TEST(Client, ReplyOverMaxPayloadIsAnError) {
  TestServer server;
  server.Serve([](int fd) {
    FrameDecoder decoder(FrameType::kRequest);
    std::optional<OwnedFrame> request = ReadFrame(fd, &decoder);
    BH_CHECK(request.has_value());
    BH_CHECK(Reply(fd, request->header.request_id, "123456789").ok());
    DrainUntilEof(fd);
  });
  Result<Client> client = Client::Connect(server.path(), /*max_payload=*/8);
  ASSERT_TRUE(client.ok()) << client.status().message();
  Result<Client::Reply> reply = client->Call("x");
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().message(),
            server.path() + ": malformed reply: payload of 9 bytes exceeds the maximum of 8");
}

TEST(Client, LargePayloadsSurvivePartialWritesAndReads) {
  // 3 MiB each way is far more than a socket buffer, so writes and reads are partial.
  const std::string big(3 * 1024 * 1024 + 7, 'z');
  TestServer server;
  server.Serve([](int fd) {
    FrameDecoder decoder(FrameType::kRequest);
    std::optional<OwnedFrame> request = ReadFrame(fd, &decoder);
    BH_CHECK(request.has_value());
    std::reverse(request->payload.begin(), request->payload.end());
    BH_CHECK(Reply(fd, request->header.request_id, request->payload).ok());
    DrainUntilEof(fd);
  });
  std::string payload = big;
  payload[0] = 'a';
  Result<Client> client = Client::Connect(server.path());
  ASSERT_TRUE(client.ok()) << client.status().message();
  Result<Client::Reply> reply = client->Call(payload);
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  ASSERT_EQ(reply->payload.size(), payload.size());
  EXPECT_EQ(reply->payload.back(), 'a');
  EXPECT_EQ(reply->payload.front(), 'z');
}

TEST(Client, ConnectErrorNamesPathAndErrno) {
  const std::string path = ::testing::TempDir() + "bulkhead-ipc-no-such.sock";
  Result<Client> client = Client::Connect(path);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().error_number(), ENOENT);
  EXPECT_EQ(client.status().message(), "connect " + path + ": " + std::strerror(ENOENT));
}

TEST(Client, ConnectRefusesOverlongPath) {
  Result<Client> client = Client::Connect("/" + std::string(200, 'p'));
  ASSERT_FALSE(client.ok());
  EXPECT_NE(client.status().message().find("must be 1 to 107 bytes long"), std::string::npos)
      << client.status().message();
  EXPECT_FALSE(Client::Connect("").ok());
}

TEST(Client, SocketIsCloseOnExec) {
  TestServer server;
  server.Serve([](int fd) { DrainUntilEof(fd); });
  Result<Client> client = Client::Connect(server.path());
  ASSERT_TRUE(client.ok()) << client.status().message();
  int flags = fcntl(client->fd(), F_GETFD);
  ASSERT_GE(flags, 0);
  EXPECT_TRUE(flags & FD_CLOEXEC);
}

TEST(Client, SendToClosedPeerIsEpipeNotSigpipe) {
  // SIGPIPE's default action would kill this test binary, so surviving is part of the check.
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  Client client = Client::FromFd(UniqueFd(fds[0]), "pair");
  close(fds[1]);
  Status status = client.Send(1, "into the void");
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.error_number(), EPIPE);
  EXPECT_EQ(status.message(), std::string("pair: send: ") + std::strerror(EPIPE));
}

TEST(Client, ClosedClientRefusesWork) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  UniqueFd peer(fds[1]);
  Client client = Client::FromFd(UniqueFd(fds[0]), "pair");
  client.Close();
  EXPECT_EQ(client.fd(), -1);
  EXPECT_EQ(client.Send(1, "x").message(), "pair: client is closed");
  EXPECT_FALSE(client.Receive().ok());
  EXPECT_FALSE(client.Call("x").ok());
  // The peer sees the close.
  char c;
  EXPECT_EQ(read(peer.get(), &c, 1), 0);
}

TEST(Client, MovedClientKeepsTheConnection) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  UniqueFd peer(fds[1]);
  Client first = Client::FromFd(UniqueFd(fds[0]), "pair");
  ASSERT_TRUE(Reply(peer.get(), 5, "queued before the move").ok());
  Client second = std::move(first);
  EXPECT_EQ(second.fd(), fds[0]);
  Result<Client::Reply> reply = second.Receive();
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  EXPECT_EQ(reply->payload, "queued before the move");
}

TEST(Client, TimeoutBoundsAWaitForAReply) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  UniqueFd peer(fds[1]);  // never answers
  Client client = Client::FromFd(UniqueFd(fds[0]), "pair");
  ASSERT_TRUE(client.SetTimeout(std::chrono::milliseconds(20)).ok());
  Result<Client::Reply> reply = client.Call("x");
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().message(), "pair: timed out after 20 ms waiting for a reply");
  EXPECT_FALSE(client.SetTimeout(std::chrono::milliseconds(-1)).ok());
}

TEST(WriteAll, WritesEveryIovecToAPipe) {
  // A pipe is not a socket: WriteAll must fall back to writev.
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  UniqueFd read_end(fds[0]);
  UniqueFd write_end(fds[1]);
  std::string a = "first", b, c = "third";
  const iovec iov[3] = {{a.data(), a.size()}, {b.data(), 0}, {c.data(), c.size()}};
  ASSERT_TRUE(WriteAll(write_end.get(), iov).ok());
  write_end.Reset();
  std::string got;
  char buf[64];
  ssize_t n;
  while ((n = read(read_end.get(), buf, sizeof(buf))) > 0) got.append(buf, n);
  EXPECT_EQ(got, "firstthird");
}

TEST(WriteAll, LoopsOverPartialWritesAcrossIovecs) {
  // On a non-blocking socket each sendmsg takes only what fits in the socket buffer, so 3 MiB
  // in three uneven pieces is written in many partial steps, split inside and between iovecs.
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds), 0);
  UniqueFd writer(fds[0]);
  UniqueFd reader(fds[1]);
  ASSERT_EQ(fcntl(reader.get(), F_SETFL, 0), 0);  // the reading side blocks
  std::string a(1024 * 1024 + 1, 'a'), b(7, 'b'), c(2 * 1024 * 1024 - 3, 'c');
  std::string got;
  std::thread read_thread([&got, &reader] {
    char buf[65536];
    ssize_t n;
    while ((n = read(reader.get(), buf, sizeof(buf))) > 0) got.append(buf, n);
  });
  const iovec iov[3] = {{a.data(), a.size()}, {b.data(), b.size()}, {c.data(), c.size()}};
  Status status = WriteAll(writer.get(), iov);
  writer.Reset();
  read_thread.join();
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_TRUE(got == a + b + c) << "got " << got.size() << " bytes";
}

TEST(WriteAll, ReportsErrno) {
  const iovec iov{const_cast<char*>("x"), 1};
  Status status = WriteAll(-1, std::span<const iovec>(&iov, 1));
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.error_number(), EBADF);
}

TEST(ReadOnce, ReturnsZeroAtEndOfStream) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  UniqueFd ours(fds[0]);
  UniqueFd peer(fds[1]);
  ASSERT_TRUE(WriteFrame(peer.get(), FrameHeader{.request_id = 3}, "req").ok());
  peer.Reset();
  FrameDecoder decoder(FrameType::kRequest);
  Result<size_t> n = ReadOnce(ours.get(), &decoder);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, kHeaderSize + 3);
  EXPECT_EQ(decoder.buffered_bytes(), kHeaderSize + 3);
  n = ReadOnce(ours.get(), &decoder);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0u);
}

}  // namespace
}  // namespace bulkhead::ipc
