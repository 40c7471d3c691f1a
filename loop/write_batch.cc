// SPDX-License-Identifier: MIT
#include "loop/write_batch.h"

#include <liburing.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <utility>

#include "loop/stream_writer.h"

namespace bulkhead::loop {

namespace {
// Submission entries of the ring: a batch larger than this goes in several io_uring_enter calls.
constexpr unsigned kRingEntries = 256;
}  // namespace

struct WriteBatch::Ring {
  io_uring ring{};
  ~Ring() { io_uring_queue_exit(&ring); }
};

std::optional<bool> IoUringWanted(const char* value) {
  if (value == nullptr) return true;
  std::string lower(value);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (std::string_view on : {"on", "1", "true", "yes"}) {
    if (lower == on) return true;
  }
  for (std::string_view off : {"off", "0", "false", "no"}) {
    if (lower == off) return false;
  }
  return std::nullopt;
}

WriteBatch::WriteBatch(uv_loop_t* loop) {
  const char* knob = std::getenv("BULKHEAD_IO_URING");
  const std::optional<bool> wanted = IoUringWanted(knob);
  const std::string one_by_one =
      "socket writes (client answers, HTTP requests to workers) go one by one";
  if (!wanted.has_value()) {
    setting_unknown_ = true;
    how_ = "BULKHEAD_IO_URING=" + std::string(knob) +
           " is not on/off (1/0, true/false, yes/no): taken as on; ";
  }
  if (wanted.value_or(true)) {
    auto ring = std::make_unique<Ring>();
    // One thread submits (the loop's); completions are only reaped right after each submit.
    io_uring_params params{};
    params.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    int rc = io_uring_queue_init_params(kRingEntries, &ring->ring, &params);
    if (rc == -EINVAL) rc = io_uring_queue_init(kRingEntries, &ring->ring, 0);  // before 6.1
    if (rc == 0) {
      ring_ = std::move(ring);
      how_ +=
          "the socket writes of a loop iteration (client answers, HTTP requests to workers) are "
          "sent together (io_uring)";
    } else {
      how_ += one_by_one + ": io_uring unavailable (io_uring_setup: " + std::strerror(-rc) + ")";
    }
  } else {
    how_ += one_by_one + ": BULKHEAD_IO_URING=" + std::string(knob);
  }
  prepare_ = handles_.Open(uv_prepare_init, loop);
  check_ = handles_.Open(uv_check_init, loop);
  prepare_->data = this;
  check_->data = this;
  uv_prepare_start(prepare_, &WriteBatch::OnPrepare);
  uv_check_start(check_, &WriteBatch::OnCheck);
  uv_unref(reinterpret_cast<uv_handle_t*>(prepare_));
  uv_unref(reinterpret_cast<uv_handle_t*>(check_));
}

WriteBatch::~WriteBatch() = default;

void WriteBatch::Join(StreamWriter* writer) { members_.push_back(writer); }

void WriteBatch::Leave(StreamWriter* writer) {
  std::replace(members_.begin(), members_.end(), writer, static_cast<StreamWriter*>(nullptr));
  std::replace(sending_.begin(), sending_.end(), writer, static_cast<StreamWriter*>(nullptr));
}

void WriteBatch::Submit() {
  // A callback may join writers again (or others): they go in the next round.
  while (!members_.empty()) {
    sending_.swap(members_);
    members_.clear();
    results_.assign(sending_.size(), 0);
    // Every send is queued, then all go in as few io_uring_enter calls as the ring allows. With
    // MSG_DONTWAIT none waits, so each has completed when io_uring_submit_and_wait returns.
    size_t next = 0;
    while (next < sending_.size()) {
      unsigned queued = 0;
      for (; next < sending_.size() && queued < kRingEntries; ++next) {
        StreamWriter* writer = sending_[next];
        const int fd = writer != nullptr ? writer->fd() : -1;
        if (fd < 0) {
          results_[next] = -EBADF;
          continue;
        }
        io_uring_sqe* sqe = io_uring_get_sqe(&ring_->ring);
        io_uring_prep_send(sqe, fd, writer->pending_.data(), writer->pending_.size(),
                           MSG_DONTWAIT | MSG_NOSIGNAL);
        io_uring_sqe_set_data64(sqe, next);
        ++queued;
      }
      if (queued == 0) continue;
      int rc;
      do {
        rc = io_uring_submit_and_wait(&ring_->ring, queued);
      } while (rc == -EINTR);
      unsigned head;
      unsigned seen = 0;
      io_uring_cqe* cqe;
      io_uring_for_each_cqe(&ring_->ring, head, cqe) {
        ++seen;
        results_[cqe->user_data] = cqe->res;
      }
      io_uring_cq_advance(&ring_->ring, seen);
      if (rc < 0 || seen != queued) {
        // Should not happen (the ring is ours alone and sized for the batch); whatever did not
        // complete is written directly below.
        for (size_t i = next - queued; i < next; ++i) {
          if (results_[i] == 0) results_[i] = -EAGAIN;
        }
      }
    }
    // First every member's bytes are settled, then the callbacks run: a callback that closes
    // another member's client finds its bytes already counted as sent.
    for (size_t i = 0; i < sending_.size(); ++i) {
      StreamWriter* writer = sending_[i];
      if (writer == nullptr) continue;
      writer->in_batch_ = false;
      results_[i] = static_cast<int>(writer->TakeSendResult(results_[i]));
    }
    for (size_t i = 0; i < sending_.size(); ++i) {
      StreamWriter* writer = sending_[i];
      if (writer == nullptr || writer->abandoned_) continue;
      writer->RunCallbacks(static_cast<StreamWriter::Sent>(results_[i]), /*batched=*/true);
    }
    sending_.clear();
  }
}

void WriteBatch::OnPrepare(uv_prepare_t* handle) {
  static_cast<WriteBatch*>(handle->data)->Submit();
}

void WriteBatch::OnCheck(uv_check_t* handle) { static_cast<WriteBatch*>(handle->data)->Submit(); }

void WriteBatch::Close(std::function<void()> on_closed) {
  if (ring_ != nullptr) Submit();
  handles_.Close(std::move(on_closed));
}

}  // namespace bulkhead::loop
