// SPDX-License-Identifier: MIT
// A [cells.NAME] table (config/cell_table.h): one loop over the keys in file order, each read by
// its ValueSpec (config/config_keys.cc) or, for the keys of kind kOwn, by a case here (the limit
// keys in config/limits.cc, the privilege keys in config/privileges.cc); then the checks across
// keys, the defaults that follow other keys, and the cell's sockets.
#include "config/cell_table.h"

#include <signal.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <string_view>
#include <utility>
#include <vector>

#include "base/ascii.h"
#include "base/check.h"
#include "config/cell_warnings.h"
#include "config/config_keys.h"
#include "config/limits.h"
#include "config/privileges.h"

namespace bulkhead::config {
namespace {

using std::chrono::milliseconds;

constexpr size_t kMaxCellNameLength = 64;
// A frame header, bytes (docs/protocol.md, "Frame layout"; ipc::kHeaderSize).
constexpr uint64_t kFrameHeaderBytes = 16;
// In the order of ReadyMode.
constexpr std::array<std::string_view, 3> kReadyModes = {"exec", "notify", "http:/PATH"};
// ready = "http:/PATH" (ReadyMode::kHttp).
constexpr std::string_view kHttpReadyPrefix = "http:";
// Keys a cell must have.
constexpr std::array<CellKeyId, 2> kRequiredKeys = {CellKeyId::kCommand, CellKeyId::kMaxConcurrent};

// The keys of one [cells.NAME] table as read: for the checks across keys once all are.
class KeysRead {
 public:
  void Add(CellKeyId id, const toml::node& value, bool ok) {
    (ok ? valid_[Index(id)] : refused_[Index(id)]) = &value;
  }
  // The key's value when it was written and accepted, else nullptr.
  const toml::node* Valid(CellKeyId id) const { return valid_[Index(id)]; }
  // The key was written and refused (its error is reported).
  bool Refused(CellKeyId id) const { return refused_[Index(id)] != nullptr; }
  bool Written(CellKeyId id) const { return Valid(id) != nullptr || Refused(id); }
  // Where the key's accepted value was written. REQUIRES: Valid(id).
  SourcePosition At(CellKeyId id) const { return config::At(Valid(id)->source()); }
  // The accepted value of a duration key as written ("1m30s"). REQUIRES: Valid(id).
  std::string Text(CellKeyId id) const { return Valid(id)->as_string()->get(); }

