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

TEST(ProbeResponse, TakesTheStatusOnceTheHeadIsIn) {
  const std::string answer =
      "HTTP/1.0 503 Service Unavailable\r\nServer: BaseHTTP/0.6 Python/3.11\r\n"
      "Content-Length: 8\r\n\r\nprobe 1\n";
  for (size_t step : {size_t{0}, size_t{1}, size_t{7}}) {
    ProbeResponse response;
    EXPECT_EQ(Feed(response, answer, step), Result::kStatus) << step;
    EXPECT_EQ(response.status_code(), 503);
    EXPECT_FALSE(ProbeHealthy(response.status_code()));
  }
  ProbeResponse head_only;
  EXPECT_EQ(Feed(head_only, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n"), Result::kNeedMore)
      << "the head is not whole yet";
  EXPECT_EQ(head_only.Feed("\r\n"), Result::kStatus) << "the body is not waited for";
  EXPECT_EQ(head_only.status_code(), 200);
  EXPECT_TRUE(ProbeHealthy(200));
  EXPECT_EQ(head_only.Feed("more"), Result::kStatus);
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
