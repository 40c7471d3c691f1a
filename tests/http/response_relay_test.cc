// SPDX-License-Identifier: MIT
// ResponseRelay (http/response_relay.h): worker responses as gunicorn, Node and http.server send
// them, fed whole and byte by byte, and the exact bytes their clients get.
#include "http/response_relay.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace bulkhead::http {
namespace {

using ::testing::HasSubstr;
using Event = ResponseRelay::Event;

struct Relayed {
  Event event = Event::kNeedMore;
  std::string out;
  size_t used = 0;  // bytes of the input consumed
};

// Feeds `input` in pieces of `step` bytes (0: whole) until the response completes or fails;
// `close` then reports the worker's close when the input ran out first.
Relayed Relay(ResponseRelay& relay, std::string_view input, size_t step = 0, bool close = false) {
  Relayed r;
  while (r.used < input.size()) {
    const size_t piece = step == 0 ? input.size() - r.used : std::min(step, input.size() - r.used);
    size_t consumed = 0;
    r.event = relay.Feed(input.substr(r.used, piece), &consumed, &r.out);
    r.used += consumed;
    if (r.event != Event::kNeedMore) return r;
  }
  if (close) r.event = relay.WorkerClosed(&r.out);
  return r;
}

Relayed RelayFresh(std::string_view input, size_t step = 0, bool close = false,
                   bool head_request = false, bool keep_alive = true, bool http11 = true) {
  ResponseRelay relay;
  relay.Begin(head_request, keep_alive, http11);
  return Relay(relay, input, step, close);
}

TEST(ResponseRelay, ContentLengthResponsePassesThroughWithoutHopByHopFields) {
  const std::string worker =
      "HTTP/1.1 201 Created\r\nServer: gunicorn\r\nConnection: keep-alive\r\n"
      "Keep-Alive: timeout=5\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n"
      "{\"ok\":true}";
  for (size_t step : {size_t{0}, size_t{1}, size_t{9}}) {
    ResponseRelay relay;
    relay.Begin(false, true, true);
    Relayed r = Relay(relay, worker, step);
    ASSERT_EQ(r.event, Event::kComplete) << relay.error();
    EXPECT_EQ(r.out,
              "HTTP/1.1 201 Created\r\nServer: gunicorn\r\nContent-Type: application/json\r\n"
              "Content-Length: 11\r\n\r\n{\"ok\":true}");
    EXPECT_EQ(relay.status_code(), 201);
    EXPECT_TRUE(relay.worker_keep_alive());
    EXPECT_FALSE(relay.client_must_close());
  }
}

TEST(ResponseRelay, ChunkedBodyIsChunkedAgainAndTrailersAreDropped) {
  const std::string worker =
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n";
  Relayed whole = RelayFresh(worker);
  ASSERT_EQ(whole.event, Event::kComplete);
  EXPECT_EQ(whole.out,
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n");
  Relayed bytes = RelayFresh(worker, 1);
  ASSERT_EQ(bytes.event, Event::kComplete);
  EXPECT_THAT(bytes.out, HasSubstr("1\r\nh\r\n1\r\ne\r\n"));  // one chunk per piece read
  EXPECT_THAT(bytes.out, ::testing::EndsWith("0\r\n\r\n"));
}

TEST(ResponseRelay, CloseDelimitedBodyIsChunkedForHttp11ClientsAndEndsAtTheClose) {
  // Python's http.server (HTTP/1.0 responses, no Content-Length).
  const std::string worker = "HTTP/1.0 200 OK\r\nServer: SimpleHTTP/0.6\r\n\r\nall of it";
  ResponseRelay relay;
  relay.Begin(false, true, true);
  Relayed r = Relay(relay, worker, 0, /*close=*/true);
  ASSERT_EQ(r.event, Event::kComplete) << relay.error();
  EXPECT_EQ(r.out,
            "HTTP/1.1 200 OK\r\nServer: SimpleHTTP/0.6\r\nTransfer-Encoding: chunked\r\n\r\n"
            "9\r\nall of it\r\n0\r\n\r\n");
  EXPECT_FALSE(relay.worker_keep_alive());
  EXPECT_FALSE(relay.client_must_close());
}

TEST(ResponseRelay, CloseDelimitedBodyClosesAnHttp10Client) {
  ResponseRelay relay;
  relay.Begin(false, true, /*client_http11=*/false);
  Relayed r = Relay(relay, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nrest", 0, true);
  ASSERT_EQ(r.event, Event::kComplete);
  EXPECT_EQ(r.out, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nrest");
  EXPECT_TRUE(relay.client_must_close());
}

TEST(ResponseRelay, Http10ClientThatKeepsAliveIsToldSo) {
  Relayed r = RelayFresh("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 0, false, false, true,
                         /*http11=*/false);
  ASSERT_EQ(r.event, Event::kComplete);
  EXPECT_THAT(r.out, HasSubstr("\r\nConnection: keep-alive\r\n\r\nok"));
}

TEST(ResponseRelay, ClientThatAskedToCloseGetsConnectionClose) {
  ResponseRelay relay;
  relay.Begin(false, /*client_keep_alive=*/false, true);
  Relayed r = Relay(relay, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
  ASSERT_EQ(r.event, Event::kComplete);
  EXPECT_THAT(r.out, HasSubstr("\r\nConnection: close\r\n\r\nok"));
  EXPECT_TRUE(relay.client_must_close());
  EXPECT_TRUE(relay.worker_keep_alive());  // the worker's connection is another matter
}

TEST(ResponseRelay, HeadResponseHasNoBodyButKeepsItsLength) {
  Relayed r = RelayFresh("HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n", 0, false,
                         /*head_request=*/true);
  ASSERT_EQ(r.event, Event::kComplete);
  EXPECT_EQ(r.out, "HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n");
}

TEST(ResponseRelay, NoContentAndNotModifiedHaveNoBody) {
  Relayed none = RelayFresh("HTTP/1.1 204 No Content\r\n\r\n");
  ASSERT_EQ(none.event, Event::kComplete);
  EXPECT_EQ(none.out, "HTTP/1.1 204 No Content\r\n\r\n");
  Relayed same = RelayFresh("HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n");
  ASSERT_EQ(same.event, Event::kComplete);
  EXPECT_EQ(same.out, "HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n");
}

TEST(ResponseRelay, InterimResponsesAreDropped) {
  Relayed r = RelayFresh(
      "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\n"
      "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
      3);
  ASSERT_EQ(r.event, Event::kComplete);
  EXPECT_EQ(r.out, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
}

TEST(ResponseRelay, BytesAfterTheResponseAreLeftToTheCaller) {
  const std::string worker = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA";
  Relayed r = RelayFresh(worker);
  ASSERT_EQ(r.event, Event::kComplete);
  EXPECT_EQ(r.used, worker.size() - 5);
}

TEST(ResponseRelay, TheSameRelayServesTheNextResponseAfterBegin) {
  ResponseRelay relay;
  relay.Begin(false, true, true);
  ASSERT_EQ(Relay(relay, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na").event, Event::kComplete);
  relay.Begin(false, true, true);
  Relayed second = Relay(relay, "HTTP/1.1 404 Not Found\r\nContent-Length: 1\r\n\r\nb");
  ASSERT_EQ(second.event, Event::kComplete);
  EXPECT_EQ(second.out, "HTTP/1.1 404 Not Found\r\nContent-Length: 1\r\n\r\nb");
}

TEST(ResponseRelay, FailuresSayWhetherTheClientAlreadyGotSomething) {
  ResponseRelay cut;
  cut.Begin(false, true, true);
  Relayed mid = Relay(cut, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", 0, true);
  EXPECT_EQ(mid.event, Event::kError);
  EXPECT_TRUE(cut.head_sent());
  EXPECT_THAT(cut.error(), HasSubstr("before its response was complete"));

  ResponseRelay silent;
  silent.Begin(false, true, true);
  EXPECT_EQ(Relay(silent, "", 0, true).event, Event::kError);
  EXPECT_FALSE(silent.head_sent());

  ResponseRelay garbage;
  garbage.Begin(false, true, true);
  EXPECT_EQ(Relay(garbage, "SPDY/3 200 OK\r\n\r\n").event, Event::kError);
  EXPECT_FALSE(garbage.head_sent());

  ResponseRelay upgraded;
  upgraded.Begin(false, true, true);
  EXPECT_EQ(Relay(upgraded, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n").event,
            Event::kError);
}

}  // namespace
}  // namespace bulkhead::http
