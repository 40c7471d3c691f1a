// SPDX-License-Identifier: MIT
// HttpFrontConnection on its own: a real client socket and libuv loop, simulated time, a fake
// data path (ClientOwner) that records each exchange and answers it when the test says, and a fake
// worker end (Link) for streamed bodies. What each Phase reads, when header_timeout falls due in
// it, and how an Outcome is rendered (docs/http.md).
#include "proxy/http_front_connection.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <uv.h>

#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "proxy/exchange.h"
#include "proxy/link.h"
#include "tests/helpers/simulated_time_source.h"
#include "tests/helpers/test_support.h"

namespace bulkhead::proxy {
namespace {

using bulkhead::testing::ListenUnix;
using bulkhead::testing::TempDir;
using bulkhead::testing::WaitFor;
using ::testing::HasSubstr;
using ::testing::StartsWith;

using Phase = HttpFrontConnection::Phase;

// The data path's part: records every request as an Exchange it keeps, answers when told.
struct FakeDataPath : ClientOwner {
  std::string cell = "t";
  loop::TimeSource* time_source = nullptr;
  HttpFrontConnection* conn = nullptr;  // the one client, while connected
  std::deque<Exchange> exchanges;       // every request handed on, in order
  std::vector<std::string> payloads;    // what the worker would get of each
  std::vector<Exchange*> gone;          // exchanges whose client gave them up
  std::vector<std::string> bad_requests;
  uint64_t delivered = 0;
  uint64_t undelivered = 0;
  std::function<void(Exchange*)> on_request;  // e.g. answer at once

  const std::string& name() const override { return cell; }
  loop::TimeSource* time() override { return time_source; }
  void OnClientConnected(Client* client) override {
    conn = static_cast<HttpFrontConnection*>(client);
  }
  void OnClientDisconnected(Client*) override { conn = nullptr; }
  void OnRequest(Client* client, const RequestInfo& info, std::string_view payload) override {
    Exchange& exchange = exchanges.emplace_back();
    exchange.info = info;
    exchange.body_pipe = info.body == RequestInfo::Body::kStreamed ? Exchange::BodyPipe::kWaiting
                                                                   : Exchange::BodyPipe::kClosed;
    payloads.emplace_back(payload);
    client->Attach(&exchange);
    if (on_request) on_request(&exchange);
  }
  void OnClientGone(Exchange* exchange) override { gone.push_back(exchange); }
  void OnBadRequest(const std::string& why) override { bad_requests.push_back(why); }
  void OnRepliesWaiting(Client*) override {}
  void CountDelivered(uint64_t* outcome) override {
    ++*outcome;
    ++delivered;
  }
  void CountUndelivered(uint64_t replies) override { undelivered += replies; }
  void CountIdleClosed() override { ++idle_closed; }
  uint64_t idle_closed = 0;

  // As CellDataPath::Answer does.
  void Answer(Exchange* exchange, const Outcome& outcome) {
    Client* client = exchange->client;
    ASSERT_NE(client, nullptr);
    client->Detach(exchange);
    client->OnOutcome(exchange, outcome, &counter);
  }
  uint64_t counter = 0;
};

// A worker end for a streamed body: takes what it is given and says how much it holds.
class FakeLink final : public Link {
 public:
  void Send(Exchange*, std::string_view) override {}
  bool busy() const override { return true; }
  Exchange* TakeInflight(bool*, std::string_view*) override { return nullptr; }
  void Close() override {}
  size_t OnBodyBytes(Exchange*, std::string_view bytes, bool last) override {
    body.append(bytes);
    ended = last;
    return held;
  }
  void OnBodyAborted(Exchange* exchange, const std::string& why) override {
    aborted.push_back(why);
    exchange->link = nullptr;
  }

  std::string body;
  bool ended = false;
  size_t held = 0;  // what OnBodyBytes reports as unwritten to the worker
  std::vector<std::string> aborted;
};

bool Readable(int fd) {
  pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & (POLLIN | POLLHUP)) != 0;
}

class HttpFrontConnectionTest : public ::testing::Test {
 protected:
  static constexpr uint64_t kHeaderTimeoutMs = 10'000;

