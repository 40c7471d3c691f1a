// SPDX-License-Identifier: MIT
#include "base/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <ctime>
#include <string>

namespace bulkhead {
namespace {

std::atomic<LogLevel> g_level{LogLevel::kInfo};

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

void AppendQuoted(std::string* out, std::string_view text) {
  out->push_back('"');
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(c);
    } else if (c == '\n') {
      out->append("\\n");
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out->push_back(' ');
    } else {
      out->push_back(c);
    }
  }
  out->push_back('"');
}

}  // namespace

void SetLogLevel(LogLevel level) { g_level.store(level); }
LogLevel GetLogLevel() { return g_level.load(); }

void Log(LogLevel level, std::string_view cell, int pid, std::string_view message) {
  if (level < g_level.load()) return;
  std::string line;
  line.reserve(96 + message.size());
  static const bool under_journald = std::getenv("JOURNAL_STREAM") != nullptr;
  if (!under_journald) {
    timespec now{};
    clock_gettime(CLOCK_REALTIME, &now);
    tm utc{};
    gmtime_r(&now.tv_sec, &utc);
    char stamp[40];
    size_t n = strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &utc);
    snprintf(stamp + n, sizeof stamp - n, ".%03ldZ ", now.tv_nsec / 1000000);
    line += stamp;
  }
  line += "level=";
  line += LevelName(level);
  if (!cell.empty()) {
    line += " cell=";
    line += cell;
  }
  if (pid > 0) {
    line += " pid=";
    line += std::to_string(pid);
  }
  line += " msg=";
  AppendQuoted(&line, message);
  line.push_back('\n');
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace bulkhead
