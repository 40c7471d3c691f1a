// SPDX-License-Identifier: MIT
// RequestParser (http/request_parser.h): requests as curl, Python and hostile clients send them,
// fed whole and byte by byte; every refusal with its status code.
#include "http/request_parser.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace bulkhead::http {
namespace {

using ::testing::HasSubstr;

// One request as the parser delivered it.
struct Parsed {
  RequestHead head;
  std::string body;
};

// What a whole input gives: the requests completed, and the error that ended it (status 0: none).
struct Outcome {
  std::vector<Parsed> requests;
  int heads = 0;
  Error error{0, ""};
};

// Feeds `input` in pieces of `step` bytes (0: whole), driving the parser to its events.
Outcome Feed(std::string_view input, size_t step = 0, Limits limits = Limits()) {
  RequestParser parser(limits);
  Outcome out;
  size_t at = 0;
  while (at < input.size()) {
    size_t piece = step == 0 ? input.size() - at : std::min(step, input.size() - at);
    std::string_view data = input.substr(at, piece);
    while (true) {
      size_t consumed = 0;
      RequestParser::Event event = parser.Parse(data, &consumed);
      at += consumed;
      data.remove_prefix(consumed);
      if (event == RequestParser::Event::kError) {
        out.error = parser.error();
        return out;
      }
      if (event == RequestParser::Event::kHead) ++out.heads;
      if (event == RequestParser::Event::kMessage) {
        out.requests.push_back({parser.head(), parser.body()});
      }
      if (event == RequestParser::Event::kNeedMore) break;
    }
  }
  if (parser.Finish() == RequestParser::Event::kError) out.error = parser.error();
  return out;
}

constexpr std::string_view kCurlPost =
    "POST /charge?x=1 HTTP/1.1\r\n"
    "Host: 127.0.0.1:8081\r\n"
    "User-Agent: curl/7.88.1\r\n"
    "Accept: */*\r\n"
    "Content-Type: application/json\r\n"
    "Content-Length: 13\r\n"
    "\r\n"
    "{\"order\": 42}";

TEST(RequestParser, CurlPostWholeAndByteByByte) {
  for (size_t step : {size_t{0}, size_t{1}, size_t{7}}) {
    Outcome out = Feed(kCurlPost, step);
    ASSERT_EQ(out.error.status, 0) << step << ": " << out.error.reason;
    ASSERT_EQ(out.requests.size(), 1u) << step;
    EXPECT_EQ(out.heads, 1);
    const RequestHead& head = out.requests[0].head;
    EXPECT_EQ(head.method, "POST");
    EXPECT_EQ(head.target, "/charge?x=1");
    EXPECT_EQ(head.version_minor, 1);
    EXPECT_EQ(head.headers.size(), 5u);
    EXPECT_EQ(head.Find("content-type"), "application/json");
    EXPECT_EQ(head.content_length, 13u);
    EXPECT_FALSE(head.chunked);
    EXPECT_TRUE(head.keep_alive);
    EXPECT_EQ(out.requests[0].body, "{\"order\": 42}");
  }
}

TEST(RequestParser, PipelinedRequestsComeOutInOrder) {
  std::string input =
      "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
      "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi"
      "GET /c HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  for (size_t step : {size_t{0}, size_t{1}, size_t{5}}) {
    Outcome out = Feed(input, step);
    ASSERT_EQ(out.error.status, 0) << out.error.reason;
    ASSERT_EQ(out.requests.size(), 3u);
    EXPECT_EQ(out.requests[0].head.target, "/a");
    EXPECT_EQ(out.requests[1].head.target, "/b");
    EXPECT_EQ(out.requests[1].body, "hi");
    EXPECT_EQ(out.requests[2].head.target, "/c");
    EXPECT_TRUE(out.requests[1].head.keep_alive);
    EXPECT_FALSE(out.requests[2].head.keep_alive);
  }
}

