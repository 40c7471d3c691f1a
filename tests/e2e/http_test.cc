// SPDX-License-Identifier: MIT
// HTTP cells end to end (docs/http.md): bulkheadd with a protocol = "http" cell whose worker is
// Python's http.server on fd 3 (tests/e2e/http_worker.py), driven by curl and by raw sockets:
// requests through both ways, keep-alive and pipelining, chunked and 100-continue bodies, the
// answers bulkheadd makes itself (503, 502, 504, 400), a worker that closes every connection,
// clients that leave while queued or running, and 100 MiB bodies both ways in bounded memory
// (request bodies stream: docs/http.md, "Request bodies").
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/unique_fd.h"
#include "tests/e2e/e2e_test.h"
#include "tests/e2e/http_conn.h"

namespace bulkhead::e2e {
namespace {

CellSpec HttpCell(std::string extra = "", uint32_t max_concurrent = 4, uint32_t max_queue = 4) {
  return CellSpec{.name = "web",
                  .command = {"/usr/bin/python3", BULKHEAD_HTTP_WORKER},
                  .max_concurrent = max_concurrent,
                  .max_queue = max_queue,
                  .extra_toml = "protocol = \"http\"\n" + std::string(kQuickStop) + extra};
}

// A client connection to the cell "web": to its Unix socket, or over TCP to `tcp_address`
// ("127.0.0.1:PORT", as the cell's status lists its listen) when that is not empty.
std::optional<HttpConn> OpenClient(Harness& h, const std::string& tcp_address = "") {
  return tcp_address.empty() ? HttpConn::Open(h.CellSocket("web")) : HttpConn::OpenTcp(tcp_address);
}

// A client connection whose GET `target` runs on the worker, once the cell shows it running;
// nullopt if that did not happen. "/stall" is never answered; WaitTarget(gate) runs until Release.
std::optional<HttpConn> RunOneRequest(Harness& h, const std::string& target,
                                      const std::string& tcp_address = "") {
  std::optional<HttpConn> conn = OpenClient(h, tcp_address);
  if (!conn || !conn->Send("GET " + target + " HTTP/1.1\r\nHost: web\r\n\r\n")) {
    return std::nullopt;
  }
  if (!h.WaitForCell("web", [](const nlohmann::json& c) { return c["running"] == 1; })) {
    return std::nullopt;
  }
  return conn;
}

// The cell "web" full, for a cell of max_concurrent = 1: `running` is a client whose GET `target`
// runs on the worker and takes the only slot; `next` a second client, connected, that has sent
// nothing yet (its first request is rejected with max_queue = 0, queued otherwise). Both over TCP
// to `tcp_address` when that is not empty. nullopt if either could not be had.
struct FullCell {
  HttpConn running;
  HttpConn next;
};
std::optional<FullCell> OpenFullCell(Harness& h, const std::string& target = "/stall",
                                     const std::string& tcp_address = "") {
  std::optional<HttpConn> running = RunOneRequest(h, target, tcp_address);
  if (!running) return std::nullopt;
  std::optional<HttpConn> next = OpenClient(h, tcp_address);
  if (!next) return std::nullopt;
  return FullCell{std::move(*running), std::move(*next)};
}

// Sends request(0) .. request(count - 1) one after the other on one connection to the cell "web",
// reading each answer before the next request: each must be a 200 that `check` finds right (it
// says what is wrong, "" when nothing is). Fails at the first that is not, naming it.
::testing::AssertionResult EachAnswered200(
    Harness& h, int count, const std::function<std::string(int)>& request,
    const std::function<std::string(int, const Response&)>& check = {}) {
  std::optional<HttpConn> conn = HttpConn::Open(h.CellSocket("web"));
  if (!conn) return ::testing::AssertionFailure() << "cannot connect to " << h.CellSocket("web");
  for (int i = 0; i < count; ++i) {
    if (!conn->Send(request(i))) return ::testing::AssertionFailure() << i << ": send failed";
    std::optional<Response> response = conn->Read();
    if (!response || response->status != 200) {
      return ::testing::AssertionFailure() << i << ": " << Describe(response);
    }
    const std::string wrong = check ? check(i, *response) : "";
    if (!wrong.empty()) {
      return ::testing::AssertionFailure() << i << ": " << wrong << "\n" << Describe(response);
    }
  }
  return ::testing::AssertionSuccess();
}

std::string GetHello(int /*i*/) { return "GET /hello HTTP/1.1\r\nHost: web\r\n\r\n"; }

// The target of a GET that runs on the worker until the file `gate` exists.
std::string WaitTarget(const std::string& gate) { return "/wait?file=" + gate; }

// Lets the GET WaitTarget(gate) running on `conn` end; true once it was answered.
bool Release(HttpConn& conn, const std::string& gate) {
  if (!testing::WriteFileAtomically(gate, "").ok()) return false;
  std::optional<Response> released = conn.Read();
  return released && released->body == "released";
}

// curl on the cell's socket: the response body, or the failure.
Result<ProcessResult> Curl(const Harness& h, std::vector<std::string> args) {
  std::vector<std::string> argv = {"/usr/bin/curl",    "-sS", "--max-time", "10", "--unix-socket",
                                   h.CellSocket("web")};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProcess(argv);
}

TEST(HttpCell, GetAndPostGoThroughWithCurl) {
  Harness h(TestOptions({HttpCell()}));
  ASSERT_STARTED(h);
  Result<ProcessResult> get = Curl(h, {"http://web/hello"});
  ASSERT_TRUE(get.ok()) << get.status().message();
  EXPECT_EQ(get->exit_code(), 0) << get->Describe();
  EXPECT_EQ(get->out, "hello");
  Result<ProcessResult> post = Curl(h, {"-i", "http://web/echo", "-d", "{\"order\": 42}"});
  ASSERT_TRUE(post.ok()) << post.status().message();
  EXPECT_EQ(post->exit_code(), 0) << post->Describe();
  EXPECT_NE(post->out.find("HTTP/1.1 200 OK"), std::string::npos) << post->out;
  EXPECT_NE(post->out.find("\r\n\r\n{\"order\": 42}"), std::string::npos) << post->out;
  ASSERT_TRUE(h.WaitForCell("web", [](const nlohmann::json& c) { return c["ok"] == 2; }))
      << h.Status().dump();
}

TEST(HttpCell, WorkersOwnErrorsPassThroughAndCountOk) {
  Harness h(TestOptions({HttpCell()}));
  ASSERT_STARTED(h);
  std::optional<HttpConn> conn = HttpConn::Open(h.CellSocket("web"));
  ASSERT_TRUE(conn);
  ASSERT_TRUE(conn->Send("GET /status/503 HTTP/1.1\r\nHost: web\r\n\r\n"));
  std::optional<Response> response = conn->Read();
  ASSERT_TRUE(response && response->status == 503) << Describe(response);
  EXPECT_EQ(response->body, "from the worker\n");
  EXPECT_EQ(response->Header("bulkhead-outcome"), "") << "the worker's answer is not bulkheadd's";
  ASSERT_TRUE(h.WaitForCell("web", [](const nlohmann::json& c) { return c["ok"] == 1; }))
      << h.Status().dump();
  EXPECT_EQ(h.Cell("web")["rejected"], 0);
}

TEST(HttpCell, BodyOverMaxPayloadBytesGets413) {
  Harness h(TestOptions({HttpCell()}, "max_payload_bytes = 1024\n"));
  ASSERT_STARTED(h);
  std::optional<HttpConn> conn = HttpConn::Open(h.CellSocket("web"));
  ASSERT_TRUE(conn);
  ASSERT_TRUE(conn->Send("POST /echo HTTP/1.1\r\nHost: web\r\nContent-Length: 2000\r\n\r\n"));
  std::optional<Response> response = conn->Read();
  ASSERT_TRUE(response && response->status == 413) << Describe(response);
  EXPECT_EQ(response->Header("bulkhead-outcome").rfind("bad_request; reason=too_large", 0), 0u)
      << Describe(response);
  EXPECT_TRUE(conn->EndsWithin());
  EXPECT_EQ(h.Cell("web")["admitted"], 0);
}

TEST(HttpCell, WorkerGetsARequestIdAndNoHopByHopFields) {
  Harness h(TestOptions({HttpCell()}));
  ASSERT_STARTED(h);
  std::optional<HttpConn> conn = HttpConn::Open(h.CellSocket("web"));
  ASSERT_TRUE(conn);
  ASSERT_TRUE(conn->Send(
      "GET /headers HTTP/1.1\r\nHost: web\r\nConnection: keep-alive, X-Private\r\n"
      "X-Private: secret\r\nKeep-Alive: timeout=5\r\nTE: trailers\r\nX-Kept: yes\r\n\r\n"));
  std::optional<Response> seen = conn->Read();
  ASSERT_TRUE(seen && seen->status == 200) << Describe(seen);
  EXPECT_NE(seen->body.find("x-kept: yes\n"), std::string::npos) << seen->body;
  EXPECT_NE(seen->body.find("x-request-id: "), std::string::npos) << seen->body;
  for (const char* gone : {"x-private:", "keep-alive:", "te:", "connection:"}) {
    EXPECT_EQ(seen->body.find(gone), std::string::npos) << gone << " in " << seen->body;
  }
  // A client's own X-Request-Id is kept.
  ASSERT_TRUE(conn->Send("GET /headers HTTP/1.1\r\nHost: web\r\nX-Request-Id: abc-1\r\n\r\n"));
  seen = conn->Read();
  ASSERT_TRUE(seen && seen->status == 200) << Describe(seen);
  EXPECT_NE(seen->body.find("x-request-id: abc-1\n"), std::string::npos) << seen->body;
}

// RFC 9110 section 7.8: an Upgrade offer bulkheadd does not take (h2c: curl --http2 sends one with
// every plain-http request) is ignored; the request is served on HTTP/1.1 and the worker sees
// neither Upgrade nor the HTTP2-Settings its Connection names. A WebSocket offer gets 501 (its
// client would wait for a 101) and the connection goes on.
TEST(HttpCell, AnH2cUpgradeIsServedOnHttp11AndAWebSocketOneGets501) {
  Harness h(TestOptions({HttpCell()}));
  ASSERT_STARTED(h);
  std::optional<HttpConn> conn = HttpConn::Open(h.CellSocket("web"));
  ASSERT_TRUE(conn);
  ASSERT_TRUE(conn->Send(
      "GET /headers HTTP/1.1\r\nHost: web\r\nConnection: Upgrade, HTTP2-Settings\r\n"
      "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\nX-Kept: yes\r\n\r\n"));
  std::optional<Response> seen = conn->Read();
  ASSERT_TRUE(seen && seen->status == 200) << Describe(seen);
  EXPECT_NE(seen->body.find("x-kept: yes\n"), std::string::npos) << seen->body;
  for (const char* gone : {"upgrade:", "http2-settings:", "connection:"}) {
    EXPECT_EQ(seen->body.find(gone), std::string::npos) << gone << " in " << seen->body;
  }
  ASSERT_TRUE(conn->Send(
      "GET /chat HTTP/1.1\r\nHost: web\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"));
  std::optional<Response> refused = conn->Read();
  ASSERT_TRUE(refused) << Describe(refused);
  EXPECT_EQ(refused->status, 501) << Describe(refused);
  nlohmann::json cell = h.Cell("web");
  EXPECT_EQ(cell["admitted"], 1) << cell.dump();
}

TEST(HttpCell, TcpClientIsNamedForTheWorker) {
  Harness h(TestOptions({HttpCell("listen = [\"127.0.0.1:0\"]\n")}));
  ASSERT_STARTED(h);
  const nlohmann::json cell = h.Cell("web");
  ASSERT_TRUE(cell["listen"].is_array() && !cell["listen"].empty()) << cell.dump();
  const std::string address = cell["listen"][0].get<std::string>();
  Result<ProcessResult> curl =
      RunProcess({"/usr/bin/curl", "-sS", "--max-time", "10", "http://" + address + "/headers"});
  ASSERT_TRUE(curl.ok()) << curl.status().message();
  EXPECT_EQ(curl->exit_code(), 0) << curl->Describe();
  EXPECT_NE(curl->out.find("x-forwarded-for: 127.0.0.1\n"), std::string::npos) << curl->out;
  EXPECT_NE(curl->out.find("forwarded: for=127.0.0.1\n"), std::string::npos) << curl->out;
  // A client on the Unix socket is named neither way.
  Result<ProcessResult> unix_curl = Curl(h, {"http://web/headers"});
  ASSERT_TRUE(unix_curl.ok()) << unix_curl.status().message();
  EXPECT_EQ(unix_curl->out.find("forwarded"), std::string::npos) << unix_curl->out;
}

TEST(HttpCell, KeepAliveReusesTheClientAndWorkerConnections) {
  Harness h(TestOptions({HttpCell()}));
  ASSERT_STARTED(h);
  std::optional<HttpConn> conn = HttpConn::Open(h.CellSocket("web"));
  ASSERT_TRUE(conn);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(conn->Send("GET /hello HTTP/1.1\r\nHost: web\r\n\r\n"));
    std::optional<Response> response = conn->Read();
    ASSERT_TRUE(response && response->status == 200) << Describe(response);
    EXPECT_EQ(response->body, "hello");
  }
  ASSERT_TRUE(h.WaitForCell("web", [](const nlohmann::json& c) { return c["ok"] == 5; }))
      << h.Status().dump();
  nlohmann::json cell = h.Cell("web");
  EXPECT_EQ(cell["clients"], 1);
  // One request at a time: one worker connection served all five.
  EXPECT_EQ(cell["worker_connections"], 1) << cell.dump();
}

TEST(HttpCell, PipelinedRequestsAreAnsweredInOrder) {
  Harness h(TestOptions({HttpCell()}));
  ASSERT_STARTED(h);
  std::optional<HttpConn> conn = HttpConn::Open(h.CellSocket("web"));
  ASSERT_TRUE(conn);
  // The first takes longest: a later answer must still wait for it.
  ASSERT_TRUE(
      conn->Send("GET /sleep/300 HTTP/1.1\r\nHost: web\r\n\r\n"
                 "POST /echo HTTP/1.1\r\nHost: web\r\nContent-Length: 6\r\n\r\nsecond"
                 "GET /status/201 HTTP/1.1\r\nHost: web\r\n\r\n"
                 "GET /hello HTTP/1.1\r\nHost: web\r\nConnection: close\r\n\r\n"));
  std::optional<Response> first = conn->Read();
  ASSERT_TRUE(first) << "no first response";
  EXPECT_EQ(first->body, "slept");
  std::optional<Response> second = conn->Read();
  ASSERT_TRUE(second) << "no second response";
  EXPECT_EQ(second->body, "second");
  std::optional<Response> third = conn->Read();
  ASSERT_TRUE(third) << "no third response";
  EXPECT_EQ(third->status, 201);
  std::optional<Response> fourth = conn->Read();
  ASSERT_TRUE(fourth) << "no fourth response";
  EXPECT_EQ(fourth->body, "hello");
  EXPECT_TRUE(conn->EndsWithin());
}

TEST(HttpCell, ChunkedRequestBodyReachesTheWorkerWhole) {
  Harness h(TestOptions({HttpCell()}));
  ASSERT_STARTED(h);
  std::optional<HttpConn> conn = HttpConn::Open(h.CellSocket("web"));
  ASSERT_TRUE(conn);
  ASSERT_TRUE(
      conn->Send("POST /echo HTTP/1.1\r\nHost: web\r\nTransfer-Encoding: chunked\r\n\r\n"
                 "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"));
  std::optional<Response> response = conn->Read();
  ASSERT_TRUE(response && response->status == 200) << Describe(response);
  EXPECT_EQ(response->body, "hello world");
  EXPECT_EQ(response->Header("x-seen-content-length"), "11");
}

TEST(HttpCell, ExpectContinueGetsOneHundredBeforeTheBody) {
  Harness h(TestOptions({HttpCell()}));
  ASSERT_STARTED(h);
  std::optional<HttpConn> conn = HttpConn::Open(h.CellSocket("web"));
  ASSERT_TRUE(conn);
  ASSERT_TRUE(conn->Send(
      "POST /echo HTTP/1.1\r\nHost: web\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n"));
  std::optional<Response> interim = conn->Read();
  ASSERT_TRUE(interim) << "no 100 Continue";
  EXPECT_EQ(interim->status, 100);
  ASSERT_TRUE(conn->Send("body"));
  std::optional<Response> response = conn->Read();
  ASSERT_TRUE(response && response->status == 200) << Describe(response);
  EXPECT_EQ(response->body, "body");
}

TEST(HttpCell, FullCellAnswers503WithRetryAfterAndOutcome) {
  Harness h(TestOptions({HttpCell("", /*max_concurrent=*/1, /*max_queue=*/0)}));
  ASSERT_STARTED(h);
  std::optional<HttpConn> stalled = RunOneRequest(h, "/stall");
  ASSERT_TRUE(stalled);
  Result<ProcessResult> curl = Curl(h, {"-i", "http://web/hello"});
  ASSERT_TRUE(curl.ok()) << curl.status().message();
  EXPECT_NE(curl->out.find("HTTP/1.1 503 Service Unavailable\r\n"), std::string::npos) << curl->out;
  EXPECT_NE(curl->out.find("\r\nRetry-After: 1\r\n"), std::string::npos) << curl->out;
  EXPECT_NE(curl->out.find("\r\nBulkhead-Outcome: rejected; reason=full; cell=web; running=1; "
                           "queued=0\r\n"),
            std::string::npos)
      << curl->out;
  EXPECT_EQ(h.Cell("web")["rejected_by_reason"]["full"], 1) << h.Status().dump();
}

// An unavailable cell's 503 invites a retry (Retry-After) only when a worker is due: a cell whose
// start is held until the cell it needs is ready says Retry-After: 1; a stopped one (or a failed
// one) says no worker is due to start and sends no Retry-After. Both used to say Retry-After: 1.
TEST(HttpCell, AnUnavailableCellSendsRetryAfterOnlyWhenAStartIsDue) {
  testing::TempDir dir;
  const std::string go_file = dir.Join("go");
  CellSpec catalog{.name = "catalog",
                   .command = {TestWorkerPath(), "--notify-ready-when-file", go_file},
                   .extra_toml = "ready = \"notify\"\n",
                   .wait_running = false};
  CellSpec web = HttpCell("needs = [\"catalog\"]\n");
  web.wait_running = false;
  Harness h(TestOptions({catalog, web}));
  ASSERT_STARTED(h);
  ASSERT_TRUE(h.WaitForCell("web", [](const nlohmann::json& c) { return c["state"] == "waiting"; }))
      << h.Status().dump();
  Result<ProcessResult> held = Curl(h, {"-i", "http://web/hello"});
  ASSERT_TRUE(held.ok()) << held.status().message();
  EXPECT_NE(held->out.find("HTTP/1.1 503 Service Unavailable\r\n"), std::string::npos) << held->out;
  EXPECT_NE(held->out.find("\r\nRetry-After: 1\r\n"), std::string::npos) << held->out;
  EXPECT_EQ(held->out.find("no worker is due"), std::string::npos) << held->out;

  ASSERT_TRUE(testing::WriteFileAtomically(go_file, "").ok());
  ASSERT_TRUE(h.WaitForCell("web", [](const nlohmann::json& c) { return c["state"] == "running"; }))
      << h.Status().dump();
  Result<ProcessResult> stop = h.Ctl({"stop", "web"});
  ASSERT_TRUE(stop.ok()) << stop.status().message();
  ASSERT_TRUE(h.WaitForCell("web", [](const nlohmann::json& c) { return c["state"] == "stopped"; }))
      << h.Status().dump();
  Result<ProcessResult> stopped = Curl(h, {"-i", "http://web/hello"});
  ASSERT_TRUE(stopped.ok()) << stopped.status().message();
  EXPECT_NE(stopped->out.find("HTTP/1.1 503 Service Unavailable\r\n"), std::string::npos)
      << stopped->out;
  EXPECT_EQ(stopped->out.find("Retry-After"), std::string::npos) << stopped->out;
  EXPECT_NE(stopped->out.find("bulkhead: web is unavailable: no worker is due to start"),
            std::string::npos)
      << stopped->out;

  // Held behind a need that is stopped: no start is due until an operator starts catalog, and
  // callers are told so; it used to say Retry-After: 1 for as long as catalog stayed stopped.
  ASSERT_TRUE(h.Ctl({"stop", "catalog"}).ok());
  ASSERT_TRUE(h.WaitForCell("catalog", [](const nlohmann::json& c) {
    return c["state"] == "stopped";
  })) << h.Status().dump();
  Result<ProcessResult> held_start = h.Ctl({"start", "web"});
  ASSERT_TRUE(held_start.ok()) << held_start.status().message();
  ASSERT_TRUE(h.WaitForCell("web", [](const nlohmann::json& c) { return c["state"] == "waiting"; }))
      << h.Status().dump();
  Result<ProcessResult> stuck = Curl(h, {"-i", "http://web/hello"});
  ASSERT_TRUE(stuck.ok()) << stuck.status().message();
  EXPECT_EQ(stuck->out.find("Retry-After"), std::string::npos) << stuck->out;
  EXPECT_NE(stuck->out.find("no worker is due to start"), std::string::npos) << stuck->out;
  // catalog started (its flag is there): web's held start goes, and it serves.
  ASSERT_TRUE(h.Ctl({"start", "catalog"}).ok());
  ASSERT_TRUE(h.WaitForCell("web", [](const nlohmann::json& c) { return c["state"] == "running"; }))
      << h.Status().dump();
  Result<ProcessResult> served = Curl(h, {"http://web/hello"});
  ASSERT_TRUE(served.ok()) << served.status().message();
  EXPECT_EQ(served->exit_code(), 0) << served->Describe();
}

// A HEAD answered by bulkheadd itself carries no body (RFC 9110 section 9.3.2), so the next
// response on the connection starts right after its head: a HEAD and a GET pipelined on one
// connection to a full cell get two 503 heads back to back, then the GET's body. The 503's body
// used to follow the HEAD's head, where a client reads the next status line.
TEST(HttpCell, LocalAnswerToHeadHasNoBodySoTheConnectionStaysInStep) {
  Harness h(TestOptions({HttpCell("", /*max_concurrent=*/1, /*max_queue=*/0)}));
  ASSERT_STARTED(h);
  std::optional<FullCell> full = OpenFullCell(h);
  ASSERT_TRUE(full);
  HttpConn& client = full->next;
  ASSERT_TRUE(
      client.Send("HEAD /hello HTTP/1.1\r\nHost: web\r\n\r\n"
                  "GET /hello HTTP/1.1\r\nHost: web\r\nConnection: close\r\n\r\n"));
  const std::string bytes = client.ReadUntilClosed();
  const size_t head_end = bytes.find("\r\n\r\n");
  ASSERT_NE(head_end, std::string::npos) << bytes;
  EXPECT_TRUE(bytes.starts_with("HTTP/1.1 503 ")) << bytes;
  EXPECT_EQ(bytes.substr(head_end + 4, 13), "HTTP/1.1 503 ") << bytes;
  EXPECT_EQ(h.Cell("web")["rejected_by_reason"]["full"], 2) << h.Status().dump();
}

// bulkheadd's own answer to an HTTP/1.0 keep-alive request says "Connection: keep-alive" (RFC
// 9112 appendix C.2.2), and the next request is served on the same connection. It said nothing
// and kept the connection open, so an HTTP/1.0 client (ab -k) waited for a close until
// header_timeout.
TEST(HttpCell, LocalAnswerToAnHttp10KeepAliveRequestSaysKeepAlive) {
  Harness h(TestOptions({HttpCell("", /*max_concurrent=*/1, /*max_queue=*/0)}));
  ASSERT_STARTED(h);
  std::optional<FullCell> full = OpenFullCell(h);
  ASSERT_TRUE(full);
  HttpConn& client = full->next;
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(client.Send("GET /hello HTTP/1.0\r\nHost: web\r\nConnection: Keep-Alive\r\n\r\n"));
    std::optional<Response> response = client.Read();
    ASSERT_TRUE(response) << i;
    EXPECT_EQ(response->status, 503) << Describe(response);
    EXPECT_EQ(ToLower(response->Header("connection")), "keep-alive") << Describe(response);
  }
}

