// SPDX-License-Identifier: MIT
// CapturedLog: the LogSink of a test, for its lifetime; keeps every line Log lets through (level,
// cell, pid, message) and writes none to stderr. Not thread-safe: for tests whose code logs on the
// test's thread (a loop run by the test).
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "base/log.h"

namespace bulkhead::testing {

class CapturedLog : public LogSink {
 public:
  struct Line {
    LogLevel level = LogLevel::kInfo;
    std::string cell;
    int pid = 0;
    std::string message;
  };

  // Logs at `level` and above are kept (debug lines are below the default level).
  explicit CapturedLog(LogLevel level = LogLevel::kDebug)
      : previous_sink_(GetLogSink()), previous_level_(GetLogLevel()) {
    SetLogSink(this);
    SetLogLevel(level);
  }
  ~CapturedLog() override {
    SetLogSink(previous_sink_);
    SetLogLevel(previous_level_);
  }
  CapturedLog(const CapturedLog&) = delete;
  CapturedLog& operator=(const CapturedLog&) = delete;

  bool Consume(const LogRecord& record) override {
    lines_.push_back(
        Line{record.level, std::string(record.cell), record.pid, std::string(record.message)});
    return true;
  }

  const std::vector<Line>& lines() const { return lines_; }
  // Lines whose message contains `needle`.
  size_t Count(std::string_view needle) const {
    return static_cast<size_t>(std::count_if(lines_.begin(), lines_.end(), [&](const Line& line) {
      return line.message.find(needle) != std::string::npos;
    }));
  }
  // The last line whose message contains `needle`, or nullptr.
  const Line* Find(std::string_view needle) const {
    for (auto it = lines_.rbegin(); it != lines_.rend(); ++it) {
      if (it->message.find(needle) != std::string::npos) return &*it;
    }
    return nullptr;
  }
  // Every message, one per line, for failure messages.
  std::string Text() const {
    std::string text;
    for (const Line& line : lines_) text += line.cell + " " + line.message + "\n";
    return text;
  }

 private:
  LogSink* previous_sink_;
  LogLevel previous_level_;
  std::vector<Line> lines_;
};

}  // namespace bulkhead::testing
