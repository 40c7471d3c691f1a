// SPDX-License-Identifier: MIT
#include "supervisor/reexec_state.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

#include "base/version.h"
#include "control/cell_counter_fields.h"

namespace bulkhead::supervisor {

namespace {

using nlohmann::json;

// A counter's key in the state: its status JSON name, under its object's when it has one
// ("ok", "rejected_by_reason.full"), so that a counter added to control/cell_counter_fields.h
// travels without a change here.
std::string CounterKey(const control::CellCounterField& field) {
  if (field.json_object.empty()) return std::string(field.json_name);
  return std::string(field.json_object) + "." + std::string(field.json_name);
}

json EncodeCounts(const admission::LatencyHistogram::Counts& counts) {
  return {{"buckets", counts.buckets}, {"count", counts.count}, {"sum_ns", counts.sum_ns}};
}

// Reads the members of one JSON object, each at most once, and keeps the first error with the
// path it happened at. Missing members leave their destination as it was (its default).
class Reader {
 public:
  Reader(const json& object, std::string path, std::string* error)
      : object_(object), path_(std::move(path)), error_(error) {
    if (error_->empty() && !object_.is_object()) Fail(path_, "not an object");
  }

  bool ok() const { return error_->empty(); }
  std::string PathOf(std::string_view key) const {
    return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  }
  // The member `key`, or null when absent (or after an error).
  const json* Find(std::string_view key) const {
    if (!ok() || !object_.is_object()) return nullptr;
    auto it = object_.find(std::string(key));
    return it == object_.end() ? nullptr : &*it;
  }

  template <typename T>
  void Unsigned(std::string_view key, T* out) {
    const json* value = Find(key);
    if (value == nullptr) return;
    if (!value->is_number_unsigned() || value->get<uint64_t>() > std::numeric_limits<T>::max()) {
      Fail(PathOf(key), "not an unsigned integer in range");
      return;
    }
    *out = static_cast<T>(value->get<uint64_t>());
  }
  void Int(std::string_view key, int* out) {
    const json* value = Find(key);
    if (value == nullptr) return;
    if (!value->is_number_integer() || value->get<int64_t>() < std::numeric_limits<int>::min() ||
        value->get<int64_t>() > std::numeric_limits<int>::max()) {
      Fail(PathOf(key), "not an integer in range");
      return;
    }
    *out = static_cast<int>(value->get<int64_t>());
  }
  void String(std::string_view key, std::string* out) {
    const json* value = Find(key);
    if (value == nullptr) return;
    if (!value->is_string()) {
      Fail(PathOf(key), "not a string");
      return;
    }
    *out = value->get<std::string>();
  }
  void Double(std::string_view key, double* out) {
    const json* value = Find(key);
    if (value == nullptr) return;
    if (!value->is_number() || value->get<double>() < 0) {
      Fail(PathOf(key), "not a number >= 0");
      return;
    }
    *out = value->get<double>();
  }
  void Bool(std::string_view key, bool* out) {
    const json* value = Find(key);
    if (value == nullptr) return;
    if (!value->is_boolean()) {
      Fail(PathOf(key), "not a boolean");
      return;
    }
    *out = value->get<bool>();
  }
  // An array member: `each(element, path)` per element.
  template <typename Each>
  void Array(std::string_view key, Each each) {
    const json* value = Find(key);
    if (value == nullptr) return;
    if (!value->is_array()) {
      Fail(PathOf(key), "not an array");
      return;
    }
    for (size_t i = 0; i < value->size() && ok(); ++i) {
      each((*value)[i], PathOf(key) + "[" + std::to_string(i) + "]");
    }
  }

  void Fail(const std::string& path, std::string_view message) {
    if (error_->empty()) *error_ = path + ": " + std::string(message);
  }

