// SPDX-License-Identifier: MIT
#include "loop/stream_writer.h"

#include <utility>

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

void StreamWriter::Flush() {
  if (writing_ || failed_ || abandoned_ || pending_.empty()) return;
  uv_buf_t buf = uv_buf_init(pending_.data(), static_cast<unsigned>(pending_.size()));
  int n = uv_try_write(stream_, &buf, 1);
  if (n == static_cast<int>(pending_.size())) {
    pending_.clear();
    if (on_written_) on_written_();
    if (on_drained_) on_drained_();
    return;
  }
  if (n < 0 && n != UV_EAGAIN) {
    failed_ = true;
    if (on_error_) on_error_(n);
    return;
  }
  if (n > 0) {
    pending_.erase(0, static_cast<size_t>(n));
    if (on_written_) on_written_();
  }
  std::swap(pending_, inflight_);
  pending_.clear();
  buf = uv_buf_init(inflight_.data(), static_cast<unsigned>(inflight_.size()));
  int rc = uv_write(&write_req_, stream_, &buf, 1, &StreamWriter::OnWrite);
  if (rc != 0) {
    failed_ = true;
    inflight_.clear();
    if (on_error_) on_error_(rc);
    return;
  }
  writing_ = true;
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
