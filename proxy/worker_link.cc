// SPDX-License-Identifier: MIT
#include "proxy/worker_link.h"

#include <utility>

#include "base/check.h"
#include "proxy/exchange.h"

namespace bulkhead::proxy {

namespace {
constexpr size_t kReadChunk = size_t{64} * 1024;
// A kept payload buffer larger than this is freed once its reply starts rather than kept for reuse.
constexpr size_t kMaxRetainedPayload = size_t{64} * 1024;
}  // namespace

WorkerLink::WorkerLink(Owner* owner, uint32_t max_payload, bool multiplexed)
    : owner_(owner),
      multiplexed_(multiplexed),
      decoder_(ipc::FrameType::kReply, max_payload),
      writer_(
          reinterpret_cast<uv_stream_t*>(&pipe_),
          [this](int status) {
            write_failed_ = true;
            Broken(std::string("write to worker failed: ") + uv_strerror(status));
          },
          nullptr) {
  pipe_.data = this;
}

Result<WorkerLink*> WorkerLink::Connect(Owner* owner, uv_loop_t* loop, const std::string& path,
                                        uint32_t max_payload, bool multiplexed) {
  auto* link = new WorkerLink(owner, max_payload, multiplexed);
  Status opened =
      link->Open(loop, path, &WorkerLink::OnAlloc, &WorkerLink::OnRead, &WorkerLink::OnClosed);
  if (!opened.ok()) return opened;
  return link;
}

void WorkerLink::Send(Exchange* exchange, std::string_view payload) {
  BH_CHECK(!closing_ && (multiplexed_ || in_flight_ == 0));
  uint32_t index = 0;
  if (free_slots_.empty()) {
    index = static_cast<uint32_t>(slots_.size());
    slots_.emplace_back();
  } else {
    index = free_slots_.back();
    free_slots_.pop_back();
  }
  Slot& slot = slots_[index];
  slot.exchange = exchange;
  slot.payload_size = static_cast<uint32_t>(payload.size());
  slot.frame_offset = writer_.appended_bytes();
  ++in_flight_;
  take_from_ = 0;
  exchange->link = this;
  ipc::FrameHeader header;
  header.type = ipc::FrameType::kRequest;
  header.request_id = RequestIdOf(index, slot.generation);
  writer_.AppendFrame(header, payload);
  if (!multiplexed_) {
    payload_.assign(payload);
    reply_started_ = false;
    writer_.Flush();
  }
}

void WorkerLink::FreeSlot(uint32_t index) {
  Slot& slot = slots_[index];
  slot.exchange->link = nullptr;
  slot.exchange = nullptr;
  // Generation 0 is never used, so that no id is 0 (nor a slot's first id a former one's).
  if (++slot.generation == 0) slot.generation = 1;
  free_slots_.push_back(index);
  --in_flight_;
}

Exchange* WorkerLink::TakeReplied(uint64_t request_id) {
  const uint64_t index = request_id >> 32;
  if (index >= slots_.size()) return nullptr;
  Slot& slot = slots_[index];
  if (slot.exchange == nullptr || slot.generation != static_cast<uint32_t>(request_id)) {
    return nullptr;
  }
  Exchange* exchange = slot.exchange;
  FreeSlot(static_cast<uint32_t>(index));
  return exchange;
}

Exchange* WorkerLink::TakeInflight(bool* unread, std::string_view* payload) {
  while (take_from_ < slots_.size() && slots_[take_from_].exchange == nullptr) ++take_from_;
  if (take_from_ == slots_.size()) return nullptr;
  const auto index = static_cast<uint32_t>(take_from_);
  const Slot& slot = slots_[index];
  if (unread != nullptr) {
    if (!multiplexed_) {
      *unread = !reply_started_ && (write_failed_ || reset_);
      if (payload != nullptr) *payload = payload_;
    } else {
      // The bytes never handed to the kernel are the newest ones: a frame that starts there was
      // not written at all.
      const std::string_view never_written = writer_.never_written();
      const uint64_t base = writer_.appended_bytes() - never_written.size();
      *unread = slot.frame_offset >= base;
      if (*unread && payload != nullptr) {
        *payload =
            never_written.substr(slot.frame_offset - base + ipc::kHeaderSize, slot.payload_size);
      }
    }
  }
  Exchange* exchange = slot.exchange;
  FreeSlot(index);
  return exchange;
}

void WorkerLink::OnAlloc(uv_handle_t* handle, size_t, uv_buf_t* buf) {
  auto* self = static_cast<WorkerLink*>(handle->data);
  std::span<char> space = self->decoder_.PrepareWrite(kReadChunk);
  *buf = uv_buf_init(space.data(), static_cast<unsigned>(space.size()));
}

void WorkerLink::OnRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t*) {
  auto* self = static_cast<WorkerLink*>(stream->data);
  if (self->closing_) return;
  if (nread < 0) {
    if (nread == UV_ECONNRESET) self->reset_ = true;
    self->Broken(nread == UV_EOF ? "worker closed the connection"
                                 : std::string("read from worker failed: ") +
                                       uv_strerror(static_cast<int>(nread)));
    return;
  }
  if (nread == 0) return;
  if (!self->multiplexed_ && self->in_flight_ != 0 && !self->reply_started_) {
    self->reply_started_ = true;
    if (self->payload_.capacity() > kMaxRetainedPayload) {
      std::string().swap(self->payload_);
    } else {
      self->payload_.clear();
    }
  }
  self->decoder_.Commit(static_cast<size_t>(nread));
  ipc::FrameView frame;
  for (;;) {
    ipc::DecodeResult result = self->decoder_.Next(&frame);
    if (result == ipc::DecodeResult::kNeedMore) return;
    if (result == ipc::DecodeResult::kError) {
      self->Broken("worker sent a malformed frame: " + self->decoder_.error_message(), true);
      return;
    }
    Exchange* exchange = self->TakeReplied(frame.header.request_id);
    if (exchange == nullptr) {
      self->Broken("worker replied to a request it was not sent", true);
      return;
    }
    // May send the next request on this link (or close it): nothing of `self` is used after this
    // except the decoder, and only while the link is still open.
    self->Answer(exchange, frame);
    if (self->closing_) return;
  }
}

