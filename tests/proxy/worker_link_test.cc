// SPDX-License-Identifier: MIT
// WorkerLink on a real libuv loop with a fake owner; the test plays the worker on the worker
// socket (docs/protocol.md, "Supervisor -> worker" and "Multiplexed worker connections").
#include "proxy/worker_link.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/unique_fd.h"
#include "ipc/frame.h"
#include "proxy/exchange.h"
#include "tests/helpers/simulated_time_source.h"
#include "tests/helpers/test_support.h"
#include "tests/proxy/fake_worker_end.h"
#include "tests/proxy/link_test_base.h"

namespace bulkhead::proxy {
namespace {

struct Replied {
  Exchange* exchange;
  std::string payload;
  Outcome::Kind kind;
};

struct Broke {
  std::string why;
  bool worker_at_fault;
};

struct FakeOwner : LinkOwner {
  std::vector<Replied> replies;
  std::vector<Broke> broken;
  void OnWorkerAnswer(Link*, Exchange* exchange, const Outcome& outcome, bool) override {
    replies.push_back(Replied{exchange, std::string(outcome.text), outcome.kind});
  }
  void OnWorkerProgress() override {}
  void OnLinkBroken(Link*, const std::string& why, bool worker_at_fault) override {
    broken.push_back(Broke{why, worker_at_fault});
  }
  void OnExchangeAborted(Link*, const std::string&) override {}
  loop::TimeSource* time() override { return &clock; }
  bulkhead::testing::SimulatedTimeSource clock;
};

class WorkerLinkTest : public LinkTestBase {
 protected:
  // Connects a link and accepts its worker end.
  WorkerLink* Connect(bool multiplexed) {
    Result<WorkerLink*> link =
        WorkerLink::Connect(&owner_, &loop_, path_, ipc::kDefaultMaxPayload, multiplexed);
    EXPECT_TRUE(link.ok()) << link.status().message();
    worker_ = FakeWorkerEnd{};
    worker_.fd = AcceptWorkerEnd();
    return link.ok() ? *link : nullptr;
  }

  std::vector<std::pair<ipc::FrameHeader, std::string>> ReadRequests(size_t count) {
    return worker_.Read([this](const std::function<bool()>& done) { return RunUntil(done); },
                        count);
  }

  void Reply(uint64_t request_id, std::string_view payload) {
    ASSERT_TRUE(worker_.Reply(request_id, payload));
  }

  FakeWorkerEnd worker_;  // the worker end accepted last
  FakeOwner owner_;
};

TEST_F(WorkerLinkTest, OnePerRequestIdsCountFromOne) {
  WorkerLink* link = Connect(/*multiplexed=*/false);
  ASSERT_NE(link, nullptr);
  Exchange a;
  Exchange b;
  link->Send(&a, "a");  // written at once: no Flush
  auto first = ReadRequests(1);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].first.request_id, 1u);
  Reply(1, "A");
  ASSERT_TRUE(RunUntil([&] { return owner_.replies.size() == 1; }));
  link->Send(&b, "b");
  auto second = ReadRequests(1);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].first.request_id, 2u);
  Reply(2, "B");
  ASSERT_TRUE(RunUntil([&] { return owner_.replies.size() == 2; }));
  EXPECT_EQ(owner_.replies[1].exchange, &b);
  link->Close();
}

TEST_F(WorkerLinkTest, MultiplexedRequestsGoOutAtFlushWithTheirOwnIdsAndMatchRepliesInAnyOrder) {
  WorkerLink* link = Connect(/*multiplexed=*/true);
  ASSERT_NE(link, nullptr);
  Exchange requests[3];
  link->Send(&requests[0], "zero");
  link->Send(&requests[1], "one");
  link->Send(&requests[2], "two");
  EXPECT_EQ(link->in_flight(), 3u);
  uv_run(&loop_, UV_RUN_NOWAIT);
  EXPECT_FALSE(Readable(worker_.fd.get())) << "written before Flush";
  link->Flush();

  auto frames = ReadRequests(3);
  ASSERT_EQ(frames.size(), 3u);
  std::set<uint64_t> ids;
  for (const auto& [header, payload] : frames) {
    EXPECT_NE(header.request_id, 0u);
    ids.insert(header.request_id);
  }
  EXPECT_EQ(ids.size(), 3u) << "ids repeat among the requests in flight";
  EXPECT_EQ(frames[0].second, "zero");
  EXPECT_EQ(frames[2].second, "two");

  // Answered last first, the middle one last; each reply reaches its own request.
  Reply(frames[2].first.request_id, "TWO");
  Reply(frames[0].first.request_id, "ZERO");
  ASSERT_TRUE(RunUntil([&] { return owner_.replies.size() == 2; }));
  EXPECT_EQ(owner_.replies[0].exchange, &requests[2]);
  EXPECT_EQ(owner_.replies[0].payload, "TWO");
  EXPECT_EQ(owner_.replies[1].exchange, &requests[0]);
  EXPECT_EQ(link->in_flight(), 1u);
  EXPECT_EQ(requests[0].link, nullptr);
  EXPECT_EQ(requests[1].link, link);

  // A freed slot is used again with a new id: a late reply to the old one is not taken for it.
  Exchange again;
  link->Send(&again, "again");
  link->Flush();
  auto next = ReadRequests(1);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(ids.count(next[0].first.request_id), 0u) << "an id came back while it could be late";
  Reply(frames[1].first.request_id, "ONE");
  Reply(next[0].first.request_id, "AGAIN");
  ASSERT_TRUE(RunUntil([&] { return owner_.replies.size() == 4; }));
  EXPECT_EQ(owner_.replies[2].exchange, &requests[1]);
  EXPECT_EQ(owner_.replies[3].exchange, &again);
  EXPECT_EQ(owner_.replies[3].payload, "AGAIN");
  EXPECT_FALSE(link->busy());
  EXPECT_TRUE(owner_.broken.empty());
  link->Close();
}