 private:
  const json& object_;
  std::string path_;
  std::string* error_;
};

void DecodeCounts(const json& value, const std::string& path, std::string* error,
                  admission::LatencyHistogram::Counts* out) {
  Reader reader(value, path, error);
  reader.Unsigned("count", &out->count);
  reader.Unsigned("sum_ns", &out->sum_ns);
  const json* buckets = reader.Find("buckets");
  if (buckets == nullptr) return;
  if (!buckets->is_array() || buckets->size() != out->buckets.size()) {
    // The bounds are part of the format: a build with other bounds bumps the version.
    reader.Fail(reader.PathOf("buckets"),
                "not an array of " + std::to_string(out->buckets.size()) + " counts");
    return;
  }
  for (size_t i = 0; i < out->buckets.size(); ++i) {
    if (!(*buckets)[i].is_number_unsigned()) {
      reader.Fail(reader.PathOf("buckets") + "[" + std::to_string(i) + "]",
                  "not an unsigned integer");
      return;
    }
    out->buckets[i] = (*buckets)[i].get<uint64_t>();
  }
}

// An adaptive cell's controller: causes and phases by name (LimitCauseName, PhaseName), so a
// cause a newer build adds is an error here rather than a count put under another cause.
json EncodeAdaptive(const admission::AdaptiveLimit::Carried& a) {
  json changes = json::array();
  for (const admission::LimitChange& change : a.changes) {
    changes.push_back({{"age_ms", change.at_ms},
                       {"from", change.from},
                       {"to", change.to},
                       {"cause", admission::LimitCauseName(change.cause)},
                       {"permille", change.permille}});
  }
  json by_cause = json::object();
  for (size_t i = 0; i < admission::kLimitCauseCount; ++i) {
    by_cause[std::string(admission::LimitCauseName(static_cast<admission::LimitCause>(i)))] =
        a.changes_by[i];
  }
  return {
      {"estimate", a.estimate},       {"phase", admission::AdaptiveLimit::PhaseName(a.phase)},
      {"base_us", a.base_us},         {"base_samples", a.base_samples},
      {"base_age_ms", a.base_age_ms}, {"changes", changes},
      {"changes_by_cause", by_cause}, {"cpu_pressure_spared", a.cpu_pressure_spared},
  };
}

std::optional<admission::LimitCause> CauseNamed(std::string_view name) {
  for (size_t i = 0; i < admission::kLimitCauseCount; ++i) {
    const auto cause = static_cast<admission::LimitCause>(i);
    if (admission::LimitCauseName(cause) == name) return cause;
  }
  return std::nullopt;
}

void DecodeAdaptive(const json& value, const std::string& path, std::string* error,
                    admission::AdaptiveLimit::Carried* out) {
  using admission::AdaptiveLimit;
  Reader reader(value, path, error);
  reader.Double("estimate", &out->estimate);
  std::string phase = std::string(AdaptiveLimit::PhaseName(out->phase));
  reader.String("phase", &phase);
  if (phase == AdaptiveLimit::PhaseName(AdaptiveLimit::Phase::kAvoidance)) {
    out->phase = AdaptiveLimit::Phase::kAvoidance;
  } else if (phase != AdaptiveLimit::PhaseName(AdaptiveLimit::Phase::kSlowStart)) {
    reader.Fail(reader.PathOf("phase"), "not a phase");
  }
  reader.Double("base_us", &out->base_us);
  reader.Unsigned("base_samples", &out->base_samples);
  reader.Unsigned("base_age_ms", &out->base_age_ms);
  reader.Array("changes", [&](const json& element, const std::string& at) {
    if (out->changes.size() == AdaptiveLimit::kRecentChanges) return;
    admission::LimitChange change;
    Reader change_reader(element, at, error);
    change_reader.Unsigned("age_ms", &change.at_ms);
    change_reader.Unsigned("from", &change.from);
    change_reader.Unsigned("to", &change.to);
    change_reader.Unsigned("permille", &change.permille);
    std::string cause;
    change_reader.String("cause", &cause);
    std::optional<admission::LimitCause> named = CauseNamed(cause);
    if (!named) {
      change_reader.Fail(change_reader.PathOf("cause"), "not a cause");
      return;
    }
    change.cause = *named;
    out->changes.push_back(change);
  });
  if (const json* by_cause = reader.Find("changes_by_cause"); by_cause != nullptr) {
    Reader cause_reader(*by_cause, reader.PathOf("changes_by_cause"), error);
    for (size_t i = 0; i < admission::kLimitCauseCount; ++i) {
      cause_reader.Unsigned(admission::LimitCauseName(static_cast<admission::LimitCause>(i)),
                            &out->changes_by[i]);
    }
  }
  reader.Unsigned("cpu_pressure_spared", &out->cpu_pressure_spared);
}

void DecodeCell(const json& value, const std::string& path, std::string* error,
                ReexecState::Cell* cell) {
  Reader reader(value, path, error);
  reader.String("name", &cell->name);
  if (reader.ok() && cell->name.empty()) reader.Fail(reader.PathOf("name"), "missing or empty");
  reader.String("state", &cell->state);
  reader.Unsigned("starts", &cell->starts);
  reader.Unsigned("restarts", &cell->restarts);
  reader.String("last_exit", &cell->last_exit);
  reader.Unsigned("in_state_ms", &cell->in_state_ms);
  reader.Unsigned("consecutive_failures", &cell->consecutive_failures);
  reader.Unsigned("next_start_in_ms", &cell->next_start_in_ms);
  reader.String("reason", &cell->reason);
  reader.Bool("gave_up", &cell->gave_up);
  reader.Array("start_ages_ms", [&](const json& age, const std::string& at) {
    if (!age.is_number_unsigned()) {
      reader.Fail(at, "not an unsigned integer");
      return;
    }
    cell->start_ages_ms.push_back(age.get<uint64_t>());
  });
  reader.Bool("crash_looping", &cell->crash_looping);
  reader.Unsigned("short_runs", &cell->short_runs);
  reader.String("crash_loop", &cell->crash_loop);
  reader.Bool("start_held", &cell->start_held);
  if (const json* restarts = reader.Find("restarts_by_reason"); restarts != nullptr) {
    Reader by_reason(*restarts, reader.PathOf("restarts_by_reason"), error);
    if (by_reason.ok()) {
      for (const auto& [reason, count] : restarts->items()) {
        uint64_t n = 0;
        by_reason.Unsigned(reason, &n);
        cell->restarts_by_reason[reason] = n;
      }
    }
  }
  if (const json* worker = reader.Find("worker"); worker != nullptr && !worker->is_null()) {
    ReexecState::Worker w;
    Reader worker_reader(*worker, reader.PathOf("worker"), error);
    worker_reader.Int("pid", &w.pid);
    worker_reader.Int("pgid", &w.pgid);
    worker_reader.String("cgroup_path", &w.cgroup_path);
    worker_reader.Int("stdout_fd", &w.stdout_fd);
    worker_reader.Int("stderr_fd", &w.stderr_fd);
    worker_reader.Bool("ready", &w.ready);
    worker_reader.Unsigned("uptime_ms", &w.uptime_ms);
    if (worker_reader.ok() && w.pid <= 0) {
      worker_reader.Fail(worker_reader.PathOf("pid"), "missing or not positive");
    }
    cell->worker = w;
  }
  if (const json* adaptive = reader.Find("adaptive"); adaptive != nullptr && !adaptive->is_null()) {
    cell->adaptive.emplace();
    DecodeAdaptive(*adaptive, reader.PathOf("adaptive"), error, &*cell->adaptive);
  }
  if (const json* counters = reader.Find("counters"); counters != nullptr) {
    Reader counter_reader(*counters, reader.PathOf("counters"), error);
    for (const control::CellCounterField& field : control::kCellCounterFields) {
      counter_reader.Unsigned(CounterKey(field), &(cell->counters.*field.member));
    }
  }
  if (const json* counts = reader.Find("queue_wait"); counts != nullptr) {
    DecodeCounts(*counts, reader.PathOf("queue_wait"), error, &cell->queue_wait);
  }
  if (const json* counts = reader.Find("duration"); counts != nullptr) {
    DecodeCounts(*counts, reader.PathOf("duration"), error, &cell->duration);
  }
}

std::string VersionsText() {
  std::string text;
  for (int version : ReexecState::kReadableVersions) {
    text += (text.empty() ? "" : " ") + std::to_string(version);
  }
  return text;
}

}  // namespace

std::string ReexecState::Encode() const {
  json listener_array = json::array();
  for (const Listener& l : listeners) {
    listener_array.push_back(
        {{"role", l.role}, {"cell", l.cell}, {"fd", l.fd}, {"address", l.address}});
  }
  json connection_array = json::array();
  for (const Connection& c : connections) {
    connection_array.push_back({{"cell", c.cell}, {"fd", c.fd}, {"tcp", c.tcp}});
  }
  json cell_array = json::array();
  for (const Cell& c : cells) {
    json counters = json::object();
    for (const control::CellCounterField& field : control::kCellCounterFields) {
      counters[CounterKey(field)] = c.counters.*field.member;
    }
    json worker = nullptr;
    if (c.worker) {
      worker = {{"pid", c.worker->pid},
                {"pgid", c.worker->pgid},
                {"cgroup_path", c.worker->cgroup_path},
                {"stdout_fd", c.worker->stdout_fd},
                {"stderr_fd", c.worker->stderr_fd},
                {"ready", c.worker->ready},
                {"uptime_ms", c.worker->uptime_ms}};
    }
    cell_array.push_back({{"name", c.name},
                          {"state", c.state},
                          {"starts", c.starts},
                          {"restarts", c.restarts},
                          {"last_exit", c.last_exit},
                          {"in_state_ms", c.in_state_ms},
                          {"restarts_by_reason", c.restarts_by_reason},
                          {"consecutive_failures", c.consecutive_failures},
                          {"next_start_in_ms", c.next_start_in_ms},
                          {"reason", c.reason},
                          {"gave_up", c.gave_up},
                          {"start_ages_ms", c.start_ages_ms},
                          {"crash_looping", c.crash_looping},
                          {"short_runs", c.short_runs},
                          {"crash_loop", c.crash_loop},
                          {"start_held", c.start_held},
                          {"worker", worker},
                          {"adaptive", c.adaptive ? EncodeAdaptive(*c.adaptive) : json(nullptr)},
                          {"counters", counters},
                          {"queue_wait", EncodeCounts(c.queue_wait)},
                          {"duration", EncodeCounts(c.duration)}});
  }
  json document = {
      {"format", kFormat},
      {"version", kVersion},
      {"written_by", written_by},
      {"uptime_ms", uptime_ms},
      {"reexecs", reexecs},
      {"metrics_bound", metrics_bound},
      {"binary", binary},
      {"reloads",
       {{"applied", reloads.applied},
        {"refused", reloads.refused},
        {"last_refused", reloads.last_refused}}},
      {"lock_fd", lock_fd},
      {"access_log", {{"lines", access_log_lines}, {"dropped", access_log_dropped}}},
      {"listeners", listener_array},
      {"connections", connection_array},
      {"cells", cell_array},
  };
  // Names and paths are the config's (valid UTF-8: toml++ checks); replace anything else rather
  // than throw.
  return document.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<ReexecState> ReexecState::Decode(std::string_view document) {
  const json root = json::parse(document, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return Status::Error("reexec state: not JSON");
  if (!root.is_object()) return Status::Error("reexec state: not a JSON object");
  auto format = root.find("format");
  if (format == root.end() || !format->is_string() || format->get<std::string>() != kFormat) {
    return Status::Error("reexec state: not a bulkheadd re-exec state (no \"format\": \"" +
                         std::string(kFormat) + "\")");
  }
  auto version = root.find("version");
  if (version == root.end() || !version->is_number_integer()) {
    return Status::Error("reexec state: no integer \"version\"");
  }
  const int64_t v = version->get<int64_t>();
  if (std::find(kReadableVersions.begin(), kReadableVersions.end(), v) == kReadableVersions.end()) {
    return Status::Error("reexec state version " + std::to_string(v) +
                         " is not readable by this bulkheadd " + std::string(Version()) +
                         " (it reads " + VersionsText() + ")");
  }
  ReexecState state;
  std::string error;
  Reader reader(root, "", &error);
  reader.String("written_by", &state.written_by);
  reader.Unsigned("uptime_ms", &state.uptime_ms);
  reader.Unsigned("reexecs", &state.reexecs);
  reader.String("metrics_bound", &state.metrics_bound);
  reader.String("binary", &state.binary);
  if (const json* reloads = reader.Find("reloads"); reloads != nullptr) {
    Reader reload_reader(*reloads, "reloads", &error);
    reload_reader.Unsigned("applied", &state.reloads.applied);
    reload_reader.Unsigned("refused", &state.reloads.refused);
    reload_reader.Bool("last_refused", &state.reloads.last_refused);
  }
  reader.Array("listeners", [&](const json& value, const std::string& path) {
    Listener listener;
    Reader listener_reader(value, path, &error);
    listener_reader.String("role", &listener.role);
    listener_reader.String("cell", &listener.cell);
    listener_reader.Int("fd", &listener.fd);
    listener_reader.String("address", &listener.address);
    if (listener_reader.ok() && listener.fd < 0) {
      listener_reader.Fail(listener_reader.PathOf("fd"), "missing or negative");
    }
    state.listeners.push_back(std::move(listener));
  });
  reader.Int("lock_fd", &state.lock_fd);
  if (const json* access_log = reader.Find("access_log"); access_log != nullptr) {
    Reader access_log_reader(*access_log, "access_log", &error);
    access_log_reader.Unsigned("lines", &state.access_log_lines);
    access_log_reader.Unsigned("dropped", &state.access_log_dropped);
  }
  reader.Array("connections", [&](const json& value, const std::string& path) {
    Connection connection;
    Reader connection_reader(value, path, &error);
    connection_reader.String("cell", &connection.cell);
    connection_reader.Int("fd", &connection.fd);
    connection_reader.Bool("tcp", &connection.tcp);
    if (connection_reader.ok() && connection.fd < 0) {
      connection_reader.Fail(connection_reader.PathOf("fd"), "missing or negative");
    }
    state.connections.push_back(std::move(connection));
  });
  reader.Array("cells", [&](const json& value, const std::string& path) {
    Cell cell;
    DecodeCell(value, path, &error, &cell);
    state.cells.push_back(std::move(cell));
  });
  if (!error.empty()) return Status::Error("reexec state: " + error);
  return state;
}

std::vector<int> ReexecState::Fds() const {
  std::vector<int> fds;
  if (lock_fd >= 0) fds.push_back(lock_fd);
  for (const Listener& listener : listeners) fds.push_back(listener.fd);
  for (const Connection& connection : connections) fds.push_back(connection.fd);
  for (const Cell& cell : cells) {
    if (!cell.worker) continue;
    for (int fd : {cell.worker->stdout_fd, cell.worker->stderr_fd}) {
      if (fd >= 0) fds.push_back(fd);
    }
  }
  return fds;
}

std::string ReadableVersionsLine() { return VersionsText(); }

Result<std::vector<int>> ParseVersionsLine(std::string_view line) {
  std::vector<int> versions;
  size_t at = 0;
  while (at < line.size()) {
    while (at < line.size() && (line[at] == ' ' || line[at] == '\n' || line[at] == '\t')) ++at;
    size_t end = at;
    while (end < line.size() && line[end] != ' ' && line[end] != '\n' && line[end] != '\t') ++end;
    if (end == at) break;
    const std::string_view word = line.substr(at, end - at);
    int version = 0;
    auto [ptr, ec] = std::from_chars(word.data(), word.data() + word.size(), version);
    if (ec != std::errc() || ptr != word.data() + word.size() || version <= 0) {
      return Status::Error("--reexec-state-versions printed \"" + std::string(word) +
                           "\": not a version");
    }
    versions.push_back(version);
    at = end;
  }
  if (versions.empty()) return Status::Error("--reexec-state-versions printed no version");
  return versions;
}

Result<UniqueFd> WriteStateMemfd(std::string_view document) {
  UniqueFd fd(::memfd_create("bulkheadd-reexec-state", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd) return Status::FromErrno("memfd_create");
  size_t written = 0;
  while (written < document.size()) {
    ssize_t n = ::pwrite(fd.get(), document.data() + written, document.size() - written,
                         static_cast<off_t>(written));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno("write reexec state");
    written += static_cast<size_t>(n);
  }
  // Sealed: what the new image reads is what was written, whoever else holds the fd.
  if (::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) !=
      0) {
    return Status::FromErrno("seal reexec state");
  }
  return fd;
}

Result<std::string> ReadStateFd(int fd) {
  std::string document;
  char buffer[64 * 1024];
  for (;;) {
    ssize_t n = ::pread(fd, buffer, sizeof buffer, static_cast<off_t>(document.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno("read reexec state fd " + std::to_string(fd));
    if (n == 0) return document;
    if (document.size() + static_cast<size_t>(n) > kMaxStateBytes) {
      return Status::Error("reexec state fd " + std::to_string(fd) + ": over " +
                           std::to_string(kMaxStateBytes) + " bytes");
    }
    document.append(buffer, static_cast<size_t>(n));
  }
}

}  // namespace bulkhead::supervisor
