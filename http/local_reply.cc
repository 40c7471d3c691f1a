// SPDX-License-Identifier: MIT
#include "http/local_reply.h"

namespace bulkhead::http {

int StatusCodeFor(ipc::ReplyStatus status, ipc::Reason reason) {
  switch (status) {
    case ipc::ReplyStatus::kRejected:
      return 503;
    case ipc::ReplyStatus::kBadRequest:
      return reason == ipc::Reason::kTooLarge ? 413 : 400;
    case ipc::ReplyStatus::kFailed:
      return reason == ipc::Reason::kTimeout || reason == ipc::Reason::kStalled ? 504 : 502;
    case ipc::ReplyStatus::kOk:
      break;
  }
  return 500;
}

std::string_view ReasonPhrase(int status_code) {
  switch (status_code) {
    case 100:
      return "Continue";
    case 400:
      return "Bad Request";
    case 408:
      return "Request Timeout";
    case 413:
      return "Content Too Large";
    case 414:
      return "URI Too Long";
    case 417:
      return "Expectation Failed";
    case 431:
      return "Request Header Fields Too Large";
    case 501:
      return "Not Implemented";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Error";
  }
}

namespace {

// A retry-after hint in whole seconds, rounded up (RFC 9110 section 10.2.3); 1 when the cell gave
// no hint (0).
uint32_t RetryAfterSeconds(uint32_t retry_after_ms) {
  return retry_after_ms == 0 ? 1 : (retry_after_ms + 999) / 1000;
}

}  // namespace

LocalReply RejectionReply(ipc::Reason reason, const ipc::RejectDetail& detail, bool start_due) {
  LocalReply reply;
  reply.status_code = StatusCodeFor(ipc::ReplyStatus::kRejected, reason);
  reply.outcome = "rejected";
  reply.reason = ipc::ReasonName(reason);
  reply.cell = detail.cell;
  reply.rejection = true;
  reply.running = detail.running;
  reply.queued = detail.queued;
  reply.retry_after_ms = detail.retry_after_ms;
  reply.close = reason == ipc::Reason::kTooManyConnections;
  switch (reason) {
    case ipc::Reason::kFull:
      reply.text = detail.cell + " is full";
      break;
    case ipc::Reason::kQueueTimeout:
      reply.text = detail.cell + ": waited in the queue past queue_timeout";
      break;
    case ipc::Reason::kTooManyConnections:
      reply.text = detail.cell + ": too many connections";
      break;
    default:
      // A start due at a known time (backoff, a crash loop) says when; none due says so. A hint of
      // 0 with a start due is no verdict: the cell is starting, waiting for its needs or
      // restarting.
      reply.text = detail.cell + " is unavailable";
      if (!start_due) {
        reply.retry_after = false;
        reply.text += ": no worker is due to start";
      } else if (detail.retry_after_ms > 0) {
        reply.text += ": its next worker starts in " +
                      std::to_string(RetryAfterSeconds(detail.retry_after_ms)) + " s";
      }
      break;
  }
  reply.text += " (" + std::to_string(detail.running) + " running, " +
                std::to_string(detail.queued) + " queued)";
  return reply;
}

LocalReply FailureReply(ipc::Reason reason, std::string_view cell, std::string_view detail) {
  LocalReply reply;
  reply.status_code = StatusCodeFor(ipc::ReplyStatus::kFailed, reason);
  reply.outcome = "failed";
  reply.reason = ipc::ReasonName(reason);
  reply.cell = std::string(cell);
  reply.text = std::string(cell) + ": " + reply.reason;
  if (!detail.empty()) reply.text += " (" + std::string(detail) + ")";
  return reply;
}

LocalReply BadRequestReply(const Error& error, std::string_view cell) {
  LocalReply reply;
  reply.status_code = error.status;
  reply.outcome = "bad_request";
  switch (error.status) {
    case 413:
      reply.reason = "too_large";
      break;
    case 408:
      reply.reason = "header_timeout";
      break;
    case 417:
      reply.reason = "expectation_failed";
      break;
    case 414:
      reply.reason = "uri_too_long";
      break;
    case 431:
      reply.reason = "head_too_large";
      break;
    case 501:
      reply.reason = "not_implemented";
      break;
    case 505:
      reply.reason = "version_not_supported";
      break;
    default:
      reply.reason = "malformed";
      break;
  }
  reply.cell = std::string(cell);
  reply.close = true;
  reply.text = error.reason;
  return reply;
}

std::string FormatLocalReply(const LocalReply& reply) {
  std::string body = "bulkhead: " + reply.text + "\n";
  std::string out = "HTTP/1.1 " + std::to_string(reply.status_code) + " ";
  out += ReasonPhrase(reply.status_code);
  out += "\r\n";
  out += kOutcomeField;
  out += ": " + reply.outcome + "; reason=" + reply.reason;
  if (!reply.cell.empty()) out += "; cell=" + reply.cell;
  if (reply.rejection) {
    out +=
        "; running=" + std::to_string(reply.running) + "; queued=" + std::to_string(reply.queued);
  }
  out += "\r\n";
  // Whole seconds, rounded up (RFC 9110 section 10.2.3); 1 when the cell gave no hint.
  if (reply.status_code == 503 && reply.retry_after) {
    out += "Retry-After: " + std::to_string(RetryAfterSeconds(reply.retry_after_ms)) + "\r\n";
  }
  out +=
      "Content-Type: text/plain; charset=utf-8\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\n";
  if (reply.close) {
    out += "Connection: close\r\n";
  } else if (reply.http10_keep_alive) {
    out += "Connection: keep-alive\r\n";
  }
  out += "\r\n";
  if (!reply.head_request) out += body;
  return out;
}

}  // namespace bulkhead::http