  void SetUp() override {
    ::signal(SIGPIPE, SIG_IGN);
    ASSERT_EQ(uv_loop_init(&loop_), 0);
    owner_.time_source = &time_;
    path_ = dir_.path() + "/front.sock";
    Result<UniqueFd> listening = ListenUnix(path_);
    ASSERT_TRUE(listening.ok()) << listening.status().message();
    ASSERT_EQ(uv_pipe_init(&loop_, &server_, 0), 0);
    server_.data = this;
    ASSERT_EQ(uv_pipe_open(&server_, listening->Release()), 0);
    ASSERT_EQ(uv_listen(reinterpret_cast<uv_stream_t*>(&server_), 8,
                        [](uv_stream_t* server, int status) {
                          if (status != 0) return;
                          auto* self = static_cast<HttpFrontConnectionTest*>(server->data);
                          HttpFrontConnection::Accept(&self->owner_, server, self->settings_);
                        }),
              0);
  }

  void TearDown() override {
    if (owner_.conn != nullptr) owner_.conn->Close();
    uv_close(reinterpret_cast<uv_handle_t*>(&server_), nullptr);
    uv_run(&loop_, UV_RUN_DEFAULT);
    EXPECT_EQ(uv_loop_close(&loop_), 0) << "a handle was left open";
  }

  bool RunUntil(const std::function<bool()>& done) {
    return WaitFor([&] {
      uv_run(&loop_, UV_RUN_NOWAIT);
      return done();
    });
  }

  // Runs the loop until nothing more happens at once (every read and write of this instant).
  void Settle() {
    for (int i = 0; i < 20; ++i) uv_run(&loop_, UV_RUN_NOWAIT);
  }

  void Advance(uint64_t ms) {
    time_.Advance(ms);
    Settle();
  }

