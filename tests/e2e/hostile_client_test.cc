// SPDX-License-Identifier: MIT
// Clients that misbehave, end to end (docs/protocol.md, "Misbehaving clients"): a header announcing
// 4 GiB, half a frame and a stall, a client that never reads its replies, more connections than a
// cell or the process may hold, pipelining past the queue, and 4 MiB payloads both ways through a
// slow reader. Each has one defined outcome, and none slows or starves another client or cell.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>

#include <string>
#include <vector>

#include "base/exit_status.h"
#include "tests/e2e/e2e_test.h"
#include "tests/helpers/blob_pattern.h"

namespace bulkhead::e2e {
namespace {

using ipc::Reason;
using ipc::ReplyStatus;
using std::chrono::milliseconds;
using ::testing::HasSubstr;
using ::testing::Not;

bool SendRaw(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

std::string RequestFrame(uint64_t id, std::string_view payload) {
  std::string frame;
  ipc::AppendFrame(&frame, ipc::FrameHeader{.type = ipc::FrameType::kRequest, .request_id = id},
                   payload);
  return frame;
}

Result<ipc::Client> ConnectWithTimeout(Harness& h, const std::string& cell,
                                       uint32_t max_payload = ipc::kDefaultMaxPayload) {
  Result<ipc::Client> client = ipc::Client::Connect(h.CellSocket(cell), max_payload);
  if (client.ok()) {
    Status set = client->SetTimeout(std::chrono::seconds(20));
    if (!set.ok()) return set;
  }
  return client;
}

// The connection ends (EOF) with nothing more to read.
void ExpectClosed(ipc::Client& client) {
  Result<ipc::Client::Reply> after = client.Receive();
  ASSERT_FALSE(after.ok()) << "connection still open: " << Describe(after);
  EXPECT_THAT(after.status().message(), HasSubstr("connection closed"));
}

uint64_t Counter(const nlohmann::json& cell, const char* name) {
  return cell.value(name, uint64_t{0});
}

// ok + rejected + failed + cancelled + dropped + undelivered: every admitted request ends in
// exactly one.
uint64_t Outcomes(const nlohmann::json& cell) {
  return Counter(cell, "ok") + Counter(cell, "rejected") + Counter(cell, "failed") +
         Counter(cell, "cancelled") + Counter(cell, "dropped") + Counter(cell, "undelivered");
}

// Every test runs in both worker connection modes (docs/protocol.md, "Supervisor -> worker"): a
// misbehaving client has the same outcome whichever way the supervisor reaches the worker.
class HostileClient : public ::testing::TestWithParam<const char*> {
 protected:
  static HarnessOptions Options(std::vector<CellSpec> cells, std::string supervisor_toml = "") {
    for (CellSpec& cell : cells) cell.worker_connections = GetParam();
    return TestOptions(std::move(cells), std::move(supervisor_toml));
  }
};

INSTANTIATE_TEST_SUITE_P(WorkerConnections, HostileClient,
                         ::testing::Values("one-per-request", "multiplex"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param) == "multiplex" ? "Multiplex"
                                                                         : "OnePerRequest";
                         });

TEST_P(HostileClient, FourGibHeaderIsRefusedAtOnceAndClosed) {
  Harness h(Options({CellSpec{.name = "c", .max_concurrent = 2}}));
  ASSERT_STARTED(h);
  Result<ipc::Client> good = ConnectWithTimeout(h, "c");
  ASSERT_TRUE(good.ok()) << good.status().message();
  // It runs until the test creates `go`.
  const std::string go = h.dir() + "/go.flag";
  ASSERT_TRUE(good->Send(1, "wait-file " + go).ok());
  ASSERT_TRUE(h.WaitForCell("c", [](const nlohmann::json& c) { return c["running"] == 1; }));

  // length = 0xffffffff: 4 GiB - 1 bytes follow the length field. Only the header is sent: the
  // supervisor must neither wait for nor allocate the payload.
  const char header[ipc::kHeaderSize] = {'\xff', '\xff', '\xff', '\xff', 1, 1, 0, 0,
                                         0,      0,      0,      0,      0, 0, 0, 42};
  Result<ipc::Client> bad = ConnectWithTimeout(h, "c");
  ASSERT_TRUE(bad.ok()) << bad.status().message();
  ASSERT_TRUE(SendRaw(bad->fd(), std::string_view(header, sizeof header)));
  Result<ipc::Client::Reply> refused = bad->Receive();
  ASSERT_TRUE(IsReply(refused, ReplyStatus::kBadRequest, Reason::kTooLarge)) << Describe(refused);
  EXPECT_EQ(refused->header.request_id, 42u);
  EXPECT_THAT(refused->payload,
              HasSubstr("payload of 4294967283 bytes exceeds the maximum of 4194304"));
  ExpectClosed(*bad);

  testing::CreateFlag(go);
  EXPECT_OK_REPLY(good->Receive(), "found " + go);
  EXPECT_OK_REPLY(good->Call("echo unaffected"), "unaffected");
  EXPECT_EQ(h.Cell("c")["bad_request"], 1);
}

// Half a frame holds only its own connection: no slot, no queue place. It stays open (there is no
// read timeout) and is answered as soon as the rest of the frame arrives.
TEST_P(HostileClient, HalfAFrameThenAStallHoldsNothingOthersNeed) {
  Harness h(Options({CellSpec{.name = "c", .max_concurrent = 1, .max_queue = 0}}));
  ASSERT_STARTED(h);
  const std::string frame = RequestFrame(7, "echo finally");
  Result<ipc::Client> half_header = ConnectWithTimeout(h, "c");
  Result<ipc::Client> half_payload = ConnectWithTimeout(h, "c");
  ASSERT_TRUE(half_header.ok() && half_payload.ok());
  ASSERT_TRUE(SendRaw(half_header->fd(), std::string_view(frame).substr(0, 5)));
  ASSERT_TRUE(SendRaw(half_payload->fd(), std::string_view(frame).substr(0, ipc::kHeaderSize + 3)));
  ASSERT_TRUE(h.WaitForCell("c", [](const nlohmann::json& c) { return c["clients"] == 2; }));

  // The cell's one slot, and no queue: any request held by the stallers would be rejected here.
  for (int i = 0; i < 3; ++i) EXPECT_OK_REPLY(h.Call("c", "echo served"), "served");
  nlohmann::json cell = h.Cell("c");
  EXPECT_EQ(cell["running"], 0);
  EXPECT_EQ(cell["queued"], 0);
  EXPECT_EQ(cell["rejected"], 0);

  ASSERT_TRUE(SendRaw(half_payload->fd(), std::string_view(frame).substr(ipc::kHeaderSize + 3)));
  Result<ipc::Client::Reply> late = half_payload->Receive();
  EXPECT_OK_REPLY(late, "finally");
  EXPECT_EQ(late->header.request_id, 7u);
  ASSERT_TRUE(SendRaw(half_header->fd(), std::string_view(frame).substr(5)));
  EXPECT_OK_REPLY(half_header->Receive(), "finally");
}

// The supervisor buffers at most 2 x max_payload_bytes + 64 KiB of unsent replies per client
// (proxy::Client::max_backlog_), then drops the client: its queued requests are cancelled and
// its running ones dropped. Another client of the same cell is served meanwhile and after.
TEST_P(HostileClient, ClientThatNeverReadsIsDroppedAfterABoundedBacklog) {
  constexpr int kRequests = 400;
  constexpr int kReplyBytes = 60000;
  Harness h(Options(
      {CellSpec{.name = "c", .max_concurrent = 2, .max_queue = 1000, .queue_timeout = "60s"},
       CellSpec{.name = "other"}},
      "max_payload_bytes = 65536\n"));
  ASSERT_STARTED(h);
  Result<ipc::Client> deaf = ConnectWithTimeout(h, "c");
  ASSERT_TRUE(deaf.ok()) << deaf.status().message();
  // A small receive buffer, so that the kernel holds little on the client's behalf.
  int small = 4096;
  ASSERT_EQ(::setsockopt(deaf->fd(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small), 0);
  std::string burst;
  for (int i = 1; i <= kRequests; ++i) {
    burst += RequestFrame(static_cast<uint64_t>(i), "blob " + std::to_string(kReplyBytes));
  }
  ASSERT_TRUE(SendRaw(deaf->fd(), burst));

  // 400 x 60 kB = 24 MB of replies against a bound of 192 KiB: the client must be dropped.
  ASSERT_TRUE(h.WaitForCell(
      "c", [](const nlohmann::json& c) { return c["clients"] == 0; }, milliseconds(60000)))
      << h.Cell("c").dump() << "\n"
      << h.Log();
  EXPECT_THAT(h.Log(), HasSubstr("client does not read its replies"));
  EXPECT_OK_REPLY(h.Call("c", "echo next client"), "next client");
  EXPECT_OK_REPLY(h.Call("other", "echo other cell"), "other cell");

  ASSERT_TRUE(h.WaitForCell(
      "c", [](const nlohmann::json& c) { return c["running"] == 0 && c["queued"] == 0; }));
  nlohmann::json cell = h.Cell("c");
  EXPECT_EQ(Outcomes(cell), static_cast<uint64_t>(kRequests) + 1) << cell.dump();
  EXPECT_GT(Counter(cell, "cancelled") + Counter(cell, "dropped"), 0u) << cell.dump();
  // Its replies buffered when it was closed were never delivered: not ok.
  EXPECT_GT(Counter(cell, "undelivered"), 0u) << cell.dump();
  EXPECT_EQ(h.Status()["supervisor"]["live_requests"], 0);
}

// Pipelined past slots and queue: each request gets exactly one reply. The excess is rejected at
// once, in request order, before any answer from the worker; the admitted ones are answered in
// FIFO order through the one slot.
TEST_P(HostileClient, PipeliningPastTheQueueGetsExactlyOneReplyEachInADefinedOrder) {
  Harness h(Options(
      {CellSpec{.name = "c", .max_concurrent = 1, .max_queue = 2, .queue_timeout = "60s"}}));
  ASSERT_STARTED(h);
  Result<ipc::Client> client = ConnectWithTimeout(h, "c");
  ASSERT_TRUE(client.ok()) << client.status().message();
  std::string burst;
  for (uint64_t id = 1; id <= 10; ++id) burst += RequestFrame(id, "sleep 200");
  ASSERT_TRUE(SendRaw(client->fd(), burst));  // one write: one read on the supervisor's side

  std::vector<uint64_t> rejected;
  std::vector<uint64_t> answered;
  for (int i = 0; i < 10; ++i) {
    Result<ipc::Client::Reply> reply = client->Receive();
    ASSERT_TRUE(reply.ok()) << reply.status().message();
    if (IsReply(reply, ReplyStatus::kRejected, Reason::kFull)) {
      EXPECT_TRUE(answered.empty()) << "a rejection came after an answer";
      rejected.push_back(reply->header.request_id);
    } else {
      EXPECT_OK_REPLY(reply, "slept 200");
      answered.push_back(reply->header.request_id);
    }
  }
  EXPECT_EQ(rejected, (std::vector<uint64_t>{4, 5, 6, 7, 8, 9, 10}));
  EXPECT_EQ(answered, (std::vector<uint64_t>{1, 2, 3}));
  // Nothing more for those ten: the next reply on the connection is the next request's.
  Result<ipc::Client::Reply> next = client->Call("echo eleventh");
  EXPECT_OK_REPLY(next, "eleventh");
  nlohmann::json cell = h.Cell("c");
  EXPECT_EQ(cell["ok"], 4);
  EXPECT_EQ(cell["rejected"], 7);
}

// A refused connection reads one REPLY REJECTED/too_many_connections with request_id 0 and a
// RejectDetail naming the cell, then EOF; the cell's kept clients and other cells are unaffected.
TEST_P(HostileClient, ConnectionsOverMaxConnectionsAreRefusedWithAReason) {
  Harness h(
      Options({CellSpec{.name = "c", .max_concurrent = 2, .extra_toml = "max_connections = 3\n"},
               CellSpec{.name = "other"}}));
  ASSERT_STARTED(h);
  std::vector<ipc::Client> kept;
  for (int i = 0; i < 3; ++i) {
    Result<ipc::Client> client = ConnectWithTimeout(h, "c");
    ASSERT_TRUE(client.ok()) << client.status().message();
    EXPECT_OK_REPLY(client->Call("echo kept"), "kept");
    kept.push_back(std::move(client).value());
  }
  Result<ipc::Client> excess = ConnectWithTimeout(h, "c");
  ASSERT_TRUE(excess.ok()) << excess.status().message();
  Result<ipc::Client::Reply> refusal = excess->Receive();
  ASSERT_TRUE(IsReply(refusal, ReplyStatus::kRejected, Reason::kTooManyConnections))
      << Describe(refusal);
  EXPECT_TRUE(ipc::IsConnectionRefusal(refusal->header));
  std::optional<ipc::RejectDetail> detail = ipc::DecodeRejectDetail(refusal->payload);
  ASSERT_TRUE(detail.has_value());
  EXPECT_EQ(detail->cell, "c");
  ExpectClosed(*excess);

  // Call() on a refused connection returns the refusal as its answer.
  Result<ipc::Client::Reply> called = h.Call("c", "echo refused");
  EXPECT_TRUE(IsReply(called, ReplyStatus::kRejected, Reason::kTooManyConnections))
      << Describe(called);
  // bulkheadctl call says why and exits 4 (REJECTED).
  Result<ProcessResult> ctl = h.Ctl({"call", "c", "--data", "echo refused"});
  ASSERT_TRUE(ctl.ok());
  EXPECT_EQ(ctl->exit_code(), kExitRejected) << ctl->Describe();
  EXPECT_THAT(ctl->err, HasSubstr("too_many_connections"));

  for (ipc::Client& client : kept) EXPECT_OK_REPLY(client.Call("echo still kept"), "still kept");
  EXPECT_OK_REPLY(h.Call("other", "echo other cell"), "other cell");
  nlohmann::json cell = h.Cell("c");
  EXPECT_EQ(cell["clients"], 3);
  EXPECT_EQ(cell["max_connections"], 3);
  EXPECT_EQ(cell["connections_refused"], 3);
  // The refusals are in the metrics text and the long status too, not only in status --json.
  Result<ProcessResult> metrics = h.Ctl({"metrics"});
  ASSERT_TRUE(metrics.ok()) << metrics.status().message();
  EXPECT_THAT(metrics->out, HasSubstr("\nbulkhead_connections_refused_total{cell=\"c\"} 3\n"));
  EXPECT_THAT(metrics->out, HasSubstr("\nbulkhead_connection_limit{cell=\"c\"} 3\n"));
  Result<ProcessResult> long_form = h.Ctl({"status", "c"});
  ASSERT_TRUE(long_form.ok()) << long_form.status().message();
  EXPECT_THAT(long_form->out, HasSubstr("    clients:           3/3 (3 refused, 0 closed idle)\n"));
  // A place freed is a place for the next client.
  kept.pop_back();
  ASSERT_TRUE(h.WaitForCell("c", [](const nlohmann::json& c) { return c["clients"] == 2; }));
  EXPECT_OK_REPLY(h.Call("c", "echo welcome back"), "welcome back");
}

// Issue 25 section 2: a leaky client pool cannot hold a frames cell's connections for ever. With
// max_connections = 32, 32 connections that went silent (half after one answer, half before any
// request) are closed by idle_timeout, without a word, each counted; a connection whose request
// is running stays, gets its answer, and the cell takes new clients. Outcomes and counts only:
// when each one closes is CellDataPathTest's, in simulated time.
TEST_P(HostileClient, IdleConnectionsAreClosedAfterIdleTimeoutAndTheirPlacesFreed) {
  constexpr int kLeaked = 31;
  TempDir dir;
  const std::string release = dir.Join("release");
  Harness h(Options({CellSpec{.name = "c",
                              .max_concurrent = 2,
                              // Wall-clock time: long enough that a client's request,
                              // sent right after its connect, never loses a race with it on a
                              // loaded machine.
                              .extra_toml = "max_connections = 32\nidle_timeout = \"1s\"\n"}}));
  ASSERT_STARTED(h);
  // Connected first, so any idle timer it wrongly had would fall due before the others'.
  Result<ipc::Client> busy = ConnectWithTimeout(h, "c");
  ASSERT_TRUE(busy.ok()) << busy.status().message();
  ASSERT_TRUE(busy->Send(1, "wait-file " + release).ok());
  ASSERT_TRUE(h.WaitForCell("c", [](const nlohmann::json& c) { return c["running"] == 1; }));
  std::vector<ipc::Client> leaked;
  for (int i = 0; i < kLeaked; ++i) {
    Result<ipc::Client> client = ConnectWithTimeout(h, "c");
    ASSERT_TRUE(client.ok()) << client.status().message();
    if (i % 2 == 0) EXPECT_OK_REPLY(client->Call("echo once"), "once");
    leaked.push_back(std::move(client).value());
  }
  for (ipc::Client& client : leaked) ExpectClosed(client);
  ASSERT_TRUE(h.WaitForCell("c", [&](const nlohmann::json& c) {
    return Counter(c, "connections_idle_closed") == kLeaked && c["clients"] == 1;
  })) << h.Cell("c").dump();

  // The running request's connection is not idle: it stays and gets its answer.
  testing::CreateFlag(release);
  Result<ipc::Client::Reply> answer = busy->Receive();
  EXPECT_OK_REPLY(answer, "found " + release);
  EXPECT_OK_REPLY(h.Call("c", "echo room again"), "room again");
  nlohmann::json cell = h.Cell("c");
  EXPECT_EQ(Counter(cell, "connections_idle_closed"), static_cast<uint64_t>(kLeaked));
  EXPECT_EQ(Counter(cell, "connections_refused"), 0u);
  EXPECT_EQ(cell["policy"]["idle_timeout_ms"], 1000);
  Result<ProcessResult> metrics = h.Ctl({"metrics"});
  ASSERT_TRUE(metrics.ok()) << metrics.status().message();
  EXPECT_THAT(metrics->out,
              HasSubstr("\nbulkhead_connections_idle_closed_total{cell=\"c\"} 31\n"));
}

// The bug this guards against: enough client connections used to exhaust bulkheadd's descriptors,
// and then every cell's requests failed with "cannot connect to worker: Too many open files" and
// spawns failed (counting toward the start limit). With RLIMIT_NOFILE at 256, 600 connections to
// one cell: it keeps its share of the descriptor budget and the excess is refused, while the other
// cell still gets clients, connects to its worker, replaces a killed worker and serves.
TEST_P(HostileClient, ConnectionFloodLeavesTheSupervisorsDescriptorsAndOtherCellsAlone) {
  constexpr int kFlood = 600;
  HarnessOptions options = Options({CellSpec{.name = "flooded", .max_concurrent = 4},
                                    CellSpec{.name = "calm", .max_concurrent = 4}});
  options.max_open_files = 256;
  Harness h(std::move(options));
  ASSERT_STARTED(h);
  const uint64_t budget = h.Status()["supervisor"]["client_connection_budget"].get<uint64_t>();
  ASSERT_GT(budget, 2u);
  ASSERT_LT(budget, 256u - 8u);
  const uint64_t share = h.Cell("flooded")["connection_limit"].get<uint64_t>();
  EXPECT_EQ(share, budget / 2) << "two cells of max_connections 1024 share the budget evenly";
  EXPECT_EQ(h.Cell("calm")["connection_limit"], share);

  std::vector<ipc::Client> flood;
  for (int i = 0; i < kFlood; ++i) {
    Result<ipc::Client> client = ConnectWithTimeout(h, "flooded");
    // The listen backlog may fill while bulkheadd works through it: wait and try again.
    if (!client.ok()) {
      ASSERT_TRUE(WaitFor([&] {
        client = ConnectWithTimeout(h, "flooded");
        return client.ok();
      })) << client.status().message();
    }
    flood.push_back(std::move(client).value());
  }
  ASSERT_TRUE(h.WaitForCell(
      "flooded",
      [&](const nlohmann::json& c) {
        return Counter(c, "clients") + Counter(c, "connections_refused") == kFlood;
      },
      milliseconds(30000)))
      << h.Cell("flooded").dump();
  EXPECT_EQ(h.Cell("flooded")["clients"], share);
  EXPECT_EQ(h.Status()["supervisor"]["client_connections"], share);

  // The first connections were kept and are served; every cell still reaches its worker.
  EXPECT_OK_REPLY(flood.front().Call("echo kept"), "kept");
  std::vector<ipc::Client> calm_clients;
  for (int i = 0; i < 8; ++i) {
    Result<ipc::Client> client = ConnectWithTimeout(h, "calm");
    ASSERT_TRUE(client.ok()) << client.status().message();
    EXPECT_OK_REPLY(client->Call("echo calm"), "calm");
    calm_clients.push_back(std::move(client).value());
  }
  // Spawning needs descriptors too: a killed worker is replaced, and the cell is not failed.
  const pid_t old_worker = h.Cell("calm")["pid"].get<pid_t>();
  ASSERT_EQ(::kill(old_worker, SIGKILL), 0);
  ASSERT_TRUE(h.WaitForCell("calm", [&](const nlohmann::json& c) {
    return c["state"] == "running" && c["pid"].is_number() && c["pid"] != old_worker;
  })) << h.Cell("calm").dump();
  for (ipc::Client& client : calm_clients) EXPECT_OK_REPLY(client.Call("echo again"), "again");
  nlohmann::json calm = h.Cell("calm");
  EXPECT_EQ(calm["failed"], 0) << calm.dump();
  EXPECT_EQ(calm["connections_refused"], 0) << calm.dump();
  EXPECT_THAT(h.Log(), Not(HasSubstr("Too many open files")));
  EXPECT_THAT(h.Log(), HasSubstr("its share of the client connection budget"));

  // Once the flood ends, the share is free again.
  flood.clear();
  ASSERT_TRUE(h.WaitForCell("flooded", [](const nlohmann::json& c) { return c["clients"] == 0; }))
      << h.Cell("flooded").dump();
  EXPECT_OK_REPLY(h.Call("flooded", "echo after the flood"), "after the flood");
}

// Reads one REPLY frame from `fd` in chunks of at most `chunk` bytes, pausing 1 ms after every
// 64 KiB: a client that drains a large reply slowly, so the supervisor's writes hit EAGAIN.
Result<ipc::Client::Reply> SlowReceive(int fd, uint32_t max_payload, size_t chunk) {
  ipc::FrameDecoder decoder(ipc::FrameType::kReply, max_payload);
  size_t since_pause = 0;
  while (true) {
    ipc::FrameView frame;
    ipc::DecodeResult result = decoder.Next(&frame);
    if (result == ipc::DecodeResult::kFrame) {
      return ipc::Client::Reply{frame.header, std::string(frame.payload)};
    }
    if (result == ipc::DecodeResult::kError) return Status::Error(decoder.error_message());
    std::span<char> space = decoder.PrepareWrite(chunk);
    ssize_t n = ::recv(fd, space.data(), std::min(chunk, space.size()), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno("recv");
    if (n == 0) return Status::Error("connection closed");
    decoder.Commit(static_cast<size_t>(n));
    since_pause += static_cast<size_t>(n);
    if (since_pause >= 64 * 1024) {
      since_pause = 0;
      timespec pause{0, 1'000'000};
      ::nanosleep(&pause, nullptr);
    }
  }
}

TEST_P(HostileClient, FourMibPayloadsBothWaysArriveByteIdenticalThroughASlowReader) {
  constexpr size_t kMax = 4 * 1024 * 1024;
  Harness h(Options({CellSpec{.name = "c", .max_concurrent = 2}, CellSpec{.name = "other"}}));
  ASSERT_STARTED(h);
  Result<ipc::Client> client = ConnectWithTimeout(h, "c");
  ASSERT_TRUE(client.ok()) << client.status().message();

  // Request of exactly max_payload_bytes, echoed back (reply: the payload minus "echo ").
  const std::string blob = testing::BlobPattern(kMax - 5);
  ASSERT_TRUE(client->Send(1, "echo " + blob).ok());
  Result<ipc::Client::Reply> echoed = SlowReceive(client->fd(), kMax, 4096);
  ASSERT_TRUE(echoed.ok()) << echoed.status().message();
  EXPECT_EQ(echoed->header.status, ReplyStatus::kOk) << echoed->payload.substr(0, 200);
  EXPECT_EQ(echoed->header.request_id, 1u);
  EXPECT_TRUE(echoed->payload == blob)
      << "echo reply differs (" << echoed->payload.size() << " bytes)";

  // Reply of exactly max_payload_bytes, read 1 KiB at a time while another client is served.
  ASSERT_TRUE(client->Send(2, "blob " + std::to_string(kMax)).ok());
  EXPECT_OK_REPLY(h.Call("other", "echo meanwhile"), "meanwhile");
  Result<ipc::Client::Reply> big = SlowReceive(client->fd(), kMax, 1024);
  ASSERT_TRUE(big.ok()) << big.status().message();
  EXPECT_EQ(big->header.status, ReplyStatus::kOk) << big->payload.substr(0, 200);
  EXPECT_EQ(big->header.request_id, 2u);
  EXPECT_TRUE(big->payload == testing::BlobPattern(kMax))
      << "blob reply differs (" << big->payload.size() << " bytes)";
}

// The worker SDK takes its payload limit from $BULKHEAD_MAX_PAYLOAD_BYTES, which bulkheadd sets
// from max_payload_bytes: 5 MiB each way works with a 6 MiB limit (the SDK used to cap at 4 MiB and
// close the connection).
TEST_P(HostileClient, WorkerSdkFollowsMaxPayloadBytesAbove4Mib) {
  constexpr uint32_t kMax = 6 * 1024 * 1024;
  Harness h(Options({CellSpec{.name = "c"}}, "max_payload_bytes = 6291456\n"));
  ASSERT_STARTED(h);
  Result<ipc::Client> client = ConnectWithTimeout(h, "c", kMax);
  ASSERT_TRUE(client.ok()) << client.status().message();
  EXPECT_OK_REPLY(client->Call("env BULKHEAD_MAX_PAYLOAD_BYTES"), "6291456");
  const std::string blob = testing::BlobPattern(5 * 1024 * 1024);
  Result<ipc::Client::Reply> echoed = client->Call("echo " + blob);
  ASSERT_TRUE(echoed.ok()) << echoed.status().message();
  EXPECT_EQ(echoed->header.status, ReplyStatus::kOk) << echoed->payload.substr(0, 200);
  EXPECT_TRUE(echoed->payload == blob) << echoed->payload.size() << " bytes";
  Result<ipc::Client::Reply> big = client->Call("blob " + std::to_string(kMax));
  ASSERT_TRUE(big.ok()) << big.status().message();
  EXPECT_EQ(big->header.status, ReplyStatus::kOk) << big->payload.substr(0, 200);
  EXPECT_EQ(big->payload.size(), kMax);
  // One byte over: the SDK refuses its own reply as FAILED/worker_error with the limit named.
  Result<ipc::Client::Reply> over = client->Call("blob " + std::to_string(kMax + 1));
  EXPECT_TRUE(IsReply(over, ReplyStatus::kFailed, Reason::kWorkerError)) << Describe(over);
  EXPECT_THAT(over->payload, HasSubstr("exceeds the maximum of 6291456"));
}

// kill -9 of bulkheadd, without cgroups: its workers die with it (PR_SET_PDEATHSIG SIGKILL), and
// the next start reclaims the stale sockets and serves, with no worker of the old generation left.
TEST_P(HostileClient, KilledSupervisorLeavesNoOldWorkerAndTheNextStartReclaimsItsSockets) {
  Harness h(Options({CellSpec{.name = "a"}, CellSpec{.name = "b", .max_concurrent = 2}}));
  ASSERT_STARTED(h);
  std::vector<pid_t> old_workers = {h.Cell("a")["pid"].get<pid_t>(),
                                    h.Cell("b")["pid"].get<pid_t>()};
  h.Kill();
  ASSERT_STARTED(h);  // no KillOrphanedWorkers: the kernel must have done it
  for (pid_t worker : old_workers) {
    int wait_status = 0;
    // The test is the subreaper: the orphaned worker became its child, dead or alive.
    ASSERT_TRUE(WaitFor([&] { return ::waitpid(worker, &wait_status, WNOHANG) == worker; }))
        << "worker " << worker << " of the killed supervisor still runs";
    EXPECT_TRUE(WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGKILL);
  }
  EXPECT_OK_REPLY(h.Call("a", "echo new a"), "new a");
  EXPECT_OK_REPLY(h.Call("b", "echo new b"), "new b");
  EXPECT_NE(h.Cell("a")["pid"], old_workers[0]);
  EXPECT_THAT(h.Log(), HasSubstr("reclaimed stale socket " + h.CellSocket("a")));
  EXPECT_THAT(h.Log(), HasSubstr("reclaimed stale socket " + h.WorkerSocket("b")));
}

}  // namespace
}  // namespace bulkhead::e2e