TEST(HttpCell, WorkerThatExitsWithoutAnsweringGives502) {
  Harness h(TestOptions({HttpCell()}));
  ASSERT_STARTED(h);
  std::optional<HttpConn> conn = HttpConn::Open(h.CellSocket("web"));
  ASSERT_TRUE(conn);
  ASSERT_TRUE(conn->Send("GET /exit HTTP/1.1\r\nHost: web\r\n\r\n"));
  std::optional<Response> response = conn->Read();
  ASSERT_TRUE(response && response->status == 502) << Describe(response);
  EXPECT_EQ(response->Header("bulkhead-outcome").rfind("failed; reason=worker_died; cell=web", 0),
            0u)
      << Describe(response);
  EXPECT_EQ(h.Cell("web")["failed_by_reason"]["worker_died"], 1) << h.Status().dump();
}

// docs/http.md: an idempotent request on a reused worker connection is sent again when the
// worker closed the connection and lives on; when the worker died under it, the GET is answered
// 502 worker_died and never carried over to the next worker, which it would kill too (issue 25
// section 7: the doc said "whatever the way the connection ended").
TEST(HttpCell, AGetOnAReusedConnectionWhoseWorkerDiesGets502AndIsNotResent) {
  Harness h(TestOptions({HttpCell("", /*max_concurrent=*/1, /*max_queue=*/0)}));
  ASSERT_STARTED(h);
  std::optional<HttpConn> conn = HttpConn::Open(h.CellSocket("web"));
  ASSERT_TRUE(conn);
  ASSERT_TRUE(conn->Send("GET /hello HTTP/1.1\r\nHost: web\r\n\r\n"));
  std::optional<Response> hello = conn->Read();
  ASSERT_TRUE(hello && hello->status == 200) << Describe(hello);
  // One slot: the GET goes on the worker connection /hello went on, reused.
  ASSERT_TRUE(conn->Send("GET /exit HTTP/1.1\r\nHost: web\r\n\r\n"));
  std::optional<Response> response = conn->Read();
  ASSERT_TRUE(response && response->status == 502) << Describe(response);
  EXPECT_EQ(response->Header("bulkhead-outcome").rfind("failed; reason=worker_died; cell=web", 0),
            0u)
      << Describe(response);
  // The next worker serves: it never got the GET /exit, or it would have died of it too.
  ASSERT_TRUE(h.WaitForCell("web", [](const nlohmann::json& c) { return c["state"] == "running"; }))
      << h.Status().dump();
  std::optional<HttpConn> next = HttpConn::Open(h.CellSocket("web"));
  ASSERT_TRUE(next);
  ASSERT_TRUE(next->Send("GET /hello HTTP/1.1\r\nHost: web\r\n\r\n"));
  std::optional<Response> again = next->Read();
  ASSERT_TRUE(again && again->status == 200) << Describe(again);
  EXPECT_EQ(h.Cell("web")["restarts"], 1) << h.Status().dump();
  EXPECT_EQ(h.Cell("web")["failed_by_reason"]["worker_died"], 1) << h.Status().dump();
}

