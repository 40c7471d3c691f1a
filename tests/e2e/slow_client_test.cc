// SPDX-License-Identifier: MIT
// Clients that do not read their replies (docs/config.md max_unsent_bytes, client_write_timeout):
// bulkheadd's memory for unsent replies stays within the cell's budget whatever clients do, a
// client that accepts no byte for client_write_timeout is closed, and replies never delivered are
// counted `undelivered`, not `ok`.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "tests/e2e/e2e_test.h"

namespace bulkhead::e2e {
namespace {

using std::chrono::milliseconds;

uint64_t U(const nlohmann::json& cell, const char* name) { return cell.value(name, uint64_t{0}); }

// VmRSS or VmHWM of `pid` in KiB (proc(5)), 0 when unreadable.
uint64_t ProcStatusKib(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stoull(line.substr(field.size() + 1));
  }
  return 0;
}

// The identity of docs/control.md ("Reconciling the counters").
void ExpectCountersReconcile(const nlohmann::json& c) {
  EXPECT_EQ(U(c, "admitted") + U(c, "rejected_at_admission"),
            U(c, "ok") + U(c, "rejected") + U(c, "failed") + U(c, "cancelled") + U(c, "dropped") +
                U(c, "undelivered") + U(c, "in_flight"))
      << c.dump();
}

// 40 clients that never read, each with a 4 MiB reply pending: unbounded, bulkheadd would hold
// ~150 MiB for them. With max_unsent_bytes = 16M it holds at most 16 MiB of unsent replies; the
// clients that accepted nothing for the longest are closed and their replies are undelivered.
TEST(SlowClient, UnsentRepliesStayWithinMaxUnsentBytes) {
  constexpr int kClients = 40;
  constexpr uint64_t kReplyBytes = 4 << 20;
  constexpr uint64_t kBudget = 16 << 20;
  Harness h(TestOptions({CellSpec{.name = "big",
                                  .max_concurrent = 4,
                                  .max_queue = kClients,
                                  .queue_timeout = "60s",
                                  .extra_toml = "max_unsent_bytes = \"16M\"\n"
                                                "client_write_timeout = \"0s\"\n"}}));
  ASSERT_STARTED(h);
  const uint64_t rss_before_kib = ProcStatusKib(h.pid(), "VmRSS");
  std::vector<ipc::Client> deaf;
  for (int i = 0; i < kClients; ++i) {
    Result<ipc::Client> client = h.Connect("big");
    ASSERT_TRUE(client.ok()) << client.status().message();
    // A small receive buffer: the kernel holds little on the client's behalf.
    int small = 4096;
    ASSERT_EQ(::setsockopt(client->fd(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small), 0);
    ASSERT_TRUE(client->Send(1, "blob " + std::to_string(kReplyBytes)).ok());
    deaf.push_back(std::move(client).value());
  }
  // Every request answered; at every look, the unsent bytes within the budget.
  uint64_t most_unsent = 0;
  nlohmann::json cell;
  ASSERT_TRUE(h.WaitForCell(
      "big",
      [&](const nlohmann::json& c) {
        cell = c;
        most_unsent = std::max(most_unsent, U(c, "unsent_bytes"));
        return U(c, "admitted") == kClients && U(c, "running") == 0 && U(c, "queued") == 0;
      },
      milliseconds(60000)))
      << cell.dump() << "\n"
      << h.Log();
  cell = h.Cell("big");
  most_unsent = std::max(most_unsent, U(cell, "unsent_bytes"));
  EXPECT_LE(most_unsent, kBudget) << cell.dump();
  EXPECT_GT(U(cell, "unsent_bytes"), 0u) << cell.dump();
  // The replies still held are in flight; the others were never delivered. None is ok: no client
  // read a byte.
  EXPECT_EQ(U(cell, "ok"), 0u) << cell.dump();
  EXPECT_GE(U(cell, "undelivered"), kClients - kBudget / (kReplyBytes - (1 << 20))) << cell.dump();
  EXPECT_EQ(U(cell, "undelivered") + U(cell, "in_flight"), static_cast<uint64_t>(kClients))
      << cell.dump();
  ExpectCountersReconcile(cell);
  EXPECT_NE(h.Log().find("client does not read its replies"), std::string::npos) << h.Log();
  EXPECT_NE(h.Log().find("max_unsent_bytes"), std::string::npos) << h.Log();

  const uint64_t rss_kib = ProcStatusKib(h.pid(), "VmRSS");
  const uint64_t hwm_kib = ProcStatusKib(h.pid(), "VmHWM");
  std::printf("bulkheadd RSS: %llu KiB before, %llu KiB after, peak %llu KiB; most unsent %llu\n",
              static_cast<unsigned long long>(rss_before_kib),
              static_cast<unsigned long long>(rss_kib), static_cast<unsigned long long>(hwm_kib),
              static_cast<unsigned long long>(most_unsent));
  RecordProperty("rss_peak_kib", std::to_string(hwm_kib));

  // The cell still serves a client that reads.
  EXPECT_OK_REPLY(h.Call("big", "echo still here"), "still here");
}

// A client that accepts no byte of its pending reply for client_write_timeout is closed; its reply
// counts as undelivered, not ok. A client that reads gets its large reply whole.
TEST(SlowClient, ClientThatAcceptsNoByteIsClosedAfterClientWriteTimeout) {
  Harness h(TestOptions({CellSpec{
      .name = "c", .max_concurrent = 2, .extra_toml = "client_write_timeout = \"1s\"\n"}}));
  ASSERT_STARTED(h);
  Result<ipc::Client> deaf = h.Connect("c");
  ASSERT_TRUE(deaf.ok()) << deaf.status().message();
  ASSERT_TRUE(deaf->Send(1, "blob 1048576").ok());
  ASSERT_TRUE(h.WaitForCell(
      "c", [](const nlohmann::json& c) { return U(c, "undelivered") == 1 && U(c, "clients") == 0; },
      milliseconds(20000)))
      << h.Cell("c").dump() << "\n"
      << h.Log();
  EXPECT_NE(h.Log().find("accepted no byte for"), std::string::npos) << h.Log();
  nlohmann::json cell = h.Cell("c");
  EXPECT_EQ(U(cell, "ok"), 0u) << cell.dump();
  EXPECT_EQ(U(cell, "unsent_bytes"), 0u) << cell.dump();
  ExpectCountersReconcile(cell);

  Result<ipc::Client::Reply> reply = h.Call("c", "blob 1048576");
  ASSERT_TRUE(IsReply(reply, ipc::ReplyStatus::kOk, ipc::Reason::kNone)) << Describe(reply);
  EXPECT_EQ(reply->payload.size(), 1048576u);
  cell = h.Cell("c");
  EXPECT_EQ(U(cell, "ok"), 1u) << cell.dump();
  ExpectCountersReconcile(cell);
}

}  // namespace
}  // namespace bulkhead::e2e
