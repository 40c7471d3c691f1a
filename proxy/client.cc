// SPDX-License-Identifier: MIT
#include "proxy/client.h"

#include <linux/sockios.h>
#include <poll.h>
#include <sys/ioctl.h>

#include "base/check.h"
#include "base/log.h"
#include "proxy/request.h"

namespace bulkhead::proxy {

bool PeerClosedBothWays(uv_stream_t* stream) {
  uv_os_fd_t fd;
  if (uv_fileno(reinterpret_cast<uv_handle_t*>(stream), &fd) != 0) return true;
  pollfd p{fd, POLLOUT, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR)) != 0;
}

uint64_t BytesUnreadByPeer(uv_stream_t* stream) {
  uv_os_fd_t fd;
  if (uv_fileno(reinterpret_cast<uv_handle_t*>(stream), &fd) != 0) return 0;
  int queued = 0;
  if (::ioctl(fd, SIOCOUTQ, &queued) != 0 || queued < 0) return 0;
  return static_cast<uint64_t>(queued);
}

Client::Client(ClientOwner* owner, uv_stream_t* stream, size_t max_backlog)
    : owner_(owner),
      stream_(stream),
      writer_(
          stream, [this](int) { Close(); }, [this] { OnDrained(); }),
      max_backlog_(max_backlog) {
  writer_.SetOnWritten([this] { CountWritten(); });
  writer_.SetBatch(owner->write_batch());
  writer_.SetOnBacklog([this] { WatchBacklog(); });
}

void Client::QueueAnswer(uint64_t* outcome, bool defer_flush) {
  unwritten_.push_back(UnwrittenReply{writer_.appended_bytes(), outcome});
  // Deferred, the caller writes the answers of its read in one write and looks at the backlog
  // after it (FrontConnection::ProcessFrames): the unsent bytes counted here would be all of them.
  if (defer_flush) return;
  writer_.Flush();
  // Its bytes may all have been written before this answer was queued (a streamed response).
  CountWritten();
  WatchBacklog();
}

void Client::WatchBacklog() {
  // Bytes waiting for the write batch were not offered to the client yet: the batch calls back
  // (on_backlog) if it does not take them all.
  if (closing_ || writer_.in_batch()) return;
  const size_t unsent = writer_.backlog_bytes();
  if (unsent == 0) return;
  // A client that does not read its answers is dropped rather than buffered for without bound.
  if (unsent > max_backlog_) {
    CloseUnread("over 2 x max_payload_bytes + 64 KiB for one connection");
    return;
  }
  if (!waiting_) {
    waiting_ = true;
    stalled_since_ms_ = uv_now(stream_->loop);
    seen_written_ = writer_.written_bytes();
    seen_unconsumed_ = BytesUnreadByPeer(stream_);
  }
  // May close this connection, or others, to keep the cell within max_unsent_bytes.
  owner_->OnRepliesWaiting(this);
}

void Client::CountWritten() {
  const uint64_t written = writer_.written_bytes();
  while (!unwritten_.empty() && unwritten_.front().end <= written) {
    owner_->CountDelivered(unwritten_.front().outcome);
    unwritten_.pop_front();
  }
}

size_t Client::CheckProgress(uint64_t now_ms) {
  CountWritten();
  const uint64_t written = writer_.written_bytes();
  const uint64_t unconsumed = BytesUnreadByPeer(stream_);
  if (written != seen_written_ || unconsumed < seen_unconsumed_) stalled_since_ms_ = now_ms;
  seen_written_ = written;
  seen_unconsumed_ = unconsumed;
  const size_t unsent = writer_.backlog_bytes();
  if (unsent == 0) waiting_ = false;
  return unsent;
}

void Client::CloseUnread(const std::string& why) {
  Log(LogLevel::kWarning, owner_->name(), 0,
      "client does not read its replies (" + std::to_string(writer_.backlog_bytes()) +
          " bytes unsent, " + why + "): closing its connection");
  Close();
}

void Client::LinkRequest(Request* request) {
  BH_CHECK(request->client == nullptr);
  request->client = this;
  request->client_prev = nullptr;
  request->client_next = requests_;
  if (requests_ != nullptr) requests_->client_prev = request;
  requests_ = request;
}

void Client::UnlinkRequest(Request* request) {
  BH_CHECK(request->client == this);
  if (request->client_prev != nullptr) {
    request->client_prev->client_next = request->client_next;
  } else {
    requests_ = request->client_next;
  }
  if (request->client_next != nullptr) request->client_next->client_prev = request->client_prev;
  request->client_prev = request->client_next = nullptr;
  request->client = nullptr;
}

void Client::CloseAnswers() {
  // Answers still waiting for the loop's write batch get the one write they would have had
  // without it; those not written whole by now are never delivered.
  writer_.WriteNow();
  CountWritten();
  if (!unwritten_.empty()) {
    owner_->CountUndelivered(unwritten_.size());
    unwritten_.clear();
  }
  writer_.Abandon();
  while (requests_ != nullptr) {
    Request* request = requests_;
    UnlinkRequest(request);
    owner_->OnClientGone(request);
  }
}

}  // namespace bulkhead::proxy