void WorkerLink::Answer(Exchange* exchange, const ipc::FrameView& frame) {
  // docs/protocol.md, "Supervisor -> worker": OK/none or FAILED/worker_error, nothing else.
  const ipc::FrameHeader& in = frame.header;
  if (!ipc::IsValidWorkerReply(in)) {
    scratch_ = std::string("worker broke the protocol: it replied with status ") +
               ipc::StatusName(in.status) + " and reason " + ipc::ReasonName(in.reason);
    owner_->OnWorkerAnswer(this, exchange, Outcome::Failed(ipc::Reason::kWorkerError, scratch_),
                           /*reusable=*/true);
  } else if (in.status == ipc::ReplyStatus::kOk) {
    owner_->OnWorkerAnswer(this, exchange, Outcome::Ok(frame.payload), /*reusable=*/true);
  } else {
    owner_->OnWorkerAnswer(this, exchange,
                           Outcome::Failed(ipc::Reason::kWorkerError, frame.payload),
                           /*reusable=*/true);
  }
}

void WorkerLink::Broken(const std::string& why, bool worker_at_fault) {
  if (closing_) return;
  owner_->OnLinkBroken(this, why, worker_at_fault);
}

void WorkerLink::Close() {
  BH_CHECK(in_flight_ == 0);
  if (closing_) return;
  closing_ = true;
  writer_.Abandon();
  uv_close(reinterpret_cast<uv_handle_t*>(&pipe_), &WorkerLink::OnClosed);
}

void WorkerLink::OnClosed(uv_handle_t* handle) { delete static_cast<WorkerLink*>(handle->data); }

}  // namespace bulkhead::proxy