 private:
  static size_t Index(CellKeyId id) { return static_cast<size_t>(id); }
  static constexpr size_t kKeys = static_cast<size_t>(CellKeyId::kCount);
  std::array<const toml::node*, kKeys> valid_{};
  std::array<const toml::node*, kKeys> refused_{};
};

struct SignalName {
  std::string_view name;  // without the SIG prefix
  int number;
};
constexpr std::array<SignalName, 7> kStopSignals = {{{"TERM", SIGTERM},
                                                     {"INT", SIGINT},
                                                     {"HUP", SIGHUP},
                                                     {"QUIT", SIGQUIT},
                                                     {"USR1", SIGUSR1},
                                                     {"USR2", SIGUSR2},
                                                     {"KILL", SIGKILL}}};

// A signal name from kStopSignals, with or without its SIG prefix ("SIGTERM", "TERM").
std::optional<int> ExpectStopSignal(ValueReader& reader, const toml::node& node,
                                    const std::string& path) {
  std::optional<std::string> text =
      reader.ExpectString(node, path, "write the signal's name, such as \"SIGTERM\"");
  if (!text) return std::nullopt;
  std::string_view name = *text;
  if (name.starts_with("SIG")) name.remove_prefix(3);
  for (const SignalName& signal : kStopSignals) {
    if (signal.name == name) return signal.number;
  }
  std::string message = "must be one of ";
  for (size_t i = 0; i < kStopSignals.size(); ++i) {
    if (i > 0) message += ", ";
    message += "SIG";
    message.append(kStopSignals[i].name);
  }
  message += " (the SIG prefix may be left out); got " + Quoted(*text);
  // Case and small typos: "sigterm", "TREM".
  std::string upper = *text;
  for (char& c : upper) c = ToUpperAscii(c);
  std::string_view bare = upper;
  if (bare.starts_with("SIG")) bare.remove_prefix(3);
  std::array<std::string_view, kStopSignals.size()> names;
  for (size_t i = 0; i < kStopSignals.size(); ++i) names[i] = kStopSignals[i].name;
  const std::string_view suggestion = ClosestMatch(bare, names);
  if (!suggestion.empty()) {
    message += "; did you mean \"SIG";
    message.append(suggestion);
    message += "\"?";
  }
  reader.AddError(At(node.source()), path, std::move(message));
  return std::nullopt;
}

// `latency_tolerance`: a whole percentage string, "1%" to "400%" (AdaptiveLimit::Options'
// tolerance is in (0, 4]).
constexpr uint32_t kMaxLatencyTolerance = 400;
std::optional<uint32_t> ExpectLatencyTolerance(ValueReader& reader, const toml::node& node,
                                               const std::string& path) {
  std::optional<std::string> text = reader.ExpectString(
      node, path,
      "write how far the service time may rise as a percentage string, such as \"50%\"");
  if (!text) return std::nullopt;
  std::string_view digits = *text;
  const bool has_percent = digits.ends_with('%');
  if (has_percent) digits.remove_suffix(1);
  uint32_t percent = 0;
  bool number = !digits.empty() && digits.size() <= 4;
  for (char c : digits) {
    if (c < '0' || c > '9') number = false;
    if (number) percent = percent * 10 + static_cast<uint32_t>(c - '0');
  }
  if (!number || !has_percent || percent < 1 || percent > kMaxLatencyTolerance) {
    reader.AddError(At(node.source()), path,
                    "must be a whole percentage from \"1%\" to \"400%\" (how far the mean "
                    "service time may rise above its base), got " +
                        Quoted(*text));
    return std::nullopt;
  }
  return percent;
}

bool ParseCommand(ValueReader& reader, const toml::node& node, const std::string& path,
                  std::vector<std::string>& argv) {
  const toml::array* array = node.as_array();
  if (array == nullptr) {
    reader.TypeError(
        node, path, "array of strings",
        "write the program and its arguments as command = [\"/usr/bin/worker\", \"--flag\"]");
    return false;
  }
  if (array->empty()) {
    reader.AddError(At(node.source()), path,
                    "must not be empty; give the program and its arguments");
    return false;
  }
  bool ok = true;
  for (size_t i = 0; i < array->size(); ++i) {
    const toml::node& element = *array->get(i);
    const std::string element_path = path + "[" + std::to_string(i) + "]";
    std::optional<std::string> arg = reader.ExpectString(element, element_path, QuoteHint(element));
    if (!arg) {
      ok = false;
      continue;
    }
    if (i == 0) {
      if (arg->empty()) {
        reader.AddError(At(element.source()), element_path, "the program must not be empty");
        ok = false;
        continue;
      }
      // With a '/', a path (resolved like every other path); without, a name looked up in $PATH.
      if (arg->find('/') != std::string::npos) {
        std::optional<std::string> program = reader.Resolve(*arg, element, element_path);
        if (!program) {
          ok = false;
          continue;
        }
        arg = std::move(program);
      }
    }
    argv.push_back(std::move(*arg));
  }
  return ok;
}

bool ParseEnvironment(ValueReader& reader, const toml::node& node, const std::string& path,
                      std::vector<std::pair<std::string, std::string>>& environment) {
  const toml::table* table = reader.ExpectTable(node, path);
  if (table == nullptr) return false;
  bool ok = true;
  for (auto [key, value] : InFileOrder(*table)) {
    const std::string variable_path = JoinKey(path, key->str());
    const std::string_view variable = key->str();
    if (variable.empty() || variable.find('=') != std::string::npos ||
        variable.find('\0') != std::string::npos) {
      reader.AddError(At(key->source()), variable_path,
                      "an environment variable name must be non-empty and contain no '=' or NUL");
      ok = false;
    }
    std::optional<std::string> text = reader.ExpectString(*value, variable_path, QuoteHint(*value));
    if (!text) {
      ok = false;
      continue;
    }
    environment.emplace_back(std::string(variable), std::move(*text));
  }
  return ok;
}

// `ready`: "exec", "notify", or "http:/PATH" with PATH an origin-form request target.
bool ParseReady(ValueReader& reader, const toml::node& node, const std::string& path,
                CellConfig& cell) {
  const std::optional<std::string> text = node.value_exact<std::string>();
  if (!text || !text->starts_with(kHttpReadyPrefix)) {
    // kReadyModes ends with "http:/PATH" for the message: a text that matched it went above.
    auto mode = reader.ExpectChoice(node, path, kReadyModes);
    if (mode) cell.ready = static_cast<ReadyMode>(*mode);
    return mode.has_value();
  }
  const std::string target = text->substr(kHttpReadyPrefix.size());
  std::string problem;
  if (target.empty() || target.front() != '/') {
    problem = "the path after \"http:\" must start with '/'";
  } else if (std::any_of(target.begin(), target.end(),
                         [](unsigned char c) { return c <= ' ' || c >= 0x7f; })) {
    problem =
        "the path after \"http:\" must be visible ASCII, without spaces (percent-encode "
        "the rest)";
  }
  if (!problem.empty()) {
    reader.AddError(At(node.source()), path,
                    problem + ", as in \"http:/healthz\"; got " + Quoted(*text));
    return false;
  }
  cell.ready = ReadyMode::kHttp;
  cell.ready_http_path = target;
  return true;
}

// `needs`: an array of cell names, none twice. Whether each names a cell of the file, and cycles,
// are checked across the file (config/cell_needs.h).
bool ParseNeeds(ValueReader& reader, const toml::node& node, const std::string& path,
                std::vector<std::string>& needs) {
  const toml::array* array = node.as_array();
  if (array == nullptr) {
    reader.TypeError(node, path, "array of strings",
                     "write the cells this one needs as needs = [\"catalog\", \"auth\"]");
    return false;
  }
  bool ok = true;
  for (size_t i = 0; i < array->size(); ++i) {
    const toml::node& element = *array->get(i);
    const std::string element_path = path + "[" + std::to_string(i) + "]";
    std::optional<std::string> name = reader.ExpectString(element, element_path);
    if (!name) {
      ok = false;
      continue;
    }
    if (!IsValidCellName(*name)) {
      reader.AddError(At(element.source()), element_path,
                      "must name a cell (1 to 64 characters of A-Z, a-z, 0-9, '_' and '-'), got " +
                          Quoted(*name));
      ok = false;
      continue;
    }
    if (std::find(needs.begin(), needs.end(), *name) != needs.end()) {
      reader.AddError(At(element.source()), element_path,
                      Quoted(*name) + " is already in needs; name each cell once");
      ok = false;
      continue;
    }
    needs.push_back(std::move(*name));
  }
  return ok;
}

// `listen`: an array of TCP addresses "HOST:PORT" (config/listen_address.h). Each is recorded in
// `sockets` for the overlap check across the file.
bool ParseListen(ValueReader& reader, const toml::node& node, const std::string& path,
                 SocketChecks& sockets, std::vector<ListenAddress>& listen) {
  const toml::array* array = node.as_array();
  if (array == nullptr) {
    reader.TypeError(node, path, "array of strings",
                     "write the TCP addresses as listen = [\"127.0.0.1:8081\", \"[::1]:8081\"]");
    return false;
  }
  bool ok = true;
  for (size_t i = 0; i < array->size(); ++i) {
    const toml::node& element = *array->get(i);
    const std::string element_path = path + "[" + std::to_string(i) + "]";
    std::optional<std::string> text =
        reader.ExpectString(element, element_path, QuoteHint(element));
    if (!text) {
      ok = false;
      continue;
    }
    // `listen` takes TCP addresses only: where ParseListenAddress would also offer a Unix path
    // (no port, or a path), the message says which forms `listen` takes.
    constexpr std::string_view kForms =
        "HOST:PORT with a numeric IPv4 address or a bracketed IPv6 one, as in "
        "\"127.0.0.1:8081\", \"[::1]:8081\", or \"0.0.0.0:8081\" / \"[::]:8081\" for every "
        "address";
    const bool no_port =
        !text->starts_with('/') && (text->find(':') == std::string::npos || text->ends_with(']'));
    Result<ListenAddress> address =
        no_port
            ? Result<ListenAddress>(Status::Error("expected " + std::string(kForms) +
                                                  " (the port is required), got " + Quoted(*text)))
            : ParseListenAddress(*text);
    if (address.ok() && !address->is_tcp()) {
      address = Status::Error("must be a TCP address " + std::string(kForms) +
                              " (the cell's Unix socket is `socket`), got " + Quoted(*text));
    }
    if (!address.ok()) {
      reader.AddError(At(element.source()), element_path, address.status().message());
      ok = false;
      continue;
    }
    sockets.AddTcp({*address, element_path, At(element.source())});
    listen.push_back(std::move(address).value());
  }
  return ok;
}

}  // namespace

// A leading '-' is refused: the name becomes the default socket's file name ("-x.sock") and an
// argument of bulkheadctl, where it would read as an option ("--help") and need "--".
bool IsValidCellName(std::string_view name) {
  return !name.empty() && name.size() <= kMaxCellNameLength && name.front() != '-' &&
         std::all_of(name.begin(), name.end(), IsBareKeyChar);
}

std::string ReadyText(const CellConfig& cell) {
  switch (cell.ready) {
    case ReadyMode::kExec:
      return "exec";
    case ReadyMode::kNotify:
      return "notify";
    case ReadyMode::kHttp:
      return std::string(kHttpReadyPrefix) + cell.ready_http_path;
  }
  return "?";
}

std::optional<CellConfig> ParseCellTable(const toml::key& name, const toml::node& node,
                                         const SupervisorConfig& supervisor, ValueReader& reader,
                                         SocketChecks& sockets) {
  const std::string path = JoinKey("cells", name.str());
  const bool name_ok = IsValidCellName(name.str());
  if (!name_ok) {
    reader.AddError(
        At(name.source()), path,
        "cell name must be 1 to 64 characters of A-Z, a-z, 0-9, '_' and '-', not starting "
        "with '-'");
  }
  const toml::table* table =
      reader.ExpectTable(node, path, "write the cell as a [cells.NAME] table");
  if (table == nullptr) return std::nullopt;

  CellConfig cell;
  cell.name = std::string(name.str());
  cell.position = At(table->source());
  bool ok = name_ok;
  KeysRead read;
  // For the warnings: where each element of `command` was written.
  std::vector<SourcePosition> command_at;
  std::optional<SocketUse> explicit_socket;
  LimitsParser limits(reader);
  PrivilegesParser privileges(reader);

  for (auto [key, value] : InFileOrder(*table)) {
    const std::string key_path = JoinKey(path, key->str());
    const std::string_view key_name = key->str();
    const CellKey* known = FindCellKey(key_name);
    if (key_name == "worker_socket") {
      reader.AddError(At(key->source()), key_path,
                      "unknown key; the worker socket is always <runtime_dir>/NAME.worker.sock");
      ok = false;
      continue;
    }
    if (known == nullptr) {
      reader.UnknownKey(*key, key_path, CellKeyNames());
      ok = false;
      continue;
    }
    bool key_ok = false;
    if (known->value.kind != ValueKind::kOwn) {
      std::optional<KeyValue> parsed = reader.ExpectValue(known->value, *value, key_path);
      if (parsed) known->store(cell, *parsed);
      key_ok = parsed.has_value();
    } else {
      switch (known->id) {
        case CellKeyId::kCommand: {
          key_ok = ParseCommand(reader, *value, key_path, cell.command);
          if (const toml::array* array = value->as_array()) {
            for (const toml::node& element : *array) command_at.push_back(At(element.source()));
          }
          break;
        }
        case CellKeyId::kSocket: {
          std::optional<std::string> socket = reader.ExpectPath(*value, key_path);
          key_ok = socket.has_value();
          if (socket) {
            cell.socket = std::move(*socket);
            explicit_socket =
                SocketUse{cell.socket, key_path, key_path, "socket", At(value->source()), ""};
          }
          break;
        }
        case CellKeyId::kListen:
          key_ok = ParseListen(reader, *value, key_path, sockets, cell.listen);
          break;
        case CellKeyId::kMaxUnsentBytes: {
          std::optional<uint64_t> bytes = reader.ExpectSize(*value, key_path, "");
          const uint64_t least = uint64_t{supervisor.max_payload_bytes} + kFrameHeaderBytes;
          if (bytes && *bytes < least) {
            reader.AddError(At(value->source()), key_path,
                            "must hold one full-size reply: at least max_payload_bytes + 16 (" +
                                std::to_string(least) + " bytes), got " + SizeAsWritten(*value));
            bytes.reset();
          }
          key_ok = bytes.has_value();
          if (bytes) cell.max_unsent_bytes = *bytes;
          break;
        }
        case CellKeyId::kReady:
          key_ok = ParseReady(reader, *value, key_path, cell);
          break;
        case CellKeyId::kStartTimeout: {
          // "0s", or systemd's "infinity" (TimeoutStartSec=infinity): wait for READY=1 forever.
          auto timeout = value->value_exact<std::string>() == "infinity"
                             ? std::optional<milliseconds>(0)
                             : reader.ExpectDuration(*value, key_path, /*allow_zero=*/true);
          key_ok = timeout.has_value();
          if (timeout) cell.start_timeout = *timeout;
          break;
        }
        case CellKeyId::kStopSignal: {
          auto signal = ExpectStopSignal(reader, *value, key_path);
          key_ok = signal.has_value();
          if (signal) cell.stop_signal = *signal;
          break;
        }
        case CellKeyId::kLatencyTolerance: {
          auto tolerance = ExpectLatencyTolerance(reader, *value, key_path);
          key_ok = tolerance.has_value();
          if (tolerance) cell.latency_tolerance = *tolerance;
          break;
        }
        case CellKeyId::kNeeds:
          key_ok = ParseNeeds(reader, *value, key_path, cell.needs);
          break;
        case CellKeyId::kEnvironment:
          key_ok = ParseEnvironment(reader, *value, key_path, cell.environment);
          break;
        case CellKeyId::kCpuMax:
        case CellKeyId::kCpuMaxPeriod:
        case CellKeyId::kMemoryMax:
        case CellKeyId::kMemoryHigh:
          key_ok = limits.ParseKey(known->id, *value, key_path, cell);
          break;
        case CellKeyId::kUser:
        case CellKeyId::kSupplementaryGroups:
          key_ok = privileges.ParseKey(known->id, *value, key_path, cell);
          break;
        default:
          // A key of kind kOwn (config/config_keys.h) needs its case above.
          BH_CHECK(false);
      }
    }
    read.Add(known->id, *value, key_ok);
    ok = ok && key_ok;
  }

  for (CellKeyId id : kRequiredKeys) {
    if (!read.Written(id)) {
      reader.AddError(cell.position, JoinKey(path, CellKeys()[static_cast<size_t>(id)].name),
                      "missing required key");
      ok = false;
    }
  }
  // Left out, max_unsent_bytes holds at least two full-size replies (and 64 KiB).
  if (!read.Valid(CellKeyId::kMaxUnsentBytes)) {
    cell.max_unsent_bytes =
        std::max(kDefaultMaxUnsentBytes,
                 2 * (uint64_t{supervisor.max_payload_bytes} + kFrameHeaderBytes) + (64 << 10));
  }
  // The cap may not be below the first step. Left out, it follows a longer restart_delay.
  if (!read.Valid(CellKeyId::kRestartMaxDelay)) {
    cell.restart_max_delay = std::max(cell.restart_max_delay, cell.restart_delay);
  } else if (!read.Refused(CellKeyId::kRestartDelay) &&
             cell.restart_max_delay < cell.restart_delay) {
    const bool delay_given = read.Valid(CellKeyId::kRestartDelay) != nullptr;
    const std::string delay_text = delay_given
                                       ? read.Text(CellKeyId::kRestartDelay)
                                       : std::to_string(CellConfig{}.restart_delay.count()) + "ms";
    reader.AddError(read.At(CellKeyId::kRestartMaxDelay), JoinKey(path, "restart_max_delay"),
                    "must be at least restart_delay (" + Quoted(delay_text) +
                        (delay_given ? "" : ", the default") + "), got " +
                        Quoted(read.Text(CellKeyId::kRestartMaxDelay)));
    ok = false;
  }

  // The adaptive keys mean nothing to a fixed limit; a floor above the ceiling bounds nothing.
  if (cell.concurrency == ConcurrencyMode::kFixed && !read.Refused(CellKeyId::kConcurrency)) {
    for (CellKeyId id : {CellKeyId::kMinConcurrent, CellKeyId::kLatencyTolerance}) {
      if (!read.Valid(id)) continue;
      const std::string_view key = CellKeys()[static_cast<size_t>(id)].name;
      reader.AddError(read.At(id), JoinKey(path, key),
                      std::string(key) +
                          " bounds the adaptive limit, which needs concurrency = \"adaptive\" "
                          "(a fixed cell runs max_concurrent at once); remove it or set "
                          "concurrency");
      ok = false;
    }
  }
  if (read.Valid(CellKeyId::kMinConcurrent) && read.Valid(CellKeyId::kMaxConcurrent) &&
      cell.min_concurrent > cell.max_concurrent) {
    reader.AddError(read.At(CellKeyId::kMinConcurrent), JoinKey(path, "min_concurrent"),
                    "must be at most max_concurrent (" + std::to_string(cell.max_concurrent) +
                        ", the adaptive limit's ceiling), got " +
                        std::to_string(cell.min_concurrent));
    ok = false;
  }

  // The probe is an HTTP request on the worker socket, which speaks frames in a frames cell.
  if (read.Valid(CellKeyId::kReady) && cell.ready == ReadyMode::kHttp &&
      cell.protocol != Protocol::kHttp) {
    reader.AddError(read.At(CellKeyId::kReady), JoinKey(path, "ready"),
                    Quoted(ReadyText(cell)) +
                        " probes the worker over HTTP, which needs protocol = \"http\" (the "
                        "worker of a frames cell speaks frames, docs/protocol.md); use \"exec\" "
                        "or \"notify\"");
    ok = false;
  }
  // header_timeout bounds the time to read an HTTP request head; a frames cell has none, and a
  // value that silently does nothing would mislead (as systemd warns of a setting it ignores).
  if (read.Valid(CellKeyId::kHeaderTimeout) && !read.Refused(CellKeyId::kProtocol) &&
      cell.protocol != Protocol::kHttp) {
    reader.AddError(read.At(CellKeyId::kHeaderTimeout), JoinKey(path, "header_timeout"),
                    "bounds the time to read an HTTP request head, which needs protocol = "
                    "\"http\" (a frames cell reads frames, docs/protocol.md); remove it");
    ok = false;
  }

  // A multiplexed link tags each request with its request_id; HTTP/1.1 has no such tag and
  // answers strictly in order on a connection, so an HTTP cell keeps one request per link.
  if (cell.worker_connections == WorkerConnections::kMultiplex &&
      cell.protocol == Protocol::kHttp) {
    reader.AddError(
        read.At(CellKeyId::kWorkerConnections), JoinKey(path, "worker_connections"),
        "\"multiplex\" needs protocol = \"frames\": HTTP/1.1 cannot multiplex "
        "requests on one connection; leave out worker_connections (\"one-per-request\") "
        "for an HTTP cell");
    ok = false;
  }

  ok = limits.Finish(path, cell) && ok;
  ok = privileges.Finish(path, cell) && ok;

  // Sockets named after the cell need a valid name and a usable runtime_dir.
  if (name_ok) {
    cell.worker_socket = JoinPath(supervisor.runtime_dir, cell.name + ".worker.sock");
    cell.notify_socket = JoinPath(supervisor.runtime_dir, cell.name + ".notify");
    sockets.AddDerived({cell.worker_socket, path, "the worker socket of " + path, "worker socket",
                        cell.position, "supervisor.runtime_dir or the cell name"});
    sockets.AddDerived({cell.notify_socket, path, "the notify socket of " + path, "notify socket",
                        cell.position, "supervisor.runtime_dir or the cell name"});
    if (explicit_socket) {
      sockets.Add(std::move(*explicit_socket));
    } else {
      cell.socket = JoinPath(supervisor.runtime_dir, cell.name + ".sock");
      const std::string socket_key = JoinKey(path, "socket");
      sockets.AddDerived({cell.socket, socket_key, socket_key, "default socket", cell.position,
                          "supervisor.runtime_dir or the cell name"});
    }
  } else if (explicit_socket) {
    sockets.Add(std::move(*explicit_socket));
  }

  if (!ok) return std::nullopt;
  const auto written_at = [&read](CellKeyId id) {
    return read.Valid(id) ? read.At(id) : SourcePosition{};
  };
  WarnAboutTimeouts(reader, cell, path, written_at(CellKeyId::kRequestTimeout),
                    written_at(CellKeyId::kStallTimeout));
  WarnAboutCrashLoopPace(reader, cell, path,
                         read.Valid(CellKeyId::kRestartMaxDelay)
                             ? read.At(CellKeyId::kRestartMaxDelay)
                             : cell.position);
  std::optional<WrittenText> working_directory;
  if (const toml::node* written = read.Valid(CellKeyId::kWorkingDirectory)) {
    working_directory = WrittenText{At(written->source()), written->as_string()->get()};
  }
  WarnAboutCommand(reader, cell, path, command_at, working_directory);
  return cell;
}

}  // namespace bulkhead::config
