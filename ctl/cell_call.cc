// SPDX-License-Identifier: MIT
// CallCell and DescribeReply (see cell_call.h). CallCell reads with poll(2) and the frame decoder
// itself rather than ipc::Client::Receive, whose SO_RCVTIMEO bounds each read, not the whole reply.
#include "ctl/cell_call.h"

#include <poll.h>

#include <cerrno>
#include <cstring>

#include "base/exit_status.h"
#include "ipc/frame.h"
#include "ipc/io.h"

namespace bulkhead::ctl {
namespace {

using Clock = std::chrono::steady_clock;

CallResult Failure(bool unreachable, std::string error) {
  CallResult result;
  result.unreachable = unreachable;
  result.error = std::move(error);
  return result;
}

}  // namespace

CallResult CallCell(const std::string& socket_path, std::string_view payload, Deadline deadline) {
  Result<ipc::Client> client = ipc::Client::Connect(socket_path, kMaxReplyPayload);
  if (!client.ok()) return Failure(true, client.status().message());

  // A blocking send bounded by SO_SNDTIMEO: the request is written in one WriteAll.
  if (deadline) {
    auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline - Clock::now());
    if (left.count() <= 0) return Failure(false, socket_path + ": timed out before sending");
    if (Status set = client->SetTimeout(left); !set.ok()) return Failure(false, set.message());
  }
  // The supervisor may refuse a request from its header alone (too_large) and close while the
  // payload is still being sent: then the send fails (EPIPE) but the reply explaining why is
  // already in the socket. Read it; report the send error only if no reply comes.
  std::string send_error;
  if (Status sent = client->Send(1, payload); !sent.ok()) {
    int err = sent.error_number();
    if (err != EPIPE && err != ECONNRESET) return Failure(false, sent.message());
    send_error = sent.message();
  }

  ipc::FrameDecoder decoder(ipc::FrameType::kReply, kMaxReplyPayload);
  while (true) {
    ipc::FrameView frame;
    switch (decoder.Next(&frame)) {
      case ipc::DecodeResult::kFrame: {
        if (frame.header.request_id != 1 && !ipc::IsConnectionRefusal(frame.header)) {
          return Failure(false, socket_path + ": reply carries request id " +
                                    std::to_string(frame.header.request_id) + ", expected 1");
        }
        CallResult result;
        result.reply = ipc::Client::Reply{frame.header, std::string(frame.payload)};
        return result;
      }
      case ipc::DecodeResult::kError:
        return Failure(false, socket_path + ": malformed reply: " + decoder.error_message());
      case ipc::DecodeResult::kNeedMore:
        break;
    }
    pollfd p{.fd = client->fd(), .events = POLLIN, .revents = 0};
    int ready = ::poll(&p, 1, PollTimeoutMs(deadline));
    if (ready < 0) {
      if (errno == EINTR) continue;
      return Failure(false, socket_path + ": poll: " + std::strerror(errno));
    }
    if (ready == 0) return Failure(false, socket_path + ": timed out waiting for the reply");
    Result<size_t> n = ipc::ReadOnce(client->fd(), &decoder);
    if (!n.ok()) {
      int err = n.status().error_number();
      if (err == EAGAIN || err == EWOULDBLOCK) continue;  // SO_RCVTIMEO cannot fire after POLLIN
      if (!send_error.empty()) return Failure(false, send_error);
      return Failure(false, socket_path + ": read: " + std::strerror(err));
    }
    if (*n == 0) {
      if (!send_error.empty()) return Failure(false, send_error);
      return Failure(false, socket_path + ": connection closed before the reply" +
                                (decoder.buffered_bytes() == 0 ? std::string() : " was complete"));
    }
  }
}

CallOutcome DescribeReply(const ipc::Client::Reply& reply, std::string_view cell, bool raw) {
  CallOutcome outcome;
  const ipc::FrameHeader& header = reply.header;
  const std::string reason = ipc::ReasonName(header.reason);
  switch (header.status) {
    case ipc::ReplyStatus::kOk:
      outcome.exit_code = kExitOk;
      outcome.out = reply.payload;
      if (!raw && (outcome.out.empty() || outcome.out.back() != '\n')) outcome.out += '\n';
      return outcome;
    case ipc::ReplyStatus::kRejected: {
      outcome.exit_code = kExitRejected;
      std::optional<ipc::RejectDetail> detail = ipc::DecodeRejectDetail(reply.payload);
      std::string name = detail ? detail->cell : std::string(cell);
      if (header.reason == ipc::Reason::kFull && detail) {
        outcome.err = "rejected: " + name + " full (running " + std::to_string(detail->running) +
                      ", queued " + std::to_string(detail->queued) + ")";
      } else if (header.reason == ipc::Reason::kFull) {
        outcome.err = "rejected: " + name + " full";
      } else if (header.reason == ipc::Reason::kQueueTimeout) {
        outcome.err = "rejected: queue timeout";
      } else if (header.reason == ipc::Reason::kUnavailable) {
        outcome.err = "rejected: unavailable";
        if (detail && detail->retry_after_ms > 0) {
          outcome.err += " (retry after " + std::to_string(detail->retry_after_ms) + " ms)";
        }
      } else {
        outcome.err = "rejected: " + reason;
      }
      outcome.err += '\n';
      return outcome;
    }
    case ipc::ReplyStatus::kFailed:
      outcome.exit_code = kExitFailed;
      outcome.err = "failed: " + reason + ": " + reply.payload + "\n";
      return outcome;
    case ipc::ReplyStatus::kBadRequest:
      outcome.exit_code = kExitBadRequest;
      outcome.err = "bad request: " + reason + ": " + reply.payload + "\n";
      return outcome;
  }
  // The decoder refuses statuses above 3.
  outcome.exit_code = kExitFailure;
  outcome.err = "unknown reply status " + std::to_string(static_cast<int>(header.status)) + "\n";
  return outcome;
}

}  // namespace bulkhead::ctl
