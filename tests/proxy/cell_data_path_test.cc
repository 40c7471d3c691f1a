// SPDX-License-Identifier: MIT
// CellDataPath on a real libuv loop with a fake Upstream and simulated time
// (tests/helpers/simulated_time_source.h): the data path serves and refuses requests with no
// process, no lifecycle and no supervisor::Cell behind it (issue 14), and its timers
// (queue_timeout, request_timeout, stall_timeout, the orphan grace) fall due only when a test
// advances the time. The test plays the worker itself on the worker socket.
#include "proxy/cell_data_path.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "base/log.h"
#include "ipc/client.h"
#include "ipc/frame.h"
#include "tests/helpers/simulated_time_source.h"
#include "tests/helpers/test_support.h"
#include "tests/proxy/fake_worker_end.h"

namespace bulkhead::proxy {
namespace {

using bulkhead::testing::ListenUnix;
using bulkhead::testing::TempDir;
using bulkhead::testing::WaitFor;

// What the data path asks of, and tells, the worker's side: set by the test, recorded for it.
struct FakeUpstream : Upstream {
  pid_t pid = 0;
  int drained = 0;
  std::vector<std::string> stalls;

  pid_t worker_pid() const override { return pid; }
  bool HasUnacceptedConnection() const override { return false; }
  void Stalled(std::string why) override { stalls.push_back(std::move(why)); }
  void Drained() override { ++drained; }
  void RetiredLinksDrained() override { ++retired_drained; }
  int retired_drained = 0;
};

class CellDataPathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // As bulkheadd's main() does: a write to a worker that closed its end is EPIPE, not a signal.
    ::signal(SIGPIPE, SIG_IGN);
    ASSERT_EQ(uv_loop_init(&loop_), 0);
    config_.name = "t";
    config_.socket = dir_.path() + "/t.sock";
    config_.worker_socket = dir_.path() + "/t.worker.sock";
    config_.max_concurrent = 1;
    config_.max_queue = 1;
    after_poll_.emplace(&loop_, [this] { data_path_->OnAfterPoll(); });
    write_batch_.emplace(&loop_);  // as bulkheadd's: the answers go out through io_uring
    data_path_.emplace(&loop_, &time_, config_, ipc::kDefaultMaxPayload, &pool_, &*write_batch_,
                       &*after_poll_, &upstream_);
    ASSERT_TRUE(data_path_->Bind(ipc::SocketAccess{}).ok());
  }

  void TearDown() override {
    // As the worker's end does before the data path closes: nothing runs any more.
    data_path_->FailInFlight(ipc::Reason::kWorkerDied, "test over");
    data_path_->DisconnectClients();
    int open = 3;
    data_path_->Close([&] { --open; });
    after_poll_->Close([&] { --open; });
    write_batch_->Close([&] { --open; });
    uv_run(&loop_, UV_RUN_DEFAULT);
    EXPECT_EQ(open, 0);
    data_path_.reset();
    after_poll_.reset();
    write_batch_.reset();
    EXPECT_EQ(uv_loop_close(&loop_), 0) << "a handle was left open";
    EXPECT_EQ(pool_.live(), 0u);
  }

  // Runs the loop until `done` or the deadline.
  bool RunUntil(const std::function<bool()>& done) {
    return WaitFor([&] {
      uv_run(&loop_, UV_RUN_NOWAIT);
      return done();
    });
  }

  Result<ipc::Client::Reply> Receive(ipc::Client& client) {
    if (!RunUntil([&] { return Readable(client.fd()); })) return Status::Error("no reply");
    return client.Receive();
  }

  // Gives the cell `slots` slots, a queue of 1 and `mode`, as a reload and the next worker's start
  // do, listens on the worker socket as the worker would, and opens admission to a "running"
  // worker.
  void StartWorker(uint32_t slots, config::WorkerConnections mode) {
    Result<UniqueFd> listening = ListenUnix(config_.worker_socket);
    ASSERT_TRUE(listening.ok()) << listening.status().message();
    worker_listen_ = std::move(listening).value();
    config::CellConfig next = config_;
    next.max_concurrent = slots;
    next.max_queue = 1;
    next.worker_connections = mode;
    data_path_->Reconfigure(next);
    data_path_->WorkerStarting();
    upstream_.pid = 4242;
    data_path_->SetAvailability({});  // a worker comes: requests are admitted
    data_path_->OpenAdmission();
  }

  // Connects `count` clients and sends one request on each: id 10 + i + first, payload
  // "p<i + first>".
  std::vector<ipc::Client> SendFromClients(int count, int first = 0) {
    std::vector<ipc::Client> clients;
    for (int i = first; i < first + count; ++i) {
      Result<ipc::Client> client = ipc::Client::Connect(config_.socket);
      EXPECT_TRUE(client.ok()) << client.status().message();
      if (!client.ok()) break;
      EXPECT_TRUE(client->Send(10 + static_cast<uint64_t>(i), "p" + std::to_string(i)).ok());
      clients.push_back(std::move(client).value());
    }
    return clients;
  }