// RFC 9110 section 7.8: a server may ignore Upgrade. An offer of h2c (curl --http2, Python's
// httpx with http2) or anything but WebSocket is served as HTTP/1.1, and the request boundaries
// stay those of HTTP/1.1: a body is read as the body, the next request as the next.
TEST(RequestParser, AnUpgradeOtherThanWebSocketIsIgnored) {
  const std::string input =
      "GET /a HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\n"
      "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n"
      "POST /b HTTP/1.1\r\nHost: x\r\nConnection: upgrade\r\nUpgrade: TLS/1.2, h2c\r\n"
      "Content-Length: 2\r\n\r\nhi"
      "GET /c HTTP/1.1\r\nHost: x\r\n\r\n";
  for (size_t step : {size_t{0}, size_t{1}, size_t{9}}) {
    Outcome out = Feed(input, step);
    ASSERT_EQ(out.error.status, 0) << step << ": " << out.error.reason;
    ASSERT_EQ(out.requests.size(), 3u) << step;
    EXPECT_EQ(out.requests[0].head.target, "/a");
    EXPECT_EQ(out.requests[0].body, "");
    EXPECT_EQ(out.requests[1].head.target, "/b");
    EXPECT_EQ(out.requests[1].body, "hi");
    EXPECT_EQ(out.requests[2].head.target, "/c");
  }
}

TEST(RequestParser, ChunkedBodyIsDecoded) {
  std::string input =
      "POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nTrailer-Field: t\r\n\r\n";
  for (size_t step : {size_t{0}, size_t{1}}) {
    Outcome out = Feed(input, step);
    ASSERT_EQ(out.error.status, 0) << out.error.reason;
    ASSERT_EQ(out.requests.size(), 1u);
    EXPECT_TRUE(out.requests[0].head.chunked);
    EXPECT_EQ(out.requests[0].body, "hello world");
  }
}

TEST(RequestParser, HeadComesBeforeTheBodyForExpectContinue) {
  RequestParser parser{Limits()};
  std::string head =
      "PUT /f HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n";
  size_t consumed = 0;
  ASSERT_EQ(parser.Parse(head, &consumed), RequestParser::Event::kHead);
  EXPECT_TRUE(parser.head().expect_continue);
  std::string_view rest = std::string_view(head).substr(consumed);
  // The head's last byte may be left for the next call; the body has not come yet.
  ASSERT_EQ(parser.Parse(rest, &consumed), RequestParser::Event::kNeedMore);
  ASSERT_EQ(parser.Parse("abc", &consumed), RequestParser::Event::kMessage);
  EXPECT_EQ(consumed, 3u);
  EXPECT_EQ(parser.body(), "abc");
}

