// SPDX-License-Identifier: MIT
// The answers bulkheadd makes itself on HTTP cells (http/local_reply.h): the outcome mapping of
// docs/http.md and the exact bytes of a rejection.
#include "http/local_reply.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace bulkhead::http {
namespace {

using ::testing::HasSubstr;

TEST(LocalReply, OutcomesMapToStatusCodes) {
  using ipc::Reason;
  using ipc::ReplyStatus;
  EXPECT_EQ(StatusCodeFor(ReplyStatus::kRejected, Reason::kFull), 503);
  EXPECT_EQ(StatusCodeFor(ReplyStatus::kRejected, Reason::kQueueTimeout), 503);
  EXPECT_EQ(StatusCodeFor(ReplyStatus::kRejected, Reason::kUnavailable), 503);
  EXPECT_EQ(StatusCodeFor(ReplyStatus::kRejected, Reason::kTooManyConnections), 503);
  EXPECT_EQ(StatusCodeFor(ReplyStatus::kFailed, Reason::kWorkerDied), 502);
  EXPECT_EQ(StatusCodeFor(ReplyStatus::kFailed, Reason::kOomKilled), 502);
  EXPECT_EQ(StatusCodeFor(ReplyStatus::kFailed, Reason::kWorkerError), 502);
  EXPECT_EQ(StatusCodeFor(ReplyStatus::kFailed, Reason::kTimeout), 504);
  EXPECT_EQ(StatusCodeFor(ReplyStatus::kFailed, Reason::kStalled), 504);
  EXPECT_EQ(StatusCodeFor(ReplyStatus::kBadRequest, Reason::kMalformed), 400);
  EXPECT_EQ(StatusCodeFor(ReplyStatus::kBadRequest, Reason::kTooLarge), 413);
}

TEST(LocalReply, FullRejectionAsTheIssueShowsIt) {
  const std::string bytes = FormatLocalReply(RejectionReply(
      ipc::Reason::kFull, ipc::RejectDetail{.cell = "payments", .running = 4, .queued = 8}));
  const std::string body = "bulkhead: payments is full (4 running, 8 queued)\n";
  EXPECT_EQ(bytes,
            "HTTP/1.1 503 Service Unavailable\r\n"
            "Bulkhead-Outcome: rejected; reason=full; cell=payments; running=4; queued=8\r\n"
            "Retry-After: 1\r\n"
            "Content-Type: text/plain; charset=utf-8\r\n"
            "Content-Length: " +
                std::to_string(body.size()) + "\r\n\r\n" + body);
}

// RFC 9110 section 9.3.2: the answer to a HEAD is the head a GET would get, without content.
TEST(LocalReply, AnswerToHeadHasNoBody) {
  LocalReply reply = RejectionReply(ipc::Reason::kFull, ipc::RejectDetail{.cell = "payments"});
  const std::string get = FormatLocalReply(reply);
  reply.head_request = true;
  const std::string head = FormatLocalReply(reply);
  EXPECT_EQ(head, get.substr(0, get.find("\r\n\r\n") + 4));
  EXPECT_THAT(head, ::testing::HasSubstr("\r\nContent-Length: "));
}

// An HTTP/1.0 client keeps its connection only when the answer says so (RFC 9112 appendix
// C.2.2); without it, ab -k waited for each connection to close.
TEST(LocalReply, KeepAliveIsSaidToAnHttp10Client) {
  LocalReply reply = RejectionReply(ipc::Reason::kFull, ipc::RejectDetail{.cell = "c"});
  EXPECT_THAT(FormatLocalReply(reply), ::testing::Not(::testing::HasSubstr("Connection:")));
  reply.http10_keep_alive = true;
  EXPECT_THAT(FormatLocalReply(reply), ::testing::HasSubstr("\r\nConnection: keep-alive\r\n"));
  reply.close = true;
  EXPECT_THAT(FormatLocalReply(reply), ::testing::HasSubstr("\r\nConnection: close\r\n"));
  EXPECT_THAT(FormatLocalReply(reply), ::testing::Not(::testing::HasSubstr("keep-alive")));
}

TEST(LocalReply, RetryAfterRoundsUpToWholeSeconds) {
  ipc::RejectDetail detail{.cell = "c", .retry_after_ms = 1001};
  EXPECT_THAT(FormatLocalReply(RejectionReply(ipc::Reason::kUnavailable, detail)),
              HasSubstr("\r\nRetry-After: 2\r\n"));
  detail.retry_after_ms = 1000;
  EXPECT_THAT(FormatLocalReply(RejectionReply(ipc::Reason::kQueueTimeout, detail)),
              HasSubstr("\r\nRetry-After: 1\r\n"));
}

// A cell in backoff says when its next worker starts, in the text as in Retry-After. A hint of 0
// says nothing of why (stopped, failed, starting, waiting for its needs, restarting): the text
// makes no claim and Retry-After stays 1.
TEST(LocalReply, AnUnavailableCellInBackoffSaysWhenItsNextWorkerStarts) {
  const std::string backoff = FormatLocalReply(RejectionReply(
      ipc::Reason::kUnavailable, ipc::RejectDetail{.cell = "c", .retry_after_ms = 9100}));
  EXPECT_THAT(backoff, HasSubstr("\r\nRetry-After: 10\r\n"));
  EXPECT_THAT(backoff, HasSubstr("bulkhead: c is unavailable: its next worker starts in 10 s"));
  const std::string no_hint =
      FormatLocalReply(RejectionReply(ipc::Reason::kUnavailable, ipc::RejectDetail{.cell = "c"}));
  EXPECT_THAT(no_hint, HasSubstr("\r\nRetry-After: 1\r\n"));
  EXPECT_THAT(no_hint, HasSubstr("bulkhead: c is unavailable (0 running, 0 queued)\n"));
}

// A stopped or failed cell (no start due: admission::Availability::NextStart::kNone) used to
// answer Retry-After: 1, inviting retries to a cell that stays down until an operator starts it.
TEST(LocalReply, AnUnavailableCellWithNoStartDueSendsNoRetryAfterAndSaysSo) {
  const std::string down = FormatLocalReply(RejectionReply(
      ipc::Reason::kUnavailable, ipc::RejectDetail{.cell = "c"}, /*start_due=*/false));
  EXPECT_THAT(down, ::testing::StartsWith("HTTP/1.1 503 Service Unavailable\r\n"));
  EXPECT_THAT(down, ::testing::Not(HasSubstr("Retry-After")));
  EXPECT_THAT(down, HasSubstr("bulkhead: c is unavailable: no worker is due to start (0 running, "
                              "0 queued)\n"));
  // Full and queue_timeout are never about a start: start_due does not touch them.
  EXPECT_THAT(FormatLocalReply(RejectionReply(ipc::Reason::kFull, {.cell = "c"}, false)),
              HasSubstr("\r\nRetry-After: 1\r\n"));
}

TEST(LocalReply, TooManyConnectionsClosesTheConnection) {
  const std::string bytes =
      FormatLocalReply(RejectionReply(ipc::Reason::kTooManyConnections, {.cell = "c"}));
  EXPECT_THAT(bytes, HasSubstr("reason=too_many_connections"));
  EXPECT_THAT(bytes, HasSubstr("\r\nConnection: close\r\n"));
}

TEST(LocalReply, FailuresCarryNoRetryAfter) {
  const std::string died =
      FormatLocalReply(FailureReply(ipc::Reason::kWorkerDied, "payments", "signal 9"));
  EXPECT_THAT(died, ::testing::StartsWith("HTTP/1.1 502 Bad Gateway\r\n"));
  EXPECT_THAT(died, HasSubstr("Bulkhead-Outcome: failed; reason=worker_died; cell=payments\r\n"));
  EXPECT_THAT(died, HasSubstr("bulkhead: payments: worker_died (signal 9)\n"));
  EXPECT_THAT(died, ::testing::Not(HasSubstr("Retry-After")));
  EXPECT_THAT(FormatLocalReply(FailureReply(ipc::Reason::kTimeout, "payments", "")),
              ::testing::StartsWith("HTTP/1.1 504 Gateway Timeout\r\n"));
}

TEST(LocalReply, ParserRefusalsKeepTheirStatusAndClose) {
  const std::string bytes =
      FormatLocalReply(BadRequestReply(Error{431, "more than 100 header fields"}, "payments"));
  EXPECT_THAT(bytes, ::testing::StartsWith("HTTP/1.1 431 Request Header Fields Too Large\r\n"));
  EXPECT_THAT(bytes, HasSubstr("Bulkhead-Outcome: bad_request; reason=head_too_large; "
                               "cell=payments\r\n"));
  EXPECT_THAT(bytes, HasSubstr("\r\nConnection: close\r\n"));
  EXPECT_THAT(bytes, HasSubstr("bulkhead: more than 100 header fields\n"));
  const std::string uri =
      FormatLocalReply(BadRequestReply(Error{414, "request-target over 16384 bytes"}, "payments"));
  EXPECT_THAT(uri, ::testing::StartsWith("HTTP/1.1 414 URI Too Long\r\n"));
  EXPECT_THAT(uri, HasSubstr("Bulkhead-Outcome: bad_request; reason=uri_too_long; "));
}

// RFC 9110 section 15.6.6: the status line says what 505 is, and the outcome names it.
TEST(LocalReply, VersionRefusalIs505WithItsReason) {
  const std::string bytes = FormatLocalReply(BadRequestReply(
      Error{505, "HTTP/2.0 is not supported (HTTP/1.0 and HTTP/1.1 are)"}, "payments"));
  EXPECT_THAT(bytes, ::testing::StartsWith("HTTP/1.1 505 HTTP Version Not Supported\r\n"));
  EXPECT_THAT(bytes, HasSubstr("Bulkhead-Outcome: bad_request; reason=version_not_supported; "
                               "cell=payments\r\n"));
  EXPECT_THAT(bytes, HasSubstr("\r\nConnection: close\r\n"));
}

}  // namespace
}  // namespace bulkhead::http