// A second reply to an answered request (a stale id) or a reply to an id never sent breaks the
// link as the worker's fault, with every request in flight left on it for the owner to fail.
TEST_F(WorkerLinkTest, MultiplexedReplyWithAnUnknownIdIsAProtocolError) {
  for (bool stale : {true, false}) {
    SCOPED_TRACE(stale ? "stale id" : "id never sent");
    owner_.replies.clear();
    owner_.broken.clear();
    WorkerLink* link = Connect(/*multiplexed=*/true);
    ASSERT_NE(link, nullptr);
    Exchange a;
    Exchange b;
    link->Send(&a, "a");
    link->Send(&b, "b");
    link->Flush();
    auto frames = ReadRequests(2);
    ASSERT_EQ(frames.size(), 2u);
    Reply(frames[0].first.request_id, "A");
    Reply(stale ? frames[0].first.request_id : frames[1].first.request_id + (uint64_t{7} << 32),
          "?");
    ASSERT_TRUE(RunUntil([&] { return !owner_.broken.empty(); }));
    ASSERT_EQ(owner_.replies.size(), 1u);
    EXPECT_EQ(owner_.replies[0].exchange, &a);
    EXPECT_TRUE(owner_.broken[0].worker_at_fault);
    EXPECT_EQ(owner_.broken[0].why, "worker replied to a request it was not sent");
    EXPECT_EQ(link->TakeInflight(), &b);
    EXPECT_EQ(link->TakeInflight(), nullptr);
    link->Close();
    uv_run(&loop_, UV_RUN_NOWAIT);
  }
}

// The worker closes the connection with five requests on it: the three written may have been
// read (not safe to send again); the two appended after, never written, are, with their payloads.
TEST_F(WorkerLinkTest, MultiplexedBreakWithSeveralInFlightTellsWhichTheWorkerCannotHaveRead) {
  WorkerLink* link = Connect(/*multiplexed=*/true);
  ASSERT_NE(link, nullptr);
  Exchange written[3];
  for (Exchange& request : written) link->Send(&request, "written");
  link->Flush();
  ASSERT_EQ(ReadRequests(3).size(), 3u);
  Exchange unsent[2];
  link->Send(&unsent[0], "first unsent");
  link->Send(&unsent[1], "second unsent");
  worker_.fd.Reset();
  ASSERT_TRUE(RunUntil([&] { return !owner_.broken.empty(); }));
  EXPECT_FALSE(owner_.broken[0].worker_at_fault);
  EXPECT_EQ(link->in_flight(), 5u);

  std::vector<Exchange*> read_maybe;
  std::vector<std::pair<Exchange*, std::string>> resendable;
  bool unread = false;
  std::string_view payload;
  while (Exchange* request = link->TakeInflight(&unread, &payload)) {
    if (unread) {
      resendable.emplace_back(request, std::string(payload));
    } else {
      read_maybe.push_back(request);
    }
    EXPECT_EQ(request->link, nullptr);
  }
  EXPECT_THAT(read_maybe, ::testing::UnorderedElementsAre(&written[0], &written[1], &written[2]));
  EXPECT_THAT(resendable, ::testing::UnorderedElementsAre(
                              std::pair<Exchange*, std::string>(&unsent[0], "first unsent"),
                              std::pair<Exchange*, std::string>(&unsent[1], "second unsent")));
  EXPECT_FALSE(link->busy());
  link->Close();
}

}  // namespace
}  // namespace bulkhead::proxy
