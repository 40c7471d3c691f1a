// SPDX-License-Identifier: MIT
// The health probe's codec (http/probe.h): the request line and fields sent, and the status code
// taken from answers as http.server, gunicorn and Node send them, whole and byte by byte.
#include "http/probe.h"

#include <gtest/gtest.h>

#include <string>

namespace bulkhead::http {
namespace {

using Result = ProbeResponse::Result;

// Feeds `input` in pieces of `step` bytes (0: whole); the last result.
Result Feed(ProbeResponse& response, std::string_view input, size_t step = 0) {
  Result result = Result::kNeedMore;
  for (size_t at = 0; at < input.size();) {
    const size_t piece = step == 0 ? input.size() - at : std::min(step, input.size() - at);
    result = response.Feed(input.substr(at, piece));
    at += piece;
    if (result != Result::kNeedMore) break;
  }
  return result;
}

TEST(ProbeRequest, IsOneGetThatClosesItsConnection) {
  EXPECT_EQ(ProbeRequest("/healthz?full=1"),
            "GET /healthz?full=1 HTTP/1.1\r\nHost: localhost\r\nUser-Agent: bulkheadd-probe\r\n"
            "Accept: */*\r\nConnection: close\r\n\r\n");
}

TEST(ProbeResponse, TakesTheStatusOnceTheWholeAnswerIsIn) {
  const std::string answer =
      "HTTP/1.0 503 Service Unavailable\r\nServer: BaseHTTP/0.6 Python/3.11\r\n"
      "Content-Length: 8\r\n\r\nprobe 1\n";
  for (size_t step : {size_t{0}, size_t{1}, size_t{7}}) {
    ProbeResponse response;
    EXPECT_EQ(Feed(response, answer, step), Result::kStatus) << step;
    EXPECT_EQ(response.status_code(), 503);
    EXPECT_FALSE(ProbeHealthy(response.status_code()));
  }
}

// The probe reads the body to its end before it closes: closing after the head made a worker still
// writing its body fail with EPIPE (Python's http.server logged a BrokenPipeError traceback).
TEST(ProbeResponse, WaitsForTheEndOfTheBody) {
  ProbeResponse sized;
  EXPECT_EQ(Feed(sized, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n"), Result::kNeedMore)
      << "the body is waited for";
  EXPECT_EQ(sized.status_code(), 200) << "known as soon as the head is in";
  EXPECT_EQ(sized.Feed("ok, "), Result::kNeedMore);
  EXPECT_EQ(sized.Feed("fine\n\n"), Result::kStatus);
  EXPECT_TRUE(ProbeHealthy(sized.status_code()));
  EXPECT_EQ(sized.Feed("more"), Result::kStatus);

  const std::string chunked =
      "HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\ndown \r\n4\r\nnow\n\r\n0\r\n\r\n";
  for (size_t step : {size_t{0}, size_t{1}, size_t{5}}) {
    ProbeResponse response;
    EXPECT_EQ(Feed(response, chunked.substr(0, chunked.size() - 2), step), Result::kNeedMore)
        << step;
    EXPECT_EQ(response.Feed("\r\n"), Result::kStatus) << step;
    EXPECT_EQ(response.status_code(), 503);
  }

  // Neither Content-Length nor chunked: the body ends when the worker closes.
  ProbeResponse close_delimited;
  EXPECT_EQ(Feed(close_delimited, "HTTP/1.0 200 OK\r\nServer: x\r\n\r\nbody"), Result::kNeedMore);
  EXPECT_EQ(close_delimited.Closed(), Result::kStatus);
  EXPECT_EQ(close_delimited.status_code(), 200);

  // No body by its status, or an empty one: over with the head.
  ProbeResponse no_content;
  EXPECT_EQ(Feed(no_content, "HTTP/1.1 204 No Content\r\n\r\n"), Result::kStatus);
  ProbeResponse empty;
  EXPECT_EQ(Feed(empty, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"), Result::kStatus);

  // A worker that closes before the body it announced: judged on its status, as before.
  ProbeResponse cut;
  EXPECT_EQ(Feed(cut, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nab"), Result::kNeedMore);
  EXPECT_EQ(cut.Closed(), Result::kStatus);
  EXPECT_EQ(cut.status_code(), 200);
}

// A body past kProbeMaxBodyBytes is not waited for: the answer is judged on its status then.
TEST(ProbeResponse, StopsReadingAtTheBodyBound) {
  ProbeResponse response;
  EXPECT_EQ(Feed(response, "HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n"),
            Result::kNeedMore);
  EXPECT_EQ(response.Feed(std::string(kProbeMaxBodyBytes - 1, 'x')), Result::kNeedMore);
  EXPECT_EQ(response.Feed("xx"), Result::kStatus);
  EXPECT_EQ(response.status_code(), 200);

  ProbeResponse endless;
  EXPECT_EQ(Feed(endless, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"),
            Result::kNeedMore);
  Result result = Result::kNeedMore;
  size_t fed = 0;
  const std::string chunk = "400\r\n" + std::string(0x400, 'y') + "\r\n";
  while (result == Result::kNeedMore && fed < 2 * kProbeMaxBodyBytes) {
    result = endless.Feed(chunk);
    fed += 0x400;
  }
  EXPECT_EQ(result, Result::kStatus);
  EXPECT_EQ(fed, kProbeMaxBodyBytes);
}

TEST(ProbeResponse, SkipsInterimResponses) {
  ProbeResponse response;
  EXPECT_EQ(Feed(response, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n", 3),
            Result::kStatus);
  EXPECT_EQ(response.status_code(), 204);
}

TEST(ProbeResponse, OnlyTwoHundredsAreHealthy) {
  EXPECT_FALSE(ProbeHealthy(199));
  EXPECT_TRUE(ProbeHealthy(204));
  EXPECT_TRUE(ProbeHealthy(299));
  EXPECT_FALSE(ProbeHealthy(301));
  EXPECT_FALSE(ProbeHealthy(0));
}

TEST(ProbeResponse, AnythingButHttpIsAnError) {
  ProbeResponse frames;
  EXPECT_EQ(Feed(frames, std::string("\x01\x02\x00\x00garbage", 11)), Result::kError);
  EXPECT_NE(frames.error().find("not an HTTP/1.x response"), std::string::npos) << frames.error();

  ProbeResponse silent;
  EXPECT_EQ(silent.Closed(), Result::kError);
  EXPECT_EQ(silent.error(), "connection closed before the status line");

  ProbeResponse cut;
  EXPECT_EQ(Feed(cut, "HTTP/1.1 200 OK\r\nContent-Le"), Result::kNeedMore);
  EXPECT_EQ(cut.Closed(), Result::kError);
  EXPECT_EQ(cut.error(), "connection closed inside the response head");
}

}  // namespace
}  // namespace bulkhead::http