TEST(HttpCell, WorkerThatDiesMidResponseClosesTheClient) {
  Harness h(TestOptions({HttpCell()}));
  ASSERT_STARTED(h);
  std::optional<HttpConn> conn = HttpConn::Open(h.CellSocket("web"));
  ASSERT_TRUE(conn);
  ASSERT_TRUE(conn->Send("GET /die HTTP/1.1\r\nHost: web\r\n\r\n"));
  // The head and 10 of the 100 bytes it promised came; then the connection ends.
  EXPECT_FALSE(conn->Read().has_value());
  EXPECT_TRUE(conn->EndsWithin());
  ASSERT_TRUE(h.WaitForCell("web", [](const nlohmann::json& c) {
    return c["failed_by_reason"]["worker_died"] == 1 && c["running"] == 0;
  })) << h.Status().dump();
}

TEST(HttpCell, RequestTimeoutGives504) {
  Harness h(TestOptions({HttpCell("request_timeout = \"300ms\"\n")}));
  ASSERT_STARTED(h);
  std::optional<HttpConn> conn = HttpConn::Open(h.CellSocket("web"));
  ASSERT_TRUE(conn);
  ASSERT_TRUE(conn->Send("GET /stall HTTP/1.1\r\nHost: web\r\n\r\n"));
  std::optional<Response> response = conn->Read();
  ASSERT_TRUE(response && response->status == 504) << Describe(response);
  EXPECT_EQ(response->Header("bulkhead-outcome").rfind("failed; reason=timeout; cell=web", 0), 0u)
      << Describe(response);
  EXPECT_EQ(h.Cell("web")["failed_by_reason"]["timeout"], 1) << h.Status().dump();
}

