// SPDX-License-Identifier: MIT
// A request on its way to the worker (http/forward.h): hop-by-hop fields gone, the client named,
// a request id, the body framed with Content-Length.
#include "http/forward.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace bulkhead::http {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The head and body of the one request in `raw`.
std::pair<RequestHead, std::string> ParseOne(std::string_view raw) {
  RequestParser parser{Limits()};
  size_t consumed = 0;
  while (true) {
    RequestParser::Event event = parser.Parse(raw, &consumed);
    raw.remove_prefix(consumed);
    EXPECT_NE(event, RequestParser::Event::kError) << parser.error().reason;
    if (event == RequestParser::Event::kMessage) return {parser.head(), parser.body()};
    if (event == RequestParser::Event::kNeedMore || event == RequestParser::Event::kError) {
      ADD_FAILURE() << "no complete request";
      return {};
    }
  }
}

TEST(Forward, HopByHopFieldsAreRemovedAndTheBodyIsFramedAnew) {
  auto [head, body] = ParseOne(
      "POST /charge HTTP/1.1\r\n"
      "Host: payments\r\n"
      "Connection: keep-alive, X-Private\r\n"
      "Keep-Alive: timeout=5\r\n"
      "X-Private: secret-to-this-hop\r\n"
      "Proxy-Authorization: Basic xyz\r\n"
      "TE: trailers\r\n"
      "Transfer-Encoding: chunked\r\n"
      "X-Kept: yes\r\n"
      "\r\n"
      "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n");
  std::string out;
  AppendForwardRequest(&out, head, body, ForwardOptions{.request_id = "r-1"});
  EXPECT_EQ(out,
            "POST /charge HTTP/1.1\r\n"
            "Host: payments\r\n"
            "X-Kept: yes\r\n"
            "X-Request-Id: r-1\r\n"
            "Content-Length: 5\r\n"
            "\r\n"
            "abcde");
}

// An HTTP/1.0 request may come without Host; it goes out as HTTP/1.1, which requires one (RFC 9112
// section 3.2): the Host given is added first. A Host the client sent is kept as sent.
TEST(Forward, RequestWithoutHostGetsTheOneGiven) {
  auto [head, body] = ParseOne("GET /items HTTP/1.0\r\nAccept: */*\r\n\r\n");
  std::string out;
  AppendForwardRequest(&out, head, body, ForwardOptions{.request_id = "r-1", .host = "catalog"});
  EXPECT_EQ(out,
            "GET /items HTTP/1.1\r\n"
            "Host: catalog\r\n"
            "Accept: */*\r\n"
            "X-Request-Id: r-1\r\n"
            "\r\n");

  auto [with_host, with_host_body] =
      ParseOne("GET /items HTTP/1.0\r\nAccept: */*\r\nhost: example.com\r\n\r\n");
  std::string kept;
  AppendForwardRequest(&kept, with_host, with_host_body, ForwardOptions{.host = "catalog"});
  EXPECT_EQ(kept, "GET /items HTTP/1.1\r\nAccept: */*\r\nhost: example.com\r\n\r\n");
}

TEST(Forward, AStreamedBodyKeepsItsContentLengthOrGoesOutChunked) {
  auto [chunked, unused] = ParseOne(
      "PUT /blob HTTP/1.1\r\nHost: store\r\nTransfer-Encoding: chunked\r\n"
      "Expect: 100-continue\r\n\r\n0\r\n\r\n");
  std::string out;
  AppendForwardHeadStreamed(&out, chunked, ForwardOptions{.request_id = "r-2"});
  AppendChunk(&out, "");
  AppendChunk(&out, std::string(300, 'x'));
  out.append(kLastChunk);
  EXPECT_EQ(out,
            "PUT /blob HTTP/1.1\r\nHost: store\r\nX-Request-Id: r-2\r\n"
            "Transfer-Encoding: chunked\r\n\r\n12c\r\n" +
                std::string(300, 'x') + "\r\n0\r\n\r\n");
  auto [sized, body] =
      ParseOne("POST /blob HTTP/1.1\r\nHost: store\r\nContent-Length: 3\r\n\r\nabc");
  out.clear();
  AppendForwardHeadStreamed(&out, sized, ForwardOptions{});
  EXPECT_EQ(out, "POST /blob HTTP/1.1\r\nHost: store\r\nContent-Length: 3\r\n\r\n");
}

// A GET that carries a body: a worker that never reads it would take it as its next request, so
// the worker is asked to close the connection after its answer, whole or streamed.
TEST(Forward, ABodyOnAGetAsksTheWorkerToCloseTheConnection) {
  auto [get, body] = ParseOne(
      "GET /search HTTP/1.1\r\nHost: es\r\nConnection: keep-alive\r\nContent-Length: 27\r\n\r\n"
      "GET /admin HTTP/1.1\r\nA: b\r\n");
  std::string out;
  AppendForwardRequest(&out, get, body, ForwardOptions{});
  EXPECT_EQ(out,
            "GET /search HTTP/1.1\r\nHost: es\r\nConnection: close\r\nContent-Length: 27\r\n\r\n"
            "GET /admin HTTP/1.1\r\nA: b\r\n");
  out.clear();
  AppendForwardHeadStreamed(&out, get, ForwardOptions{});
  EXPECT_EQ(out,
            "GET /search HTTP/1.1\r\nHost: es\r\nConnection: close\r\nContent-Length: 27\r\n\r\n");

  auto [plain, none] = ParseOne("GET /search HTTP/1.1\r\nHost: es\r\n\r\n");
  out.clear();
  AppendForwardRequest(&out, plain, none, ForwardOptions{});
  EXPECT_THAT(out, Not(HasSubstr("Connection")));
}

