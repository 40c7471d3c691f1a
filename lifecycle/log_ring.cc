// SPDX-License-Identifier: MIT
#include "lifecycle/log_ring.h"

#include <algorithm>
#include <utility>

#include "base/check.h"

namespace bulkhead::lifecycle {

LogRing::LogRing(size_t max_lines, size_t max_bytes)
    : max_lines_(max_lines), max_bytes_(max_bytes) {
  BH_CHECK(max_lines >= 1 && max_bytes >= 1);
}

void LogRing::Append(std::string line) {
  if (line.size() > max_bytes_) line.resize(max_bytes_);
  bytes_ += line.size();
  lines_.push_back(std::move(line));
  while (lines_.size() > max_lines_ || bytes_ > max_bytes_) {
    bytes_ -= lines_.front().size();
    lines_.pop_front();
    ++first_seq_;
  }
}

LogRing::Page LogRing::Read(std::optional<uint64_t> from, std::optional<uint64_t> last) const {
  Page page;
  const uint64_t next = first_seq_ + lines_.size();
  page.next = next;
  uint64_t start = first_seq_;
  // A `from` beyond `next` was not handed out by this ring (bulkheadd restarted since): every
  // line held is new to that reader.
  if (from && *from <= next) {
    if (*from < first_seq_) page.missed = first_seq_ - *from;
    start = std::max(*from, first_seq_);
  }
  if (last && next - start > *last) start = next - *last;
  for (uint64_t seq = start; seq < next; ++seq) page.lines.push_back(lines_[seq - first_seq_]);
  return page;
}

}  // namespace bulkhead::lifecycle
