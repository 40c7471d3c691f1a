// SPDX-License-Identifier: MIT
// Framing that no peer can desynchronise (issue 23, docs/http.md), through a real bulkheadd: the
// classes of request and response that used to make one client's bytes reach another's exchange,
// or a worker's framing reach a client. Workers: tests/e2e/raw_http_worker.py, which sends exactly
// the bytes a test asks for, never reads a GET's body and ignores Connection: close; and Python's
// http.server (tests/e2e/http_worker.py), whose naive handlers never read a GET's body either.
// Tests count outcomes (what each client got, the cell's counters), never time.
#include <gtest/gtest.h>

#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tests/e2e/e2e_test.h"
#include "tests/e2e/http_conn.h"

namespace bulkhead::e2e {
namespace {

const std::string kRawWorker = BULKHEAD_RAW_HTTP_WORKER;
const std::string kPythonWorker = BULKHEAD_HTTP_WORKER;

// A cell "web" whose worker is `script` (run by python3).
CellSpec WebCell(const std::string& script, uint32_t max_concurrent = 2, uint32_t max_queue = 4) {
  return CellSpec{.name = "web",
                  .command = {"/usr/bin/python3", script},
                  .max_concurrent = max_concurrent,
                  .max_queue = max_queue,
                  .extra_toml = "protocol = \"http\"\n" + std::string(kQuickStop)};
}

// The bytes as lowercase hex digits, for raw_http_worker.py's /raw/HEX.
std::string Hex(std::string_view bytes) {
  std::string out;
  for (unsigned char c : bytes) {
    char two[3];
    std::snprintf(two, sizeof two, "%02x", c);
    out += two;
  }
  return out;
}

// A GET that makes the raw worker send `bytes` as its answer (and `later`, if not empty, before
// its answer to the next request on the same worker connection).
std::string RawGet(std::string_view bytes, std::string_view later = "",
                   const char* method = "GET") {
  std::string target = "/raw/" + Hex(bytes);
  if (!later.empty()) target += "/later/" + Hex(later);
  return std::string(method) + " " + target + " HTTP/1.1\r\nHost: web\r\n\r\n";
}

constexpr std::string_view kHello = "GET /hello HTTP/1.1\r\nHost: web\r\n\r\n";
// Shaped as a response of its own: a client that read it would take it as the answer to its next
// request.
constexpr std::string_view kSmuggledResponse =
    "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nsmuggled";

// `clients` fresh client connections each send GET /hello and read one answer: true when every one
// got "hello" (described in `*got` otherwise).
bool EachNewClientGetsHello(Harness& h, int clients, std::string* got) {
  bool all = true;
  for (int i = 0; i < clients; ++i) {
    std::optional<HttpConn> conn = HttpConn::Open(h.CellSocket("web"));
    std::optional<Response> response;
    if (conn && conn->Send(kHello)) response = conn->Read();
    if (!response || response->status != 200 || response->body != "hello") {
      all = false;
      *got += "client " + std::to_string(i) + ": " + Describe(response) + "\n";
    }
  }
  return all;
}

// RFC 9110 section 6.5.1: a request's trailer fields are never merged into the header section the
// worker gets, whatever the field, whether the trailer came in the same read as the head (the
// request then goes to the worker whole) or later (its body streams).
TEST(HttpFraming, RequestTrailerFieldsNeverReachTheWorker) {
  Harness h(TestOptions({WebCell(kRawWorker)}));
  ASSERT_STARTED(h);
  std::optional<HttpConn> conn = HttpConn::Open(h.CellSocket("web"));
  ASSERT_TRUE(conn);
  const std::string head =
      "POST /echo-head HTTP/1.1\r\nHost: web\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string trailers =
      "0\r\nHost: evil\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\nX-Trailer: t\r\n\r\n";
  // In one write: head, body and trailer come in one read.
  ASSERT_TRUE(conn->Send(head + "5\r\nhello\r\n" + trailers));
  std::optional<Response> whole = conn->Read();
  ASSERT_TRUE(whole && whole->status == 200) << Describe(whole);
  const std::string seen = ToLower(whole->body);
  EXPECT_EQ(seen.find("evil"), std::string::npos) << seen;
  EXPECT_EQ(seen.find("x-trailer"), std::string::npos) << seen;
  EXPECT_EQ(seen.find("\r\nhost: "), seen.rfind("\r\nhost: ")) << "one Host: " << seen;
  EXPECT_NE(seen.find("\r\ncontent-length: 5\r\n\r\n--body--hello"), std::string::npos) << seen;

  // The trailer after the head was handed on: the body streams, chunked, and ends without it.
  ASSERT_TRUE(conn->Send(head + "5\r\nhello\r\n"));
  ASSERT_TRUE(h.WaitForCell("web", [](const nlohmann::json& c) { return c["running"] == 1; }))
      << h.Status().dump();
  ASSERT_TRUE(conn->Send(trailers));
  std::optional<Response> streamed = conn->Read();
  ASSERT_TRUE(streamed && streamed->status == 200) << Describe(streamed);
  EXPECT_EQ(streamed->body.find("evil"), std::string::npos) << streamed->body;
  EXPECT_NE(streamed->body.find("--body--5\r\nhello\r\n0\r\n\r\n"), std::string::npos)
      << streamed->body;

  // The connection is in step: the next request is the client's own.
  ASSERT_TRUE(conn->Send(kHello));
  std::optional<Response> next = conn->Read();
  ASSERT_TRUE(next && next->body == "hello") << Describe(next);
  ASSERT_TRUE(h.WaitForCell("web", [](const nlohmann::json& c) { return c["ok"] == 3; }))
      << h.Status().dump();
}

struct BodilessCase {
  const char* name;
  const char* method;
  std::string head;  // the worker's response head; kSmuggledResponse follows it
  bool head_request = false;
};

void PrintTo(const BodilessCase& c, std::ostream* os) { *os << c.name; }

const std::vector<BodilessCase> kBodilessCases = {
    {"NoContentWithLength", "GET",
     "HTTP/1.1 204 No Content\r\nContent-Length: " + std::to_string(kSmuggledResponse.size()) +
         "\r\n\r\n",
     false},
    {"NoContentChunked", "GET", "HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n",
     false},
    {"NotModifiedWithLength", "GET",
     "HTTP/1.1 304 Not Modified\r\nContent-Length: " + std::to_string(kSmuggledResponse.size()) +
         "\r\n\r\n",
     false},
    {"HeadWithLength", "HEAD",
     "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(kSmuggledResponse.size()) + "\r\n\r\n",
     true},
};

class HttpFramingBodiless : public ::testing::TestWithParam<BodilessCase> {};

// RFC 9112 section 6.3, rule 1: a 204, a 304 and the answer to HEAD end at the empty line whatever
// their framing fields say. The bytes a worker sends after one (gunicorn sends a WSGI app's body
// with 204) never reach the client: not as a body, and not as the answer to its next request.
TEST_P(HttpFramingBodiless, BytesAfterTheHeadNeverReachTheClient) {
  const BodilessCase& c = GetParam();
  Harness h(TestOptions({WebCell(kRawWorker)}));
  ASSERT_STARTED(h);
  std::optional<HttpConn> conn = HttpConn::Open(h.CellSocket("web"));
  ASSERT_TRUE(conn);
  ASSERT_TRUE(conn->Send(RawGet(c.head + std::string(kSmuggledResponse), "", c.method)));
  std::optional<Response> first = c.head_request ? conn->ReadAnswerToHead() : conn->Read();
  ASSERT_TRUE(first) << "no answer";
  EXPECT_EQ(first->status, std::stoi(c.head.substr(9, 3)));
  ASSERT_TRUE(conn->Send(kHello));
  std::optional<Response> second = conn->Read();
  ASSERT_TRUE(second && second->body == "hello") << Describe(second);
  // The worker connection that carried it was closed: the next request went out on another.
  EXPECT_EQ(second->Header("x-worker-connection"), "2") << Describe(second);
  std::string got;
  EXPECT_TRUE(EachNewClientGetsHello(h, 3, &got)) << got;
  ASSERT_TRUE(h.WaitForCell("web", [](const nlohmann::json& cell) { return cell["ok"] == 5; }))
      << h.Status().dump();
  EXPECT_EQ(h.Cell("web")["failed"], 0) << h.Status().dump();
}

// The same bytes sent only once the worker got its next request on that connection (they arrive
// after bulkheadd took the response whole): the connection is never reused, so no next request
// comes on it and no other client gets them.
TEST_P(HttpFramingBodiless, BytesSentLaterNeverReachTheNextClient) {
  const BodilessCase& c = GetParam();
  Harness h(TestOptions({WebCell(kRawWorker, /*max_concurrent=*/1)}));
  ASSERT_STARTED(h);
  std::optional<HttpConn> conn = HttpConn::Open(h.CellSocket("web"));
  ASSERT_TRUE(conn);
  ASSERT_TRUE(conn->Send(RawGet(c.head, kSmuggledResponse, c.method)));
  std::optional<Response> first = c.head_request ? conn->ReadAnswerToHead() : conn->Read();
  ASSERT_TRUE(first) << "no answer";
  EXPECT_EQ(first->status, std::stoi(c.head.substr(9, 3)));
  std::string got;
  EXPECT_TRUE(EachNewClientGetsHello(h, 4, &got)) << got;
  ASSERT_TRUE(h.WaitForCell("web", [](const nlohmann::json& cell) { return cell["ok"] == 5; }))
      << h.Status().dump();
}

INSTANTIATE_TEST_SUITE_P(Responses, HttpFramingBodiless, ::testing::ValuesIn(kBodilessCases),
                         [](const ::testing::TestParamInfo<BodilessCase>& info) {
                           return std::string(info.param.name);
                         });

// An interim response ends at its empty line too: bytes after it are the next response. Framing
// fields that announce a body on it mean the worker is out of step: anything that does not then
// read as a response is a malformed response (502), and the connection is not reused.
TEST(HttpFraming, BytesAfterAnInterimResponseAreNeverItsBody) {
  Harness h(TestOptions({WebCell(kRawWorker)}));
  ASSERT_STARTED(h);
  std::optional<HttpConn> conn = HttpConn::Open(h.CellSocket("web"));
  ASSERT_TRUE(conn);
  ASSERT_TRUE(
      conn->Send(RawGet("HTTP/1.1 100 Continue\r\nContent-Length: 5\r\n\r\nhello"
                        "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")));
  std::optional<Response> bad = conn->Read();
  ASSERT_TRUE(bad && bad->status == 502) << Describe(bad);
  EXPECT_EQ(bad->Header("bulkhead-outcome").rfind("failed; reason=worker_error", 0), 0u)
      << Describe(bad);
  ASSERT_TRUE(conn->Send(kHello));
  std::optional<Response> next = conn->Read();
  ASSERT_TRUE(next && next->body == "hello") << Describe(next);
  nlohmann::json cell = h.Cell("web");
  EXPECT_EQ(cell["failed_by_reason"]["worker_error"], 1) << cell.dump();
  EXPECT_EQ(cell["ok"], 1) << cell.dump();
}

// Interim responses (100, 103) before the final one stay legal: dropped, the final response
// relayed, the worker connection kept.
TEST(HttpFraming, InterimResponsesBeforeTheFinalOneAreDroppedAndTheConnectionKept) {
  Harness h(TestOptions({WebCell(kRawWorker, /*max_concurrent=*/1)}));
  ASSERT_STARTED(h);
  std::optional<HttpConn> conn = HttpConn::Open(h.CellSocket("web"));
  ASSERT_TRUE(conn);
  ASSERT_TRUE(conn->Send(
      RawGet("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\n"
             "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")));
  std::optional<Response> final_response = conn->Read();
  ASSERT_TRUE(final_response && final_response->status == 200) << Describe(final_response);
  EXPECT_EQ(final_response->body, "ok");
  ASSERT_TRUE(conn->Send(kHello));
  std::optional<Response> next = conn->Read();
  ASSERT_TRUE(next && next->body == "hello") << Describe(next);
  EXPECT_EQ(next->Header("x-worker-connection"), "1") << "reused: " << Describe(next);
}

// RFC 9112 section 5.1: a field name with whitespace before its colon is refused (502) rather than
// passed on beside bulkheadd's own framing field; RFC 9112 section 2.2: so is a bare CR.
TEST(HttpFraming, AMalformedResponseGets502AndNothingOfIt) {
  Harness h(TestOptions({WebCell(kRawWorker)}));
  ASSERT_STARTED(h);
  const std::vector<std::string> malformed = {
      "HTTP/1.1 200 OK\r\nContent-Length : 2\r\nTransfer-Encoding: chunked\r\n\r\n"
      "2\r\nok\r\n0\r\n\r\n",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding : chunked\r\nContent-Length: 2\r\n\r\nok",
      "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\rXok",
      "HTTP/1.1 200 OK\r\nX-A: 1\r\n folded\r\nContent-Length: 2\r\n\r\nok",
  };
  for (const std::string& response : malformed) {
    std::optional<HttpConn> conn = HttpConn::Open(h.CellSocket("web"));
    ASSERT_TRUE(conn);
    ASSERT_TRUE(conn->Send(RawGet(response)));
    std::optional<Response> got = conn->Read();
    ASSERT_TRUE(got && got->status == 502) << response << "\n" << Describe(got);
    EXPECT_EQ(got->Header("bulkhead-outcome").rfind("failed; reason=worker_error", 0), 0u)
        << Describe(got);
    // The client's connection stays in step.
    ASSERT_TRUE(conn->Send(kHello));
    std::optional<Response> next = conn->Read();
    ASSERT_TRUE(next && next->body == "hello") << Describe(next);
  }
  nlohmann::json cell = h.Cell("web");
  EXPECT_EQ(cell["failed_by_reason"]["worker_error"], malformed.size()) << cell.dump();
  EXPECT_EQ(cell["ok"], malformed.size()) << cell.dump();
}

// RFC 9112 section 2.2: a bare CR in the head or the chunked framing; section 3.2: a TAB (or other
// byte no request-target holds); section 7.1: a LF inside a chunk line. Each gets 400 and the
// connection closed; none reaches the worker.
TEST(HttpFraming, BareCrAndForbiddenTargetBytesGet400) {
  Harness h(TestOptions({WebCell(kRawWorker)}));
  ASSERT_STARTED(h);
  const std::string chunked =
      "POST /echo-head HTTP/1.1\r\nHost: web\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::vector<std::string> attempts = {
      "GET /hello HTTP/1.1\r\nHost: web\r\nX-A:\rX-B: 1\r\n\r\n",
      "GET /hello HTTP/1.1\r\nHost: web\r\n\rX",
      "GET /hel\tlo HTTP/1.1\r\nHost: web\r\n\r\n",
      "GET /hello\t HTTP/1.1\r\nHost: web\r\n\r\n",
      chunked + "5\rXhello\r\n0\r\n\r\n",
      chunked + "5;a\nb\r\nhello\r\n0\r\n\r\n",
      chunked + "5\r\nhelloXY0\r\n\r\n",
      chunked + "0\r\nX-T: 1\rY\r\n\r\n",
  };
  for (const std::string& attempt : attempts) EXPECT_TRUE(RefusedAndClosed(h, attempt, 400));
  nlohmann::json cell = h.Cell("web");
  EXPECT_EQ(cell["bad_request"], attempts.size()) << cell.dump();
  EXPECT_EQ(cell["admitted"], 0) << cell.dump();
}

// RFC 9112 section 3.2, RFC 9110 sections 4.2.4 and 7.2: a Host that is not host[:port] (a space,
// userinfo, empty) gets 400 and never reaches the worker; section 3.2.2: an absolute-form target's
// authority is the one Host the worker gets, whatever the client's Host said.
TEST(HttpFraming, BadHostGets400AndAnAbsoluteTargetsAuthorityIsTheHost) {
  Harness h(TestOptions({WebCell(kRawWorker)}));
  ASSERT_STARTED(h);
  const std::vector<std::string> attempts = {
      "GET /hello HTTP/1.1\r\nHost: a b\r\n\r\n",
      "GET /hello HTTP/1.1\r\nHost: a@b\r\n\r\n",
      "GET /hello HTTP/1.1\r\nHost:\r\n\r\n",
      "GET http://u@web/hello HTTP/1.1\r\nHost: web\r\n\r\n",
  };
  for (const std::string& attempt : attempts) EXPECT_TRUE(RefusedAndClosed(h, attempt, 400));
  std::optional<HttpConn> conn = HttpConn::Open(h.CellSocket("web"));
  ASSERT_TRUE(conn);
  ASSERT_TRUE(conn->Send("GET http://b.example:81/echo-head HTTP/1.1\r\nHost: a.example\r\n\r\n"));
  std::optional<Response> echoed = conn->Read();
  ASSERT_TRUE(echoed && echoed->status == 200) << Describe(echoed);
  const std::string seen = ToLower(echoed->body);
  EXPECT_NE(seen.find("\r\nhost: b.example:81\r\n"), std::string::npos) << seen;
  EXPECT_EQ(seen.find("a.example"), std::string::npos) << seen;
  nlohmann::json cell = h.Cell("web");
  EXPECT_EQ(cell["bad_request"], attempts.size()) << cell.dump();
  EXPECT_EQ(cell["admitted"], 1) << cell.dump();
}

struct NaiveWorker {
  const char* name;
  std::string script;
};

void PrintTo(const NaiveWorker& w, std::ostream* os) { *os << w.name; }

class HttpFramingGetBody : public ::testing::TestWithParam<NaiveWorker> {};

// A GET that carries a body shaped as a request: a worker that never reads GET bodies reads it as
// its next request. The worker connection is never reused after it (and the worker is asked to
// close it), so the smuggled request's answer never reaches another client, whether the worker
// honours Connection: close (Python's http.server) or not (the raw worker). The smuggled request
// waits for a gate that opens only once the next client's request was sent: had the connection
// been reused, that client would get its answer.
TEST_P(HttpFramingGetBody, ItsBytesNeverReachAnotherClientsExchange) {
  Harness h(TestOptions({WebCell(GetParam().script, /*max_concurrent=*/1)}));
  ASSERT_STARTED(h);
  const std::string gate = h.dir() + "/gate";
  const std::string smuggled = "GET /wait?file=" + gate + " HTTP/1.1\r\nHost: web\r\n\r\n";
  std::optional<HttpConn> sender = HttpConn::Open(h.CellSocket("web"));
  ASSERT_TRUE(sender);
  ASSERT_TRUE(sender->Send("GET /hello HTTP/1.1\r\nHost: web\r\nContent-Length: " +
                           std::to_string(smuggled.size()) + "\r\n\r\n" + smuggled));
  std::optional<Response> own = sender->Read();
  ASSERT_TRUE(own && own->body == "hello") << Describe(own);
  const std::string sender_connection = own->Header("x-worker-connection");

  std::vector<std::string> answers;
  for (int i = 0; i < 5; ++i) {
    std::optional<HttpConn> other = HttpConn::Open(h.CellSocket("web"));
    ASSERT_TRUE(other && other->Send(kHello));
    // Its request runs on the worker, or was answered already.
    const int answered = 1 + i;
    ASSERT_TRUE(h.WaitForCell("web", [answered](const nlohmann::json& c) {
      return c["running"] == 1 || c["ok"] == answered + 1;
    })) << h.Status().dump();
    if (i == 0) {
      ASSERT_TRUE(testing::WriteFileAtomically(gate, "").ok());
    }
    std::optional<Response> response = other->Read();
    ASSERT_TRUE(response) << "client " << i << ": no answer";
    answers.push_back(response->body);
    EXPECT_NE(response->Header("x-worker-connection"), sender_connection)
        << "client " << i << " went out on the sender's worker connection";
  }
  EXPECT_EQ(answers, std::vector<std::string>(5, "hello"));
  ASSERT_TRUE(h.WaitForCell("web", [](const nlohmann::json& c) { return c["ok"] == 6; }))
      << h.Status().dump();
  EXPECT_EQ(h.Cell("web")["failed"], 0) << h.Status().dump();
}

INSTANTIATE_TEST_SUITE_P(Workers, HttpFramingGetBody,
                         ::testing::Values(NaiveWorker{"PythonHttpServer", kPythonWorker},
                                           NaiveWorker{"IgnoresConnectionClose", kRawWorker}),
                         [](const ::testing::TestParamInfo<NaiveWorker>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace bulkhead::e2e
