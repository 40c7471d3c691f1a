// SPDX-License-Identifier: MIT
// LineSplitter: cuts a byte stream (a worker's stdout or stderr) into lines of bounded length, as
// journald does with a service's output (journald.conf(5) LineMax=). Pure: no I/O, no clock; one
// instance per stream, used by one thread.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace bulkhead::lifecycle {

class LineSplitter {
 public:
  // `line`: without its '\n' (and without a '\r' just before it). `truncated`: the line was longer
  // than max_line bytes and this is its first max_line bytes; the rest of it, up to its '\n', is
  // dropped. `line` is valid only during the call.
  using Sink = std::function<void(std::string_view line, bool truncated)>;

  // REQUIRES: max_line >= 1. The splitter holds at most max_line bytes of a pending line.
  LineSplitter(size_t max_line, Sink sink);

  // Feeds the next bytes of the stream; the sink gets every line they complete, in order. An
  // over-long line is delivered (truncated) as soon as max_line bytes of it have arrived.
  void Feed(std::string_view data);
  // End of the stream: a pending unterminated line goes to the sink; then the splitter is as new.
  void Finish();

  // Bytes of the pending unterminated line held now (<= max_line).
  size_t pending() const { return pending_.size(); }

 private:
  void Emit(std::string_view line, bool truncated);

  size_t max_line_;
  Sink sink_;
  std::string pending_;
  // An over-long line was delivered: its remaining bytes are dropped up to the next '\n'.
  bool discarding_ = false;
};

}  // namespace bulkhead::lifecycle
