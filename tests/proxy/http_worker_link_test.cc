// SPDX-License-Identifier: MIT
// HttpWorkerLink on a real libuv loop with a fake owner; the test plays the HTTP worker on the
// worker socket (docs/http.md, "The worker"). What is written when: with the loop's WriteBatch the
// request waits for the batch; a worker that closes before it went out gets it never, and it is
// one to send again; a response that completes before its request was all written leaves the
// connection unused for the next request.
#include "proxy/http_worker_link.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "loop/write_batch.h"
#include "proxy/client.h"
#include "proxy/exchange.h"
#include "tests/helpers/simulated_time_source.h"
#include "tests/helpers/test_support.h"
#include "tests/proxy/link_test_base.h"

namespace bulkhead::proxy {
namespace {

constexpr std::string_view kGet = "GET / HTTP/1.1\r\nHost: w\r\n\r\n";
constexpr std::string_view kOk = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

struct Answered {
  Exchange* exchange;
  bool reusable;
};

// Takes a broken link's exchange off at once, as CellDataPath::OnLinkBroken does, and closes it.
struct FakeOwner : LinkOwner {
  std::vector<Answered> answers;
  std::vector<std::string> broken;
  std::vector<bool> unread;  // TakeInflight's verdict for each exchange taken off a broken link
  void OnWorkerAnswer(Link*, Exchange* exchange, const Outcome&, bool reusable) override {
    answers.push_back(Answered{exchange, reusable});
  }
  void OnWorkerProgress() override {}
  void OnLinkBroken(Link* link, const std::string& why, bool) override {
    broken.push_back(why);
    bool was_unread = false;
    std::string_view payload;
    while (link->TakeInflight(&was_unread, &payload) != nullptr) unread.push_back(was_unread);
    link->Close();
  }
  void OnExchangeAborted(Link*, const std::string&) override {}
  loop::TimeSource* time() override { return &clock; }
  bulkhead::testing::SimulatedTimeSource clock;
};

class HttpWorkerLinkTest : public LinkTestBase {
 protected:
  void TearDown() override {
    if (batch_) batch_->Close([] {});
    LinkTestBase::TearDown();
    batch_.reset();
  }

  // The loop's write batch; false (the test skips) where io_uring is not available.
  bool MakeBatch() {
    batch_ = std::make_unique<loop::WriteBatch>(&loop_);
    return batch_->enabled();
  }

  // Connects a link (with the batch, if made) and accepts its worker end.
  HttpWorkerLink* Connect() {
    Result<HttpWorkerLink*> link = HttpWorkerLink::Connect(&owner_, &loop_, path_, batch_.get());
    EXPECT_TRUE(link.ok()) << link.status().message();
    worker_ = AcceptWorkerEnd();
    return link.ok() ? *link : nullptr;
  }

  // What the worker end can read now, without waiting.
  std::string ReadNow() const {
    std::string got;
    char buffer[65536];
    for (;;) {
      const ssize_t n = ::recv(worker_.get(), buffer, sizeof buffer, MSG_DONTWAIT);
      if (n <= 0) return got;
      got.append(buffer, static_cast<size_t>(n));
    }
  }