TEST(Forward, TrailerFieldsNeverReachTheWorker) {
  auto [head, body] = ParseOne(
      "POST /up HTTP/1.1\r\nHost: payments\r\nTransfer-Encoding: chunked\r\n\r\n"
      "2\r\nok\r\n0\r\nHost: evil\r\nContent-Length: 99\r\nX-Trailer: t\r\n\r\n");
  std::string out;
  AppendForwardRequest(&out, head, body, ForwardOptions{});
  EXPECT_EQ(out, "POST /up HTTP/1.1\r\nHost: payments\r\nContent-Length: 2\r\n\r\nok");
}

TEST(Forward, TcpClientsAreNamedAfterWhatEarlierProxiesSaid) {
  auto [head, body] = ParseOne(
      "GET /items HTTP/1.1\r\nHost: catalog\r\nX-Forwarded-For: 198.51.100.1\r\n"
      "Forwarded: for=198.51.100.1\r\nX-Request-Id: abc\r\n\r\n");
  std::string out;
  AppendForwardRequest(&out, head, body,
                       ForwardOptions{.client_address = "203.0.113.7", .request_id = "r-2"});
  EXPECT_THAT(out, HasSubstr("\r\nX-Forwarded-For: 198.51.100.1, 203.0.113.7\r\n"));
  EXPECT_THAT(out, HasSubstr("\r\nForwarded: for=198.51.100.1, for=203.0.113.7\r\n"));
  EXPECT_THAT(out, HasSubstr("\r\nX-Request-Id: abc\r\n"));  // the client's id is kept
  EXPECT_THAT(out, Not(HasSubstr("r-2")));
  EXPECT_THAT(out, Not(HasSubstr("Content-Length")));  // a GET without a body gets none
  EXPECT_THAT(out, ::testing::EndsWith("\r\n\r\n"));

  std::string v6;
  AppendForwardRequest(&v6, head, body, ForwardOptions{.client_address = "2001:db8::1"});
  EXPECT_THAT(v6, HasSubstr("\r\nForwarded: for=198.51.100.1, for=\"[2001:db8::1]\"\r\n"));
}

TEST(Forward, SeveralForwardingFieldsAreJoinedInTheirOrder) {
  auto [head, body] = ParseOne(
      "GET / HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 198.51.100.1\r\nForwarded: for=a\r\n"
      "X-Forwarded-For: 198.51.100.2, 198.51.100.3\r\nForwarded: for=b\r\n\r\n");
  std::string out;
  AppendForwardRequest(&out, head, body, ForwardOptions{.client_address = "203.0.113.7"});
  EXPECT_EQ(out,
            "GET / HTTP/1.1\r\nHost: x\r\n"
            "X-Forwarded-For: 198.51.100.1, 198.51.100.2, 198.51.100.3, 203.0.113.7\r\n"
            "Forwarded: for=a, for=b, for=203.0.113.7\r\n\r\n");
}

TEST(Forward, UnixSocketClientsAddNoAddress) {
  auto [head, body] = ParseOne("GET / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n\r\n");
  std::string out;
  AppendForwardRequest(&out, head, body, ForwardOptions{});
  EXPECT_EQ(out, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
}

TEST(Forward, FieldsNamedByConnectionAreCaseInsensitiveTokens) {
  const std::vector<Header> headers = {{"connection", "Close , X-A"}, {"Connection", "x-b"}};
  EXPECT_TRUE(IsHopByHop("X-A", headers));
  EXPECT_TRUE(IsHopByHop("x-a", headers));
  EXPECT_TRUE(IsHopByHop("X-B", headers));
  EXPECT_TRUE(IsHopByHop("close", headers));
  EXPECT_TRUE(IsHopByHop("proxy-anything", {}));
  EXPECT_TRUE(IsHopByHop("Keep-Alive", {}));
  EXPECT_FALSE(IsHopByHop("X-C", headers));
  EXPECT_FALSE(IsHopByHop("X-", headers));
  EXPECT_FALSE(IsHopByHop("", headers));
}

}  // namespace
TEST(Forward, OnlyIdempotentMethodsMayBeSentAgain) {
  for (const char* method : {"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"}) {
    EXPECT_TRUE(IsIdempotentMethod(method)) << method;
  }
  for (const char* method : {"POST", "PATCH", "CONNECT", "get", "GETX", ""}) {
    EXPECT_FALSE(IsIdempotentMethod(method)) << method;
  }
}

}  // namespace bulkhead::http
