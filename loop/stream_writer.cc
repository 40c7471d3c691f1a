// SPDX-License-Identifier: MIT
#include "loop/stream_writer.h"

#include <utility>

#include "loop/write_batch.h"

namespace bulkhead::loop {

StreamWriter::StreamWriter(uv_stream_t* stream, std::function<void(int)> on_error,
                           std::function<void()> on_drained)
    : stream_(stream), on_error_(std::move(on_error)), on_drained_(std::move(on_drained)) {
  write_req_.data = this;
}

void StreamWriter::AppendFrame(const ipc::FrameHeader& header, std::string_view payload) {
  const size_t before = pending_.size();
  ipc::AppendFrame(&pending_, header, payload);
  appended_ += pending_.size() - before;
}

void StreamWriter::AppendBytes(std::string_view bytes) {
  pending_.append(bytes);
  appended_ += bytes.size();
}

uint64_t StreamWriter::written_bytes() const {
  // libuv counts what is left of a uv_write in write_queue_size, partial writes deducted.
  const size_t queued = writing_ ? uv_stream_get_write_queue_size(stream_) : 0;
  return appended_ - pending_.size() - queued;
}

StreamWriter::~StreamWriter() {
  if (in_batch_) batch_->Leave(this);
}

void StreamWriter::SetBatch(WriteBatch* batch) {
  batch_ = batch != nullptr && batch->enabled() ? batch : nullptr;
}

void StreamWriter::Abandon() {
  abandoned_ = true;
  if (in_batch_) {
    in_batch_ = false;
    batch_->Leave(this);
  }
}

void StreamWriter::WriteNow() {
  if (!in_batch_) return;
  in_batch_ = false;
  batch_->Leave(this);
  uv_buf_t buf = uv_buf_init(pending_.data(), static_cast<unsigned>(pending_.size()));
  const int n = uv_try_write(stream_, &buf, 1);
  if (n > 0) pending_.erase(0, static_cast<size_t>(n));
}

int StreamWriter::fd() const {
  uv_os_fd_t fd = -1;
  if (uv_fileno(reinterpret_cast<const uv_handle_t*>(stream_), &fd) != 0) return -1;
  return fd;
}

void StreamWriter::Flush() {
  if (writing_ || failed_ || abandoned_ || in_batch_ || pending_.empty()) return;
  if (batch_ != nullptr) {
    in_batch_ = true;
    batch_->Join(this);
    return;
  }
  uv_buf_t buf = uv_buf_init(pending_.data(), static_cast<unsigned>(pending_.size()));
  // The caller looks at the backlog itself after a direct write (Client::WatchBacklog).
  RunCallbacks(TakeSendResult(uv_try_write(stream_, &buf, 1)), /*batched=*/false);
}

StreamWriter::Sent StreamWriter::TakeSendResult(int n) {
  if (n == static_cast<int>(pending_.size())) {
    pending_.clear();
    return Sent::kAll;
  }
  if (n < 0 && n != UV_EAGAIN) {
    failed_ = true;
    error_ = n;
    return Sent::kError;
  }
  const bool some = n > 0;
  if (some) pending_.erase(0, static_cast<size_t>(n));
  std::swap(pending_, inflight_);
  pending_.clear();
  uv_buf_t buf = uv_buf_init(inflight_.data(), static_cast<unsigned>(inflight_.size()));
  int rc = uv_write(&write_req_, stream_, &buf, 1, &StreamWriter::OnWrite);
  if (rc != 0) {
    failed_ = true;
    error_ = rc;
    inflight_.clear();
    return Sent::kError;
  }
  writing_ = true;
  return some ? Sent::kSome : Sent::kNothing;
}

void StreamWriter::RunCallbacks(Sent sent, bool batched) {
  switch (sent) {
    case Sent::kAll:
      if (on_written_) on_written_();
      if (on_drained_) on_drained_();
      return;
    case Sent::kError:
      if (on_error_) on_error_(error_);
      return;
    case Sent::kSome:
      if (on_written_) on_written_();
      [[fallthrough]];
    case Sent::kNothing:
      if (batched && on_backlog_) on_backlog_();
      return;
  }
}

void StreamWriter::OnWrite(uv_write_t* req, int status) {
  auto* self = static_cast<StreamWriter*>(req->data);
  self->writing_ = false;
  self->inflight_.clear();
  if (self->abandoned_) return;
  if (status < 0) {
    if (!self->failed_) {
      self->failed_ = true;
      if (self->on_error_) self->on_error_(status);
    }
    return;
  }
  if (self->on_written_) self->on_written_();
  if (self->pending_.empty()) {
    if (self->on_drained_) self->on_drained_();
  } else {
    self->Flush();
  }
}

}  // namespace bulkhead::loop
