// SPDX-License-Identifier: MIT
#include "lifecycle/cell_logs.h"

#include <sys/uio.h>
#include <systemd/sd-journal.h>
#include <systemd/sd-login.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <ctime>

namespace bulkhead::lifecycle {
namespace {

int SendToJournal(const std::vector<std::string>& fields) {
  std::vector<iovec> iov;
  iov.reserve(fields.size());
  for (const std::string& field : fields) {
    iov.push_back(iovec{const_cast<char*>(field.data()), field.size()});
  }
  return sd_journal_sendv(iov.data(), static_cast<int>(iov.size()));
}

std::string UpperCase(std::string_view key) {
  std::string out(key);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return out;
}

}  // namespace

std::vector<std::string> JournalFields(const LogRecord& record, const std::string& identifier) {
  std::string message = "MESSAGE=";
  FormatLogLine(LogStyle::kBare, timespec{}, record.level, record.cell, record.pid, record.fields,
                record.message, &message);
  message.pop_back();  // the newline
  std::vector<std::string> fields = {
      std::move(message),
      "PRIORITY=" + std::to_string(SyslogPriority(record.level)),
      "SYSLOG_IDENTIFIER=" + identifier,
  };
  if (!record.cell.empty()) fields.push_back("CELL=" + std::string(record.cell));
  if (record.pid > 0) fields.push_back("WORKER_PID=" + std::to_string(record.pid));
  for (const LogField& field : record.fields) {
    fields.push_back(UpperCase(field.key) + "=" + std::string(field.value));
  }
  return fields;
}

CellLogs::CellLogs(bool journal, JournalSend send)
    : send_(send ? std::move(send) : JournalSend(&SendToJournal)),
      identifier_(program_invocation_short_name) {
  if (!journal) return;
  JournalSource source;
  source.pid = ::getpid();
  char* unit = nullptr;
  if (sd_pid_get_unit(0, &unit) >= 0 && unit != nullptr) source.unit = unit;
  std::free(unit);
  journal_ = std::move(source);
}

bool CellLogs::Consume(const LogRecord& record) {
  if (!record.cell.empty()) {
    std::string line;
    timespec now{};
    clock_gettime(CLOCK_REALTIME, &now);
    FormatLogLine(LogStyle::kTimestamp, now, record.level, record.cell, record.pid, record.fields,
                  record.message, &line);
    line.pop_back();
    std::lock_guard lock(mutex_);
    auto ring = rings_.find(record.cell);
    if (ring == rings_.end()) ring = rings_.emplace(std::string(record.cell), LogRing()).first;
    ring->second.Append(std::move(line));
  }
  if (!journal_) return false;
  return send_(JournalFields(record, identifier_)) >= 0;
}

LogRing::Page CellLogs::Read(const std::string& cell, std::optional<uint64_t> from,
                             std::optional<uint64_t> last) const {
  std::lock_guard lock(mutex_);
  auto ring = rings_.find(cell);
  if (ring == rings_.end()) return LogRing().Read(from, last);
  return ring->second.Read(from, last);
}

void CellLogs::Forget(const std::string& cell) {
  std::lock_guard lock(mutex_);
  rings_.erase(cell);
}

}  // namespace bulkhead::lifecycle