  // The worker's end of the next connection the data path opened (invalid fd if none came).
  FakeWorkerEnd AcceptWorkerEnd() {
    FakeWorkerEnd end;
    if (RunUntil([&] { return Readable(worker_listen_.get()); })) {
      end.fd = UniqueFd(::accept4(worker_listen_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    }
    return end;
  }

  std::vector<std::pair<ipc::FrameHeader, std::string>> ReadRequests(FakeWorkerEnd& end,
                                                                     size_t count) {
    return end.Read([this](const std::function<bool()>& done) { return RunUntil(done); }, count);
  }

  // Moves simulated time on by `ms`, running the timers that fall due, then lets the loop poll
  // once, so that a verdict asked for after the poll (loop/after_poll.h) is given.
  void Advance(uint64_t ms) {
    time_.Advance(ms);
    uv_run(&loop_, UV_RUN_NOWAIT);
  }

  TempDir dir_;
  uv_loop_t loop_{};
  bulkhead::testing::SimulatedTimeSource time_;
  config::CellConfig config_;
  ExchangePool pool_;
  FakeUpstream upstream_;
  std::optional<loop::AfterPoll> after_poll_;
  std::optional<loop::WriteBatch> write_batch_;
  std::optional<CellDataPath> data_path_;
  UniqueFd worker_listen_;  // the worker socket, once StartWorker listened on it
};

TEST_F(CellDataPathTest, RefusesWhileTheUpstreamHasNoWorkerWithItsRetryAfter) {
  // A backoff whose next start is 1234 ms away, beyond queue_timeout: refused, saying when.
  data_path_->SetAvailability({.refuse_until_ms = time_.NowMs() + 234,
                               .next_start = admission::Availability::NextStart::kAt,
                               .next_start_at_ms = time_.NowMs() + 1234});
  Result<ipc::Client> client = ipc::Client::Connect(config_.socket);
  ASSERT_TRUE(client.ok()) << client.status().message();
  ASSERT_TRUE(client->Send(7, "ping").ok());

  Result<ipc::Client::Reply> reply = Receive(*client);
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  EXPECT_EQ(reply->header.request_id, 7u);
  EXPECT_EQ(reply->header.status, ipc::ReplyStatus::kRejected);
  EXPECT_EQ(reply->header.reason, ipc::Reason::kUnavailable);
  std::optional<ipc::RejectDetail> detail = ipc::DecodeRejectDetail(reply->payload);
  ASSERT_TRUE(detail.has_value());
  EXPECT_EQ(detail->cell, "t");
  EXPECT_EQ(detail->retry_after_ms, 1234u);
  EXPECT_EQ(data_path_->counters().rejected_at_admission, 1u);
  EXPECT_EQ(data_path_->worker_connections(), 0u) << "a refused request reached for the worker";
}

// A backoff refuses only while its end is more than queue_timeout away (the availability the
// lifecycle pushed names that moment); from then on a request waits in the queue for the worker
// that starts, on the simulated clock alone, with no new push.
TEST_F(CellDataPathTest, ABackoffRefusesUntilItsEndIsWithinQueueTimeoutThenQueues) {
  const uint64_t now = time_.NowMs();
  data_path_->SetAvailability({.refuse_until_ms = now + 500,
                               .next_start = admission::Availability::NextStart::kAt,
                               .next_start_at_ms = now + 1500});
  Result<ipc::Client> client = ipc::Client::Connect(config_.socket);
  ASSERT_TRUE(client.ok()) << client.status().message();
  ASSERT_TRUE(client->Send(1, "early").ok());
  Result<ipc::Client::Reply> refused = Receive(*client);
  ASSERT_TRUE(refused.ok()) << refused.status().message();
  EXPECT_EQ(refused->header.reason, ipc::Reason::kUnavailable);
  std::optional<ipc::RejectDetail> detail = ipc::DecodeRejectDetail(refused->payload);
  ASSERT_TRUE(detail.has_value());
  EXPECT_EQ(detail->retry_after_ms, 1500u);

  time_.Advance(500);
  ASSERT_TRUE(client->Send(2, "in time").ok());
  EXPECT_TRUE(RunUntil([&] { return data_path_->bulkhead().queued() == 1; }));
  EXPECT_EQ(data_path_->counters().rejected_at_admission, 1u);
}

// A cell that is stopped or failed (Availability::NoneDue, as every data path begins) refuses
// with no retry-after: frames carry 0, and HTTP sends no Retry-After (LocalReply tests).
TEST_F(CellDataPathTest, ACellWithNoStartDueRefusesWithNoRetryAfter) {
  Result<ipc::Client> client = ipc::Client::Connect(config_.socket);
  ASSERT_TRUE(client.ok()) << client.status().message();
  ASSERT_TRUE(client->Send(3, "x").ok());
  Result<ipc::Client::Reply> reply = Receive(*client);
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  EXPECT_EQ(reply->header.reason, ipc::Reason::kUnavailable);
  std::optional<ipc::RejectDetail> detail = ipc::DecodeRejectDetail(reply->payload);
  ASSERT_TRUE(detail.has_value());
  EXPECT_EQ(detail->retry_after_ms, 0u);
}

TEST_F(CellDataPathTest, ForwardsToTheWorkerSocketAndTellsTheUpstreamWhenDrained) {
  Result<UniqueFd> worker_listen = ListenUnix(config_.worker_socket);
  ASSERT_TRUE(worker_listen.ok()) << worker_listen.status().message();
  upstream_.pid = 4242;  // a worker "runs": the data path only names it in logs
  data_path_->SetAvailability({});  // a worker comes: requests are admitted
  data_path_->OpenAdmission();

  Result<ipc::Client> client = ipc::Client::Connect(config_.socket);
  ASSERT_TRUE(client.ok()) << client.status().message();
  ASSERT_TRUE(client->Send(9, "ping").ok());

  // The worker: accepts the link, reads the REQUEST frame, answers OK "pong" with its id.
  ASSERT_TRUE(RunUntil([&] { return Readable(worker_listen->get()); }));
  UniqueFd link(::accept4(worker_listen->get(), nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_TRUE(link.valid());
  ipc::FrameDecoder decoder(ipc::FrameType::kRequest);
  ipc::FrameView request;
  ASSERT_TRUE(RunUntil([&] {
    char buffer[256];
    if (Readable(link.get())) {
      ssize_t n = ::read(link.get(), buffer, sizeof buffer);
      if (n > 0) decoder.Feed(std::string_view(buffer, static_cast<size_t>(n)));
    }
    return decoder.Next(&request) == ipc::DecodeResult::kFrame;
  }));
  EXPECT_EQ(request.payload, "ping");
  EXPECT_EQ(data_path_->bulkhead().running(), 1u);
  ipc::FrameHeader ok;
  ok.type = ipc::FrameType::kReply;
  ok.status = ipc::ReplyStatus::kOk;
  ok.request_id = request.header.request_id;
  std::string frame;
  ipc::AppendFrame(&frame, ok, "pong");
  ASSERT_EQ(::send(link.get(), frame.data(), frame.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(frame.size()));

  Result<ipc::Client::Reply> reply = Receive(*client);
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  EXPECT_EQ(reply->header.request_id, 9u);
  EXPECT_EQ(reply->header.status, ipc::ReplyStatus::kOk);
  EXPECT_EQ(reply->payload, "pong");
  EXPECT_EQ(data_path_->bulkhead().running(), 0u);
  EXPECT_EQ(upstream_.drained, 1);
  EXPECT_TRUE(upstream_.stalls.empty());
  EXPECT_EQ(data_path_->worker_connections(), 1u) << "the link stays open for the next request";
  EXPECT_TRUE(RunUntil([&] { return data_path_->counters().ok == 1; }));
}

// A re-exec's drain learns the end of the last request from the data path (SetQuietObserver), not
// by looking every few ms: the observer runs once the answer is written, with no timer run at all
// (simulated time never moves here).
TEST_F(CellDataPathTest, TellsItsQuietObserverWhenTheLastRequestInFlightIsAnswered) {
  int quiet = 0;
  uint64_t in_flight_when_told = 99;
  data_path_->SetQuietObserver([&] {
    ++quiet;
    in_flight_when_told = data_path_->in_flight();
  });
  StartWorker(/*slots=*/2, config::WorkerConnections::kOnePerRequest);
  std::vector<ipc::Client> clients = SendFromClients(2);
  FakeWorkerEnd first = AcceptWorkerEnd();
  FakeWorkerEnd second = AcceptWorkerEnd();
  const std::vector<std::pair<ipc::FrameHeader, std::string>> one = ReadRequests(first, 1);
  const std::vector<std::pair<ipc::FrameHeader, std::string>> two = ReadRequests(second, 1);
  ASSERT_EQ(one.size(), 1u);
  ASSERT_EQ(two.size(), 1u);
  ASSERT_EQ(data_path_->in_flight(), 2u);
  const int told_before = quiet;  // a client connecting with nothing in flight may tell

  ASSERT_TRUE(first.Reply(one.front().first.request_id, "one"));
  ASSERT_TRUE(RunUntil([&] { return data_path_->counters().ok == 1; }));
  EXPECT_EQ(quiet, told_before) << "one request is still in flight";

  ASSERT_TRUE(second.Reply(two.front().first.request_id, "two"));
  ASSERT_TRUE(RunUntil([&] { return quiet > told_before; }));
  EXPECT_EQ(quiet, told_before + 1);
  EXPECT_EQ(in_flight_when_told, 0u);
  EXPECT_EQ(data_path_->counters().ok, 2u);
  EXPECT_EQ(time_.NowMs(), 1'000'000u) << "no time passed: no timer told it";
}

// Records the bad-request warnings Log receives for the cell "t", each with the loop's time (ms)
// when it came, which is the time the data path judged it by; installed while the object lives.
class BadRequestLog : public LogSink {
 public:
  explicit BadRequestLog(const loop::TimeSource* time) : time_(time), previous_(GetLogSink()) {
    SetLogSink(this);
  }
  ~BadRequestLog() override { SetLogSink(previous_); }
  BadRequestLog(const BadRequestLog&) = delete;
  BadRequestLog& operator=(const BadRequestLog&) = delete;

  bool Consume(const LogRecord& record) override {
    if (record.cell != "t" || !record.message.starts_with(kPrefix)) return false;
    lines.emplace_back(time_->NowMs(), std::string(record.message));
    return true;
  }

  static constexpr std::string_view kPrefix = "bad request, closing client connection: ";
  std::vector<std::pair<uint64_t, std::string>> lines;

 private:
  const loop::TimeSource* time_;
  LogSink* previous_;
};

// How many bad requests `line` says were not logged before it: K of its "(and K more since the
// last such line, not logged)", 0 without one; nullopt when the text is not that.
std::optional<uint64_t> NotLoggedBefore(std::string_view line) {
  constexpr std::string_view kAnd = " (and ";
  constexpr std::string_view kMore = " more since the last such line, not logged)";
  const size_t at = line.find(kAnd);
  if (at == std::string_view::npos) return 0;
  std::string_view rest = line.substr(at + kAnd.size());
  uint64_t count = 0;
  auto [end, error] = std::from_chars(rest.data(), rest.data() + rest.size(), count);
  if (error != std::errc() || count == 0 || std::string_view(end, rest.end()) != kMore) {
    return std::nullopt;
  }
  return count;
}

// Any client can send bad requests as fast as it likes: each is counted and answered, but the log
// gets at most one line a second of them (burst 1 per 1000 ms), and the next line logged says how
// many were not, so that every bad request is in the log's tally once.
TEST_F(CellDataPathTest, BadRequestsAreLoggedAtMostOnceASecondAndTheNextLineCountsTheRest) {
  BadRequestLog log(&time_);
  auto send_bad_request = [&](uint64_t nth) {
    Result<ipc::Client> client = ipc::Client::Connect(config_.socket);
    ASSERT_TRUE(client.ok()) << client.status().message();
    constexpr std::string_view kGarbage = "GARBAGE GARBAGE GARBAGE!";
    ASSERT_EQ(::send(client->fd(), kGarbage.data(), kGarbage.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(kGarbage.size()));
    Result<ipc::Client::Reply> reply = Receive(*client);
    ASSERT_TRUE(reply.ok()) << reply.status().message();
    EXPECT_EQ(reply->header.status, ipc::ReplyStatus::kBadRequest);
    EXPECT_EQ(data_path_->counters().bad_request, nth);
  };
  for (uint64_t i = 1; i <= 5; ++i) send_bad_request(i);
  ASSERT_FALSE(log.lines.empty());
  // A second after the last line logged, the next bad request is logged again.
  time_.Advance(1000);
  send_bad_request(6);

  ASSERT_EQ(log.lines.size(), 2u) << "five bad requests sent at one instant were not one line";
  uint64_t tally = 0;
  for (size_t i = 0; i < log.lines.size(); ++i) {
    const auto& [at_ms, line] = log.lines[i];
    std::optional<uint64_t> not_logged = NotLoggedBefore(line);
    ASSERT_TRUE(not_logged.has_value()) << line;
    tally += 1 + *not_logged;
    if (i == 0) {
      EXPECT_EQ(*not_logged, 0u) << line;
    } else {
      EXPECT_GE(at_ms - log.lines[i - 1].first, 1000u) << "two lines within a second: " << line;
    }
  }
  EXPECT_EQ(tally, 6u) << "the log's lines and their counts do not add up to the bad requests";
}

// True when the peer of `fd` closed the connection: it reads as the end (a peek gets 0 bytes).
bool PeerClosed(int fd) {
  char byte;
  return Readable(fd) && ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

// A frame cell's request that the worker cannot have read (it closed the connection with the
// request unread in it: ECONNRESET) goes out again on a new connection, and before connecting the
// data path closes the connection that has been idle longest (TakeLink with `fresh`): the worker
// is likeliest to be closing that one too. The request is answered once; the connection idle for
// a shorter time stays open and is not written to.
// A worker swap's handover (lifecycle/worker_swap.h): the link to the previous worker carries
// its request to the end and closes, the Upstream hears when the last one is done, and a new
// request takes a new connection to whatever the worker socket's path names now.
TEST_F(CellDataPathTest, RetiredLinksFinishWhatTheyCarryAndNewRequestsTakeNewLinks) {
  StartWorker(2, config::WorkerConnections::kOnePerRequest);
  std::vector<ipc::Client> first = SendFromClients(1);
  FakeWorkerEnd previous = AcceptWorkerEnd();
  ASSERT_TRUE(previous.fd.valid());
  auto request = ReadRequests(previous, 1);
  ASSERT_EQ(request.size(), 1u);

  // The next worker's socket takes the path (the runner renames it there).
  ASSERT_EQ(::unlink(config_.worker_socket.c_str()), 0);
  Result<UniqueFd> next_listen = ListenUnix(config_.worker_socket);
  ASSERT_TRUE(next_listen.ok()) << next_listen.status().message();
  worker_listen_ = std::move(next_listen).value();
  EXPECT_TRUE(data_path_->RetireWorkerLinks());
  EXPECT_EQ(data_path_->retiring_links(), 1u);

  std::vector<ipc::Client> second = SendFromClients(1, 1);
  FakeWorkerEnd next = AcceptWorkerEnd();
  ASSERT_TRUE(next.fd.valid()) << "a new request went to the previous worker";
  auto next_request = ReadRequests(next, 1);
  ASSERT_EQ(next_request.size(), 1u);
  EXPECT_EQ(next_request[0].second, "p1");

  ASSERT_TRUE(previous.Reply(request[0].first.request_id, "from previous"));
  Result<ipc::Client::Reply> reply = Receive(first[0]);
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  EXPECT_EQ(reply->payload, "from previous");
  EXPECT_EQ(upstream_.retired_drained, 1);
  EXPECT_EQ(data_path_->retiring_links(), 0u);
  EXPECT_EQ(data_path_->worker_connections(), 1u) << "the retired link was closed";

  ASSERT_TRUE(next.Reply(next_request[0].first.request_id, "from next"));
  reply = Receive(second[0]);
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  EXPECT_EQ(reply->payload, "from next");
  EXPECT_EQ(data_path_->counters().ok, 2u);
  EXPECT_EQ(upstream_.retired_drained, 1);
}

// The swap's previous worker is reaped with requests still on its retired links, one whose link
// broke first (the kill closed its socket) and one whose link is still open: both get FAILED
// worker_died with its exit, as a crash's would, not worker_error after the orphan grace; the
// serving worker's request is untouched.
TEST_F(CellDataPathTest, RequestsOfAPreviousWorkerThatIsReapedFailAsWorkerDied) {
  StartWorker(3, config::WorkerConnections::kOnePerRequest);
  std::vector<ipc::Client> first = SendFromClients(2);
  FakeWorkerEnd broken = AcceptWorkerEnd();
  FakeWorkerEnd open = AcceptWorkerEnd();
  ASSERT_EQ(ReadRequests(broken, 1).size(), 1u);
  ASSERT_EQ(ReadRequests(open, 1).size(), 1u);
  ASSERT_EQ(::unlink(config_.worker_socket.c_str()), 0);
  Result<UniqueFd> next_listen = ListenUnix(config_.worker_socket);
  ASSERT_TRUE(next_listen.ok()) << next_listen.status().message();
  worker_listen_ = std::move(next_listen).value();
  EXPECT_TRUE(data_path_->RetireWorkerLinks());
  std::vector<ipc::Client> second = SendFromClients(1, 2);
  FakeWorkerEnd next = AcceptWorkerEnd();
  ASSERT_EQ(ReadRequests(next, 1).size(), 1u);

  broken.fd.Reset();
  ASSERT_TRUE(RunUntil([&] { return data_path_->retiring_links() == 1; }));
  data_path_->PreviousWorkerExited("signal 9");
  for (ipc::Client& client : first) {
    Result<ipc::Client::Reply> reply = Receive(client);
    ASSERT_TRUE(reply.ok()) << reply.status().message();
    EXPECT_EQ(reply->header.status, ipc::ReplyStatus::kFailed);
    EXPECT_EQ(reply->header.reason, ipc::Reason::kWorkerDied);
    EXPECT_EQ(reply->payload, "signal 9");
  }
  EXPECT_EQ(data_path_->retiring_links(), 0u);
  EXPECT_EQ(data_path_->counters().failed_worker_died, 2u);
  EXPECT_EQ(data_path_->counters().failed_worker_error, 0u);
  Advance(5000);  // past the orphan grace: nothing more
  EXPECT_FALSE(Readable(second[0].fd())) << "the serving worker's request was answered";
  EXPECT_EQ(data_path_->bulkhead().running(), 1u);
}

TEST_F(CellDataPathTest, AResendClosesTheLongestIdleConnectionFirst) {
  StartWorker(/*slots=*/3, config::WorkerConnections::kOnePerRequest);
  std::vector<ipc::Client> clients = SendFromClients(3);
  ASSERT_EQ(clients.size(), 3u);
  // Three connections, one request on each, answered one after the other: ends[0]'s connection
  // becomes idle first, ends[2]'s last.
  std::vector<FakeWorkerEnd> ends;
  for (int i = 0; i < 3; ++i) {
    ends.push_back(AcceptWorkerEnd());
    ASSERT_TRUE(ends.back().fd.valid()) << i;
  }
  for (size_t i = 0; i < ends.size(); ++i) {
    auto request = ReadRequests(ends[i], 1);
    ASSERT_EQ(request.size(), 1u) << i;
    ASSERT_TRUE(ends[i].Reply(request[0].first.request_id, "r" + request[0].second));
    ASSERT_TRUE(RunUntil([&] { return data_path_->counters().ok == i + 1; })) << i;
  }
  for (size_t i = 0; i < clients.size(); ++i) {
    Result<ipc::Client::Reply> reply = Receive(clients[i]);
    ASSERT_TRUE(reply.ok()) << reply.status().message();
    EXPECT_EQ(reply->payload, "rp" + std::to_string(reply->header.request_id - 10));
  }
  ASSERT_EQ(data_path_->worker_connections(), 3u);

  // The next request takes the connection idle for the shortest time; the worker closes it
  // without reading the request.
  std::vector<ipc::Client> next = SendFromClients(1, /*first=*/3);
  ASSERT_EQ(next.size(), 1u);
  ASSERT_TRUE(RunUntil([&] { return Readable(ends[2].fd.get()); }));
  ends[2].fd.Reset();

  FakeWorkerEnd fresh = AcceptWorkerEnd();
  ASSERT_TRUE(fresh.fd.valid()) << "the request was not sent again on a new connection";
  EXPECT_TRUE(RunUntil([&] { return PeerClosed(ends[0].fd.get()); }))
      << "the longest idle connection is still open";
  auto resent = ReadRequests(fresh, 1);
  ASSERT_EQ(resent.size(), 1u);
  EXPECT_EQ(resent[0].second, "p3");
  ASSERT_TRUE(fresh.Reply(resent[0].first.request_id, "once"));
  Result<ipc::Client::Reply> reply = Receive(next[0]);
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  EXPECT_EQ(reply->header.request_id, 13u);
  EXPECT_EQ(reply->header.status, ipc::ReplyStatus::kOk);
  EXPECT_EQ(reply->payload, "once");
  EXPECT_TRUE(RunUntil([&] { return data_path_->counters().ok == 4; }));
  EXPECT_EQ(data_path_->counters().failed(), 0u);
  EXPECT_FALSE(Readable(next[0].fd())) << "a second reply";
  EXPECT_FALSE(Readable(ends[1].fd.get())) << "the connection idle for a shorter time was used";
  EXPECT_FALSE(Readable(worker_listen_.get())) << "one connection more than the resend needs";
  EXPECT_EQ(data_path_->worker_connections(), 2u);
}

// --- Timers, in simulated time. ---

// queue_timeout: a queued request is rejected at its deadline, not a millisecond before, while the
// running one is untouched.
TEST_F(CellDataPathTest, QueueTimeoutRejectsAQueuedRequestAtItsDeadline) {
  config_.queue_timeout = std::chrono::milliseconds(500);
  StartWorker(/*slots=*/1, config::WorkerConnections::kOnePerRequest);
  std::vector<ipc::Client> clients = SendFromClients(2);
  ASSERT_EQ(clients.size(), 2u);
  FakeWorkerEnd end = AcceptWorkerEnd();
  ASSERT_EQ(ReadRequests(end, 1).size(), 1u);
  ASSERT_TRUE(RunUntil([&] { return data_path_->bulkhead().queued() == 1; }));
  Advance(499);
  EXPECT_FALSE(Readable(clients[1].fd())) << "rejected before queue_timeout";
  Advance(1);
  Result<ipc::Client::Reply> reply = Receive(clients[1]);
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  EXPECT_EQ(reply->header.request_id, 11u);
  EXPECT_EQ(reply->header.status, ipc::ReplyStatus::kRejected);
  EXPECT_EQ(reply->header.reason, ipc::Reason::kQueueTimeout);
  EXPECT_TRUE(RunUntil([&] { return data_path_->counters().rejected_queue_timeout == 1; }));
  EXPECT_EQ(data_path_->bulkhead().running(), 1u);
  EXPECT_FALSE(Readable(clients[0].fd()));
}

// request_timeout: the client is answered FAILED timeout at the deadline; the slot stays taken
// until the worker answers, whose late answer is then dropped.
TEST_F(CellDataPathTest, RequestTimeoutAnswersAtTheDeadlineAndKeepsTheSlotUntilTheWorkerAnswers) {
  config_.request_timeout = std::chrono::milliseconds(1000);
  StartWorker(/*slots=*/1, config::WorkerConnections::kOnePerRequest);
  std::vector<ipc::Client> clients = SendFromClients(1);
  FakeWorkerEnd end = AcceptWorkerEnd();
  auto request = ReadRequests(end, 1);
  ASSERT_EQ(request.size(), 1u);
  Advance(999);
  EXPECT_FALSE(Readable(clients[0].fd())) << "timed out early";
  Advance(1);
  Result<ipc::Client::Reply> reply = Receive(clients[0]);
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  EXPECT_EQ(reply->header.status, ipc::ReplyStatus::kFailed);
  EXPECT_EQ(reply->header.reason, ipc::Reason::kTimeout);
  EXPECT_EQ(reply->payload, "request_timeout of 1000 ms passed");
  EXPECT_EQ(data_path_->bulkhead().running(), 1u) << "the worker still holds the request";
  ASSERT_TRUE(end.Reply(request[0].first.request_id, "late"));
  ASSERT_TRUE(RunUntil([&] { return data_path_->bulkhead().running() == 0; }));
  EXPECT_TRUE(RunUntil([&] { return data_path_->counters().failed_timeout == 1; }));
  EXPECT_EQ(data_path_->counters().ok, 0u);
  EXPECT_FALSE(Readable(clients[0].fd())) << "a second answer";
}

// A reply that waits in the worker socket when the deadline passes (the supervisor was paused or
// starved) is read before the verdict: the client gets OK, not FAILED timeout.
TEST_F(CellDataPathTest, RequestTimeoutReadsAReplyThatWaitedInTheSocketFirst) {
  config_.request_timeout = std::chrono::milliseconds(1000);
  StartWorker(/*slots=*/1, config::WorkerConnections::kOnePerRequest);
  std::vector<ipc::Client> clients = SendFromClients(1);
  FakeWorkerEnd end = AcceptWorkerEnd();
  auto request = ReadRequests(end, 1);
  ASSERT_EQ(request.size(), 1u);
  ASSERT_TRUE(end.Reply(request[0].first.request_id, "in time"));
  Advance(5000);
  Result<ipc::Client::Reply> reply = Receive(clients[0]);
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  EXPECT_EQ(reply->header.status, ipc::ReplyStatus::kOk);
  EXPECT_EQ(reply->payload, "in time");
  EXPECT_EQ(data_path_->counters().failed_timeout, 0u);
}

// A request_timeout or stall_timeout set by reload counts from the reload for the requests already
// running (systemd#9467 is that bug in systemd's watchdog): a request that has run 1200 ms when a
// reload brings 1000 ms timeouts has 1000 ms more, then times out, and its worker is reported
// stalled, each once. (It replaces an e2e test that slept 1200 ms to age its requests.)
TEST_F(CellDataPathTest, ATimeoutAddedByReloadCountsFromTheReload) {
  StartWorker(/*slots=*/1, config::WorkerConnections::kOnePerRequest);
  std::vector<ipc::Client> clients = SendFromClients(1);
  FakeWorkerEnd end = AcceptWorkerEnd();
  auto request = ReadRequests(end, 1);
  ASSERT_EQ(request.size(), 1u);
  Advance(1200);
  config::CellConfig next = config_;
  next.request_timeout = std::chrono::milliseconds(1000);
  next.stall_timeout = std::chrono::milliseconds(1000);
  data_path_->Reconfigure(next);
  Advance(999);
  EXPECT_FALSE(Readable(clients[0].fd())) << "timed out from the request's start";
  EXPECT_TRUE(upstream_.stalls.empty()) << upstream_.stalls.front();
  Advance(1);
  Result<ipc::Client::Reply> reply = Receive(clients[0]);
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  EXPECT_EQ(reply->header.status, ipc::ReplyStatus::kFailed);
  EXPECT_EQ(reply->header.reason, ipc::Reason::kTimeout);
  ASSERT_EQ(upstream_.stalls.size(), 1u);
  // The verdict waited for the reload's 1000 ms; the silence it reports is all of it.
  EXPECT_EQ(upstream_.stalls[0], "no reply for 2200 ms");
}

// stall_timeout: silence of a worker with requests in hand is reported once it lasts the whole
// timeout; a reply in between starts the count again.
TEST_F(CellDataPathTest, StallIsReportedAfterAWholeStallTimeoutOfSilence) {
  config_.stall_timeout = std::chrono::milliseconds(2000);
  StartWorker(/*slots=*/2, config::WorkerConnections::kOnePerRequest);
  std::vector<ipc::Client> clients = SendFromClients(2);
  FakeWorkerEnd first = AcceptWorkerEnd();
  FakeWorkerEnd second = AcceptWorkerEnd();
  auto a = ReadRequests(first, 1);
  auto b = ReadRequests(second, 1);
  ASSERT_EQ(a.size() + b.size(), 2u);
  Advance(1500);
  ASSERT_TRUE(first.Reply(a[0].first.request_id, "progress"));
  ASSERT_TRUE(RunUntil([&] { return data_path_->bulkhead().running() == 1; }));
  Advance(1999);  // 3499 ms since dispatch, 1999 since the last reply
  EXPECT_TRUE(upstream_.stalls.empty()) << upstream_.stalls.front();
  Advance(1);
  ASSERT_EQ(upstream_.stalls.size(), 1u);
  EXPECT_EQ(upstream_.stalls[0], "no reply for 2000 ms");
}

// An idle worker is never stalled, however long nothing happens.
TEST_F(CellDataPathTest, AnIdleWorkerIsNeverStalled) {
  config_.stall_timeout = std::chrono::milliseconds(100);
  StartWorker(/*slots=*/1, config::WorkerConnections::kOnePerRequest);
  Advance(60'000);
  EXPECT_TRUE(upstream_.stalls.empty());
}

// idle_timeout: a frame client with no request in flight is closed without a word (counted), one
// whose request runs is not, and its idle time counts from its last answer.
TEST_F(CellDataPathTest, IdleTimeoutClosesAClientWithNoRequestInFlight) {
  config_.idle_timeout = std::chrono::milliseconds(500);
  StartWorker(/*slots=*/1, config::WorkerConnections::kOnePerRequest);
  Result<ipc::Client> idle = ipc::Client::Connect(config_.socket);
  ASSERT_TRUE(idle.ok()) << idle.status().message();
  std::vector<ipc::Client> busy = SendFromClients(1);
  FakeWorkerEnd end = AcceptWorkerEnd();
  auto request = ReadRequests(end, 1);
  ASSERT_EQ(request.size(), 1u);
  ASSERT_EQ(data_path_->clients(), 2u);
  Advance(499);
  EXPECT_EQ(data_path_->clients(), 2u) << "closed before idle_timeout";
  Advance(1);
  ASSERT_TRUE(RunUntil([&] { return data_path_->clients() == 1; }));
  EXPECT_TRUE(RunUntil([&] { return PeerClosed(idle->fd()); }));
  EXPECT_EQ(data_path_->counters().idle_closed, 1u);
  // The busy one, whose request runs for ten times the timeout, stays; once answered it is idle.
  Advance(5000);
  EXPECT_EQ(data_path_->clients(), 1u);
  ASSERT_TRUE(end.Reply(request[0].first.request_id, "done"));
  Result<ipc::Client::Reply> reply = Receive(busy[0]);
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  Advance(499);
  EXPECT_EQ(data_path_->clients(), 1u) << "idle time counted from before the answer";
  Advance(1);
  EXPECT_TRUE(RunUntil([&] { return data_path_->clients() == 0; }));
  EXPECT_EQ(data_path_->counters().idle_closed, 2u);
}

// A request that waits unread in the socket when idle_timeout passes (the loop was paused) is
// read and answered, not lost with a closed connection.
TEST_F(CellDataPathTest, IdleTimeoutSparesAClientWhoseRequestWaitsUnread) {
  config_.idle_timeout = std::chrono::milliseconds(500);
  data_path_->Reconfigure(config_);  // no worker: the request is refused at once, answered
  Result<ipc::Client> client = ipc::Client::Connect(config_.socket);
  ASSERT_TRUE(client.ok()) << client.status().message();
  ASSERT_TRUE(RunUntil([&] { return data_path_->clients() == 1; }));
  ASSERT_TRUE(client->Send(5, "late").ok());
  time_.Advance(500);  // the timer fires before the loop has read the request
  Result<ipc::Client::Reply> reply = Receive(*client);
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  EXPECT_EQ(reply->header.request_id, 5u);
  EXPECT_EQ(data_path_->counters().idle_closed, 0u);
}

class MultiplexDataPathTest : public CellDataPathTest {
 protected:
  void StartMultiplexed(uint32_t slots) {
    StartWorker(slots, config::WorkerConnections::kMultiplex);
  }

  void AcceptWorker() {
    worker_ = AcceptWorkerEnd();
    ASSERT_TRUE(worker_.fd.valid());
  }

  std::vector<std::pair<ipc::FrameHeader, std::string>> ReadRequests(size_t count) {
    return CellDataPathTest::ReadRequests(worker_, count);
  }

  FakeWorkerEnd worker_;
};

// A swap's handover in the loop turn that put a request on the multiplexed link (whose writes go
// out before the next poll, for the link in use only) retires that link with the request sent,
// not left in its buffer until the previous worker is killed at stop_timeout and it is resent
// (bulkhead-bench-restart showed every multiplexed restart taking stop_timeout).
TEST_F(MultiplexDataPathTest, AHandoverInTheTurnThatQueuedAWriteSendsItOnTheRetiredLink) {
  StartMultiplexed(/*slots=*/2);
  std::vector<ipc::Client> first = SendFromClients(1);
  AcceptWorker();
  auto first_sent = ReadRequests(1);
  ASSERT_EQ(first_sent.size(), 1u);
  ASSERT_EQ(::unlink(config_.worker_socket.c_str()), 0);
  Result<UniqueFd> next_listen = ListenUnix(config_.worker_socket);
  ASSERT_TRUE(next_listen.ok()) << next_listen.status().message();
  worker_listen_ = std::move(next_listen).value();

  // The handover comes right after the poll that read the second request: a check handle runs
  // there, before the next turn's prepare.
  struct Handover {
    CellDataPath* data_path;
    bool done = false;
  } handover{&*data_path_};
  uv_check_t check;
  ASSERT_EQ(uv_check_init(&loop_, &check), 0);
  check.data = &handover;
  uv_check_start(&check, [](uv_check_t* handle) {
    auto* h = static_cast<Handover*>(handle->data);
    if (!h->done && h->data_path->bulkhead().running() == 2) {
      h->done = true;
      EXPECT_TRUE(h->data_path->RetireWorkerLinks());
    }
  });
  std::vector<ipc::Client> second = SendFromClients(1, 1);
  const bool handed_over = RunUntil([&] { return handover.done; });
  uv_close(reinterpret_cast<uv_handle_t*>(&check), nullptr);
  uv_run(&loop_, UV_RUN_NOWAIT);
  ASSERT_TRUE(handed_over);
  auto sent = ReadRequests(1);
  ASSERT_EQ(sent.size(), 1u) << "the request stayed in the retired link's buffer";
  EXPECT_EQ(sent[0].second, "p1");
  EXPECT_FALSE(Readable(worker_listen_.get())) << "it went to the next worker instead";
  // The previous worker answers both; the retired link then drains and closes.
  ASSERT_TRUE(worker_.Reply(sent[0].first.request_id, "r1"));
  ASSERT_TRUE(worker_.Reply(first_sent[0].first.request_id, "r0"));
  Result<ipc::Client::Reply> reply = Receive(second[0]);
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  EXPECT_EQ(reply->payload, "r1");
  reply = Receive(first[0]);
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  EXPECT_EQ(reply->payload, "r0");
  EXPECT_TRUE(RunUntil([&] { return data_path_->retiring_links() == 0; }));
}

TEST_F(MultiplexDataPathTest, SendsEveryRequestOnOneConnectionAndMatchesRepliesInAnyOrder) {
  StartMultiplexed(/*slots=*/3);
  std::vector<ipc::Client> clients = SendFromClients(4);
  ASSERT_EQ(clients.size(), 4u);
  AcceptWorker();
  auto first = ReadRequests(3);
  ASSERT_EQ(first.size(), 3u);
  EXPECT_TRUE(RunUntil([&] { return data_path_->bulkhead().queued() == 1; }));
  EXPECT_EQ(data_path_->bulkhead().running(), 3u) << "max_concurrent = 3 exceeded";
  EXPECT_EQ(data_path_->worker_connections(), 1u);
  EXPECT_FALSE(Readable(worker_listen_.get())) << "a second connection to the worker";

  // Answered out of order; the queued request then goes out on the same connection.
  ASSERT_TRUE(worker_.Reply(first[2].first.request_id, "r" + first[2].second));
  ASSERT_TRUE(worker_.Reply(first[0].first.request_id, "r" + first[0].second));
  auto queued = ReadRequests(1);
  ASSERT_EQ(queued.size(), 1u);
  ASSERT_TRUE(worker_.Reply(queued[0].first.request_id, "r" + queued[0].second));
  ASSERT_TRUE(worker_.Reply(first[1].first.request_id, "r" + first[1].second));

  for (int i = 0; i < 4; ++i) {
    Result<ipc::Client::Reply> reply = Receive(clients[static_cast<size_t>(i)]);
    ASSERT_TRUE(reply.ok()) << reply.status().message();
    EXPECT_EQ(reply->header.request_id, 10u + static_cast<uint64_t>(i));
    EXPECT_EQ(reply->header.status, ipc::ReplyStatus::kOk);
    EXPECT_EQ(reply->payload, "rp" + std::to_string(i));
  }
  EXPECT_EQ(data_path_->bulkhead().running(), 0u);
  EXPECT_EQ(data_path_->worker_connections(), 1u) << "the link stays open for the next requests";
  EXPECT_TRUE(RunUntil([&] { return data_path_->counters().ok == 4; }));
}

// The worker ends: every request in flight on the multiplexed link fails with the exit reason.
TEST_F(MultiplexDataPathTest, FailInFlightFailsEveryRequestOnTheLink) {
  StartMultiplexed(/*slots=*/2);
  std::vector<ipc::Client> clients = SendFromClients(2);
  ASSERT_EQ(clients.size(), 2u);
  AcceptWorker();
  ASSERT_EQ(ReadRequests(2).size(), 2u);
  data_path_->FailInFlight(ipc::Reason::kWorkerDied, "exit 3");
  for (ipc::Client& client : clients) {
    Result<ipc::Client::Reply> reply = Receive(client);
    ASSERT_TRUE(reply.ok()) << reply.status().message();
    EXPECT_EQ(reply->header.status, ipc::ReplyStatus::kFailed);
    EXPECT_EQ(reply->header.reason, ipc::Reason::kWorkerDied);
    EXPECT_EQ(reply->payload, "exit 3");
  }
  EXPECT_EQ(data_path_->worker_connections(), 0u);
  EXPECT_EQ(data_path_->bulkhead().running(), 0u);
}

// The worker closes its idle multiplexed connection just as a request comes: the request, never
// written to that connection (EPIPE), goes out again on a new one and is answered, not failed.
TEST_F(MultiplexDataPathTest, ARequestNotWrittenWhenTheWorkerClosedGoesOnANewConnection) {
  StartMultiplexed(/*slots=*/2);
  std::vector<ipc::Client> clients = SendFromClients(1);
  ASSERT_EQ(clients.size(), 1u);
  AcceptWorker();
  auto first = ReadRequests(1);
  ASSERT_EQ(first.size(), 1u);
  ASSERT_TRUE(worker_.Reply(first[0].first.request_id, "one"));
  Result<ipc::Client::Reply> reply = Receive(clients[0]);
  ASSERT_TRUE(reply.ok()) << reply.status().message();

  // The loop iteration that reads the request appends it to the link; the write comes before
  // the next poll (OnFlushPrepare), and by then the worker has closed its end: EPIPE.
  ASSERT_TRUE(clients[0].Send(20, "two").ok());
  ASSERT_TRUE(RunUntil([&] { return data_path_->bulkhead().running() == 1; }));
  worker_.fd.Reset();
  worker_.decoder = ipc::FrameDecoder(ipc::FrameType::kRequest);
  AcceptWorker();
  auto again = ReadRequests(1);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].second, "two");
  ASSERT_TRUE(worker_.Reply(again[0].first.request_id, "TWO"));
  reply = Receive(clients[0]);
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  EXPECT_EQ(reply->header.request_id, 20u);
  EXPECT_EQ(reply->header.status, ipc::ReplyStatus::kOk);
  EXPECT_EQ(reply->payload, "TWO");
  EXPECT_EQ(data_path_->worker_connections(), 1u);
}

// The worker closes the link after reading two requests: both may have been read, so neither is
// sent again; with no exit reaped within the grace period they fail as worker errors.
TEST_F(MultiplexDataPathTest, ABrokenLinkFailsTheRequestsTheWorkerMayHaveRead) {
  StartMultiplexed(/*slots=*/2);
  std::vector<ipc::Client> clients = SendFromClients(2);
  ASSERT_EQ(clients.size(), 2u);
  AcceptWorker();
  ASSERT_EQ(ReadRequests(2).size(), 2u);
  worker_.fd.Reset();
  // They wait for the worker's exit for the orphan grace period (1 s), then fail.
  ASSERT_TRUE(RunUntil([&] { return data_path_->worker_connections() == 0; }));
  Advance(999);
  EXPECT_FALSE(Readable(clients[0].fd())) << "failed before the grace period passed";
  Advance(1);
  for (ipc::Client& client : clients) {
    Result<ipc::Client::Reply> reply = Receive(client);
    ASSERT_TRUE(reply.ok()) << reply.status().message();
    EXPECT_EQ(reply->header.status, ipc::ReplyStatus::kFailed);
    EXPECT_EQ(reply->header.reason, ipc::Reason::kWorkerError);
    EXPECT_EQ(reply->payload, "worker closed the connection without replying");
  }
  EXPECT_FALSE(Readable(worker_listen_.get())) << "a request the worker may have read went again";
}

// concurrency = "adaptive" (issue 26, docs/adaptive-concurrency.md): the data path feeds its
// AdaptiveLimit one service time per answered request and the Bulkhead holds the limit. The test
// plays a worker on one multiplexed connection in rounds of simulated time: every request at the
// worker is read, time moves on by the service time the worker has at that concurrency, and all
// are answered; each client sends its next request as soon as it has its answer (closed loop).
class AdaptiveDataPathTest : public MultiplexDataPathTest {
 protected:
  static constexpr int kClients = 16;

  // The queue is full of the clients' next requests: a worker gone would start them.
  void TearDown() override {
    data_path_->CloseAdmission();
    data_path_->RejectQueued();
    MultiplexDataPathTest::TearDown();
  }

  struct Run {
    uint32_t lowest_limit = UINT32_MAX;
    uint32_t highest_limit = 0;
    uint32_t highest_running = 0;
    uint64_t answered_ok = 0;
    uint64_t answered_other = 0;
  };

  // Starts a worker for a cell of `concurrency`, ceiling `ceiling`, with room in the queue for
  // every client and no timer that could end a request.
  void StartCell(config::ConcurrencyMode concurrency, uint32_t ceiling) {
    config_.concurrency = concurrency;
    config_.min_concurrent = 1;
    config_.queue_timeout = std::chrono::milliseconds(60'000);
    Result<UniqueFd> listening = ListenUnix(config_.worker_socket);
    ASSERT_TRUE(listening.ok()) << listening.status().message();
    worker_listen_ = std::move(listening).value();
    config::CellConfig next = config_;
    next.max_concurrent = ceiling;
    next.max_queue = kClients;
    next.worker_connections = config::WorkerConnections::kMultiplex;
    data_path_->Reconfigure(next);
    data_path_->WorkerStarting();
    upstream_.pid = 4242;
    data_path_->SetAvailability({});  // a worker comes: requests are admitted
    data_path_->OpenAdmission();
  }

  // The config StartCell gives the cell, with `concurrency` and the bounds `floor`..`ceiling`:
  // what a reload of it passes.
  config::CellConfig Reloaded(config::ConcurrencyMode concurrency, uint32_t floor,
                              uint32_t ceiling) const {
    config::CellConfig next = config_;
    next.max_concurrent = ceiling;
    next.max_queue = kClients;
    next.worker_connections = config::WorkerConnections::kMultiplex;
    next.concurrency = concurrency;
    next.min_concurrent = floor;
    return next;
  }

  // The clients' first requests, each payload naming its client ("c<i>").
  void Connect() {
    for (int i = 0; i < kClients; ++i) {
      Result<ipc::Client> client = ipc::Client::Connect(config_.socket);
      ASSERT_TRUE(client.ok()) << client.status().message();
      ASSERT_TRUE(client->Send(1, "c" + std::to_string(i)).ok());
      clients_.push_back(std::move(client).value());
    }
    AcceptWorker();
    ASSERT_TRUE(RunUntil([&] {
      return data_path_->bulkhead().running() + data_path_->bulkhead().queued() == kClients;
    }));
  }

  // Rounds for `duration_ms` of simulated time; `service_ms(running)` is the worker's service
  // time with that many requests at it.
  Run RunRounds(uint64_t duration_ms, const std::function<uint64_t(uint32_t)>& service_ms) {
    Run run;
    const uint64_t end_ms = time_.NowMs() + duration_ms;
    while (time_.NowMs() < end_ms) {
      const uint32_t running = data_path_->bulkhead().running();
      const uint32_t limit = data_path_->bulkhead().limits().max_concurrent;
      run.lowest_limit = std::min(run.lowest_limit, limit);
      run.highest_limit = std::max(run.highest_limit, limit);
      run.highest_running = std::max(run.highest_running, running);
      auto requests = ReadRequests(running);
      if (requests.size() != running) {
        ADD_FAILURE() << "the worker got " << requests.size() << " of " << running;
        return run;
      }
      Advance(service_ms(running));
      for (const auto& [header, payload] : requests) {
        EXPECT_TRUE(worker_.Reply(header.request_id, payload));
      }
      for (const auto& [header, payload] : requests) {
        ipc::Client& client = clients_[std::stoul(payload.substr(1))];
        Result<ipc::Client::Reply> reply = Receive(client);
        if (!reply.ok()) {
          ADD_FAILURE() << reply.status().message();
          return run;
        }
        ++(reply->header.status == ipc::ReplyStatus::kOk ? run.answered_ok : run.answered_other);
        EXPECT_TRUE(client.Send(1, payload).ok());
      }
      if (!RunUntil([&] {
            return data_path_->bulkhead().running() + data_path_->bulkhead().queued() == kClients;
          })) {
        ADD_FAILURE() << "the clients' next requests never came";
        return run;
      }
    }
    return run;
  }

  std::vector<ipc::Client> clients_;
};

// A worker of two parallel units: 10 ms per request up to two at once, then proportionally
// longer (processor sharing).
uint64_t KneeOfTwo(uint32_t running) { return running <= 2 ? 10 : 5 * uint64_t{running}; }

TEST_F(AdaptiveDataPathTest, AWorkerThatSlowsPastItsKneeSeesTheLimitFallBackToIt) {
  StartCell(config::ConcurrencyMode::kAdaptive, /*ceiling=*/16);
  ASSERT_NE(data_path_->adaptive(), nullptr);
  EXPECT_EQ(data_path_->bulkhead().limits().max_concurrent, 1u) << "it starts at the floor";
  Connect();
  const Run warm = RunRounds(3'000, KneeOfTwo);
  const admission::AdaptiveLimit& adaptive = *data_path_->adaptive();
  EXPECT_GE(warm.highest_limit, 4u) << "slow start never probed past the knee";
  EXPECT_GE(adaptive.changes_by(admission::LimitCause::kSlowStart), 1u);
  EXPECT_GE(adaptive.changes_by(admission::LimitCause::kLatency), 1u)
      << "the service time doubled past the knee and the limit never fell for it";
  ASSERT_TRUE(adaptive.base_us().has_value());
  EXPECT_EQ(*adaptive.base_us(), 10'000u) << "the base is the service time at the floor";
  // Settled: the limit stays near the knee (the band's edge puts the next step at 3).
  const Run settled = RunRounds(3'000, KneeOfTwo);
  EXPECT_GE(settled.lowest_limit, 2u);
  EXPECT_LE(settled.highest_limit, 3u);
  EXPECT_EQ(data_path_->bulkhead().limits().max_concurrent, adaptive.limit());
  EXPECT_EQ(warm.answered_other + settled.answered_other, 0u) << "a request failed";
  EXPECT_GT(warm.answered_ok + settled.answered_ok, 500u);
}

TEST_F(AdaptiveDataPathTest, AFixedCellKeepsItsLimitWhateverTheServiceTime) {
  StartCell(config::ConcurrencyMode::kFixed, /*ceiling=*/8);
  EXPECT_EQ(data_path_->adaptive(), nullptr);
  Connect();
  const Run run = RunRounds(2'000, KneeOfTwo);
  EXPECT_EQ(run.lowest_limit, 8u);
  EXPECT_EQ(run.highest_limit, 8u);
  EXPECT_EQ(run.highest_running, 8u);
  EXPECT_EQ(run.answered_other, 0u);
}

// A reload to "adaptive" puts the limit at the floor with eight requests running at a fixed 8:
// all eight finish OK, the queued ones wait in order, and no new one starts until running is
// below the limit. Then back to "fixed": the queued requests start at once.
TEST_F(AdaptiveDataPathTest, ALoweredLimitFailsNoRunningRequestAndFixedAgainStartsTheQueue) {
  StartCell(config::ConcurrencyMode::kFixed, /*ceiling=*/8);
  Connect();
  auto running = ReadRequests(8);
  ASSERT_EQ(running.size(), 8u);

  config::CellConfig adaptive = Reloaded(config::ConcurrencyMode::kAdaptive, 1, 8);
  data_path_->Reconfigure(adaptive);
  ASSERT_NE(data_path_->adaptive(), nullptr);
  EXPECT_EQ(data_path_->bulkhead().limits().max_concurrent, 1u);
  EXPECT_EQ(data_path_->bulkhead().running(), 8u) << "the lowered limit stopped a running request";

  Advance(10);
  for (size_t i = 0; i < running.size(); ++i) {
    ASSERT_TRUE(worker_.Reply(running[i].first.request_id, running[i].second));
    ipc::Client& client = clients_[std::stoul(running[i].second.substr(1))];
    Result<ipc::Client::Reply> reply = Receive(client);
    ASSERT_TRUE(reply.ok()) << reply.status().message();
    EXPECT_EQ(reply->header.status, ipc::ReplyStatus::kOk);
    // None starts while running is at or above the floor of 1; the last answer starts one.
    EXPECT_EQ(data_path_->bulkhead().running(), i + 1 < running.size() ? 7u - i : 1u);
  }
  EXPECT_EQ(data_path_->bulkhead().queued(), 7u);
  EXPECT_EQ(data_path_->counters().rejected_queue_timeout + data_path_->counters().rejected_full,
            0u);

  config::CellConfig fixed = adaptive;
  fixed.concurrency = config::ConcurrencyMode::kFixed;
  data_path_->Reconfigure(fixed);
  EXPECT_EQ(data_path_->adaptive(), nullptr);
  EXPECT_EQ(data_path_->bulkhead().limits().max_concurrent, 8u);
  EXPECT_EQ(data_path_->bulkhead().running(), 8u) << "the queued requests did not start";
  EXPECT_EQ(ReadRequests(8).size(), 8u);
}

// adaptive -> adaptive: the bounds move the limit (cause "bounds"); the base and the phase stay.
TEST_F(AdaptiveDataPathTest, AReloadOfTheBoundsClampsTheLimitAndKeepsTheBase) {
  StartCell(config::ConcurrencyMode::kAdaptive, /*ceiling=*/16);
  Connect();
  RunRounds(3'000, KneeOfTwo);
  const admission::AdaptiveLimit* before = data_path_->adaptive();
  ASSERT_NE(before, nullptr);
  ASSERT_TRUE(before->base_us().has_value());
  config::CellConfig next = config_;
  next.max_concurrent = 16;
  next.max_queue = kClients;
  next.worker_connections = config::WorkerConnections::kMultiplex;
  next.min_concurrent = 5;
  next.latency_tolerance = 100;
  data_path_->Reconfigure(next);
  ASSERT_EQ(data_path_->adaptive(), before) << "a new controller: the base was lost";
  EXPECT_EQ(before->limit(), 5u);
  EXPECT_EQ(data_path_->bulkhead().limits().max_concurrent, 5u);
  EXPECT_EQ(before->change(0).cause, admission::LimitCause::kBounds);
  EXPECT_DOUBLE_EQ(before->options().tolerance, 1.0);
  EXPECT_TRUE(before->base_us().has_value());
}

// The kernel signals from the worker's side (lifecycle::PressureWatch through supervisor::Cell):
// a PSI trigger's event cuts the limit the Bulkhead holds; no running request fails for it.
TEST_F(AdaptiveDataPathTest, APressureTriggerEventLowersTheLimitAndFailsNothing) {
  StartCell(config::ConcurrencyMode::kAdaptive, /*ceiling=*/16);
  Connect();
  const Run warm = RunRounds(3'000, KneeOfTwo);
  const admission::AdaptiveLimit& adaptive = *data_path_->adaptive();
  const uint32_t before = adaptive.limit();
  ASSERT_GE(before, 2u);
  const uint32_t running = data_path_->bulkhead().running();
  data_path_->PressureFired(admission::Signal::kMemoryPressure);
  EXPECT_LT(adaptive.limit(), before);
  EXPECT_EQ(data_path_->bulkhead().limits().max_concurrent, adaptive.limit());
  EXPECT_EQ(adaptive.changes_by(admission::LimitCause::kMemoryPressure), 1u);
  EXPECT_EQ(adaptive.growth_hold(), admission::GrowthHold::kPressure);
  EXPECT_EQ(data_path_->bulkhead().running(), running) << "a running request was stopped";
  const Run after = RunRounds(1'000, KneeOfTwo);
  EXPECT_EQ(warm.answered_other + after.answered_other, 0u) << "a request failed";
}

// One poll's working set near memory.max cuts the limit only while the runner says the memory
// usage signal is live; the live signals reach a controller a reload makes later.
TEST_F(AdaptiveDataPathTest, AMemoryPollCutsTheLimitOnlyWhileItsSignalIsLive) {
  StartCell(config::ConcurrencyMode::kFixed, /*ceiling=*/8);
  const uint8_t live = admission::SignalBit(admission::Signal::kMemoryUsage) |
                       admission::SignalBit(admission::Signal::kMemoryPressure);
  data_path_->SetKernelSignals(live);
  data_path_->PressureFired(admission::Signal::kMemoryPressure);  // a fixed cell: ignored
  EXPECT_EQ(data_path_->bulkhead().limits().max_concurrent, 8u);

  data_path_->Reconfigure(Reloaded(config::ConcurrencyMode::kAdaptive, 4, 8));
  const admission::AdaptiveLimit* controller = data_path_->adaptive();
  ASSERT_NE(controller, nullptr);
  EXPECT_TRUE(controller->signal_live(admission::Signal::kMemoryUsage));
  EXPECT_TRUE(controller->signal_live(admission::Signal::kMemoryPressure));
  EXPECT_FALSE(controller->signal_live(admission::Signal::kCpuThrottling));
  // The floor is 4: raised to the ceiling, then lowered, the limit stays at 8, where a cut shows.
  data_path_->Reconfigure(Reloaded(config::ConcurrencyMode::kAdaptive, 8, 8));
  data_path_->Reconfigure(Reloaded(config::ConcurrencyMode::kAdaptive, 1, 8));
  ASSERT_EQ(controller->limit(), 8u);

  const CellDataPath::CgroupSample near_max{.working_set = 900, .memory_max = 1000};
  data_path_->SetKernelSignals(0);
  data_path_->CgroupUsagePolled(near_max);
  EXPECT_EQ(controller->limit(), 8u) << "a signal said off was fed";
  data_path_->SetKernelSignals(live);
  data_path_->CgroupUsagePolled(near_max);
  EXPECT_EQ(controller->limit(), 6u);
  EXPECT_EQ(data_path_->bulkhead().limits().max_concurrent, 6u);
  EXPECT_EQ(controller->changes_by(admission::LimitCause::kMemoryUsage), 1u);
}

// The supervisor's judgment of whose CPU reaches the controller: spared, the limit (and the
// bulkhead's) stays; a waiting neighbour cuts both.
TEST_F(AdaptiveDataPathTest, ACpuTriggerEventCutsOnlyWhenTheSupervisorSaysAnotherCellWaits) {
  StartCell(config::ConcurrencyMode::kFixed, /*ceiling=*/8);
  data_path_->SetKernelSignals(admission::SignalBit(admission::Signal::kCpuPressure));
  data_path_->Reconfigure(Reloaded(config::ConcurrencyMode::kAdaptive, 8, 8));
  data_path_->Reconfigure(Reloaded(config::ConcurrencyMode::kAdaptive, 1, 8));
  const admission::AdaptiveLimit* controller = data_path_->adaptive();
  ASSERT_NE(controller, nullptr);
  ASSERT_EQ(controller->limit(), 8u);
  data_path_->PressureFired(admission::Signal::kCpuPressure,
                            admission::CpuNeighbours::kNoneWaiting);
  EXPECT_EQ(controller->limit(), 8u);
  EXPECT_EQ(data_path_->bulkhead().limits().max_concurrent, 8u);
  EXPECT_EQ(controller->cpu_pressure_spared(), 1u);
  data_path_->PressureFired(admission::Signal::kCpuPressure, admission::CpuNeighbours::kWaiting);
  EXPECT_EQ(controller->limit(), 6u);
  EXPECT_EQ(data_path_->bulkhead().limits().max_concurrent, 6u);
  EXPECT_EQ(controller->cpu_pressure_spared(), 1u);
}
}  // namespace
}  // namespace bulkhead::proxy