TEST(HttpCell, SmugglingAttemptsGet400AndTheConnectionClosed) {
  Harness h(TestOptions({HttpCell()}));
  ASSERT_STARTED(h);
  const std::vector<std::string> attempts = {
      // Content-Length with Transfer-Encoding.
      "POST /echo HTTP/1.1\r\nHost: web\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
      "0\r\n\r\n",
      // Two Content-Lengths.
      "POST /echo HTTP/1.1\r\nHost: web\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nbody",
      // A bad chunk size.
      "POST /echo HTTP/1.1\r\nHost: web\r\nTransfer-Encoding: "
      "chunked\r\n\r\nzz\r\nbody\r\n0\r\n\r\n",
      // obs-fold.
      "GET /hello HTTP/1.1\r\nHost: web\r\nX-Folded: a\r\n b\r\n\r\n",
  };
  for (const std::string& attempt : attempts) EXPECT_TRUE(RefusedAndClosed(h, attempt, 400));
  nlohmann::json cell = h.Cell("web");
  EXPECT_EQ(cell["bad_request"], 4) << cell.dump();
  EXPECT_EQ(cell["admitted"], 0) << cell.dump();
}

// RFC 9112 section 3: a request line without a version (HTTP/0.9's "GET /x") gets 400; RFC 9110
// section 15.6.6: another major version gets 505. Both close the connection and reach no worker.
// Any client can send bad requests as fast as it likes; each is counted, but the log gets at most
// one line a second of them, so that a client cannot flood the journal.
TEST(HttpCell, BadRequestsAreCountedEachButLoggedAtMostOnceASecond) {
  Harness h(TestOptions({HttpCell()}));
  ASSERT_STARTED(h);
  for (int i = 0; i < 40; ++i) {
    std::optional<HttpConn> conn = HttpConn::Open(h.CellSocket("web"));
    ASSERT_TRUE(conn && conn->Send("BAD\r\n\r\n"));
    std::optional<Response> response = conn->Read();
    ASSERT_TRUE(response && response->status == 400) << i << ": " << Describe(response);
  }
  ASSERT_TRUE(h.WaitForCell("web", [](const nlohmann::json& c) { return c["bad_request"] == 40; }))
      << h.Status().dump();
  const std::string log = h.Log();
  size_t lines = 0;
  for (size_t at = log.find("bad request, closing"); at != std::string::npos;
       at = log.find("bad request, closing", at + 1)) {
    ++lines;
  }
  EXPECT_GE(lines, 1u) << log;
  EXPECT_LE(lines, 10u) << log;  // 40 requests would take over 9 s to earn 10 lines
}

