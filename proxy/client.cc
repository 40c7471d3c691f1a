// SPDX-License-Identifier: MIT
#include "proxy/client.h"

#include <fcntl.h>

#include <cstddef>

#include "base/check.h"
#include "base/log.h"

namespace bulkhead::proxy {

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

size_t Client::OnResponseBytes(Exchange*, std::string_view, bool) {
  BH_CHECK(false && "this front end streams no response");
  return 0;
}

void Client::OnBodyFlow(Exchange*) { BH_CHECK(false && "this front end streams no request body"); }

void Client::LabelPeer() {
  peer_label_size_ = static_cast<uint8_t>(PeerLabel(stream_, peer_label_, sizeof peer_label_));
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
    stalled_since_ms_ = owner_->time()->NowMs();
    seen_written_ = writer_.written_bytes();
    seen_unconsumed_ = BytesUnreadByPeer(stream_);
  }
  // May close this connection, or others, to keep the cell within max_unsent_bytes.
  owner_->OnRepliesWaiting(this);
}

void Client::CountWritten() {
  const uint64_t written = writer_.written_bytes();
  while (unwritten_head_ < unwritten_.size() && unwritten_[unwritten_head_].end <= written) {
    owner_->CountDelivered(unwritten_[unwritten_head_].outcome);
    ++unwritten_head_;
  }
  if (unwritten_head_ == unwritten_.size()) {
    unwritten_.clear();
    unwritten_head_ = 0;
  } else if (unwritten_head_ > 64 && 2 * unwritten_head_ > unwritten_.size()) {
    // A client that always has answers waiting (pipelining): the counted ones go now and then.
    unwritten_.erase(unwritten_.begin(),
                     unwritten_.begin() + static_cast<std::ptrdiff_t>(unwritten_head_));
    unwritten_head_ = 0;
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

void Client::Attach(Exchange* exchange) {
  BH_CHECK(exchange->client == nullptr);
  exchange->client = this;
  exchange->client_prev = nullptr;
  exchange->client_next = exchanges_;
  if (exchanges_ != nullptr) exchanges_->client_prev = exchange;
  exchanges_ = exchange;
}

void Client::Detach(Exchange* exchange) {
  BH_CHECK(exchange->client == this);
  if (exchange->client_prev != nullptr) {
    exchange->client_prev->client_next = exchange->client_next;
  } else {
    exchanges_ = exchange->client_next;
  }
  if (exchange->client_next != nullptr) {
    exchange->client_next->client_prev = exchange->client_prev;
  }
  exchange->client_prev = exchange->client_next = nullptr;
  exchange->client = nullptr;
}

void Client::CloseAnswers() {
  // Answers still waiting for the loop's write batch get the one write they would have had
  // without it; those not written whole by now are never delivered.
  writer_.WriteNow();
  CountWritten();
  if (unwritten_head_ < unwritten_.size()) {
    owner_->CountUndelivered(unwritten_.size() - unwritten_head_);
  }
  unwritten_.clear();
  unwritten_head_ = 0;
  writer_.Abandon();
  while (exchanges_ != nullptr) {
    Exchange* exchange = exchanges_;
    Detach(exchange);
    owner_->OnClientGone(exchange);
  }
}

int Client::DuplicateSocket() const {
  uv_os_fd_t fd = -1;
  if (uv_fileno(reinterpret_cast<const uv_handle_t*>(stream_), &fd) != 0) return -1;
  return ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
}

}  // namespace bulkhead::proxy
