// SPDX-License-Identifier: MIT
// Admission seen from clients: a disconnected client's queue place is freed at once, a queued
// request is refused after queue_timeout (and not before), and 64 concurrent clients on a cell of
// 4 slots and 8 queue places each get exactly one reply per request, with counters that reconcile
// and a worker that never sees more than 4 requests at once.
#include <gtest/gtest.h>
#include <poll.h>

#include <atomic>
#include <chrono>
#include <latch>
#include <thread>
#include <vector>

#include "tests/e2e/e2e_test.h"

namespace bulkhead::e2e {
namespace {

using ipc::Reason;
using ipc::ReplyStatus;

// True when nothing can be read from `client` right now: no reply is waiting.
bool NothingToRead(const ipc::Client& client) {
  pollfd p{.fd = client.fd(), .events = POLLIN, .revents = 0};
  return ::poll(&p, 1, 0) == 0;
}

TEST(Admission, ClientDisconnectFreesItsQueuePlace) {
  Harness h(TestOptions({CellSpec{.name = "q",
                                  .max_concurrent = 1,
                                  .max_queue = 1,
                                  .queue_timeout = "30s",
                                  .extra_toml = kQuickStop}}));
  ASSERT_STARTED(h);

  Result<ipc::Client> a = h.Connect("q");
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_TRUE(a->Send(1, "hang").ok());
  ASSERT_TRUE(h.WaitForCell("q", [](const nlohmann::json& c) { return c["running"] == 1; }));

  Result<ipc::Client> b = h.Connect("q");
  ASSERT_TRUE(b.ok()) << b.status().message();
  ASSERT_TRUE(b->Send(1, "echo b").ok());
  ASSERT_TRUE(h.WaitForCell("q", [](const nlohmann::json& c) { return c["queued"] == 1; }));

  b->Close();
  ASSERT_TRUE(h.WaitForCell("q", [](const nlohmann::json& c) {
    return c["queued"] == 0 && c["cancelled"] == 1;
  })) << h.Status().dump();

  // The place is free again: a third client queues instead of being refused.
  Result<ipc::Client> c = h.Connect("q");
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_TRUE(c->Send(1, "echo c").ok());
  ASSERT_TRUE(h.WaitForCell("q", [](const nlohmann::json& c) { return c["queued"] == 1; }))
      << h.Status().dump();
  EXPECT_TRUE(NothingToRead(*c));
  EXPECT_EQ(h.Cell("q")["rejected"], 0);

  // And the queue is full again: the next one is refused, with exact figures.
  Result<ipc::Client::Reply> d = h.Call("q", "echo d");
  ASSERT_TRUE(IsReply(d, ReplyStatus::kRejected, Reason::kFull)) << Describe(d);
  std::optional<ipc::RejectDetail> detail = ipc::DecodeRejectDetail(d->payload);
  ASSERT_TRUE(detail.has_value());
  EXPECT_EQ(detail->cell, "q");
  EXPECT_EQ(detail->running, 1u);
  EXPECT_EQ(detail->queued, 1u);
}

TEST(Admission, QueueTimeoutRejectsAfterTheTimeout) {
  Harness h(TestOptions({CellSpec{.name = "q",
                                  .max_concurrent = 1,
                                  .max_queue = 1,
                                  .queue_timeout = "300ms",
                                  .extra_toml = kQuickStop}}));
  ASSERT_STARTED(h);
  Result<ipc::Client> a = h.Connect("q");
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_TRUE(a->Send(1, "hang").ok());
  ASSERT_TRUE(h.WaitForCell("q", [](const nlohmann::json& c) { return c["running"] == 1; }));

  // When, to the millisecond: CellDataPathTest.QueueTimeoutRejectsAQueuedRequestAtItsDeadline,
  // in simulated time. Here the outcome.
  Result<ipc::Client::Reply> reply = h.Call("q", "echo late");
  ASSERT_TRUE(IsReply(reply, ReplyStatus::kRejected, Reason::kQueueTimeout)) << Describe(reply);
  std::optional<ipc::RejectDetail> detail = ipc::DecodeRejectDetail(reply->payload);
  ASSERT_TRUE(detail.has_value());
  EXPECT_EQ(detail->cell, "q");
  EXPECT_EQ(detail->running, 1u);

  nlohmann::json cell = h.Cell("q");
  EXPECT_EQ(cell["rejected_by_reason"]["queue_timeout"], 1);
  EXPECT_EQ(cell["queued"], 0);
}

TEST(Admission, SixtyFourConcurrentClientsReconcile) {
  constexpr int kClients = 64;
  constexpr int kRequestsEach = 4;
  constexpr int kSlots = 4;
  Harness h(TestOptions({CellSpec{
      .name = "burst", .max_concurrent = kSlots, .max_queue = 8, .queue_timeout = "5s"}}));
  ASSERT_STARTED(h);

  std::atomic<int> ok{0}, full{0}, queue_timeout{0}, other{0}, errors{0}, extra{0};
  std::mutex mu;
  std::vector<std::string> problems;
  std::latch ready(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      auto problem = [&](std::string what) {
        ++errors;
        std::lock_guard<std::mutex> lock(mu);
        problems.push_back("client " + std::to_string(i) + ": " + std::move(what));
      };
      Result<ipc::Client> client = h.Connect("burst");
      ready.arrive_and_wait();  // every client connected: now all at once
      if (!client.ok()) return problem(client.status().message());
      if (!client->SetTimeout(std::chrono::seconds(20)).ok()) return problem("SetTimeout");
      for (int r = 0; r < kRequestsEach; ++r) {
        // Call checks that the reply carries this request's id.
        Result<ipc::Client::Reply> reply = client->Call("sleep 20");
        if (!reply.ok()) return problem(reply.status().message());
        if (IsReply(reply, ReplyStatus::kOk, Reason::kNone) && reply->payload == "slept 20") {
          ++ok;
        } else if (IsReply(reply, ReplyStatus::kRejected, Reason::kFull)) {
          ++full;
        } else if (IsReply(reply, ReplyStatus::kRejected, Reason::kQueueTimeout)) {
          ++queue_timeout;
        } else {
          ++other;
          problem("unexpected reply " + Describe(reply));
        }
      }
      // Exactly one reply per request: nothing more may arrive.
      if (!NothingToRead(*client)) ++extra;
    });
  }
  for (std::thread& t : threads) t.join();