TEST(HttpCell, RequestLineWithoutVersionGets400AndHttp2Gets505) {
  Harness h(TestOptions({HttpCell()}));
  ASSERT_STARTED(h);
  const std::vector<std::pair<std::string, int>> attempts = {
      {"GET /hello\r\n\r\n", 400},
      {"GET /hello HTTP/2.0\r\nHost: web\r\n\r\n", 505},
      // RFC 9113 section 3.4: an HTTP/2 client with prior knowledge opens with this preface; its
      // version is refused, not its method (it got 501).
      {"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505},
      // RFC 9112 section 3.2: HTTP/1.1 without Host.
      {"GET /hello HTTP/1.1\r\n\r\n", 400},
  };
  for (const auto& [attempt, status] : attempts) EXPECT_TRUE(RefusedAndClosed(h, attempt, status));
  nlohmann::json cell = h.Cell("web");
  EXPECT_EQ(cell["bad_request"], 4) << cell.dump();
  EXPECT_EQ(cell["admitted"], 0) << cell.dump();
}

// An HTTP/1.0 request may come without Host; it goes to the worker as HTTP/1.1, which requires one
// (RFC 9112 section 3.2; Node answers 400 without it): bulkheadd adds the cell's name.
TEST(HttpCell, Http10RequestWithoutHostReachesTheWorkerWithTheCellsName) {
  Harness h(TestOptions({HttpCell()}));
  ASSERT_STARTED(h);
  std::optional<HttpConn> conn = HttpConn::Open(h.CellSocket("web"));
  ASSERT_TRUE(conn);
  ASSERT_TRUE(conn->Send("GET /headers HTTP/1.0\r\nAccept: */*\r\n\r\n"));
  std::optional<Response> seen = conn->Read();
  ASSERT_TRUE(seen && seen->status == 200) << Describe(seen);
  EXPECT_TRUE(seen->body.starts_with("host: web\n")) << seen->body;
  // A Host the client sent is kept.
  conn = HttpConn::Open(h.CellSocket("web"));
  ASSERT_TRUE(conn);
  ASSERT_TRUE(conn->Send("GET /headers HTTP/1.0\r\nHost: example.com\r\n\r\n"));
  seen = conn->Read();
  ASSERT_TRUE(seen && seen->status == 200) << Describe(seen);
  EXPECT_NE(seen->body.find("host: example.com\n"), std::string::npos) << seen->body;
  EXPECT_EQ(seen->body.find("host: web"), std::string::npos) << seen->body;
}

// `bulkheadctl status CELL` and the JSON status show the cell's protocol and header_timeout.
TEST(HttpCell, StatusShowsTheProtocolAndHeaderTimeout) {
  Harness h(TestOptions({HttpCell("header_timeout = \"2500ms\"\n")}));
  ASSERT_STARTED(h);
  const nlohmann::json cell = h.Cell("web");
  EXPECT_EQ(cell["protocol"], "http") << cell.dump();
  EXPECT_EQ(cell["policy"]["header_timeout_ms"], 2500) << cell.dump();
  Result<ProcessResult> status = h.Ctl({"status", "web"}, "");
  ASSERT_TRUE(status.ok()) << status.status().message();
  EXPECT_EQ(status->exit_code(), 0) << status->Describe();
  EXPECT_NE(status->out.find("    protocol:          http\n"), std::string::npos) << status->out;
  EXPECT_NE(status->out.find(" header_timeout_ms=2500"), std::string::npos) << status->out;
  // `call` speaks frames: on an HTTP cell it says so and names a client that speaks HTTP.
  Result<ProcessResult> call = h.Ctl({"call", "web", "--data", "x"}, "");
  ASSERT_TRUE(call.ok()) << call.status().message();
  EXPECT_EQ(call->exit_code(), 2) << call->Describe();
  EXPECT_NE(call->err.find("cell web speaks HTTP/1.1 (protocol = \"http\"), not frames: call it "
                           "with an HTTP client, e.g. curl --unix-socket " +
                           h.CellSocket("web") + " http://web/"),
            std::string::npos)
      << call->Describe();
}

TEST(HttpCell, WorkerThatClosesEveryConnectionServesFiftyRequestsInARow) {
  CellSpec cell = HttpCell();
  cell.environment = {{"WORKER_CLOSE", "1"}};
  Harness h(TestOptions({cell}));
  ASSERT_STARTED(h);
  // The client's connection stays open: only the worker's closes.
  ASSERT_TRUE(EachAnswered200(h, 50, GetHello, [](int, const Response& response) {
    return response.Header("connection").empty() ? ""
                                                 : "Connection: " + response.Header("connection");
  }));
  ASSERT_TRUE(h.WaitForCell("web", [](const nlohmann::json& c) { return c["ok"] == 50; }))
      << h.Status().dump();
  EXPECT_EQ(h.Cell("web")["failed"], 0) << h.Status().dump();
}

TEST(HttpCell, IdleConnectionsTheWorkerClosedNeverFailARequest) {
  CellSpec cell = HttpCell();
  cell.environment = {{"WORKER_RUDE", "1"}};
  Harness h(TestOptions({cell}));
  ASSERT_STARTED(h);
  // Each request may go out on a connection the worker is closing, or has closed, right now.
  ASSERT_TRUE(EachAnswered200(h, 50, GetHello));
  ASSERT_TRUE(h.WaitForCell("web", [](const nlohmann::json& c) { return c["ok"] == 50; }))
      << h.Status().dump();
  EXPECT_EQ(h.Cell("web")["failed"], 0) << h.Status().dump();
}

// A POST is never sent to the worker twice (RFC 9110 section 9.2.2): a worker that closes the
// connection with it in hand (killed, crashed) may have acted on it. The client gets 502 and the
// worker saw it once; it used to be sent again on a fresh connection, and ran twice.
TEST(HttpCell, APostTheWorkerDroppedIsNotSentAgain) {
  bulkhead::testing::TempDir dir;
  const std::string log = dir.Join("drops");
  CellSpec cell = HttpCell();
  cell.environment = {{"WORKER_DROP_LOG", log}};
  Harness h(TestOptions({cell}));
  ASSERT_STARTED(h);
  // A GET first, so that an idle connection waits for reuse.
  Result<ProcessResult> get = Curl(h, {"http://web/hello"});
  ASSERT_TRUE(get.ok() && get->out == "hello") << (get.ok() ? get->Describe() : "");
  Result<ProcessResult> post = Curl(h, {"-i", "http://web/drop", "-d", "pay=1"});
  ASSERT_TRUE(post.ok()) << post.status().message();
  EXPECT_TRUE(post->out.starts_with("HTTP/1.1 502 ")) << post->Describe();
  EXPECT_EQ(testing::ReadFile(log).value_or("(none)"), "POST /drop\n");
  EXPECT_EQ(h.Cell("web")["failed_by_reason"]["worker_error"], 1) << h.Status().dump();
}

// POSTs on a keep-alive client to a worker that drops every idle connection without a word all
// succeed: each goes out on a fresh worker connection, which the worker cannot have closed (a
// POST cannot be resent, see above), and the cell never holds more than max_concurrent.
// A POST goes out on an idle keep-alive connection as any request does: opening a connection per
// POST cost the HTTP path half its throughput (docs/benchmarks.md).
TEST(HttpCell, PostsReuseTheWorkersKeepAliveConnection) {
  Harness h(TestOptions({HttpCell()}));
  ASSERT_STARTED(h);
  std::string first_connection;
  ASSERT_TRUE(EachAnswered200(
      h, 10,
      [](int i) {
        return "POST /echo HTTP/1.1\r\nHost: web\r\nContent-Length: 2\r\n\r\n" +
               std::to_string(10 + i);
      },
      [&](int, const Response& response) {
        const std::string connection = response.Header("x-worker-connection");
        if (first_connection.empty()) first_connection = connection;
        return connection == first_connection && !connection.empty()
                   ? ""
                   : "went out on worker connection " + connection + ", not " + first_connection;
      }));
}

TEST(HttpCell, PostsToAWorkerThatClosesIdleConnectionsNeverFail) {
  CellSpec cell = HttpCell();
  cell.environment = {{"WORKER_RUDE", "1"}};
  Harness h(TestOptions({cell}));
  ASSERT_STARTED(h);
  auto body = [](int i) { return "n" + std::to_string(i); };
  ASSERT_TRUE(EachAnswered200(
      h, 30,
      [&](int i) {
        return "POST /echo HTTP/1.1\r\nHost: web\r\nContent-Length: " +
               std::to_string(body(i).size()) + "\r\n\r\n" + body(i);
      },
      [&](int i, const Response& response) {
        return response.body == body(i) ? "" : "the body is not " + body(i);
      }));
  nlohmann::json c = h.Cell("web");
  EXPECT_EQ(c["failed"], 0) << c.dump();
  EXPECT_LE(c["worker_connections"].get<uint64_t>(), 4u) << c.dump();
}

// A field of bulkheadd's /proc/PID/status in KiB ("VmRSS:" resident now, "VmHWM:" its peak), 0
// when unknown.
uint64_t StatusKib(pid_t pid, std::string_view field) {
  std::optional<std::string> status = testing::ReadFile("/proc/" + std::to_string(pid) + "/status");
  if (!status) return 0;
  const size_t at = status->find(field);
  if (at == std::string::npos) return 0;
  return std::stoull(status->substr(at + field.size()));
}

uint64_t ResidentKib(pid_t pid) { return StatusKib(pid, "VmRSS:"); }

TEST(HttpCell, LargeResponseStreamsToASlowReaderInBoundedMemory) {
  constexpr size_t kBody = size_t{100} << 20;
  Harness h(TestOptions({HttpCell()}));
  ASSERT_STARTED(h);
  // Its resident memory before: a sanitizer build starts far higher than a release one.
  const uint64_t rss_before_kib = ResidentKib(h.pid());
  ASSERT_GT(rss_before_kib, 0u);
  std::optional<HttpConn> conn = HttpConn::Open(h.CellSocket("web"));
  ASSERT_TRUE(conn);
  ASSERT_TRUE(conn->Send("GET /big/" + std::to_string(kBody) + " HTTP/1.1\r\nHost: web\r\n\r\n"));
  // The client reads nothing yet: its socket fills, then bulkheadd holds what it cannot write.
  ASSERT_TRUE(h.WaitForCell("web", [](const nlohmann::json& c) {
    return c["unsent_bytes"].is_number() && c["unsent_bytes"] > 0;
  })) << h.Status().dump();
  // Its worker link stopped reading: what it holds stays near the bound, far below the body.
  nlohmann::json cell = h.Cell("web");
  EXPECT_LE(cell["unsent_bytes"].get<uint64_t>(), 1u << 20) << cell.dump();
  const uint64_t rss_kib = ResidentKib(h.pid());
  EXPECT_LT(rss_kib, rss_before_kib + uint64_t{16} * 1024)
      << "bulkheadd holds the body: " << rss_before_kib << " KiB before, " << rss_kib << " now";
  std::optional<Response> response = conn->Read(std::chrono::seconds(60));
  ASSERT_TRUE(response && response->status == 200) << "no whole response";
  ASSERT_EQ(response->body.size(), kBody);
  for (size_t i = 0; i < kBody; i += 4093) {
    ASSERT_EQ(static_cast<unsigned char>(response->body[i]), i % 256) << "byte " << i;
  }
  ASSERT_TRUE(h.WaitForCell("web", [](const nlohmann::json& c) { return c["ok"] == 1; }))
      << h.Status().dump();
}

// Bytes [from, from + n) of the body http_worker.py's /verify checks: 4096-byte blocks, block K
// is K as 8 little-endian bytes, 512 times.
std::string Pattern(uint64_t from, size_t n) {
  std::string out(n, '\0');
  for (size_t i = 0; i < n; ++i) {
    const uint64_t at = from + i;
    out[i] = static_cast<char>(((at / 4096) >> (8 * (at % 8))) & 0xff);
  }
  return out;
}

// Sends bytes [from, from + n) of the pattern as (part of) a request body, in pieces of 1 MiB:
// raw, or each piece as one chunk (the last chunk is the caller's).
bool SendPattern(HttpConn& conn, uint64_t from, uint64_t n, bool chunked) {
  constexpr uint64_t kPiece = uint64_t{1} << 20;
  for (uint64_t at = from; at < from + n; at += kPiece) {
    const std::string piece = Pattern(at, static_cast<size_t>(std::min(kPiece, from + n - at)));
    if (chunked) {
      char size[32];
      std::snprintf(size, sizeof size, "%zx\r\n", piece.size());
      if (!conn.Send(size) || !conn.Send(piece) || !conn.Send("\r\n")) return false;
    } else if (!conn.Send(piece)) {
      return false;
    }
  }
  return true;
}

// The first line a worker wrote to the file at `path` ("incomplete 65536"), once it is whole;
// "" when none came in time.
std::string FirstLine(const std::string& path) {
  std::string line;
  testing::WaitFor([&] {
    const std::string text = testing::ReadFile(path).value_or("");
    const size_t end = text.find('\n');
    if (end == std::string::npos) return false;
    line = text.substr(0, end);
    return true;
  });
  return line;
}

// docs/http.md, "Request bodies": 100 MiB uploads, with Content-Length and then chunked on the same
// keep-alive connection, to a worker that reads slowly, arrive byte-identical, while bulkheadd's
// peak memory stays far below one body: the body streams through, it is never held whole.
TEST(HttpCell, HundredMiBUploadsStreamToASlowWorkerInBoundedMemory) {
  constexpr uint64_t kBody = uint64_t{100} << 20;
  Harness h(
      TestOptions({HttpCell("request_timeout = \"120s\"\n")}, "max_payload_bytes = 209715200\n"));
  ASSERT_STARTED(h);
  // Its peak before: a sanitizer build starts far higher than a release one.
  const uint64_t peak_before_kib = StatusKib(h.pid(), "VmHWM:");
  ASSERT_GT(peak_before_kib, 0u);
  std::optional<HttpConn> conn = HttpConn::Open(h.CellSocket("web"));
  ASSERT_TRUE(conn);
  for (const bool chunked : {false, true}) {
    SCOPED_TRACE(chunked ? "chunked" : "Content-Length");
    ASSERT_TRUE(conn->Send(std::string(chunked ? "PUT" : "POST") +
                           " /verify?pace=1 HTTP/1.1\r\nHost: web\r\n" +
                           (chunked ? std::string("Transfer-Encoding: chunked\r\n")
                                    : "Content-Length: " + std::to_string(kBody) + "\r\n") +
                           "\r\n"));
    ASSERT_TRUE(SendPattern(*conn, 0, kBody, chunked));
    if (chunked) {
      ASSERT_TRUE(conn->Send("0\r\n\r\n"));
    }
    std::optional<Response> response = conn->Read(std::chrono::seconds(120));
    ASSERT_TRUE(response && response->status == 200) << Describe(response);
    EXPECT_EQ(response->body, std::to_string(kBody) + " -1") << "length, first bad offset";
  }
  const uint64_t peak_kib = StatusKib(h.pid(), "VmHWM:");
  EXPECT_LT(peak_kib, peak_before_kib + uint64_t{32} * 1024)
      << "bulkheadd held the body: peak " << peak_before_kib << " KiB before, " << peak_kib
      << " after";
  EXPECT_EQ(h.Cell("web")["ok"], 2) << h.Status().dump();
}

// While its request waits in the queue, an upload's body stays in the client's socket (bulkheadd
// reads none of it: the client cannot send it all); the request runs once a slot frees, and its
// body then arrives whole.
// A worker may refuse an upload from its head and close without reading the body: bulkheadd's
// next write of the body fails, and the worker's answer, already sent, must still reach the client
// rather than a 502. The failing write races with the read of the answer, so many uploads.
TEST(HttpCell, WorkersEarlyAnswerToAnUploadItDidNotReadReachesTheClient) {
  Harness h(TestOptions({HttpCell()}, "max_payload_bytes = 16777216\n"));
  ASSERT_STARTED(h);
  const std::string body(size_t{1} << 20, 'u');
  for (int i = 0; i < 30; ++i) {
    std::optional<HttpConn> conn = HttpConn::Open(h.CellSocket("web"));
    ASSERT_TRUE(conn);
    conn->Send("POST /early HTTP/1.1\r\nHost: web\r\nContent-Length: " +
               std::to_string(body.size()) + "\r\n\r\n" + body);
    std::optional<Response> response = conn->Read();
    ASSERT_TRUE(response && response->status == 413 && response->body == "too big\n")
        << "upload " << i << ": " << Describe(response);
  }
  EXPECT_EQ(h.Cell("web")["failed"], 0) << h.Status().dump();
}

TEST(HttpCell, QueuedUploadIsNotReadUntilASlotFrees) {
  constexpr uint64_t kBody = uint64_t{32} << 20;
  testing::TempDir dir;
  const std::string gate = dir.Join("gate");
  CellSpec cell = HttpCell("", /*max_concurrent=*/1, /*max_queue=*/1);
  cell.queue_timeout = "60s";
  Harness h(TestOptions({cell}, "max_payload_bytes = 67108864\n"));
  ASSERT_STARTED(h);
  std::optional<FullCell> full = OpenFullCell(h, WaitTarget(gate));
  ASSERT_TRUE(full);
  auto& [running, upload] = *full;
  ASSERT_TRUE(upload.Send("POST /verify HTTP/1.1\r\nHost: web\r\nContent-Length: " +
                          std::to_string(kBody) + "\r\n\r\n"));
  // Admitted on its head alone.
  ASSERT_TRUE(h.WaitForCell("web", [](const nlohmann::json& c) { return c["queued"] == 1; }))
      << h.Status().dump();
  const std::string body = Pattern(0, kBody);
  const size_t taken = upload.SendSome(body);
  EXPECT_LT(taken, kBody) << "the whole body was read while its request was queued";
  nlohmann::json status = h.Cell("web");
  EXPECT_EQ(status["queued"], 1) << status.dump();
  // The slot frees: the request runs and its body is read.
  ASSERT_TRUE(Release(running, gate));
  ASSERT_TRUE(upload.Send(std::string_view(body).substr(taken)));
  std::optional<Response> response = upload.Read(std::chrono::seconds(60));
  ASSERT_TRUE(response && response->status == 200) << Describe(response);
  EXPECT_EQ(response->body, std::to_string(kBody) + " -1");
  ASSERT_TRUE(h.WaitForCell("web", [](const nlohmann::json& c) {
    return c["ok"] == 2 && c["running"] == 0 && c["queued"] == 0;
  })) << h.Status().dump();
}

// A client that leaves in the middle of its upload: the worker sees its connection end, never a
// whole request; the request counts dropped and its slot is free again.
TEST(HttpCell, ClientThatLeavesMidUploadEndsTheWorkersRequest) {
  testing::TempDir dir;
  const std::string log = dir.Join("bodies");
  CellSpec cell = HttpCell("", /*max_concurrent=*/1, /*max_queue=*/1);
  cell.environment = {{"WORKER_BODY_LOG", log}};
  Harness h(TestOptions({cell}, "max_payload_bytes = 67108864\n"));
  ASSERT_STARTED(h);
  std::optional<HttpConn> conn = HttpConn::Open(h.CellSocket("web"));
  ASSERT_TRUE(conn);
  ASSERT_TRUE(conn->Send("POST /verify HTTP/1.1\r\nHost: web\r\nContent-Length: " +
                         std::to_string(16 << 20) + "\r\n\r\n"));
  ASSERT_TRUE(SendPattern(*conn, 0, 1 << 20, /*chunked=*/false));
  ASSERT_TRUE(h.WaitForCell("web", [](const nlohmann::json& c) { return c["running"] == 1; }))
      << h.Status().dump();
  conn->Close();
  EXPECT_TRUE(FirstLine(log).starts_with("incomplete ")) << FirstLine(log);
  ASSERT_TRUE(h.WaitForCell("web", [](const nlohmann::json& c) {
    return c["running"] == 0 && c["dropped"] == 1 && c["ok"] == 0;
  })) << h.Status().dump();
  Result<ProcessResult> curl = Curl(h, {"http://web/hello"});
  ASSERT_TRUE(curl.ok()) << curl.status().message();
  EXPECT_EQ(curl->out, "hello") << curl->Describe();
}

// A chunked body that grows over max_payload_bytes after it began to stream to the worker: the
// worker's request ends (its connection closed, never a whole request) and the client gets 413.
TEST(HttpCell, ChunkedBodyOverMaxPayloadBytesMidStreamGets413) {
  testing::TempDir dir;
  const std::string log = dir.Join("bodies");
  CellSpec cell = HttpCell();
  cell.environment = {{"WORKER_BODY_LOG", log}};
  Harness h(TestOptions({cell}, "max_payload_bytes = 1048576\n"));
  ASSERT_STARTED(h);
  std::optional<HttpConn> conn = HttpConn::Open(h.CellSocket("web"));
  ASSERT_TRUE(conn);
  ASSERT_TRUE(
      conn->Send("POST /verify HTTP/1.1\r\nHost: web\r\nTransfer-Encoding: chunked\r\n\r\n"));
  ASSERT_TRUE(SendPattern(*conn, 0, 512 << 10, /*chunked=*/true));
  ASSERT_TRUE(h.WaitForCell("web", [](const nlohmann::json& c) { return c["running"] == 1; }))
      << h.Status().dump();
  // Over the limit: bulkheadd answers and closes, so the send may fail part way.
  (void)SendPattern(*conn, 512 << 10, 768 << 10, /*chunked=*/true);
  std::optional<Response> response = conn->Read();
  ASSERT_TRUE(response && response->status == 413) << Describe(response);
  EXPECT_EQ(response->Header("connection"), "close");
  EXPECT_TRUE(conn->EndsWithin());
  EXPECT_TRUE(FirstLine(log).starts_with("incomplete ")) << FirstLine(log);
  ASSERT_TRUE(h.WaitForCell("web", [](const nlohmann::json& c) {
    return c["running"] == 0 && c["dropped"] == 1 && c["bad_request"] == 1 && c["ok"] == 0;
  })) << h.Status().dump();
}

// A slow uploader holds its slot no longer than request_timeout: it gets 504, the worker's
// request ends (its connection closed mid-body) and the slot is free at once; the rest of the body
// is dropped and the connection serves the next request.
TEST(HttpCell, SlowUploadIsCutAtRequestTimeout) {
  testing::TempDir dir;
  const std::string log = dir.Join("bodies");
  CellSpec cell = HttpCell("request_timeout = \"300ms\"\n", /*max_concurrent=*/1);
  cell.environment = {{"WORKER_BODY_LOG", log}};
  Harness h(TestOptions({cell}));
  ASSERT_STARTED(h);
  std::optional<HttpConn> conn = HttpConn::Open(h.CellSocket("web"));
  ASSERT_TRUE(conn);
  ASSERT_TRUE(conn->Send("POST /verify HTTP/1.1\r\nHost: web\r\nContent-Length: 131072\r\n\r\n"));
  ASSERT_TRUE(conn->Send(Pattern(0, 65536)));
  std::optional<Response> response = conn->Read();
  ASSERT_TRUE(response && response->status == 504) << Describe(response);
  EXPECT_TRUE(FirstLine(log).starts_with("incomplete ")) << FirstLine(log);
  ASSERT_TRUE(h.WaitForCell("web", [](const nlohmann::json& c) {
    return c["running"] == 0 && c["failed_by_reason"]["timeout"] == 1;
  })) << h.Status().dump();
  ASSERT_TRUE(conn->Send(Pattern(65536, 65536) + "GET /hello HTTP/1.1\r\nHost: web\r\n\r\n"));
  std::optional<Response> next = conn->Read();
  ASSERT_TRUE(next && next->status == 200) << Describe(next);
  EXPECT_EQ(next->body, "hello");
}

// `Expect: 100-continue` is answered when the request is sent to the worker: a queued request's
// client gets "100 Continue" once a slot frees; a rejected one gets its 503 instead, with
// Connection: close, and never sends its body.
// Without request_timeout, a client that stops in the middle of its body would hold its slot
// forever; header_timeout bounds its silence as it does in the head.
TEST(HttpCell, UploadThatStopsMidBodyIsCutAtHeaderTimeout) {
  bulkhead::testing::TempDir dir;
  const std::string log = dir.Join("bodies");
  CellSpec cell = HttpCell("header_timeout = \"300ms\"\n");
  cell.environment = {{"WORKER_BODY_LOG", log}};
  Harness h(TestOptions({cell}));
  ASSERT_STARTED(h);
  std::optional<HttpConn> conn = HttpConn::Open(h.CellSocket("web"));
  ASSERT_TRUE(conn);
  ASSERT_TRUE(conn->Send("POST /verify HTTP/1.1\r\nHost: web\r\nContent-Length: 100000\r\n\r\n"));
  ASSERT_TRUE(h.WaitForCell("web", [](const nlohmann::json& c) { return c["running"] == 1; }));
  ASSERT_TRUE(conn->Send(std::string(1000, 'x')));
  std::optional<Response> response = conn->Read();
  ASSERT_TRUE(response && response->status == 408) << Describe(response);
  EXPECT_NE(response->body.find("no request body bytes within header_timeout"), std::string::npos)
      << response->body;
  ASSERT_TRUE(h.WaitForCell("web", [](const nlohmann::json& c) {
    return c["running"] == 0 && c["dropped"] == 1;
  })) << h.Status().dump();
  // The worker saw its connection end, not a whole request.
  EXPECT_TRUE(FirstLine(log).starts_with("incomplete ")) << FirstLine(log);
}

TEST(HttpCell, ExpectContinueIsAnsweredWhenTheRequestRunsNotWhenItIsRejected) {
  testing::TempDir dir;
  const std::string gate = dir.Join("gate");
  CellSpec cell = HttpCell("", /*max_concurrent=*/1, /*max_queue=*/1);
  cell.queue_timeout = "60s";
  Harness h(TestOptions({cell}));
  ASSERT_STARTED(h);
  std::optional<FullCell> full = OpenFullCell(h, WaitTarget(gate));
  ASSERT_TRUE(full);
  auto& [running, queued] = *full;
  const std::string head =
      "POST /verify HTTP/1.1\r\nHost: web\r\nExpect: 100-continue\r\nContent-Length: 8192\r\n\r\n";
  ASSERT_TRUE(queued.Send(head));
  ASSERT_TRUE(h.WaitForCell("web", [](const nlohmann::json& c) { return c["queued"] == 1; }));
  std::optional<HttpConn> rejected = HttpConn::Open(h.CellSocket("web"));
  ASSERT_TRUE(rejected && rejected->Send(head));
  std::optional<Response> refusal = rejected->Read();
  ASSERT_TRUE(refusal && refusal->status == 503) << Describe(refusal);
  EXPECT_EQ(refusal->Header("connection"), "close");
  EXPECT_TRUE(rejected->EndsWithin());
  ASSERT_TRUE(Release(running, gate));
  std::optional<Response> interim = queued.Read();
  ASSERT_TRUE(interim && interim->status == 100) << Describe(interim);
  ASSERT_TRUE(queued.Send(Pattern(0, 8192)));
  std::optional<Response> response = queued.Read();
  ASSERT_TRUE(response && response->status == 200) << Describe(response);
  EXPECT_EQ(response->body, "8192 -1");
}

// A request rejected from the queue before its body was read: the body that follows is read and
// dropped, and the connection serves the next request.
TEST(HttpCell, BodyOfARequestRejectedFromTheQueueIsDroppedAndTheConnectionGoesOn) {
  testing::TempDir dir;
  const std::string gate = dir.Join("gate");
  CellSpec cell = HttpCell("", /*max_concurrent=*/1, /*max_queue=*/1);
  cell.queue_timeout = "200ms";
  Harness h(TestOptions({cell}));
  ASSERT_STARTED(h);
  std::optional<FullCell> full = OpenFullCell(h, WaitTarget(gate));
  ASSERT_TRUE(full);
  auto& [running, conn] = *full;
  ASSERT_TRUE(conn.Send("POST /echo HTTP/1.1\r\nHost: web\r\nContent-Length: 5\r\n\r\n"));
  std::optional<Response> refusal = conn.Read();
  ASSERT_TRUE(refusal && refusal->status == 503) << Describe(refusal);
  EXPECT_EQ(refusal->Header("bulkhead-outcome").rfind("rejected; reason=queue_timeout", 0), 0u)
      << Describe(refusal);
  ASSERT_TRUE(Release(running, gate));
  ASSERT_TRUE(
      conn.Send("hello"
                "GET /hello HTTP/1.1\r\nHost: web\r\n\r\n"));
  std::optional<Response> next = conn.Read();
  ASSERT_TRUE(next && next->status == 200) << Describe(next);
  EXPECT_EQ(next->body, "hello");
  EXPECT_EQ(h.Cell("web")["rejected_by_reason"]["queue_timeout"], 1) << h.Status().dump();
}

TEST(HttpCell, ConnectionOverMaxConnectionsGets503AndIsClosed) {
  Harness h(TestOptions({HttpCell("max_connections = 1\n")}));
  ASSERT_STARTED(h);
  std::optional<HttpConn> first = HttpConn::Open(h.CellSocket("web"));
  ASSERT_TRUE(first);
  ASSERT_TRUE(h.WaitForCell("web", [](const nlohmann::json& c) { return c["clients"] == 1; }));
  std::optional<HttpConn> second = HttpConn::Open(h.CellSocket("web"));
  ASSERT_TRUE(second);
  std::optional<Response> refused = second->Read();
  ASSERT_TRUE(refused && refused->status == 503) << Describe(refused);
  EXPECT_EQ(refused->Header("retry-after"), "1");
  EXPECT_EQ(refused->Header("connection"), "close");
  EXPECT_EQ(refused->Header("bulkhead-outcome").rfind("rejected; reason=too_many_connections", 0),
            0u)
      << Describe(refused);
  EXPECT_TRUE(second->EndsWithin());
}

TEST(HttpCell, HeadNotCompleteWithinHeaderTimeoutGets408) {
  // Wall-clock time: long enough that the idle connection's request, sent right after its
  // connect, never loses a race with it on a loaded machine.
  Harness h(TestOptions({HttpCell("header_timeout = \"1s\"\n")}));
  ASSERT_STARTED(h);
  std::optional<HttpConn> slow = HttpConn::Open(h.CellSocket("web"));
  ASSERT_TRUE(slow);
  ASSERT_TRUE(slow->Send("GET /hello HTTP/1.1\r\nHost: web\r\nX-Slow: "));
  std::optional<Response> response = slow->Read();
  ASSERT_TRUE(response && response->status == 408) << Describe(response);
  EXPECT_EQ(response->Header("connection"), "close");
  EXPECT_TRUE(slow->EndsWithin());
  // An idle keep-alive connection is closed without a word.
  std::optional<HttpConn> idle = HttpConn::Open(h.CellSocket("web"));
  ASSERT_TRUE(idle);
  ASSERT_TRUE(idle->Send("GET /hello HTTP/1.1\r\nHost: web\r\n\r\n"));
  response = idle->Read();
  ASSERT_TRUE(response && response->status == 200) << Describe(response);
  EXPECT_TRUE(idle->EndsWithin());
  EXPECT_EQ(h.Cell("web")["bad_request"], 1) << h.Status().dump();
}

// With the one slot of "web" taken: a client of `queued` (just opened) whose request waits in the
// queue, then closes its connection; its request must leave the queue as cancelled.
::testing::AssertionResult QueuedRequestIsCancelledWhenItsClientLeaves(Harness& h,
                                                                       HttpConn& queued) {
  if (!queued.Send("GET /hello HTTP/1.1\r\nHost: web\r\n\r\n")) {
    return ::testing::AssertionFailure() << "cannot send the request to queue";
  }
  if (!h.WaitForCell("web", [](const nlohmann::json& c) { return c["queued"] == 1; })) {
    return ::testing::AssertionFailure() << "not queued: " << h.Status().dump();
  }
  queued.Close();
  if (!h.WaitForCell(
          "web", [](const nlohmann::json& c) { return c["queued"] == 0 && c["cancelled"] == 1; })) {
    return ::testing::AssertionFailure() << "not cancelled: " << h.Status().dump();
  }
  return ::testing::AssertionSuccess();
}

TEST(HttpCell, ClientThatLeavesWhileQueuedIsCancelled) {
  Harness h(TestOptions({HttpCell("", /*max_concurrent=*/1, /*max_queue=*/1)}));
  ASSERT_STARTED(h);
  std::optional<FullCell> full = OpenFullCell(h);
  ASSERT_TRUE(full);
  EXPECT_TRUE(QueuedRequestIsCancelledWhenItsClientLeaves(h, full->next));
}

// Over TCP a client's close reads as a FIN, the same as a shutdown of its sending side; an HTTP
// client closes only after its last response (RFC 9112 section 9.6), so either way it left.
TEST(HttpCell, TcpClientThatLeavesWhileQueuedIsCancelledAndWhileRunningDropped) {
  Harness h(TestOptions({HttpCell("listen = [\"127.0.0.1:0\"]\n", /*max_concurrent=*/1,
                                  /*max_queue=*/1)}));
  ASSERT_STARTED(h);
  const nlohmann::json cell = h.Cell("web");
  ASSERT_TRUE(cell["listen"].is_array() && !cell["listen"].empty()) << cell.dump();
  const std::string address = cell["listen"][0].get<std::string>();
  std::optional<FullCell> full = OpenFullCell(h, "/sleep/1500", address);
  ASSERT_TRUE(full);
  auto& [running, queued] = *full;
  EXPECT_TRUE(QueuedRequestIsCancelledWhenItsClientLeaves(h, queued));
  running.Close();
  ASSERT_TRUE(h.WaitForCell("web", [](const nlohmann::json& c) {
    return c["running"] == 0 && c["dropped"] == 1 && c["ok"] == 0;
  })) << h.Status().dump();
}

TEST(HttpCell, ClientThatLeavesWhileRunningIsDroppedWhenTheWorkerAnswers) {
  Harness h(TestOptions({HttpCell("", /*max_concurrent=*/1, /*max_queue=*/1)}));
  ASSERT_STARTED(h);
  std::optional<HttpConn> conn = RunOneRequest(h, "/sleep/500");
  ASSERT_TRUE(conn);
  conn->Close();
  ASSERT_TRUE(h.WaitForCell("web", [](const nlohmann::json& c) {
    return c["running"] == 0 && c["dropped"] == 1;
  })) << h.Status().dump();
  // The slot is free again.
  Result<ProcessResult> curl = Curl(h, {"http://web/hello"});
  ASSERT_TRUE(curl.ok()) << curl.status().message();
  EXPECT_EQ(curl->out, "hello") << curl->Describe();
}

}  // namespace
}  // namespace bulkhead::e2e