TEST(RequestParser, Http10KeepAliveOnlyWhenAsked) {
  Outcome plain = Feed("GET / HTTP/1.0\r\n\r\n");
  ASSERT_EQ(plain.requests.size(), 1u) << plain.error.reason;
  EXPECT_FALSE(plain.requests[0].head.keep_alive);
  Outcome kept = Feed("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  ASSERT_EQ(kept.requests.size(), 1u);
  EXPECT_TRUE(kept.requests[0].head.keep_alive);
}

// RFC 9110 section 2.5: HTTP/1.x above 1.1 is taken as HTTP/1.1 (Host required, persistent).
TEST(RequestParser, Http12IsTakenAsHttp11) {
  for (size_t step : {size_t{0}, size_t{1}}) {
    Outcome out = Feed("GET /a HTTP/1.2\r\nHost: x\r\n\r\n", step);
    ASSERT_EQ(out.requests.size(), 1u) << out.error.reason;
    EXPECT_EQ(out.requests[0].head.version_major, 1);
    EXPECT_EQ(out.requests[0].head.version_minor, 1);
    EXPECT_EQ(out.requests[0].head.target, "/a");
    EXPECT_TRUE(out.requests[0].head.keep_alive);
    EXPECT_EQ(Feed("GET / HTTP/1.9\r\n\r\n", step).error.status, 400) << "no Host, as 1.1";
  }
  Outcome http10 = Feed("GET / HTTP/1.0\r\n\r\n", 1);
  ASSERT_EQ(http10.requests.size(), 1u) << http10.error.reason;
  EXPECT_EQ(http10.requests[0].head.version_minor, 0);
}

struct Refusal {
  const char* name;
  std::string input;
  int status;
  const char* reason;
};

// Each refusal, fed whole and in pieces of each of `steps` bytes, is refused with its status and a
// reason that holds its `reason`, and completes no request.
void ExpectEachRefused(const std::vector<Refusal>& refusals, const std::vector<size_t>& steps) {
  for (const Refusal& r : refusals) {
    for (size_t step : steps) {
      Outcome out = Feed(r.input, step);
      EXPECT_EQ(out.error.status, r.status)
          << r.name << " step " << step << ": " << out.error.reason;
      EXPECT_THAT(out.error.reason, HasSubstr(r.reason)) << r.name;
      EXPECT_TRUE(out.requests.empty()) << r.name << " step " << step;
    }
  }
}

// Valid Host values (RFC 9110 section 4.2.3: uri-host [":" port]) pass as sent.
TEST(RequestParser, TakesEveryFormOfHost) {
  for (const char* host : {"x", "127.0.0.1", "a-b.example:8080", "[::1]", "[::1]:8081", "[v1.fe]",
                           "a%41b", "a:", "_svc.example~!$&'()*+,;="}) {
    Outcome out = Feed(std::string("GET / HTTP/1.1\r\nHost: ") + host + "\r\n\r\n");
    ASSERT_EQ(out.requests.size(), 1u) << host << ": " << out.error.reason;
    EXPECT_EQ(out.requests[0].head.Find("Host"), std::optional<std::string_view>(host));
  }
}

// RFC 9112 section 3.2.2: with an absolute-form target the server ignores Host and uses the
// target's authority; the worker gets that one as Host, and the target as sent.
TEST(RequestParser, AnAbsoluteFormTargetsAuthorityReplacesHost) {
  for (size_t step : {size_t{0}, size_t{1}}) {
    Outcome out = Feed(
        "GET HTTP://b.example:81/p?q=1 HTTP/1.1\r\nHost: a.example\r\nX: 1\r\n\r\n"
        "GET http://c.example?x HTTP/1.0\r\n\r\n",
        step);
    ASSERT_EQ(out.requests.size(), 2u) << out.error.reason;
    EXPECT_EQ(out.requests[0].head.target, "HTTP://b.example:81/p?q=1");
    EXPECT_EQ(out.requests[0].head.Find("Host"), std::optional<std::string_view>("b.example:81"));
    EXPECT_EQ(out.requests[0].head.headers.size(), 2u);
    // HTTP/1.0 without Host: the authority is added as Host.
    EXPECT_EQ(out.requests[1].head.Find("Host"), std::optional<std::string_view>("c.example"));
  }
}

// Request smuggling and malformed requests (RFC 9112 sections 3.2, 5.2, 6.1, 6.3, 11.2): each is
// refused with its status, whole or split into single bytes.
TEST(RequestParser, RefusesWhatCouldBeSmuggledOrIsMalformed) {
  const std::vector<Refusal> refusals = {
      {"CL and TE",
       "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400,
       "Content-Length"},
      {"TE and CL",
       "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", 400,
       "Content-Length"},
      {"duplicate CL",
       "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc", 400,
       "Content-Length"},
      {"differing CL",
       "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400,
       "Content-Length"},
      {"bad CL", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3x\r\n\r\nabc", 400,
       "Content-Length"},
      {"negative CL", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400,
       "Content-Length"},
      {"bad chunk size",
       "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n0\r\n\r\n", 400,
       "chunk size"},
      // http-parser calls an overflowing chunk size a bad Content-Length: its own reason here.
      {"chunk size over 2^64",
       "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
       "fffffffffffffffff\r\n",
       400, "chunk size too large"},
      {"obs-fold", "GET / HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n  folded\r\n\r\n", 400, "obs-fold"},
      {"no Host", "GET / HTTP/1.1\r\nAccept: */*\r\n\r\n", 400, "Host"},
      {"two Hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "Host"},
      // RFC 9112 section 3.2, RFC 9110 sections 4.2.3, 4.2.4 and 7.2: Host is host[:port].
      {"two Hosts in 1.0", "GET / HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n", 400, "Host"},
      {"space in Host", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400, "bad Host"},
      {"userinfo in Host", "GET / HTTP/1.1\r\nHost: a@b\r\n\r\n", 400, "bad Host"},
      {"empty Host", "GET / HTTP/1.1\r\nHost: \r\n\r\n", 400, "empty Host"},
      {"empty Host in 1.0", "GET / HTTP/1.0\r\nHost:\r\n\r\n", 400, "empty Host"},
      {"port only", "GET / HTTP/1.1\r\nHost: :80\r\n\r\n", 400, "bad Host"},
      {"bad port", "GET / HTTP/1.1\r\nHost: a:8x\r\n\r\n", 400, "bad Host"},
      {"two colons", "GET / HTTP/1.1\r\nHost: a:1:2\r\n\r\n", 400, "bad Host"},
      {"open bracket", "GET / HTTP/1.1\r\nHost: [::1\r\n\r\n", 400, "bad Host"},
      {"bad escape", "GET / HTTP/1.1\r\nHost: a%4\r\n\r\n", 400, "bad Host"},
      {"slash in Host", "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", 400, "bad Host"},
      {"userinfo in target", "GET http://u@a/ HTTP/1.1\r\nHost: a\r\n\r\n", 400, "authority"},
      {"no host in target", "GET http:///x HTTP/1.1\r\nHost: a\r\n\r\n", 400, "authority"},
      {"ftp target", "GET ftp://a/x HTTP/1.1\r\nHost: a\r\n\r\n", 400, "http or https"},
      {"TE in 1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400,
       "HTTP/1.0"},
      {"gzip TE", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501,
       "Transfer-Encoding"},
      {"gzip, chunked TE", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
       501, "Transfer-Encoding"},
      {"chunked twice in one field",
       "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, Chunked\r\n\r\n0\r\n\r\n", 400,
       "chunked more than once"},
      {"chunked in two fields",
       "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
       "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
       400, "chunked more than once"},
      {"Upgrade", "GET / HTTP/1.1\r\nHost: x\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n",
       501, "WebSocket"},
      {"Upgrade among others",
       "GET / HTTP/1.1\r\nHost: x\r\nConnection: upgrade\r\nUpgrade: h2c, WebSocket/13\r\n\r\n",
       501, "WebSocket"},
      {"CONNECT", "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n", 501,
       "CONNECT"},
      {"odd Expect", "GET / HTTP/1.1\r\nHost: x\r\nExpect: teapot\r\n\r\n", 417, "Expect"},
      {"bad method", "G@T / HTTP/1.1\r\nHost: x\r\n\r\n", 400, ""},
      {"no method at all", "{GET / HTTP/1.1\r\nHost: x\r\n\r\n", 400, ""},
      {"control byte in method", "GE\x01 / HTTP/1.1\r\nHost: x\r\n\r\n", 400, ""},
      // RFC 9110 section 9.1: a method (a token) the parser does not know is not implemented.
      {"unknown method", "BREW /pot HTTP/1.1\r\nHost: x\r\n\r\n", 501, "method not implemented"},
      {"unknown longer method", "GETX / HTTP/1.1\r\nHost: x\r\n\r\n", 501, "method"},
      {"lower-case method", "get / HTTP/1.1\r\nHost: x\r\n\r\n", 501, "method"},
      {"a token but no request line", "BAD\r\n\r\n", 400, "bad method"},
      {"a method too long", std::string(70, 'Q') + " / HTTP/1.1\r\nHost: x\r\n\r\n", 400,
       "bad method"},
      {"bad version", "GET / HTTP/9.9x\r\nHost: x\r\n\r\n", 400, ""},
      // RFC 9112 section 3: a request line has a version; HTTP/0.9's "GET /x" is not spoken.
      {"no version", "GET /x\r\n\r\n", 400, "no HTTP version"},
      {"no version, bare LF", "GET /x\n\n", 400, "no HTTP version"},
      {"no version, then fields", "GET /x\r\nHost: x\r\n\r\n", 400, "no HTTP version"},
      // An HTTP/0.9 client sends the one line and waits: refused at its end, not at a timeout.
      {"no version, one line", "GET /h09\r\n", 400, "no HTTP version"},
      // RFC 9110 section 15.6.6: a major version other than 1.
      {"HTTP/2.0", "GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505, "HTTP/2.0 is not supported"},
      {"HTTP/3.0", "GET / HTTP/3.0\r\nHost: x\r\n\r\n", 505, "HTTP/3.0"},
      {"HTTP/0.9 written", "GET / HTTP/0.9\r\n\r\n", 505, "HTTP/0.9 is not supported"},
      // The version outranks a method http-parser does not know: HTTP/2's prior-knowledge preface
      // (RFC 9113 section 3.4) is refused for its version, and so is any other method's line.
      {"HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505,
       "HTTP/2.0 is not supported (HTTP/1.0 and HTTP/1.1 are)"},
      {"unknown method, HTTP/3.0", "BREW /pot HTTP/3.0\r\nHost: x\r\n\r\n", 505,
       "HTTP/3.0 is not supported"},
      {"unknown method, HTTP/10.0", "BREW / HTTP/10.0\r\n\r\n", 505, "HTTP/10.0"},
      {"unknown method, bare LF", "BREW / HTTP/2.0\n\n", 505, "HTTP/2.0"},
      {"unknown method, HTTP/0.9 written", "BREW / HTTP/0.9\r\n\r\n", 505, "HTTP/0.9"},
      {"PRI in HTTP/1.1", "PRI * HTTP/1.1\r\nHost: x\r\n\r\n", 501, "method not implemented"},
      {"unknown method, no version", "BREW /pot\r\n\r\n", 501, "method not implemented"},
      {"unknown method, bad version", "BREW / HTTP/2.x\r\n\r\n", 501, "method not implemented"},
      {"unknown method, version too long", "BREW / HTTP/2222.0\r\n\r\n", 501, "method"},
      {"space in name", "GET / HTTP/1.1\r\nHost: x\r\nBad Name: 1\r\n\r\n", 400, "field name"},
      {"space before colon", "GET / HTTP/1.1\r\nHost: x\r\nName : 1\r\n\r\n", 400, ""},
      {"NUL in value",
       std::string("GET / HTTP/1.1\r\nHost: x\r\nA: 1\0"
                   "2\r\n\r\n",
                   35),
       400, ""},
      {"cut short", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc", 400,
       "middle of a request"},
  };
  ExpectEachRefused(refusals, {0, 1});
}

// RFC 9110 section 6.5.1: trailer fields are never merged into the header section, whatever the
// field (one that would frame, route or repeat the head's) and whether the trailer came in the same
// read as the head (the request then goes to the worker whole, with head()) or later.
TEST(RequestParser, TrailerFieldsAreDroppedNeverMergedIntoTheHead) {
  const std::string head =
      "POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nX-Own: 1\r\n\r\n";
  const std::string trailers =
      "Host: evil\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n"
      "X-Own: 2\r\nX-Anything: 3\r\n\r\n";
  const std::string input =
      head + "5\r\nhello\r\n0\r\n" + trailers + "GET /next HTTP/1.1\r\nHost: y\r\n\r\n";
  for (size_t step : {size_t{0}, size_t{1}, size_t{7}}) {
    Outcome out = Feed(input, step);
    ASSERT_EQ(out.error.status, 0) << step << ": " << out.error.reason;
    ASSERT_EQ(out.requests.size(), 2u) << step;
    const RequestHead& first = out.requests[0].head;
    ASSERT_EQ(first.headers.size(), 3u) << step;
    EXPECT_EQ(first.headers[0].name, "Host");
    EXPECT_EQ(first.headers[0].value, "x");
    EXPECT_EQ(first.headers[2].value, "1");
    EXPECT_TRUE(first.chunked);
    EXPECT_TRUE(first.keep_alive) << "a trailer's Connection: close changes nothing";
    EXPECT_EQ(out.requests[0].body, "hello");
    // The next request on the connection is read as the client framed it.
    EXPECT_EQ(out.requests[1].head.target, "/next");
    EXPECT_EQ(out.requests[1].head.Find("Host"), "y");
  }
}

TEST(RequestParser, TrailerSectionIsBoundedAsAHeadIs) {
  Limits limits;
  limits.max_head_bytes = 128;
  const std::string input =
      "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-Big: " +
      std::string(200, 'a') + "\r\n\r\n";
  for (size_t step : {size_t{0}, size_t{1}}) {
    Outcome out = Feed(input, step, limits);
    EXPECT_EQ(out.error.status, 431) << step << ": " << out.error.reason;
    EXPECT_THAT(out.error.reason, HasSubstr("trailer section"));
  }
}

// RFC 9112 section 2.2: a bare CR (not followed by LF) is invalid wherever it is in the head or
// the chunked framing; http-parser without HTTP_PARSER_STRICT takes the byte after it as the LF.
// RFC 9112 section 7.1: chunk lines end with CRLF and each chunk's data is followed by CRLF.
TEST(RequestParser, BareCrAndBrokenChunkLinesAreRefused) {
  const std::string chunked_head =
      "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::vector<Refusal> refusals = {
      {"before the request line", "\rGET / HTTP/1.1\r\nHost: x\r\n\r\n", 400, "bare CR"},
      {"ending a field line", "GET / HTTP/1.1\r\nHost: x\rX-A: 1\r\n\r\n", 400, ""},
      {"ending the head", "GET / HTTP/1.1\r\nHost: x\r\n\rX", 400, "bare CR"},
      {"ending the head, body follows", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\rXok",
       400, "bare CR"},
      {"after an empty value", "GET / HTTP/1.1\r\nHost: x\r\nX-A:\rX-B: 1\r\n\r\n", 400, "bare CR"},
      {"in a chunk size line", chunked_head + "5\rXhello\r\n0\r\n\r\n", 400, "bare CR"},
      {"in a chunk extension", chunked_head + "5;a=b\rXhello\r\n0\r\n\r\n", 400, "bare CR"},
      {"after chunk data", chunked_head + "5\r\nhello\rX0\r\n\r\n", 400, "bare CR"},
      {"in the last chunk's line", chunked_head + "0\rX\r\n", 400, "bare CR"},
      {"in a trailer", chunked_head + "0\r\nX-T:\rX-U: 2\r\n\r\n", 400, "bare CR"},
      {"ending the trailers", chunked_head + "0\r\n\rX", 400, "bare CR"},
      {"LF in a chunk extension", chunked_head + "5;a\nb\r\nhello\r\n0\r\n\r\n", 400, "CRLF"},
      {"bare LF ending a chunk line", chunked_head + "5;a\nhello\r\n0\r\n\r\n", 400, "CRLF"},
      {"bare LF ending a trailer", chunked_head + "0\r\nX-T: 1\n\r\n", 400, "CRLF"},
      {"no CRLF after chunk data", chunked_head + "5\r\nhelloXY0\r\n\r\n", 400,
       "chunk data not followed by CRLF"},
      {"obs-fold in a trailer", chunked_head + "0\r\nX-T: 1\r\n folded\r\n\r\n", 400, "obs-fold"},
  };
  ExpectEachRefused(refusals, {0, 1, 3});
}

// Body data is never framing: a CR, a LF, a bare CR or a whole request in it changes nothing.
TEST(RequestParser, BodyDataIsNeverCheckedAsFraming) {
  const std::string data = "a\rb\nc\r\n\rX\n GET / HTTP/1.1\r\n\r\n";
  const std::string chunked = "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
                              std::string(1, "0123456789abcdef"[data.size() / 16]) +
                              std::string(1, "0123456789abcdef"[data.size() % 16]) + "\r\n" + data +
                              "\r\n0\r\n\r\n";
  const std::string sized =
      "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(data.size()) + "\r\n\r\n" +
      data;
  for (const std::string& input : {chunked, sized}) {
    for (size_t step : {size_t{0}, size_t{1}, size_t{3}}) {
      Outcome out = Feed(input, step);
      ASSERT_EQ(out.error.status, 0) << out.error.reason;
      ASSERT_EQ(out.requests.size(), 1u);
      EXPECT_EQ(out.requests[0].body, data);
    }
  }
}

// The head is handed out (kHead) only once all of it was checked, its last byte included.
TEST(RequestParser, AHeadEndingInABareCrIsNeverHandedOut) {
  RequestParser parser{Limits()};
  size_t consumed = 0;
  EXPECT_EQ(parser.Parse("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\rX", &consumed),
            RequestParser::Event::kError);
  EXPECT_THAT(parser.error().reason, HasSubstr("bare CR"));
}

TEST(RequestParser, LineEndingsWithoutCrStayTakenInTheHead) {
  // RFC 9112 section 2.2 lets a recipient take a bare LF as a line's end; curl never sends one,
  // but HAProxy, nginx and http-parser take it.
  for (size_t step : {size_t{0}, size_t{1}}) {
    Outcome out =
        Feed("GET /a HTTP/1.1\nHost: x\nX-A: 1\n\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n", step);
    ASSERT_EQ(out.error.status, 0) << out.error.reason;
    ASSERT_EQ(out.requests.size(), 2u);
    EXPECT_EQ(out.requests[0].head.Find("X-A"), "1");
  }
}

// RFC 9112 section 3.2: the request-target holds no whitespace (a TAB included), no control
// character; bytes above 0x7f and '#' are refused as HAProxy refuses them.
TEST(RequestParser, ForbiddenBytesInTheTargetAreRefused) {
  const std::vector<Refusal> refusals = {
      {"TAB", "GET /a\tb HTTP/1.1\r\nHost: x\r\n\r\n", 400, "request-target"},
      {"TAB at the end", "GET /a\t HTTP/1.1\r\nHost: x\r\n\r\n", 400, "request-target"},
      {"form feed", "GET /a\fb HTTP/1.1\r\nHost: x\r\n\r\n", 400, "request-target"},
      {"byte above 0x7f", "GET /caf\xc3\xa9 HTTP/1.1\r\nHost: x\r\n\r\n", 400, "request-target"},
      {"fragment", "GET /a#b HTTP/1.1\r\nHost: x\r\n\r\n", 400, "request-target"},
      {"TAB in an absolute form", "GET http://x/a\tb HTTP/1.1\r\nHost: x\r\n\r\n", 400,
       "request-target"},
  };
  ExpectEachRefused(refusals, {0, 1});
  // What clients send unencoded and front proxies take goes through as sent.
  Outcome taken = Feed("GET /a?q={\"x\"|y}&z=<^`>\\ HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_EQ(taken.requests.size(), 1u) << taken.error.reason;
  EXPECT_EQ(taken.requests[0].head.target, "/a?q={\"x\"|y}&z=<^`>\\");
}

// RFC 9110 section 9.3: GET, HEAD, DELETE, OPTIONS and TRACE give content no meaning; one that
// carries a body is marked, whatever the framing.
TEST(RequestParser, ABodyOnAMethodWithoutBodySemanticsIsMarked) {
  struct Case {
    std::string input;
    bool marked;
  };
  const std::vector<Case> cases = {
      {"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc", true},
      {"GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
       true},
      {"GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", true},
      {"HEAD / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\na", true},
      {"DELETE /r HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\na", true},
      {"OPTIONS * HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\na", true},
      {"TRACE / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\na", true},
      {"GET / HTTP/1.1\r\nHost: x\r\n\r\n", false},
      {"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", false},
      {"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\na", false},
      {"PUT / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\na", false},
      {"PATCH / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\na", false},
  };
  for (const Case& c : cases) {
    Outcome out = Feed(c.input);
    ASSERT_EQ(out.requests.size(), 1u) << c.input << ": " << out.error.reason;
    EXPECT_EQ(out.requests[0].head.body_on_bodiless_method, c.marked) << c.input;
  }
}

TEST(RequestParser, LimitsOnHeadAndBody) {
  Limits limits;
  limits.max_head_bytes = 64;
  limits.max_headers = 3;
  limits.max_body_bytes = 4;
  Outcome long_head =
      Feed("GET / HTTP/1.1\r\nHost: x\r\nX-Long: " + std::string(100, 'a') + "\r\n\r\n", 0, limits);
  EXPECT_EQ(long_head.error.status, 431) << long_head.error.reason;
  Outcome long_head_bytes =
      Feed("GET / HTTP/1.1\r\nHost: x\r\nX-Long: " + std::string(100, 'a'), 1, limits);
  EXPECT_EQ(long_head_bytes.error.status, 431) << "refused before the head ends";
  // A request-target longer than a head may be is 414 (URI Too Long, RFC 9110 section 15.5.15),
  // whether the request line arrives whole or the head overflows before it ends.
  const std::string long_target = "GET /" + std::string(100, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n";
  for (size_t step : {size_t{0}, size_t{1}, size_t{7}}) {
    Outcome out = Feed(long_target, step, limits);
    EXPECT_EQ(out.error.status, 414) << step << ": " << out.error.reason;
    EXPECT_THAT(out.error.reason, HasSubstr("request-target over 64 bytes")) << step;
  }
  // A target within the limit whose request line is not: 414 too, however the line arrives,
  // whether the limit falls in its target or in its version, and whether fields follow in the
  // same read (the line is judged by its own length then).
  for (size_t target : {size_t{50}, size_t{53}, size_t{56}, size_t{62}}) {
    const std::string long_line =
        "GET /" + std::string(target, 'a') + " HTTP/1.1\r\nHost: x\r\nA: 1\r\n\r\n";
    for (size_t step : {size_t{0}, size_t{1}, size_t{3}, size_t{7}, size_t{60}}) {
      Outcome out = Feed(long_line, step, limits);
      EXPECT_EQ(out.error.status, 414) << target << " step " << step << ": " << out.error.reason;
    }
  }
  // A target within the limit and fields that make the head too long: 431.
  Outcome long_fields =
      Feed("GET /" + std::string(40, 'a') + " HTTP/1.1\r\nHost: x\r\nX-A: " + std::string(30, 'b') +
               "\r\n\r\n",
           1, limits);
  EXPECT_EQ(long_fields.error.status, 431) << long_fields.error.reason;
  Outcome many = Feed("GET / HTTP/1.1\r\nHost: x\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", 0, limits);
  EXPECT_EQ(many.error.status, 431) << many.error.reason;
  Outcome declared = Feed("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n", 0, limits);
  EXPECT_EQ(declared.error.status, 413) << "known from the head, before the body is read";
  Outcome chunked = Feed(
      "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: "
      "chunked\r\n\r\n3\r\nabc\r\n3\r\ndef\r\n0\r\n\r\n",
      0, limits);
  EXPECT_EQ(chunked.error.status, 413) << chunked.error.reason;
  Outcome fits = Feed("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nabcd", 0, limits);
  ASSERT_EQ(fits.requests.size(), 1u) << fits.error.reason;
}

TEST(RequestParser, AStreamedBodyTakenAsItComesStillCountsAgainstTheLimit) {
  Limits limits;
  limits.max_body_bytes = 5;
  RequestParser parser(limits);
  size_t consumed = 0;
  std::string_view input =
      "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n";
  ASSERT_EQ(parser.Parse(input, &consumed), RequestParser::Event::kHead);
  input.remove_prefix(consumed);
  ASSERT_EQ(parser.Parse(input, &consumed), RequestParser::Event::kNeedMore);
  EXPECT_EQ(consumed, input.size());
  EXPECT_EQ(parser.body(), "abc");
  parser.body().clear();  // sent on to the worker
  EXPECT_EQ(parser.Parse("3\r\ndef\r\n", &consumed), RequestParser::Event::kError);
  EXPECT_EQ(parser.error().status, 413) << parser.error().reason;
}

TEST(RequestParser, AfterAnErrorNothingMoreIsParsed) {
  RequestParser parser{Limits()};
  size_t consumed = 0;
  ASSERT_EQ(parser.Parse("GET / HTTP/1.1\r\n\r\n", &consumed), RequestParser::Event::kError);
  EXPECT_EQ(parser.Parse("GET / HTTP/1.1\r\nHost: x\r\n\r\n", &consumed),
            RequestParser::Event::kError);
  EXPECT_EQ(consumed, 0u);
}

}  // namespace
}  // namespace bulkhead::http
