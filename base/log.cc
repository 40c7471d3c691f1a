// SPDX-License-Identifier: MIT
#include "base/log.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace bulkhead {
namespace {

std::atomic<LogLevel> g_level{LogLevel::kInfo};
std::atomic<LogSink*> g_sink{nullptr};

constexpr char kHex[] = "0123456789abcdef";

void AppendHexByte(std::string* out, unsigned char c) {
  out->append("\\x");
  out->push_back(kHex[c >> 4]);
  out->push_back(kHex[c & 0xf]);
}

// The length of the valid UTF-8 sequence at the start of `text` (2 to 4), or 0 when it is not one
// (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF). REQUIRES: text[0] >= 0x80.
size_t Utf8SequenceLength(std::string_view text) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  unsigned char lead = byte(0);
  size_t length = 0;
  unsigned char second_min = 0x80;
  unsigned char second_max = 0xbf;
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    if (lead == 0xe0) second_min = 0xa0;
    if (lead == 0xed) second_max = 0x9f;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    if (lead == 0xf0) second_min = 0x90;
    if (lead == 0xf4) second_max = 0x8f;
  } else {
    return 0;
  }
  if (text.size() < length) return 0;
  if (byte(1) < second_min || byte(1) > second_max) return 0;
  for (size_t i = 2; i < length; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xbf) return 0;
  }
  return length;
}

void AppendQuoted(std::string* out, std::string_view text) {
  out->push_back('"');
  size_t i = 0;
  while (i < text.size()) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      size_t length = Utf8SequenceLength(text.substr(i));
      if (length == 0) {
        AppendHexByte(out, c);
        ++i;
      } else {
        out->append(text.substr(i, length));
        i += length;
      }
      continue;
    }
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          AppendHexByte(out, c);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
    ++i;
  }
  out->push_back('"');
}

bool IsBareValue(std::string_view value) {
  if (value.empty()) return false;
  for (char c : value) {
    if (c <= ' ' || c >= 0x7f || c == '"' || c == '=' || c == '\\') return false;
  }
  return true;
}

LogStyle DetectStderrStyle() {
  const char* stream = std::getenv("JOURNAL_STREAM");
  if (stream == nullptr) return LogStyle::kTimestamp;
  // "DEVICE:INODE", both decimal (systemd.exec(5) $JOURNAL_STREAM).
  std::string_view text(stream);
  size_t colon = text.find(':');
  uintmax_t device = 0;
  uintmax_t inode = 0;
  if (colon == std::string_view::npos) return LogStyle::kTimestamp;
  const char* end = text.data() + text.size();
  auto [device_end, device_error] = std::from_chars(text.data(), text.data() + colon, device);
  auto [inode_end, inode_error] = std::from_chars(text.data() + colon + 1, end, inode);
  if (device_error != std::errc() || device_end != text.data() + colon ||
      inode_error != std::errc() || inode_end != end) {
    return LogStyle::kTimestamp;
  }
  struct stat st {};
  if (::fstat(STDERR_FILENO, &st) != 0) return LogStyle::kTimestamp;
  return static_cast<uintmax_t>(st.st_dev) == device && static_cast<uintmax_t>(st.st_ino) == inode
             ? LogStyle::kJournal
             : LogStyle::kTimestamp;
}

// The sd-daemon(3) prefix "<N>" of `level`.
void AppendPriorityPrefix(LogLevel level, std::string* out) {
  out->push_back('<');
  out->push_back(static_cast<char>('0' + SyslogPriority(level)));
  out->push_back('>');
}

