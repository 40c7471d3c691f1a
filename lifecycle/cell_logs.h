// SPDX-License-Identifier: MIT
// CellLogs: bulkheadd's LogSink (base/log.h). Every line that names a cell goes into that cell's
// LogRing, for `bulkheadctl logs` (the control command "logs", docs/control.md). When stderr is
// the journal (StderrLogStyle() == kJournal), every line is sent to journald as a structured entry
// (sd_journal_sendv(3)) with CELL=, WORKER_PID=, STREAM= ... beside MESSAGE= and PRIORITY=, so
// that `journalctl -u bulkheadd CELL=payments` selects one cell (docs/logging.md); a line the
// journal refuses goes to stderr as before. Thread-safe: Consume may be called on any thread.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/log.h"
#include "lifecycle/log_ring.h"

namespace bulkhead::lifecycle {

// The fields of the journal entry for `record`, each "NAME=value" (systemd.journal-fields(7)):
// MESSAGE= the line as it would be written to stderr without its prefix and newline
// (level=... cell=... msg="..."), PRIORITY= the syslog priority of the level, SYSLOG_IDENTIFIER=
// `identifier`, CELL= the cell when there is one, WORKER_PID= the pid when there is one, then one
// field per LogField with its key in upper case (STREAM=stdout, TRUNCATED=true). Pure.
std::vector<std::string> JournalFields(const LogRecord& record, const std::string& identifier);

class CellLogs : public LogSink {
 public:
  // Sends one entry's fields to the journal; returns 0 or a negative errno, as sd_journal_sendv.
  using JournalSend = std::function<int(const std::vector<std::string>& fields)>;

  // `journal`: whether lines go to the journal, through `send` (default: sd_journal_sendv).
  explicit CellLogs(bool journal, JournalSend send = nullptr);

  bool Consume(const LogRecord& record) override;

  // Where `bulkheadctl logs` reads the journal: this process's systemd unit (sd_pid_get_unit(3);
  // empty outside one) and pid. nullopt when lines do not go to the journal.
  struct JournalSource {
    std::string unit;
    pid_t pid = 0;
  };
  const std::optional<JournalSource>& journal() const { return journal_; }

  // The recent lines of `cell` (LogRing::Read); an empty page for a cell that logged nothing yet.
  LogRing::Page Read(const std::string& cell, std::optional<uint64_t> from,
                     std::optional<uint64_t> last) const;
  // Drops the lines of a cell that is gone (removed by a reload, its last lines logged).
  void Forget(const std::string& cell);

 private:
  std::optional<JournalSource> journal_;
  JournalSend send_;
  std::string identifier_;
  mutable std::mutex mutex_;
  std::map<std::string, LogRing, std::less<>> rings_;  // GUARDED_BY(mutex_)
};

}  // namespace bulkhead::lifecycle
