// SPDX-License-Identifier: MIT
// LogRing: a cell's most recent log lines, for `bulkheadctl logs` when bulkheadd does not log to
// the journal (docs/logging.md, "Recent lines of a cell"). Bounded by a number of lines and a
// number of bytes; the oldest lines make room. Each line gets a sequence number, so that a reader
// that follows asks for the lines after the last it got and learns how many it missed. Pure: no
// I/O, no clock. Thread-compatible (CellLogs locks around it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

namespace bulkhead::lifecycle {

class LogRing {
 public:
  // What a ring keeps by default: the last 1000 lines of the cell, at most 256 KiB of them.
  static constexpr size_t kDefaultMaxLines = 1000;
  static constexpr size_t kDefaultMaxBytes = size_t{256} * 1024;

  // REQUIRES: max_lines >= 1, max_bytes >= 1.
  explicit LogRing(size_t max_lines = kDefaultMaxLines, size_t max_bytes = kDefaultMaxBytes);

  // Adds `line` (without its newline) as the newest, cut to max_bytes when longer, and drops the
  // oldest lines until both bounds hold.
  void Append(std::string line);

  struct Page {
    std::vector<std::string> lines;  // oldest first
    uint64_t next = 0;               // the sequence number the next line will get
    uint64_t missed = 0;             // lines numbered `from` or later that were already dropped
  };
  // The lines numbered `from` and later (every line held, without `from` or with a `from` beyond
  // `next`, which another ring handed out), at most the newest `last` of them when given.
  Page Read(std::optional<uint64_t> from, std::optional<uint64_t> last) const;

  size_t lines() const { return lines_.size(); }
  size_t bytes() const { return bytes_; }

 private:
  size_t max_lines_;
  size_t max_bytes_;
  std::deque<std::string> lines_;
  size_t bytes_ = 0;        // sum of the sizes of lines_
  uint64_t first_seq_ = 0;  // the sequence number of lines_.front()
};

}  // namespace bulkhead::lifecycle
