// SPDX-License-Identifier: MIT
// Supervisor logging: one line per event on stderr, in logfmt so that journald and grep read it
// (the format is specified in docs/logging.md):
//   2026-11-29T22:41:07.123Z level=info cell=payments pid=41234 msg="worker started"
// When stderr is the journal's stream (JOURNAL_STREAM names stderr's device:inode, systemd.exec(5))
// the timestamp is left out, since journald stamps lines itself, and the line starts with the
// sd-daemon(3) priority prefix instead: "<6>level=info ...". Thread-safe: each line is written with
// one write(2).
#pragma once

#include <ctime>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace bulkhead {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// Lines below `level` are dropped. Default kInfo.
void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();

// "debug", "info", "warning", "error" (the values of `[supervisor] log_level` and
// `bulkheadd --log-level`) to a level; nullopt for anything else.
std::optional<LogLevel> ParseLogLevel(std::string_view name);
// The name ParseLogLevel accepts for `level`.
const char* LogLevelName(LogLevel level);

// The sd-daemon(3) / syslog(3) priority of a level: 7 debug, 6 info, 4 warning, 3 error.
int SyslogPriority(LogLevel level);

// A line that starts with an sd-daemon(3) priority prefix "<N>", N = 0..7, as journald reads it
// (systemd.exec(5) SyslogLevelPrefix=): removes the prefix from `*text` and returns its level
// (0-3 error, 4 warning, 5-6 info, 7 debug). nullopt, `*text` unchanged, without such a prefix.
std::optional<LogLevel> StripPriorityPrefix(std::string_view* text);

// One more key=value of a line, between pid= and msg=. `key` is a bare word (a-z, '_'); `value`
// is written bare when it is a non-empty run of printable ASCII without ' ', '"', '=' or '\',
// else quoted as messages are.
struct LogField {
  std::string_view key;
  std::string_view value;
};

// Appends `value` as a logfmt value: bare when it is a non-empty run of printable ASCII without
// ' ', '"', '=' or '\', else quoted and escaped as FormatLogLine quotes messages, so that no byte
// of `value` can end the line or start another field. Pure.
void AppendLogfmtValue(std::string* out, std::string_view value);

// How a line starts: a timestamp, or the journal's priority prefix, or neither.
enum class LogStyle {
  kTimestamp,  // "2026-11-29T22:41:07.123Z " (RFC 3339, UTC, milliseconds)
  kJournal,    // "<6>" (sd-daemon(3))
  kBare,       // nothing: the MESSAGE= of a journal entry, which carries PRIORITY= apart
};

// Appends one complete line, '\n' included, to `*out`:
//   [stamp or <N>]level=L[ cell=C][ pid=P][ key=value...] msg="M"
// `cell` is left out when empty and `pid` when <= 0. The message is always quoted: '"' and '\' are
// escaped with '\', newline, carriage return and tab as \n \r \t, other control bytes (and DEL) and
// bytes that are not valid UTF-8 as \xNN, so the line is one line of valid UTF-8 whatever the
// input. `now` (CLOCK_REALTIME) is used for kTimestamp only. Pure: for tests.
void FormatLogLine(LogStyle style, const timespec& now, LogLevel level, std::string_view cell,
                   int pid, std::span<const LogField> fields, std::string_view message,
                   std::string* out);

// The style of this process's stderr: kJournal when $JOURNAL_STREAM is "DEVICE:INODE" of the file
// on descriptor 2 (the check systemd.exec(5) recommends, so a child whose stderr was redirected
// does not take the journal's format), else kTimestamp. Decided once, on the first call.
LogStyle StderrLogStyle();

// One event as Log received it. The views are valid during the LogSink::Consume call only.
struct LogRecord {
  LogLevel level = LogLevel::kInfo;
  std::string_view cell;  // empty: the event concerns no cell
  int pid = 0;            // <= 0: no process
  std::span<const LogField> fields;
  std::string_view message;
};

// Where Log sends lines besides, or instead of, stderr: bulkheadd installs one that keeps each
// cell's recent lines and sends them to the journal with structured fields
// (lifecycle/cell_logs.h).
class LogSink {
 public:
  virtual ~LogSink() = default;
  // Sees each line Log lets through (at or above the level), on the thread that called Log.
  // Returns true when it has written the line out itself, false to have Log write it to stderr.
  virtual bool Consume(const LogRecord& record) = 0;
};

// Installs `sink` (nullptr: none, the default) for every later Log call. The caller keeps it
// alive until it is replaced; replace it only while no other thread logs.
void SetLogSink(LogSink* sink);
LogSink* GetLogSink();

// Writes one line to stderr (or hands it to the LogSink). `cell` may be empty and `pid` 0 when the
// event concerns no cell or process. `message` is quoted and escaped as needed.
void Log(LogLevel level, std::string_view cell, int pid, std::string_view message);
// As above with more fields (e.g. stream=stdout for a worker's output).
void Log(LogLevel level, std::string_view cell, int pid, std::span<const LogField> fields,
         std::string_view message);

// Writes `text` and a newline to stderr unformatted, in one write(2), preceded by the priority
// prefix "<N>" of `level` when stderr is the journal (StderrLogStyle() is kJournal). For what a
// command prints for a person (bulkheadd --check-config's file:line:col errors, bulkheadctl's
// errors): plain at a terminal, at the right priority under a unit (`journalctl -p err`). Not
// filtered by SetLogLevel. `text` should be one line.
void WriteStderrLine(LogLevel level, std::string_view text);

inline void LogInfo(std::string_view message) { Log(LogLevel::kInfo, {}, 0, message); }
inline void LogWarning(std::string_view message) { Log(LogLevel::kWarning, {}, 0, message); }
inline void LogError(std::string_view message) { Log(LogLevel::kError, {}, 0, message); }

}  // namespace bulkhead