  void Answer(std::string_view bytes) {
    ASSERT_EQ(::send(worker_.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }

  UniqueFd worker_;  // the worker end accepted last
  std::unique_ptr<loop::WriteBatch> batch_;
  FakeOwner owner_;
};

TEST_F(HttpWorkerLinkTest, WithTheBatchARequestGoesOutWithTheLoopIterationsWrites) {
  if (!MakeBatch()) GTEST_SKIP() << "io_uring unavailable: " << batch_->how();
  HttpWorkerLink* link = Connect();
  ASSERT_NE(link, nullptr);
  Exchange exchange;
  exchange.info.idempotent = true;
  link->Send(&exchange, kGet);
  EXPECT_EQ(ReadNow(), "") << "written before the batch";
  batch_->Submit();
  EXPECT_EQ(ReadNow(), kGet);
  Answer(kOk);
  ASSERT_TRUE(RunUntil([&] { return owner_.answers.size() == 1; }));
  EXPECT_EQ(owner_.answers[0].exchange, &exchange);
  EXPECT_TRUE(owner_.answers[0].reusable);
  link->Close();
}

TEST_F(HttpWorkerLinkTest, AWorkerThatClosesBeforeTheBatchWentOutNeverGetsTheRequestAndItIsUnread) {
  if (!MakeBatch()) GTEST_SKIP() << "io_uring unavailable: " << batch_->how();
  HttpWorkerLink* link = Connect();
  ASSERT_NE(link, nullptr);
  Exchange first;
  first.info.idempotent = true;
  link->Send(&first, kGet);
  batch_->Submit();
  ASSERT_EQ(ReadNow(), kGet);
  Answer(kOk);
  ASSERT_TRUE(RunUntil([&] { return owner_.answers.size() == 1; }));
  ASSERT_TRUE(owner_.answers[0].reusable);
  // A POST on the idle connection, while the worker closes it (its keep-alive timeout): the
  // request waits for the batch when the link reads the end of the connection.
  Exchange post;
  post.info.idempotent = false;
  link->Send(&post, "POST / HTTP/1.1\r\nHost: w\r\nContent-Length: 1\r\n\r\nx");
  worker_.Reset();
  ASSERT_TRUE(RunUntil([&] { return owner_.broken.size() == 1; }));
  ASSERT_EQ(owner_.unread.size(), 1u);
  EXPECT_TRUE(owner_.unread[0]) << "a POST never written is safe to send again";
}

TEST_F(HttpWorkerLinkTest, AResponseBeforeTheRequestWentOutLeavesTheConnectionUnused) {
  // The request is sent from a prepare handle that runs after the batch's (libuv runs the prepare
  // handles started last first), so it waits in the batch through the next poll, as a request
  // forwarded by a client read waits while the poll's other callbacks run.
  struct Sender {
    uv_prepare_t prepare{};
    HttpWorkerLink* link = nullptr;
    Exchange exchange;
  } sender;
  sender.exchange.info.idempotent = true;
  ASSERT_EQ(uv_prepare_init(&loop_, &sender.prepare), 0);
  sender.prepare.data = &sender;
  ASSERT_EQ(uv_prepare_start(&sender.prepare,
                             [](uv_prepare_t* handle) {
                               auto* s = static_cast<Sender*>(handle->data);
                               s->link->Send(&s->exchange, kGet);
                               uv_prepare_stop(handle);
                             }),
            0);
  if (!MakeBatch()) {
    uv_close(reinterpret_cast<uv_handle_t*>(&sender.prepare), nullptr);
    uv_run(&loop_, UV_RUN_NOWAIT);
    GTEST_SKIP() << "io_uring unavailable: " << batch_->how();
  }
  sender.link = Connect();
  ASSERT_NE(sender.link, nullptr);
  // A worker that answers what it never read: its answer is in the socket before the request
  // went out.
  Answer(kOk);
  ASSERT_TRUE(RunUntil([&] { return owner_.answers.size() == 1; }));
  EXPECT_EQ(owner_.answers[0].exchange, &sender.exchange);
  EXPECT_FALSE(owner_.answers[0].reusable) << "its request would be read as the next one";
  sender.link->Close();
  uv_close(reinterpret_cast<uv_handle_t*>(&sender.prepare), nullptr);
  // The prepare handle lives on this stack: its close must finish before the test returns (the
  // loop's pending-close list would point into a dead frame by TearDown).
  uv_run(&loop_, UV_RUN_NOWAIT);
}

TEST_F(HttpWorkerLinkTest, AResponseBeforeTheWholeBodyWasWrittenLeavesTheConnectionUnused) {
  // No batch: the request is written at once, as far as the socket takes it.
  HttpWorkerLink* link = Connect();
  ASSERT_NE(link, nullptr);
  // A body larger than the socket's buffers, which the worker never reads: it answers early (a
  // 401 or 413 to an upload) and keeps the connection.
  std::string request = "POST / HTTP/1.1\r\nHost: w\r\nContent-Length: 4194304\r\n\r\n";
  request.append(size_t{4} << 20, 'x');
  Exchange exchange;
  link->Send(&exchange, request);
  Answer(kOk);
  ASSERT_TRUE(RunUntil([&] { return owner_.answers.size() == 1; }));
  EXPECT_FALSE(owner_.answers[0].reusable)
      << "the rest of the body would be read as the next request";
  link->Close();
}

// The worker waits for a streamed body as fast as its client uploads it: that time is the
// client's, and the exchange takes the moment the last byte went to the worker
// (Exchange::body_whole_at_ns), from which its service time counts.
TEST_F(HttpWorkerLinkTest, TheMomentAStreamedBodyWasWholeIsTakenOnTheExchange) {
  HttpWorkerLink* link = Connect();
  ASSERT_NE(link, nullptr);
  const std::string head = "POST / HTTP/1.1\r\nHost: w\r\nContent-Length: 4\r\n\r\n";
  Exchange exchange;
  exchange.dispatched_at_ns = owner_.clock.NowNs();
  exchange.body_pipe = Exchange::BodyPipe::kFlowing;
  link->Send(&exchange, head);
  owner_.clock.AdvanceNs(7'000);
  EXPECT_TRUE(exchange.SendBody("ab", false));
  EXPECT_EQ(exchange.body_whole_at_ns, 0u) << "still flowing";
  owner_.clock.AdvanceNs(3'000);
  exchange.SendBody("cd", true);
  EXPECT_EQ(exchange.body_whole_at_ns, owner_.clock.NowNs());
  ASSERT_EQ(ReadNow(), head + "abcd");
  owner_.clock.AdvanceNs(2'000);
  EXPECT_EQ(exchange.ServiceNs(owner_.clock.NowNs()), 2'000u) << "not the 12'000 since dispatch";
  Answer(kOk);
  ASSERT_TRUE(RunUntil([&] { return owner_.answers.size() == 1; }));
  link->Close();
}

// A client end that holds whatever backlog the test sets: above Exchange::kHighWatermark, the
// link stops reading for it (SendResponse returns false).
struct NullClientOwner : ClientOwner {
  const std::string& name() const override { return name_; }
  loop::TimeSource* time() override { return nullptr; }
  void OnClientConnected(Client*) override {}
  void OnClientDisconnected(Client*) override {}
  void OnRequest(Client*, const RequestInfo&, std::string_view) override {}
  void OnClientGone(Exchange*) override {}
  void OnBadRequest(const std::string&) override {}
  void OnRepliesWaiting(Client*) override {}
  void CountDelivered(uint64_t*) override {}
  void CountUndelivered(uint64_t) override {}
  void CountIdleClosed() override {}
  std::string name_ = "c";
};

class BackloggedClient : public Client {
 public:
  explicit BackloggedClient(ClientOwner* owner)
      : Client(owner, reinterpret_cast<uv_stream_t*>(&unused_), SIZE_MAX) {}
  size_t OnResponseBytes(Exchange*, std::string_view bytes, bool) override {
    received.append(bytes);
    return backlog;
  }
  void OnOutcome(Exchange*, const Outcome&, uint64_t*) override {}
  void Close() override {}
  bool HandOver(int*, bool*) override { return false; }
  void PauseReads(bool) override {}

  size_t backlog = 0;
  std::string received;

 private:
  void OnDrained() override {}
  uv_pipe_t unused_{};  // never initialised: nothing is written through the base's writer
};

// A response whose last bytes put its client over the high watermark is whole all the same: the
// link, idle and reused, must read the next response (it stopped reading for the slow client and
// never read again: the next request on the connection waited forever, as a GET after a 2 MiB
// upload answered with a 2 MiB body did through a real bulkheadd).
TEST_F(HttpWorkerLinkTest, AResponseThatEndsWithItsClientBehindLeavesTheConnectionReading) {
  HttpWorkerLink* link = Connect();
  ASSERT_NE(link, nullptr);
  NullClientOwner client_owner;
  BackloggedClient slow(&client_owner);
  slow.backlog = Exchange::kHighWatermark + 1;
  Exchange first;
  first.info.idempotent = true;
  slow.Attach(&first);
  link->Send(&first, kGet);
  ASSERT_EQ(ReadNow(), kGet);
  Answer(kOk);
  ASSERT_TRUE(RunUntil([&] { return owner_.answers.size() == 1; }));
  EXPECT_THAT(slow.received, ::testing::EndsWith("\r\n\r\nok"));
  ASSERT_TRUE(owner_.answers[0].reusable);
  slow.Detach(&first);

  BackloggedClient quick(&client_owner);
  Exchange second;
  second.info.idempotent = true;
  quick.Attach(&second);
  link->Send(&second, kGet);
  ASSERT_EQ(ReadNow(), kGet);
  Answer(kOk);
  ASSERT_TRUE(RunUntil([&] { return owner_.answers.size() == 2; }))
      << "the link never read the second response";
  EXPECT_EQ(owner_.answers[1].exchange, &second);
  EXPECT_THAT(quick.received, ::testing::EndsWith("\r\n\r\nok"));
  quick.Detach(&second);
  link->Close();
}

// The link stops reading while its client is behind; that time is the client's, not the worker's,
// and the exchange carries it to the adaptive limit's service time (Exchange::client_paused_ns).
TEST_F(HttpWorkerLinkTest, TheTimeReadingStoppedForASlowClientIsCountedOnTheExchange) {
  HttpWorkerLink* link = Connect();
  ASSERT_NE(link, nullptr);
  NullClientOwner client_owner;
  BackloggedClient slow(&client_owner);
  slow.backlog = Exchange::kHighWatermark + 1;
  Exchange exchange;
  exchange.info.idempotent = true;
  slow.Attach(&exchange);
  link->Send(&exchange, kGet);
  ASSERT_EQ(ReadNow(), kGet);
  Answer("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nok");
  ASSERT_TRUE(RunUntil([&] { return slow.received.ends_with("ok"); }));
  owner_.clock.AdvanceNs(4'000);
  slow.backlog = 0;
  exchange.ResponseDrained();  // the client wrote what it held: the link reads on
  EXPECT_EQ(exchange.client_paused_ns, 4'000u);
  Answer("ok");
  ASSERT_TRUE(RunUntil([&] { return owner_.answers.size() == 1; }));
  EXPECT_EQ(exchange.client_paused_ns, 4'000u);
  slow.Detach(&exchange);
  link->Close();
}

}  // namespace
}  // namespace bulkhead::proxy