  for (const std::string& p : problems) ADD_FAILURE() << p;
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(extra.load(), 0);
  EXPECT_EQ(ok + full + queue_timeout + other, kClients * kRequestsEach);
  EXPECT_GT(full.load(), 0) << "the burst never filled the cell: the test proves nothing";
  EXPECT_GE(ok.load(), kSlots);

  ASSERT_TRUE(h.WaitForCell("burst", [](const nlohmann::json& c) {
    return c["running"] == 0 && c["queued"] == 0;
  })) << h.Status().dump();
  nlohmann::json response = h.Status();
  const nlohmann::json& cell = response["cells"][0];
  EXPECT_EQ(cell["ok"], ok.load());
  EXPECT_EQ(cell["rejected_by_reason"]["full"], full.load());
  EXPECT_EQ(cell["rejected_by_reason"]["queue_timeout"], queue_timeout.load());
  EXPECT_EQ(cell["rejected_by_reason"]["unavailable"], 0);
  EXPECT_EQ(cell["failed"], 0);
  EXPECT_EQ(cell["cancelled"], 0);
  EXPECT_EQ(cell["dropped"], 0);
  EXPECT_EQ(cell["ok"].get<int>() + cell["rejected"].get<int>() + cell["failed"].get<int>(),
            kClients * kRequestsEach);
  EXPECT_EQ(response["supervisor"]["live_requests"], 0);

  // The worker's own count of requests in it at once.
  Result<ipc::Client::Reply> peak = h.Call("burst", "peak");
  ASSERT_TRUE(IsReply(peak, ReplyStatus::kOk, Reason::kNone)) << Describe(peak);
  EXPECT_GE(std::stoi(peak->payload), 1);
  EXPECT_LE(std::stoi(peak->payload), kSlots);
}

}  // namespace
}  // namespace bulkhead::e2e