  // Connects the client and runs the loop until the connection is accepted.
  void Connect() {
    client_ = UniqueFd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path_.c_str(), path_.size() + 1);
    ASSERT_EQ(::connect(client_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    ASSERT_TRUE(RunUntil([&] { return owner_.conn != nullptr; }));
  }

  void Send(std::string_view bytes) {
    ASSERT_EQ(::send(client_.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
    Settle();
  }

  // Everything the client has been sent so far.
  std::string Received() {
    Settle();
    std::string out;
    char buffer[4096];
    while (Readable(client_.get())) {
      ssize_t n = ::recv(client_.get(), buffer, sizeof buffer, MSG_DONTWAIT);
      if (n <= 0) {
        closed_ = n == 0;
        break;
      }
      out.append(buffer, static_cast<size_t>(n));
    }
    return out;
  }

  // The client saw the connection end.
  bool ClientSeesClose() {
    Received();
    return closed_;
  }

  Exchange* Last() { return owner_.exchanges.empty() ? nullptr : &owner_.exchanges.back(); }

  TempDir dir_;
  uv_loop_t loop_{};
  bulkhead::testing::SimulatedTimeSource time_;
  FakeDataPath owner_;
  ClientSettings settings_{.max_payload = 1 << 20, .header_timeout_ms = kHeaderTimeoutMs};
  std::string path_;
  uv_pipe_t server_{};
  UniqueFd client_;
  bool closed_ = false;
};

constexpr std::string_view kGet = "GET /a HTTP/1.1\r\nHost: x\r\n\r\n";

// --- kHead and its timer. ---

TEST_F(HttpFrontConnectionTest, AnIdleConnectionIsClosedAtHeaderTimeoutWithoutAWord) {
  Connect();
  EXPECT_EQ(owner_.conn->phase(), Phase::kHead);
  Advance(kHeaderTimeoutMs - 1);
  EXPECT_FALSE(ClientSeesClose()) << "closed before header_timeout";
  Advance(1);
  EXPECT_EQ(Received(), "");
  EXPECT_TRUE(closed_);
  EXPECT_TRUE(owner_.bad_requests.empty());
  EXPECT_EQ(owner_.idle_closed, 1u);
}

// idle_timeout below header_timeout: an idle connection goes at idle_timeout, a head begun still
// has the whole header_timeout.
TEST_F(HttpFrontConnectionTest, IdleTimeoutBelowHeaderTimeoutClosesOnlyAnIdleConnectionSooner) {
  settings_.idle_timeout_ms = 2000;
  Connect();
  Advance(1999);
  EXPECT_FALSE(ClientSeesClose());
  Advance(1);
  EXPECT_TRUE(ClientSeesClose());
  EXPECT_EQ(owner_.idle_closed, 1u);

  closed_ = false;
  Connect();
  Send("GET /a HTTP/1.1\r\n");
  Advance(kHeaderTimeoutMs - 1);
  EXPECT_FALSE(ClientSeesClose()) << "a head begun was closed at idle_timeout";
  Advance(1);
  EXPECT_THAT(Received(), StartsWith("HTTP/1.1 408 "));
  EXPECT_EQ(owner_.idle_closed, 1u);
}

TEST_F(HttpFrontConnectionTest, IdleTimeoutAloneBoundsIdleConnectionsWithoutHeaderTimeout) {
  settings_.header_timeout_ms = 0;
  settings_.idle_timeout_ms = 5000;
  Connect();
  Send(kGet);
  Advance(60'000);
  EXPECT_FALSE(ClientSeesClose()) << "closed while its answer was awaited";
  owner_.Answer(Last(), Outcome::Rejected(ipc::Reason::kFull, 1, 0, 0));
  EXPECT_THAT(Received(), StartsWith("HTTP/1.1 503 "));
  Advance(4999);
  EXPECT_FALSE(ClientSeesClose());
  Advance(1);
  EXPECT_TRUE(ClientSeesClose());
  EXPECT_EQ(owner_.idle_closed, 1u);
}

TEST_F(HttpFrontConnectionTest, AHeadBegunButNotEndedGets408AtHeaderTimeout) {
  Connect();
  Send("GET /a HTTP/1.1\r\nHost: x\r\n");
  Advance(kHeaderTimeoutMs);
  std::string answer = Received();
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 408 "));
  EXPECT_THAT(answer, HasSubstr("Connection: close"));
  EXPECT_TRUE(ClientSeesClose());
  ASSERT_EQ(owner_.bad_requests.size(), 1u);
  EXPECT_THAT(owner_.bad_requests[0], HasSubstr("header_timeout (10000 ms)"));
  EXPECT_TRUE(owner_.exchanges.empty());
}

// Slowloris: bytes trickling in do not move the deadline, which counts from the phase's start.
TEST_F(HttpFrontConnectionTest, BytesOfAHeadDoNotPostponeHeaderTimeout) {
  Connect();
  for (char c : std::string_view("GET /a HTTP/1.1\r\nHost: x\r\n")) {
    Send(std::string_view(&c, 1));
    Advance(kHeaderTimeoutMs / 40);
  }
  EXPECT_FALSE(ClientSeesClose());
  Advance(kHeaderTimeoutMs);
  EXPECT_THAT(Received(), StartsWith("HTTP/1.1 408 "));
}

// --- A whole request, and what the exchange says of it. ---

TEST_F(HttpFrontConnectionTest, AWholeRequestIsHandedOnWithWhatItIs) {
  Connect();
  Send("HEAD /h HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  ASSERT_EQ(owner_.exchanges.size(), 1u);
  const RequestInfo& info = Last()->info;
  EXPECT_EQ(info.body, RequestInfo::Body::kWhole);
  EXPECT_TRUE(info.head);
  EXPECT_TRUE(info.idempotent);
  EXPECT_TRUE(info.keep_alive);
  EXPECT_FALSE(info.http11);
  EXPECT_FALSE(info.close_link_after);
  EXPECT_THAT(owner_.payloads[0], StartsWith("HEAD /h HTTP/1.1\r\nHost: t\r\n"));
  EXPECT_EQ(owner_.conn->phase(), Phase::kAwaitingAnswer);
  // No timer while the answer is awaited: request_timeout is the data path's.
  Advance(10 * kHeaderTimeoutMs);
  EXPECT_FALSE(ClientSeesClose());
  EXPECT_EQ(owner_.conn->phase(), Phase::kAwaitingAnswer);
}

// A request without X-Request-Id gets one: this run's 8-hex-digit prefix, then a 12-digit count,
// different for each request.
TEST_F(HttpFrontConnectionTest, ARequestWithoutAnIdGetsAFreshOne) {
  Connect();
  Send("GET /a HTTP/1.1\r\nHost: t\r\n\r\nGET /b HTTP/1.1\r\nHost: t\r\n\r\n");
  ASSERT_EQ(owner_.exchanges.size(), 1u);
  Exchange* exchange = Last();
  EXPECT_TRUE(exchange->SendResponse("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false));
  owner_.Answer(exchange, Outcome::Ok({}));
  Settle();
  ASSERT_EQ(owner_.payloads.size(), 2u);
  const std::regex id("\r\nX-Request-Id: ([0-9a-f]{8})-([0-9a-f]{12})\r\n");
  std::smatch first;
  std::smatch second;
  ASSERT_TRUE(std::regex_search(owner_.payloads[0], first, id)) << owner_.payloads[0];
  ASSERT_TRUE(std::regex_search(owner_.payloads[1], second, id)) << owner_.payloads[1];
  EXPECT_EQ(first[1], second[1]);
  EXPECT_EQ(std::stoull(second[2], nullptr, 16), std::stoull(first[2], nullptr, 16) + 1);
}

TEST_F(HttpFrontConnectionTest, AGetWithABodyMustNotShareItsWorkerConnection) {
  Connect();
  Send("GET /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc");
  ASSERT_EQ(owner_.exchanges.size(), 1u);
  EXPECT_TRUE(Last()->info.close_link_after);
  EXPECT_FALSE(Last()->info.idempotent && Last()->info.body == RequestInfo::Body::kStreamed);
}

TEST_F(HttpFrontConnectionTest, PostIsNotIdempotent) {
  Connect();
  Send("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc");
  ASSERT_EQ(owner_.exchanges.size(), 1u);
  EXPECT_FALSE(Last()->info.idempotent);
  EXPECT_FALSE(Last()->info.close_link_after);
}

TEST_F(HttpFrontConnectionTest, TheResponseStreamsThroughTheExchangeAndOkEndsIt) {
  Connect();
  Send(kGet);
  ASSERT_EQ(owner_.exchanges.size(), 1u);
  Exchange* exchange = Last();
  EXPECT_TRUE(exchange->SendResponse("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n", false));
  EXPECT_TRUE(exchange->SendResponse("hi", false));
  owner_.Answer(exchange, Outcome::Ok({}));
  EXPECT_EQ(Received(), "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi");
  EXPECT_EQ(owner_.delivered, 1u);
  EXPECT_EQ(owner_.conn->phase(), Phase::kHead) << "keep-alive: the next request is awaited";
  EXPECT_FALSE(closed_);
}

TEST_F(HttpFrontConnectionTest, ACloseDelimitedResponseEndsTheConnection) {
  Connect();
  Send(kGet);
  Exchange* exchange = Last();
  exchange->SendResponse("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nall", /*must_close=*/true);
  owner_.Answer(exchange, Outcome::Ok({}));
  EXPECT_EQ(Received(), "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nall");
  EXPECT_TRUE(closed_);
}

TEST_F(HttpFrontConnectionTest, PipelinedRequestsAreHandedOnOneAtATimeInOrder) {
  Connect();
  Send("GET /1 HTTP/1.1\r\nHost: x\r\n\r\nGET /2 HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_EQ(owner_.exchanges.size(), 1u) << "the second was handed on before the first's answer";
  EXPECT_THAT(owner_.payloads[0], StartsWith("GET /1 "));
  owner_.Answer(Last(), Outcome::Rejected(ipc::Reason::kFull, 1, 0, 0));
  Settle();
  ASSERT_EQ(owner_.exchanges.size(), 2u);
  EXPECT_THAT(owner_.payloads[1], StartsWith("GET /2 "));
}

// --- Outcomes rendered as bulkheadd's own answers (http/local_reply.h). ---

TEST_F(HttpFrontConnectionTest, ARejectionIs503WithRetryAfterAndTheCellsFigures) {
  Connect();
  Send(kGet);
  owner_.Answer(Last(), Outcome::Rejected(ipc::Reason::kUnavailable, 0, 2, 2500));
  const std::string answer = Received();
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 503 "));
  EXPECT_THAT(answer, HasSubstr("\r\nRetry-After: 3\r\n"));
  EXPECT_THAT(answer,
              HasSubstr("Bulkhead-Outcome: rejected; reason=unavailable; cell=t; running=0; "
                        "queued=2"));
  EXPECT_EQ(owner_.conn->phase(), Phase::kHead);
}

TEST_F(HttpFrontConnectionTest, AFailureIs504ForATimeoutAndAHeadAnswerHasNoBody) {
  Connect();
  Send("HEAD /h HTTP/1.1\r\nHost: x\r\n\r\n");
  owner_.Answer(Last(), Outcome::Failed(ipc::Reason::kTimeout, "request_timeout of 5 ms passed"));
  const std::string answer = Received();
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 504 "));
  EXPECT_THAT(answer, HasSubstr("Content-Length: "));
  EXPECT_TRUE(answer.ends_with("\r\n\r\n")) << answer;
}

TEST_F(HttpFrontConnectionTest, AFailureAfterPartOfTheResponseWentOutClosesTheConnection) {
  Connect();
  Send(kGet);
  Exchange* exchange = Last();
  exchange->SendResponse("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhal", false);
  owner_.Answer(exchange, Outcome::Failed(ipc::Reason::kWorkerDied, "exit 1"));
  EXPECT_EQ(Received(), "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhal");
  EXPECT_TRUE(closed_);
}

TEST_F(HttpFrontConnectionTest, AMalformedRequestGets400AndTheConnectionCloses) {
  Connect();
  Send("GET /a HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n");
  EXPECT_THAT(Received(), StartsWith("HTTP/1.1 400 "));
  EXPECT_TRUE(closed_);
  EXPECT_TRUE(owner_.exchanges.empty());
  EXPECT_EQ(owner_.bad_requests.size(), 1u);
}

// --- A streamed body (kBody): read only while its worker end takes it. ---

constexpr std::string_view kPostHead = "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n";

TEST_F(HttpFrontConnectionTest, AStreamedBodyIsReadOnlyOnceItsWorkerEndTakesIt) {
  Connect();
  Send(std::string(kPostHead) + "0123");
  ASSERT_EQ(owner_.exchanges.size(), 1u);
  Exchange* exchange = Last();
  EXPECT_EQ(exchange->info.body, RequestInfo::Body::kStreamed);
  EXPECT_TRUE(owner_.payloads[0].ends_with("\r\n\r\n0123")) << owner_.payloads[0];
  EXPECT_EQ(owner_.conn->phase(), Phase::kBody);
  // Queued: the rest stays in the socket, and no timer runs (queue_timeout bounds the wait).
  Send("456789");
  Advance(10 * kHeaderTimeoutMs);
  EXPECT_FALSE(ClientSeesClose());
  FakeLink link;
  exchange->link = &link;
  exchange->WantBody();
  Settle();
  EXPECT_EQ(link.body, "456789");
  EXPECT_TRUE(link.ended);
  EXPECT_EQ(owner_.conn->phase(), Phase::kAwaitingAnswer);
  exchange->link = nullptr;
}

TEST_F(HttpFrontConnectionTest, ExpectContinueIsAnsweredWhenTheWorkerEndTakesTheBody) {
  Connect();
  Send("POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n");
  Exchange* exchange = Last();
  ASSERT_NE(exchange, nullptr);
  EXPECT_EQ(Received(), "") << "100 Continue before a worker takes the body";
  FakeLink link;
  exchange->link = &link;
  exchange->WantBody();
  EXPECT_EQ(Received(), "HTTP/1.1 100 Continue\r\n\r\n");
  Send("ok");
  EXPECT_EQ(link.body, "ok");
  exchange->link = nullptr;
}

TEST_F(HttpFrontConnectionTest, AClientSilentInItsBodyIsCutWith408AtHeaderTimeout) {
  Connect();
  Send(std::string(kPostHead) + "01");
  Exchange* exchange = Last();
  FakeLink link;
  exchange->link = &link;
  exchange->WantBody();
  Advance(kHeaderTimeoutMs / 2);
  Send("23");  // progress: the silence counts from here
  Advance(kHeaderTimeoutMs - 1);
  EXPECT_FALSE(ClientSeesClose());
  Advance(1);
  EXPECT_THAT(Received(), StartsWith("HTTP/1.1 408 "));
  EXPECT_TRUE(closed_);
  ASSERT_EQ(owner_.gone.size(), 1u) << "the request was not given up";
  EXPECT_EQ(owner_.gone[0], exchange);
  ASSERT_EQ(link.aborted.size(), 1u);
  EXPECT_THAT(link.aborted[0], HasSubstr("408"));
}

TEST_F(HttpFrontConnectionTest, AFullWorkerEndPausesTheBodyAndItsTimer) {
  Connect();
  Send(std::string(kPostHead) + "01");
  Exchange* exchange = Last();
  FakeLink link;
  link.held = Exchange::kHighWatermark + 1;
  exchange->link = &link;
  exchange->WantBody();
  Send("23");
  EXPECT_EQ(link.body, "23");
  EXPECT_EQ(exchange->body_pipe, Exchange::BodyPipe::kFull);
  Send("45");
  EXPECT_EQ(link.body, "23") << "read on while the worker end was full";
  Advance(10 * kHeaderTimeoutMs);
  EXPECT_FALSE(ClientSeesClose()) << "a paused body was timed as the client's silence";
  link.held = 0;
  exchange->WantBody();  // drained below the low watermark
  Settle();
  EXPECT_EQ(link.body, "2345");
  exchange->link = nullptr;
}

TEST_F(HttpFrontConnectionTest, AnAnswerBeforeTheBodyIsWholeDrainsTheRestThenTheNextRequest) {
  Connect();
  Send(std::string(kPostHead) + "01");
  Exchange* exchange = Last();
  owner_.Answer(exchange, Outcome::Rejected(ipc::Reason::kFull, 1, 1, 0));
  EXPECT_THAT(Received(), StartsWith("HTTP/1.1 503 "));
  EXPECT_EQ(owner_.conn->phase(), Phase::kDrainBody);
  Send(std::string("23456789") + std::string(kGet));
  EXPECT_EQ(owner_.exchanges.size(), 2u) << "the request after the drained body";
  EXPECT_THAT(owner_.payloads[1], StartsWith("GET /a "));
}

TEST_F(HttpFrontConnectionTest, ABodyNeverFinishedAfterItsAnswerIsClosedSilentlyAtHeaderTimeout) {
  Connect();
  Send(std::string(kPostHead) + "01");
  owner_.Answer(Last(), Outcome::Rejected(ipc::Reason::kFull, 1, 1, 0));
  EXPECT_THAT(Received(), StartsWith("HTTP/1.1 503 "));
  Advance(kHeaderTimeoutMs);
  EXPECT_EQ(Received(), "") << "a second answer to one request";
  EXPECT_TRUE(closed_);
}

TEST_F(HttpFrontConnectionTest, AClientWaitingForContinueIsClosedAfterAnEarlyAnswer) {
  Connect();
  Send("POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n");
  owner_.Answer(Last(), Outcome::Rejected(ipc::Reason::kFull, 1, 1, 0));
  const std::string answer = Received();
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 503 "));
  EXPECT_THAT(answer, HasSubstr("Connection: close"));
  EXPECT_TRUE(closed_);
}

// --- The client leaving. ---

TEST_F(HttpFrontConnectionTest, AClientThatLeavesWhileItsAnswerIsAwaitedGivesItsRequestUp) {
  Connect();
  Send(kGet);
  Exchange* exchange = Last();
  client_.Reset();
  ASSERT_TRUE(RunUntil([&] { return owner_.conn == nullptr; }));
  ASSERT_EQ(owner_.gone.size(), 1u);
  EXPECT_EQ(owner_.gone[0], exchange);
  EXPECT_EQ(exchange->client, nullptr);
}

TEST_F(HttpFrontConnectionTest, AHalfCloseWhileTheAnswerIsAwaitedIsTheClientLeaving) {
  Connect();
  Send(kGet);
  ASSERT_EQ(::shutdown(client_.get(), SHUT_WR), 0);
  Settle();
  // A client waiting for its answer that ends its input is taken as gone (RFC 9112 section 9.6).
  EXPECT_EQ(owner_.conn, nullptr);
  EXPECT_EQ(owner_.gone.size(), 1u);
}

TEST_F(HttpFrontConnectionTest, AHalfCloseBetweenRequestsClosesOnceTheAnswersAreWritten) {
  Connect();
  Send(kGet);
  Last()->SendResponse("HTTP/1.1 204 No Content\r\n\r\n", false);
  owner_.Answer(Last(), Outcome::Ok({}));
  ASSERT_EQ(::shutdown(client_.get(), SHUT_WR), 0);
  EXPECT_EQ(Received(), "HTTP/1.1 204 No Content\r\n\r\n");
  EXPECT_TRUE(closed_);
  EXPECT_TRUE(owner_.gone.empty());
}

}  // namespace
}  // namespace bulkhead::proxy