// Writes all of `*line` with as few write(2) calls as the kernel allows (one, but for a signal or
// a full pipe), so lines stay whole; then drops a huge buffer's capacity (a message of many
// megabytes should not keep it for good).
void WriteLineToStderr(std::string* line) {
  size_t written = 0;
  while (written < line->size()) {
    ssize_t n = ::write(STDERR_FILENO, line->data() + written, line->size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
  if (line->capacity() > (1u << 20)) std::string().swap(*line);
}

}  // namespace

void SetLogLevel(LogLevel level) { g_level.store(level); }
LogLevel GetLogLevel() { return g_level.load(); }

const char* LogLevelName(LogLevel level) {
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

std::optional<LogLevel> ParseLogLevel(std::string_view name) {
  for (LogLevel level : {LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarning, LogLevel::kError}) {
    if (name == LogLevelName(level)) return level;
  }
  return std::nullopt;
}

int SyslogPriority(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return 7;
    case LogLevel::kInfo:
      return 6;
    case LogLevel::kWarning:
      return 4;
    case LogLevel::kError:
      return 3;
  }
  return 6;
}

std::optional<LogLevel> StripPriorityPrefix(std::string_view* text) {
  if (text->size() < 3 || (*text)[0] != '<' || (*text)[2] != '>') return std::nullopt;
  char digit = (*text)[1];
  if (digit < '0' || digit > '7') return std::nullopt;
  text->remove_prefix(3);
  if (digit <= '3') return LogLevel::kError;
  if (digit == '4') return LogLevel::kWarning;
  if (digit <= '6') return LogLevel::kInfo;
  return LogLevel::kDebug;
}

void AppendLogfmtValue(std::string* out, std::string_view value) {
  if (IsBareValue(value)) {
    out->append(value);
  } else {
    AppendQuoted(out, value);
  }
}

void FormatLogLine(LogStyle style, const timespec& now, LogLevel level, std::string_view cell,
                   int pid, std::span<const LogField> fields, std::string_view message,
                   std::string* out) {
  if (style == LogStyle::kJournal) {
    AppendPriorityPrefix(level, out);
  } else if (style == LogStyle::kTimestamp) {
    tm utc{};
    gmtime_r(&now.tv_sec, &utc);
    char stamp[40];
    size_t n = strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &utc);
    std::snprintf(stamp + n, sizeof stamp - n, ".%03ldZ ", now.tv_nsec / 1000000);
    out->append(stamp);
  }
  out->append("level=");
  out->append(LogLevelName(level));
  if (!cell.empty()) {
    out->append(" cell=");
    AppendLogfmtValue(out, cell);
  }
  if (pid > 0) {
    out->append(" pid=");
    out->append(std::to_string(pid));
  }
  for (const LogField& field : fields) {
    out->push_back(' ');
    out->append(field.key);
    out->push_back('=');
    AppendLogfmtValue(out, field.value);
  }
  out->append(" msg=");
  AppendQuoted(out, message);
  out->push_back('\n');
}

LogStyle StderrLogStyle() {
  static const LogStyle style = DetectStderrStyle();
  return style;
}

void SetLogSink(LogSink* sink) { g_sink.store(sink); }
LogSink* GetLogSink() { return g_sink.load(); }

void Log(LogLevel level, std::string_view cell, int pid, std::string_view message) {
  Log(level, cell, pid, {}, message);
}

void Log(LogLevel level, std::string_view cell, int pid, std::span<const LogField> fields,
         std::string_view message) {
  if (level < g_level.load()) return;
  if (LogSink* sink = g_sink.load();
      sink != nullptr && sink->Consume(LogRecord{level, cell, pid, fields, message})) {
    return;
  }
  // Reused per thread: logging a worker's lines makes no heap churn.
  thread_local std::string line;
  line.clear();
  timespec now{};
  LogStyle style = StderrLogStyle();
  if (style == LogStyle::kTimestamp) clock_gettime(CLOCK_REALTIME, &now);
  FormatLogLine(style, now, level, cell, pid, fields, message, &line);
  WriteLineToStderr(&line);
}

void WriteStderrLine(LogLevel level, std::string_view text) {
  thread_local std::string line;
  line.clear();
  if (StderrLogStyle() == LogStyle::kJournal) AppendPriorityPrefix(level, &line);
  line.append(text);
  line.push_back('\n');
  WriteLineToStderr(&line);
}

}  // namespace bulkhead
