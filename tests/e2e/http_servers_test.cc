// SPDX-License-Identifier: MIT
// HTTP cells with servers and clients that are not ours (issue 15, docs/http.md): gunicorn serving
// a Flask app (sync workers: every response closes its connection), Node's http module (keep-alive)
// and Python's http.server (tests/fixtures/http/) as workers on fd 3; curl, Python's http.client
// and ab as clients, over the cell's Unix socket and its TCP listen address. Then the seed
// scenario (tests/seeds) over HTTP: stalled payments fill only their compartment, the catalog
// answers, and the fourth payment gets 503 with Bulkhead-Outcome.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "tests/e2e/e2e_test.h"
#include "tests/e2e/http_conn.h"
#include "tests/helpers/test_support.h"

namespace bulkhead::e2e {
namespace {

using ::testing::HasSubstr;

const std::string kFixtures = BULKHEAD_HTTP_FIXTURES_DIR;

struct Server {
  const char* name;
  std::vector<std::string> command;
  // It reads chunked request bodies (Python's http.server leaves them to the handler, and the
  // fixture reads Content-Length only).
  bool chunked_requests = true;
};

// Names the parameter in test names and messages (not its bytes).
void PrintTo(const Server& server, std::ostream* os) { *os << server.name; }

std::string ServerName(const ::testing::TestParamInfo<Server>& info) { return info.param.name; }

const Server kGunicorn{
    "gunicorn_flask",
    {"/usr/bin/gunicorn", "--chdir", kFixtures, "--workers", "4", "flask_app:app"}};
const Server kNode{"node", {"/usr/bin/node", kFixtures + "/node_server.js"}};
const Server kPython{"python_http_server",
                     {"/usr/bin/python3", kFixtures + "/fd3_http_server.py"},
                     /*chunked_requests=*/false};

// An HTTP cell running `server`; its TCP address is chosen by the kernel (status shows it).
CellSpec ServerCell(const std::string& name, const Server& server, uint32_t max_concurrent,
                    uint32_t max_queue, std::string extra = "") {
  return CellSpec{.name = name,
                  .command = server.command,
                  .max_concurrent = max_concurrent,
                  .max_queue = max_queue,
                  .queue_timeout = "20s",
                  .extra_toml =
                      "protocol = \"http\"\nlisten = [\"127.0.0.1:0\"]\n"
                      "ready = \"http:/healthz\"\nstart_timeout = \"60s\"\n" +
                      std::string(kQuickStop) + extra};
}

HarnessOptions ServerOptions(std::vector<CellSpec> cells) {
  HarnessOptions options = TestOptions(std::move(cells));
  options.start_timeout = std::chrono::milliseconds(60000);  // gunicorn boots slowly when loaded
  return options;
}

// "127.0.0.1:PORT" of the cell's first listen address.
std::string TcpAddress(Harness& h, const std::string& cell) {
  nlohmann::json c = h.Cell(cell);
  if (!c.contains("listen") || !c["listen"].is_array() || c["listen"].empty()) return "";
  return c["listen"][0].get<std::string>();
}

Result<ProcessResult> Curl(std::vector<std::string> args) {
  std::vector<std::string> argv = {"/usr/bin/curl", "-sS", "--max-time", "30"};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProcess(argv);
}

uint64_t Counter(const nlohmann::json& cell, const char* key) { return cell[key].get<uint64_t>(); }

class RealServer : public ::testing::TestWithParam<Server> {};

// curl over the Unix socket and over TCP, Python's http.client on one keep-alive connection, and
// ab with 8 concurrent keep-alive clients: every request is served, the worker's own 503 passes
// through untouched (and counts ok), and the counters add up.
TEST_P(RealServer, ServesCurlHttpClientAndAb) {
  Harness h(ServerOptions({ServerCell("payments", GetParam(), 4, 8)}));
  ASSERT_STARTED(h);
  const std::string address = TcpAddress(h, "payments");
  ASSERT_FALSE(address.empty()) << h.Cell("payments").dump();

  Result<ProcessResult> unix_post = Curl({"--unix-socket", h.CellSocket("payments"),
                                          "http://payments/charge", "-d", "{\"order\": 42}"});
  ASSERT_TRUE(unix_post.ok()) << unix_post.status().message();
  EXPECT_EQ(unix_post->exit_code(), 0) << unix_post->Describe();
  EXPECT_EQ(unix_post->out, "charged {\"order\": 42}\n");

  Result<ProcessResult> tcp_post =
      Curl({"-i", "http://" + address + "/charge", "-d", "{\"order\": 43}"});
  ASSERT_TRUE(tcp_post.ok()) << tcp_post.status().message();
  EXPECT_THAT(tcp_post->out, ::testing::StartsWith("HTTP/1.1 200"));
  EXPECT_THAT(tcp_post->out, HasSubstr("\r\n\r\ncharged {\"order\": 43}\n"));
  EXPECT_THAT(tcp_post->out, ::testing::Not(HasSubstr("Bulkhead-Outcome")));

  // 2 MiB uploads that curl sends after "100 Continue", so they stream to the worker (docs/http.md,
  // "Request bodies"): with Content-Length, and chunked to a server that reads chunked bodies.
  bulkhead::testing::TempDir dir;
  const std::string upload = std::string(size_t{2} << 20, 'u');
  const std::string upload_file = dir.Join("upload");
  ASSERT_TRUE(bulkhead::testing::WriteFileAtomically(upload_file, upload).ok());
  uint64_t uploads = 0;
  for (const bool chunked : {false, true}) {
    if (chunked && !GetParam().chunked_requests) continue;
    std::vector<std::string> args = {
        "--unix-socket",        h.CellSocket("payments"), "--data-binary", "@" + upload_file, "-H",
        "Expect: 100-continue", "http://payments/charge"};
    if (chunked) args.insert(args.end(), {"-H", "Transfer-Encoding: chunked"});
    Result<ProcessResult> streamed = Curl(args);
    ASSERT_TRUE(streamed.ok()) << streamed.status().message();
    EXPECT_EQ(streamed->exit_code(), 0) << streamed->err;
    EXPECT_TRUE(streamed->out == "charged " + upload + "\n")
        << (chunked ? "chunked: " : "Content-Length: ") << streamed->out.size() << " bytes back";
    ++uploads;
  }

  // The worker's own 503 is the worker's answer: passed through, without the Bulkhead-Outcome
  // field the fixture forges (only bulkheadd's own answers carry one).
  Result<ProcessResult> own_503 = Curl({"-i", "http://" + address + "/charge?status=503"});
  ASSERT_TRUE(own_503.ok()) << own_503.status().message();
  EXPECT_THAT(own_503->out, ::testing::StartsWith("HTTP/1.1 503"));
  EXPECT_THAT(own_503->out, ::testing::Not(HasSubstr("Bulkhead-Outcome")));

  // Python's http.client: 20 requests on one connection, which bulkheadd keeps open whatever the
  // worker does with its own connections (gunicorn closes each one).
  const size_t colon = address.rfind(':');
  Result<ProcessResult> python =
      RunProcess({"/usr/bin/python3", "-c",
                  "import http.client, sys\n"
                  "conn = http.client.HTTPConnection(sys.argv[1], int(sys.argv[2]), timeout=30)\n"
                  "socks = set()\n"
                  "for i in range(20):\n"
                  "    conn.request('POST', '/charge', body='n%d' % i)\n"
                  "    r = conn.getresponse()\n"
                  "    body = r.read().decode()\n"
                  "    assert r.status == 200 and body == 'charged n%d\\n' % i, (r.status, body)\n"
                  "    socks.add(id(conn.sock))\n"
                  "print('%d connection(s)' % len(socks))\n",
                  address.substr(0, colon), address.substr(colon + 1)});
  ASSERT_TRUE(python.ok()) << python.status().message();
  EXPECT_EQ(python->exit_code(), 0) << python->Describe();
  EXPECT_EQ(python->out, "1 connection(s)\n");

  // ab: 400 POSTs from 8 concurrent keep-alive clients.
  const std::string body_file = dir.Join("body");
  ASSERT_TRUE(bulkhead::testing::WriteFileAtomically(body_file, "{\"order\": 7}").ok());
  Result<ProcessResult> ab =
      RunProcess({"/usr/bin/ab", "-q", "-k", "-n", "400", "-c", "8", "-s", "30", "-p", body_file,
                  "-T", "application/json", "http://" + address + "/charge"});
  ASSERT_TRUE(ab.ok()) << ab.status().message();
  EXPECT_EQ(ab->exit_code(), 0) << ab->Describe();
  EXPECT_THAT(ab->out, HasSubstr("Complete requests:      400"));
  EXPECT_THAT(ab->out, HasSubstr("Failed requests:        0"));
  EXPECT_THAT(ab->out, ::testing::Not(HasSubstr("Non-2xx responses")));

  nlohmann::json c = h.Cell("payments");
  EXPECT_EQ(Counter(c, "ok"), 1u + 1 + uploads + 1 + 20 + 400) << c.dump();
  EXPECT_EQ(Counter(c, "failed"), 0u) << c.dump();
  EXPECT_EQ(Counter(c, "rejected"), 0u) << c.dump();
  EXPECT_LE(c["worker_connections"].get<uint64_t>(), 4u) << c.dump();
}

INSTANTIATE_TEST_SUITE_P(Servers, RealServer, ::testing::Values(kGunicorn, kNode, kPython),
                         ServerName);

// Issue 23's reproduction with Debian's gunicorn: a WSGI app that returns a body with 204 gets it
// sent, after a Content-Length. A 204 ends at its empty line (RFC 9112 section 6.3): the client
// gets the 204 alone, and its next request on the same connection gets its own answer, not the
// 204's body (shaped here as a response).
TEST(Gunicorn, ABodySentWith204NeverReachesTheClientAsItsNextAnswer) {
  Harness h(ServerOptions({ServerCell("payments", kGunicorn, 2, 4)}));
  ASSERT_STARTED(h);
  std::optional<HttpConn> conn = HttpConn::Open(h.CellSocket("payments"));
  ASSERT_TRUE(conn);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(conn->Send("GET /no-content-with-body HTTP/1.1\r\nHost: payments\r\n\r\n"));
    std::optional<Response> no_content = conn->Read();
    ASSERT_TRUE(no_content && no_content->status == 204) << Describe(no_content);
    ASSERT_TRUE(conn->Send("GET /healthz HTTP/1.1\r\nHost: payments\r\n\r\n"));
    std::optional<Response> next = conn->Read();
    ASSERT_TRUE(next && next->status == 200 && next->body == "ok\n") << i << ": " << Describe(next);
  }
  nlohmann::json c = h.Cell("payments");
  EXPECT_EQ(Counter(c, "ok"), 6u) << c.dump();
  EXPECT_EQ(Counter(c, "failed"), 0u) << c.dump();
}

// examples/http_worker.py, the worker a new user starts from (examples/http.toml): a chunked body
// that bulkheadd streams on as chunks reaches it whole, and HEAD gets GET's head. It read only
// Content-Length bodies (a streamed one was answered without it, and counted dropped) and had no
// do_HEAD (501).
TEST(ExampleWorker, EchoesAStreamedChunkedBodyAndAnswersHead) {
  const Server example{"example", {"/usr/bin/python3", BULKHEAD_EXAMPLES_DIR "/http_worker.py"}};
  Harness h(ServerOptions({ServerCell("hello", example, 2, 4)}));
  ASSERT_STARTED(h);
  std::optional<HttpConn> conn = HttpConn::Open(h.CellSocket("hello"));
  ASSERT_TRUE(conn);
  // 256 KiB in 16 KiB chunks: more than a head's read, so bulkheadd streams it on as chunks.
  std::string body;
  std::string chunks;
  for (int i = 0; i < 16; ++i) {
    const std::string chunk(16 * 1024, static_cast<char>('a' + i));
    body += chunk;
    chunks += "4000\r\n" + chunk + "\r\n";
  }
  ASSERT_TRUE(conn->Send("POST /big HTTP/1.1\r\nHost: hello\r\nTransfer-Encoding: chunked\r\n\r\n" +
                         chunks + "0\r\n\r\n"));
  std::optional<Response> echoed = conn->Read();
  ASSERT_TRUE(echoed && echoed->status == 200) << Describe(echoed);
  EXPECT_EQ(echoed->body.size(), std::string("hello /big\n").size() + body.size());
  EXPECT_TRUE(echoed->body == "hello /big\n" + body) << echoed->body.substr(0, 40);
  ASSERT_TRUE(conn->Send("HEAD /x HTTP/1.1\r\nHost: hello\r\n\r\n"));
  std::optional<Response> head = conn->ReadAnswerToHead();
  ASSERT_TRUE(head && head->status == 200) << Describe(head);
  EXPECT_EQ(head->Header("content-length"), "9") << "GET's: \"hello /x\\n\"";
  EXPECT_EQ(head->body, "");
  nlohmann::json c = h.Cell("hello");
  EXPECT_EQ(Counter(c, "ok"), 2u) << c.dump();
  EXPECT_EQ(Counter(c, "dropped"), 0u) << c.dump();
}

// tests/seeds over HTTP: payments (gunicorn) holds 2 running and 1 queued stalled charges; the
// catalog (Node) still answers at once; a fourth charge is refused 503 with Retry-After and
// Bulkhead-Outcome without reaching gunicorn; the three stalled ones then complete.
TEST(SeedScenarioOverHttp, StalledPaymentsFillOnlyTheirCompartment) {
  Harness h(
      ServerOptions({ServerCell("payments", kGunicorn, 2, 1), ServerCell("catalog", kNode, 4, 4)}));
  ASSERT_STARTED(h);
  std::vector<Result<ProcessResult>> stalled(3, Status::Error("not run"));
  std::vector<std::thread> callers;
  for (size_t i = 0; i < stalled.size(); ++i) {
    callers.emplace_back([&h, &stalled, i] {
      stalled[i] = Curl({"--unix-socket", h.CellSocket("payments"),
                         "http://payments/charge?stall_ms=3000", "-d", "pay-" + std::to_string(i)});
    });
  }
  const bool filled = h.WaitForCell(
      "payments", [](const nlohmann::json& c) { return c["running"] == 2 && c["queued"] == 1; });
  EXPECT_TRUE(filled) << h.Cell("payments").dump();

  if (filled) {
    Result<ProcessResult> catalog =
        Curl({"--unix-socket", h.CellSocket("catalog"), "http://catalog/charge"});
    ASSERT_TRUE(catalog.ok()) << catalog.status().message();
    EXPECT_EQ(catalog->exit_code(), 0) << catalog->Describe();
    EXPECT_EQ(catalog->out, "charged \n");

    Result<ProcessResult> fourth = Curl(
        {"-i", "--unix-socket", h.CellSocket("payments"), "http://payments/charge", "-d", "pay-4"});
    ASSERT_TRUE(fourth.ok()) << fourth.status().message();
    EXPECT_THAT(fourth->out, ::testing::StartsWith("HTTP/1.1 503 Service Unavailable\r\n"));
    EXPECT_THAT(fourth->out, HasSubstr("\r\nRetry-After: "));
    EXPECT_THAT(fourth->out,
                HasSubstr("\r\nBulkhead-Outcome: rejected; reason=full; cell=payments; "
                          "running=2; queued=1\r\n"));
  }
  for (std::thread& caller : callers) caller.join();
  for (size_t i = 0; i < stalled.size(); ++i) {
    ASSERT_TRUE(stalled[i].ok()) << stalled[i].status().message();
    EXPECT_EQ(stalled[i]->exit_code(), 0) << stalled[i]->Describe();
    EXPECT_EQ(stalled[i]->out, "charged pay-" + std::to_string(i) + "\n");
  }
  nlohmann::json payments = h.Cell("payments");
  EXPECT_EQ(Counter(payments, "ok"), 3u) << payments.dump();
  EXPECT_EQ(payments["rejected_by_reason"]["full"], filled ? 1 : 0) << payments.dump();
  nlohmann::json catalog = h.Cell("catalog");
  EXPECT_EQ(Counter(catalog, "rejected"), 0u) << catalog.dump();
}

}  // namespace
}  // namespace bulkhead::e2e
