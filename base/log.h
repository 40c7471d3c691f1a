// SPDX-License-Identifier: MIT
// Supervisor logging: one line per event on stderr, in logfmt so that journald and grep read it:
//   2026-11-29T22:41:07.123Z level=info cell=payments pid=41234 msg="worker started"
// The timestamp is left out when stderr goes to journald (JOURNAL_STREAM set), which stamps lines
// itself. Thread-safe: each line is written with one write(2).
#pragma once

#include <string_view>

namespace bulkhead {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// Lines below `level` are dropped. Default kInfo.
void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();

// Writes one line. `cell` may be empty and `pid` 0 when the event concerns no cell or process.
// `message` is quoted and escaped as needed.
void Log(LogLevel level, std::string_view cell, int pid, std::string_view message);

inline void LogInfo(std::string_view message) { Log(LogLevel::kInfo, {}, 0, message); }
inline void LogWarning(std::string_view message) { Log(LogLevel::kWarning, {}, 0, message); }
inline void LogError(std::string_view message) { Log(LogLevel::kError, {}, 0, message); }

}  // namespace bulkhead
