// SPDX-License-Identifier: MIT
// ResponseRelay (http/response_relay.h): worker responses as gunicorn, Node and http.server send
// them, fed whole and byte by byte, and the exact bytes their clients get.
#include "http/response_relay.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

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

// Bulkhead-Outcome marks bulkheadd's own answers (docs/http.md, "Outcomes"): a worker's is
// dropped, whatever its case, from the final response (interim ones are dropped whole).
TEST(ResponseRelay, AWorkersBulkheadOutcomeFieldIsDropped) {
  const std::string worker =
      "HTTP/1.1 100 Continue\r\nBulkhead-Outcome: failed; reason=timeout\r\n\r\n"
      "HTTP/1.1 503 Service Unavailable\r\nBulkhead-Outcome: rejected; reason=full\r\n"
      "X-A: 1\r\nbulkhead-outcome: rejected\r\nBULKHEAD-OUTCOME: x\r\nContent-Length: 2\r\n\r\nno";
  for (size_t step : {size_t{0}, size_t{1}, size_t{7}}) {
    ResponseRelay relay;
    relay.Begin(false, true, true);
    Relayed r = Relay(relay, worker, step);
    ASSERT_EQ(r.event, Event::kComplete) << relay.error();
    EXPECT_EQ(r.out, "HTTP/1.1 503 Service Unavailable\r\nX-A: 1\r\nContent-Length: 2\r\n\r\nno");
  }
  // A field whose name only starts or ends the same is the worker's own.
  Relayed other = RelayFresh(
      "HTTP/1.1 200 OK\r\nBulkhead-Outcomes: 1\r\nX-Bulkhead-Outcome: 2\r\nContent-Length: "
      "0\r\n\r\n");
  ASSERT_EQ(other.event, Event::kComplete);
  EXPECT_THAT(other.out, HasSubstr("\r\nBulkhead-Outcomes: 1\r\nX-Bulkhead-Outcome: 2\r\n"));
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

// RFC 9112 section 6.3, rule 1: a 204, a 304, any 1xx and the response to HEAD end at the empty
// line whatever their Content-Length or Transfer-Encoding say. What follows is never relayed as
// their body (the client would read it as the next response); a worker that announces a body
// there may send it, so its connection is not reused.
TEST(ResponseRelay, BodilessResponsesEndAtTheEmptyLineWhateverTheirFramingSays) {
  struct Case {
    std::string worker;  // the response head as the worker sends it (a "body" follows)
    std::string client;  // what the client gets
    bool head_request = false;
  };
  const std::vector<Case> cases = {
      {"HTTP/1.1 204 No Content\r\nContent-Length: 21\r\n\r\n", "HTTP/1.1 204 No Content\r\n\r\n"},
      {"HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n",
       "HTTP/1.1 204 No Content\r\n\r\n"},
      {"HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\nContent-Length: 21\r\n\r\n",
       "HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\nContent-Length: 21\r\n\r\n"},
      {"HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n",
       "HTTP/1.1 304 Not Modified\r\n\r\n"},
      {"HTTP/1.1 200 OK\r\nContent-Length: 21\r\n\r\n",
       "HTTP/1.1 200 OK\r\nContent-Length: 21\r\n\r\n", true},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", "HTTP/1.1 200 OK\r\n\r\n", true},
  };
  // Bytes a worker sends after such a head, shaped as a response of their own.
  const std::string smuggled = "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nsmuggled";
  for (const Case& c : cases) {
    for (size_t step : {size_t{0}, size_t{1}, size_t{7}}) {
      ResponseRelay relay;
      relay.Begin(c.head_request, true, true);
      Relayed r = Relay(relay, c.worker + smuggled, step);
      ASSERT_EQ(r.event, Event::kComplete) << c.worker << relay.error();
      EXPECT_EQ(r.out, c.client) << c.worker << " step " << step;
      EXPECT_EQ(r.used, c.worker.size()) << c.worker << " step " << step;
      EXPECT_FALSE(relay.worker_keep_alive()) << c.worker;
    }
  }
}

TEST(ResponseRelay, BodilessResponsesWithoutFramingFieldsKeepTheConnection) {
  for (const std::string worker :
       {"HTTP/1.1 204 No Content\r\n\r\n", "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n",
        "HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n"}) {
    ResponseRelay relay;
    relay.Begin(false, true, true);
    Relayed r = Relay(relay, worker);
    ASSERT_EQ(r.event, Event::kComplete) << worker << relay.error();
    EXPECT_EQ(r.used, worker.size());
    EXPECT_TRUE(relay.worker_keep_alive()) << worker;
  }
  ResponseRelay head;
  head.Begin(/*head_request=*/true, true, true);
  ASSERT_EQ(Relay(head, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n").event, Event::kComplete);
  EXPECT_TRUE(head.worker_keep_alive());
}

// An interim response ends at its empty line too: bytes after it are the next response, and
// anything that is not one is a malformed response (502), never the interim's body.
TEST(ResponseRelay, BytesAfterAnInterimResponseAreTheNextResponse) {
  for (size_t step : {size_t{0}, size_t{1}, size_t{5}}) {
    ResponseRelay garbage;
    garbage.Begin(false, true, true);
    Relayed r = Relay(garbage,
                      "HTTP/1.1 100 Continue\r\nContent-Length: 5\r\n\r\nhello"
                      "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
                      step);
    EXPECT_EQ(r.event, Event::kError) << step;
    EXPECT_FALSE(garbage.head_sent());
    EXPECT_EQ(r.out, "");

    ResponseRelay framed;
    framed.Begin(false, true, true);
    r = Relay(framed,
              "HTTP/1.1 103 Early Hints\r\nTransfer-Encoding: chunked\r\nLink: </s.css>\r\n\r\n"
              "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
              step);
    ASSERT_EQ(r.event, Event::kComplete) << step << framed.error();
    EXPECT_EQ(r.out, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    EXPECT_FALSE(framed.worker_keep_alive()) << "its framing fields announced a body";
  }
}

// RFC 9112 section 5.1: no whitespace between a field name and its colon; a proxy must reject or
// fix such a response. Passed on, the client would read the worker's framing beside bulkheadd's.
TEST(ResponseRelay, FieldNamesThatAreNotTokensMakeTheResponseMalformed) {
  for (const std::string worker :
       {"HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\nok",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding : chunked\r\nContent-Length: 2\r\n\r\nok",
        "HTTP/1.1 200 OK\r\nX Private: 1\r\nContent-Length: 2\r\n\r\nok"}) {
    for (size_t step : {size_t{0}, size_t{1}}) {
      ResponseRelay relay;
      relay.Begin(false, true, true);
      Relayed r = Relay(relay, worker, step);
      EXPECT_EQ(r.event, Event::kError) << worker;
      // http-parser itself refuses the second (it reads "Transfer-Encoding " as Transfer-Encoding,
      // beside a Content-Length); the relay the others.
      EXPECT_THAT(relay.error(), HasSubstr("malformed response")) << worker;
      EXPECT_FALSE(relay.head_sent()) << "nothing went out: the client gets a 502";
      EXPECT_EQ(r.out, "");
    }
  }
}

// RFC 9112 section 4: a status code is three digits; http-parser reads "20" as status 20, which
// would pass as an interim response and be dropped.
TEST(ResponseRelay, AStatusCodeOfFewerThanThreeDigitsIsMalformed) {
  for (const std::string worker : {"HTTP/1.1 20 OK\r\nContent-Length: 2\r\n\r\nok",
                                   "HTTP/1.1 2 OK\r\n\r\nHTTP/1.1 200 OK\r\n\r\n"}) {
    ResponseRelay relay;
    relay.Begin(false, true, true);
    Relayed r = Relay(relay, worker);
    EXPECT_EQ(r.event, Event::kError) << worker;
    EXPECT_THAT(relay.error(), HasSubstr("status code")) << worker;
    EXPECT_FALSE(relay.head_sent());
  }
}

// RFC 9112 section 2.2 (bare CR), 5.2 (obs-fold in a response: 502 or replace), 7.1 (chunk lines).
TEST(ResponseRelay, BareCrObsFoldAndBrokenChunkLinesMakeTheResponseMalformed) {
  struct Case {
    std::string worker;
    bool head_sent;  // the failure comes after the head went to the client
  };
  const std::string chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::vector<Case> cases = {
      {"HTTP/1.1 200 OK\rContent-Length: 2\r\n\r\nok", false},
      {"HTTP/1.1 200 OK\r\nContent-Length: 2\rX-A: 1\r\n\r\nok", false},
      {"HTTP/1.1 200 OK\r\nX-A:\rContent-Length: 2\r\n\r\nok", false},
      {"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\rXok", false},
      {"HTTP/1.1 204 No Content\r\n\rX", false},
      {"HTTP/1.1 200 OK\r\nX-A: 1\r\n folded\r\nContent-Length: 2\r\n\r\nok", false},
      {"HTTP/1.1 200 O\x01K\r\nContent-Length: 2\r\n\r\nok", false},
      {chunked + "2\rXok\r\n0\r\n\r\n", true},
      {chunked + "2;x\nok\r\n0\r\n\r\n", true},
      {chunked + "2\r\nokXY0\r\n\r\n", true},
      {chunked + "2\r\nok\r\n0\r\nX-T: 1\rY\r\n\r\n", true},
  };
  for (const Case& c : cases) {
    for (size_t step : {size_t{0}, size_t{1}, size_t{4}}) {
      ResponseRelay relay;
      relay.Begin(false, true, true);
      Relayed r = Relay(relay, c.worker, step);
      EXPECT_EQ(r.event, Event::kError) << c.worker << " step " << step;
      EXPECT_THAT(relay.error(), HasSubstr("malformed response")) << c.worker;
      EXPECT_EQ(relay.head_sent(), c.head_sent) << c.worker << " step " << step;
      if (!c.head_sent) {
        EXPECT_EQ(r.out, "") << c.worker;
      }
    }
  }
}

// Body data is never framing: CR and LF in it, bare or not, go through as they came.
TEST(ResponseRelay, BodyDataIsNeverCheckedAsFraming) {
  const std::string data = "a\rb\nc\r\n\rX\n HTTP/1.1 200 OK\r\n\r\n";
  const std::string size = std::string(1, "0123456789abcdef"[data.size() / 16]) +
                           std::string(1, "0123456789abcdef"[data.size() % 16]);
  for (size_t step : {size_t{0}, size_t{1}, size_t{3}}) {
    Relayed chunked = RelayFresh("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + size +
                                     "\r\n" + data + "\r\n0\r\n\r\n",
                                 step);
    ASSERT_EQ(chunked.event, Event::kComplete) << step;
    if (step == 0) {
      EXPECT_THAT(chunked.out, HasSubstr("\r\n" + size + "\r\n" + data + "\r\n0\r\n\r\n"));
    }
    Relayed sized = RelayFresh(
        "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(data.size()) + "\r\n\r\n" + data,
        step);
    ASSERT_EQ(sized.event, Event::kComplete) << step;
    EXPECT_THAT(sized.out, ::testing::EndsWith("\r\n\r\n" + data));
  }
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
