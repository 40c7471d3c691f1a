// SPDX-License-Identifier: MIT
#include "lifecycle/line_splitter.h"

#include <cstring>
#include <utility>

#include "base/check.h"

namespace bulkhead::lifecycle {

LineSplitter::LineSplitter(size_t max_line, Sink sink)
    : max_line_(max_line), sink_(std::move(sink)) {
  BH_CHECK(max_line_ >= 1);
}

void LineSplitter::Emit(std::string_view line, bool truncated) {
  if (!truncated && !line.empty() && line.back() == '\r') line.remove_suffix(1);
  sink_(line, truncated);
}

void LineSplitter::Feed(std::string_view data) {
  while (!data.empty()) {
    const void* found = std::memchr(data.data(), '\n', data.size());
    size_t end = found == nullptr
                     ? data.size()
                     : static_cast<size_t>(static_cast<const char*>(found) - data.data());
    std::string_view piece = data.substr(0, end);
    bool complete = found != nullptr;
    data.remove_prefix(complete ? end + 1 : end);

    if (discarding_) {
      if (complete) discarding_ = false;
      continue;
    }
    if (pending_.size() + piece.size() > max_line_) {
      // Over-long: its first max_line bytes now, the rest dropped.
      size_t take = max_line_ - pending_.size();
      if (pending_.empty()) {
        Emit(piece.substr(0, take), true);
      } else {
        pending_.append(piece.substr(0, take));
        Emit(pending_, true);
        pending_.clear();
      }
      discarding_ = !complete;
      continue;
    }
    if (!complete) {
      pending_.append(piece);
    } else if (pending_.empty()) {
      Emit(piece, false);  // straight from the caller's buffer
    } else {
      pending_.append(piece);
      Emit(pending_, false);
      pending_.clear();
    }
  }
}

void LineSplitter::Finish() {
  if (!pending_.empty()) Emit(pending_, false);
  pending_.clear();
  discarding_ = false;
}

}  // namespace bulkhead::lifecycle
