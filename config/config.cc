// SPDX-License-Identifier: MIT
// Loading the config: toml++ parses, ConfigParser walks the tree once, checking every key, filling
// defaults and collecting every error it finds; then the sockets are checked across the whole file.
// toml++ may throw in here; nothing is allowed out. Thread-compatible (reads environment and cwd).
#include "config/config.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <toml++/toml.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstring>
#include <exception>
#include <map>
#include <span>

#include "base/lexical_path.h"
#include "base/runtime_dir.h"
#include "base/status.h"
#include "base/unique_fd.h"
#include "config/config_keys.h"
#include "config/cpu_share.h"
#include "config/identity.h"
#include "config/size.h"

namespace bulkhead::config {
namespace {

using std::chrono::milliseconds;

// sun_path holds the path and its terminating NUL.
constexpr size_t kMaxSocketPathBytes = sizeof(sockaddr_un{}.sun_path) - 1;
constexpr size_t kMaxCellNameLength = 64;
constexpr int64_t kMaxConcurrentLimit = 65535;
constexpr int64_t kMaxQueueLimit = 1'000'000;
// fs.nr_open's default: no process can hold more descriptors than this.
constexpr int64_t kMaxConnectionsLimit = 1'048'576;
constexpr int64_t kMaxPayloadBytesLimit = int64_t{1} << 30;  // 1 GiB.
constexpr int64_t kMaxStartLimitBurst = 1000;
// cgroup-v2.rst: cpu.weight is in [1, 10000]; cpu.max takes a period of 1ms to 1s and a quota of
// at least 1ms (the kernel's min_cfs_quota_period and max_cfs_quota_period).
constexpr int64_t kMaxCpuWeight = 10000;
constexpr milliseconds kMinCpuMaxPeriod{1};
constexpr milliseconds kMaxCpuMaxPeriod{1000};
constexpr uint64_t kMinCpuMaxQuotaUs = 1000;
// PID_MAX_LIMIT on 64-bit kernels (include/linux/threads.h): no cell can hold more tasks.
constexpr int64_t kMaxPidsMax = 4'194'304;
// A frame header, bytes (docs/protocol.md, "Frame layout"; ipc::kHeaderSize).
constexpr uint64_t kFrameHeaderBytes = 16;

// A config file is a few kilobytes; refuse to read anything absurd into memory.
constexpr size_t kMaxConfigFileBytes = 16 << 20;

constexpr std::array<std::string_view, 2> kTopLevelKeys = {"supervisor", "cells"};
constexpr std::array<std::string_view, 4> kLogLevels = {"debug", "info", "warning", "error"};
// In the order of RestartMode and ReadyMode.
constexpr std::array<std::string_view, 3> kRestartModes = {"always", "on-failure", "never"};
constexpr std::array<std::string_view, 2> kReadyModes = {"exec", "notify"};
// In the order of OutputMode.
constexpr std::array<std::string_view, 3> kOutputModes = {"log", "inherit", "null"};
constexpr int64_t kMaxLogRateLimitBurst = 1'000'000;
// In the order of OomPolicy.
constexpr std::array<std::string_view, 2> kOomPolicies = {"kill", "continue"};
// In the order of CgroupMode.
constexpr std::array<std::string_view, 3> kCgroupModes = {"auto", "required", "off"};
// In the order of KillMode.
constexpr std::array<std::string_view, 2> kKillModes = {"control-group", "mixed"};
// In the order of ShutdownAction.
constexpr std::array<std::string_view, 3> kShutdownActions = {"exit", "poweroff", "reboot"};

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

SourcePosition At(const toml::source_region& region) {
  return {static_cast<int>(region.begin.line), static_cast<int>(region.begin.column)};
}

bool Before(const SourcePosition& a, const SourcePosition& b) {
  return a.line != b.line ? a.line < b.line : a.column < b.column;
}

std::string_view TypeName(toml::node_type type) {
  switch (type) {
    case toml::node_type::none:
      return "nothing";
    case toml::node_type::table:
      return "table";
    case toml::node_type::array:
      return "array";
    case toml::node_type::string:
      return "string";
    case toml::node_type::integer:
      return "integer";
    case toml::node_type::floating_point:
      return "float";
    case toml::node_type::boolean:
      return "boolean";
    case toml::node_type::date:
      return "date";
    case toml::node_type::time:
      return "time";
    case toml::node_type::date_time:
      return "date-time";
  }
  return "unknown";
}

bool IsBareKeyChar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

// One segment of a dotted key path, quoted as TOML would need it: `payments`, `"my cell"`.
std::string KeySegment(std::string_view key) {
  if (!key.empty() && std::all_of(key.begin(), key.end(), IsBareKeyChar)) return std::string(key);
  std::string out = "\"";
  for (char c : key) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20 || byte == 0x7f) {
      static constexpr char kHex[] = "0123456789ABCDEF";
      out += "\\u00";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xf];
    } else {
      out += c;
    }
  }
  out += '"';
  return out;
}

std::string JoinKey(std::string_view parent, std::string_view key) {
  std::string out(parent);
  out += '.';
  out += KeySegment(key);
  return out;
}

// Optimal string alignment distance (Levenshtein plus adjacent transpositions), so that both
// "max_queu" and "max_qeue" are one or two edits from "max_queue".
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

// The candidate closest to `word` within 2 edits (and fewer edits than `word` has characters), or
// "" if there is none. Ties go to the earlier candidate.
std::string_view ClosestMatch(std::string_view word, std::span<const std::string_view> candidates) {
  constexpr size_t kMaxEdits = 2;
  std::string_view best;
  size_t best_distance = kMaxEdits + 1;
  for (std::string_view candidate : candidates) {
    const size_t length_gap = word.size() > candidate.size() ? word.size() - candidate.size()
                                                             : candidate.size() - word.size();
    if (length_gap > kMaxEdits) continue;
    const size_t distance = EditDistance(word, candidate);
    if (distance < best_distance && distance < word.size()) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

// For argv and environment values: a number or boolean was probably meant as its text.
std::string_view QuoteHint(const toml::node& node) {
  return node.is_number() || node.is_boolean() ? "quote it" : "";
}

bool Contains(std::span<const std::string_view> list, std::string_view word) {
  return std::find(list.begin(), list.end(), word) != list.end();
}

// A leading '-' is refused: the name becomes the default socket's file name ("-x.sock") and an
// argument of bulkheadctl, where it would read as an option ("--help") and need "--".
bool IsValidCellName(std::string_view name) {
  return !name.empty() && name.size() <= kMaxCellNameLength && name.front() != '-' &&
         std::all_of(name.begin(), name.end(), IsBareKeyChar);
}

std::string JoinPath(std::string_view dir, std::string_view file) {
  std::string out(dir);
  if (out.empty() || out.back() != '/') out += '/';
  out.append(file);
  return out;
}

// The entries of a table in file order (toml::table iterates in key order).
std::vector<std::pair<const toml::key*, const toml::node*>> InFileOrder(const toml::table& table) {
  std::vector<std::pair<const toml::key*, const toml::node*>> entries;
  for (auto&& [key, node] : table) entries.emplace_back(&key, &node);
  std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return Before(At(a.first->source()), At(b.first->source()));
  });
  return entries;
}

// A Unix socket path the config names or implies, for the length and uniqueness checks.
struct SocketUse {
  std::string path;
  // The key the error is reported under: "cells.a.socket", "supervisor.control_socket", or
  // "cells.a" for a worker socket.
  std::string key;
  // How another error names this use: the key, or "the worker socket of cells.a".
  std::string owner;
  // What the path is, at the start of a message: "socket", "default socket", "worker socket".
  std::string kind;
  SourcePosition position;
  // For paths derived from runtime_dir, what to shorten when the path is too long.
  std::string shorten;
};

class ConfigParser {
 public:
  // `base_dir` is the absolute directory relative paths are resolved against, or "" if unknown.
  ConfigParser(std::string file, std::string base_dir, std::string default_runtime_dir,
               HostFacts host)
      : file_(std::move(file)),
        base_dir_(std::move(base_dir)),
        default_runtime_dir_(std::move(default_runtime_dir)),
        host_(host) {}

  LoadResult Parse(std::string_view toml_text) {
    toml::table root;
    try {
      root = toml::parse(toml_text, std::string_view(file_));
    } catch (const toml::parse_error& e) {
      std::string message(e.description());
      // toml++ says "Error while parsing ..."; every other message here starts in lower case.
      if (!message.empty() && message.front() == 'E') message.front() = 'e';
      AddError(At(e.source()), "", std::move(message));
      return Finish(std::nullopt);
    }

    Config config;
    ParseRoot(root, config);
    CheckSockets();
    return Finish(std::move(config));
  }

 private:
  void AddError(SourcePosition at, std::string key, std::string message) {
    errors_.push_back({file_, at.line, at.column, std::move(key), std::move(message)});
  }
  void AddWarning(SourcePosition at, std::string key, std::string message) {
    warnings_.push_back({file_, at.line, at.column, std::move(key), std::move(message)});
  }

  LoadResult Finish(std::optional<Config> config) {
    LoadResult result;
    for (std::vector<ConfigError>* list : {&errors_, &warnings_}) {
      std::stable_sort(list->begin(), list->end(), [](const ConfigError& a, const ConfigError& b) {
        return Before({a.line, a.column}, {b.line, b.column});
      });
    }
    if (errors_.empty()) result.config = std::move(config);
    result.errors = std::move(errors_);
    result.warnings = std::move(warnings_);
    return result;
  }

  void UnknownKey(const toml::key& key, const std::string& path,
                  std::span<const std::string_view> known) {
    std::string message = "unknown key";
    const std::string_view suggestion = ClosestMatch(key.str(), known);
    if (!suggestion.empty()) {
      message += "; did you mean \"";
      message.append(suggestion);
      message += "\"?";
    }
    AddError(At(key.source()), path, std::move(message));
  }

  void TypeError(const toml::node& node, const std::string& path, std::string_view expected,
                 std::string_view hint = {}) {
    std::string message = "expected ";
    message.append(expected);
    message += ", got ";
    message.append(TypeName(node.type()));
    if (!hint.empty()) {
      message += " (";
      message.append(hint);
      message += ')';
    }
    AddError(At(node.source()), path, std::move(message));
  }

  const toml::table* ExpectTable(const toml::node& node, const std::string& path,
                                 std::string_view hint = {}) {
    const toml::table* table = node.as_table();
    if (table == nullptr) TypeError(node, path, "table", hint);
    return table;
  }

  std::optional<std::string> ExpectString(const toml::node& node, const std::string& path,
                                          std::string_view hint = {}) {
    const toml::value<std::string>* value = node.as_string();
    if (value == nullptr) {
      TypeError(node, path, "string", hint);
      return std::nullopt;
    }
    const std::string& text = value->get();
    if (text.find('\0') != std::string::npos) {
      AddError(At(node.source()), path, "must not contain a NUL character");
      return std::nullopt;
    }
    return text;
  }

  std::optional<int64_t> ExpectInteger(const toml::node& node, const std::string& path, int64_t min,
                                       int64_t max, std::string_view max_note = {}) {
    const toml::value<int64_t>* value = node.as_integer();
    if (value == nullptr) {
      TypeError(node, path, "integer");
      return std::nullopt;
    }
    const int64_t number = value->get();
    if (number < min || number > max) {
      std::string message = "must be between " + std::to_string(min) + " and " +
                            std::to_string(max) + std::string(max_note) + ", got " +
                            std::to_string(number);
      AddError(At(node.source()), path, std::move(message));
      return std::nullopt;
    }
    return number;
  }

  std::optional<milliseconds> ExpectDuration(const toml::node& node, const std::string& path,
                                             bool allow_zero) {
    std::optional<std::string> text =
        ExpectString(node, path, "a duration is a string such as \"500ms\" or \"2s\"");
    if (!text) return std::nullopt;
    Result<milliseconds> duration = ParseDuration(*text);
    if (!duration.ok()) {
      AddError(At(node.source()), path, duration.status().message());
      return std::nullopt;
    }
    if (!allow_zero && duration.value() == milliseconds(0)) {
      AddError(At(node.source()), path, "must be greater than 0");
      return std::nullopt;
    }
    return duration.value();
  }

  // A size in bytes: a TOML integer, or a string ParseSize accepts. `zero_refusal` is why 0 is
  // refused, or "" when 0 is allowed.
  std::optional<uint64_t> ExpectSize(const toml::node& node, const std::string& path,
                                     std::string_view zero_refusal) {
    uint64_t bytes = 0;
    if (const toml::value<int64_t>* integer = node.as_integer()) {
      if (integer->get() < 0) {
        AddError(At(node.source()), path,
                 "invalid size " + std::to_string(integer->get()) + ": must not be negative; " +
                     std::string(kSizeForms));
        return std::nullopt;
      }
      bytes = static_cast<uint64_t>(integer->get());
    } else if (node.is_string()) {
      std::optional<std::string> text = ExpectString(node, path);
      if (!text) return std::nullopt;
      Result<uint64_t> size = ParseSize(*text);
      if (!size.ok()) {
        AddError(At(node.source()), path, size.status().message());
        return std::nullopt;
      }
      bytes = size.value();
    } else {
      TypeError(node, path, "size",
                "write bytes as an integer, 268435456, or a string with a unit, \"256M\"");
      return std::nullopt;
    }
    if (bytes == 0 && !zero_refusal.empty()) {
      AddError(At(node.source()), path, "must be greater than 0: " + std::string(zero_refusal));
      return std::nullopt;
    }
    return bytes;
  }

  // A size as written, for messages naming it: "256M" quoted, 1048576 bare.
  static std::string SizeAsWritten(const toml::node& node) {
    if (const toml::value<std::string>* text = node.as_string()) return Quoted(text->get());
    if (const toml::value<int64_t>* integer = node.as_integer()) {
      return std::to_string(integer->get());
    }
    return "";
  }

  // `cpu_max`: a CPU share, in thousandths of a percent (config/cpu_share.h), no more than the
  // host's CPUs.
  std::optional<uint64_t> ExpectCpuShare(const toml::node& node, const std::string& path) {
    std::optional<std::string> text = ExpectString(
        node, path, "write a share of one CPU as a percentage string, such as \"50%\"");
    if (!text) return std::nullopt;
    Result<uint64_t> share = ParseCpuShare(*text);
    if (!share.ok()) {
      AddError(At(node.source()), path, share.status().message());
      return std::nullopt;
    }
    const uint64_t host_share = uint64_t{host_.cpus} * 100 * kCpuShareScale;
    if (share.value() > host_share) {
      AddError(At(node.source()), path,
               *text + " is above the 100% × " + std::to_string(host_.cpus) +
                   (host_.cpus == 1 ? " CPU" : " CPUs") + " of this host");
      return std::nullopt;
    }
    return share.value();
  }

  // A user or group: a name (string) or a numeric id (integer, or a string of digits).
  std::optional<std::string> ExpectIdentity(const toml::node& node, const std::string& path) {
    if (const toml::value<int64_t>* integer = node.as_integer()) {
      if (integer->get() < 0) {
        AddError(At(node.source()), path,
                 "must not be negative, got " + std::to_string(integer->get()));
        return std::nullopt;
      }
      return std::to_string(integer->get());
    }
    return ExpectString(node, path, "write a name, \"nobody\", or a numeric id, 65534");
  }

  std::optional<ResolvedUser> ExpectUser(const toml::node& node, const std::string& path) {
    std::optional<std::string> text = ExpectIdentity(node, path);
    if (!text) return std::nullopt;
    Result<ResolvedUser> user = ResolveUser(*text);
    if (!user.ok()) {
      AddError(At(node.source()), path, user.status().message());
      return std::nullopt;
    }
    return user.value();
  }

  std::optional<gid_t> ExpectGroup(const toml::node& node, const std::string& path) {
    std::optional<std::string> text = ExpectIdentity(node, path);
    if (!text) return std::nullopt;
    Result<gid_t> group = ResolveGroup(*text);
    if (!group.ok()) {
      AddError(At(node.source()), path, group.status().message());
      return std::nullopt;
    }
    return group.value();
  }

  // An octal permission string, "0660" (config/identity.h), 0..0777.
  std::optional<uint32_t> ExpectMode(const toml::node& node, const std::string& path) {
    std::optional<std::string> text =
        ExpectString(node, path, "write the mode as an octal string, such as \"0660\"");
    if (!text) return std::nullopt;
    Result<uint32_t> mode = ParseOctalMode(*text, 0777);
    if (!mode.ok()) {
      AddError(At(node.source()), path, mode.status().message());
      return std::nullopt;
    }
    return mode.value();
  }

  std::optional<bool> ExpectBoolean(const toml::node& node, const std::string& path) {
    const toml::value<bool>* value = node.as_boolean();
    if (value == nullptr) {
      TypeError(node, path, "boolean",
                node.is_string() ? "write true or false without quotes" : "");
      return std::nullopt;
    }
    return value->get();
  }

  // A string that must be one of `choices`; returns its index.
  std::optional<size_t> ExpectChoice(const toml::node& node, const std::string& path,
                                     std::span<const std::string_view> choices) {
    std::optional<std::string> text = ExpectString(node, path);
    if (!text) return std::nullopt;
    for (size_t i = 0; i < choices.size(); ++i) {
      if (choices[i] == *text) return i;
    }
    std::string message = "must be one of ";
    for (size_t i = 0; i < choices.size(); ++i) {
      if (i > 0) message += ", ";
      message.append(choices[i]);
    }
    message += "; got " + Quoted(*text);
    const std::string_view suggestion = ClosestMatch(*text, choices);
    if (!suggestion.empty()) {
      message += "; did you mean \"";
      message.append(suggestion);
      message += "\"?";
    }
    AddError(At(node.source()), path, std::move(message));
    return std::nullopt;
  }

  // A signal name from kStopSignals, with or without its SIG prefix ("SIGTERM", "TERM").
  std::optional<int> ExpectStopSignal(const toml::node& node, const std::string& path) {
    std::optional<std::string> text =
        ExpectString(node, path, "write the signal's name, such as \"SIGTERM\"");
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
    for (char& c : upper) {
      if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    }
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
    AddError(At(node.source()), path, std::move(message));
    return std::nullopt;
  }

  // A cgroup as the kernel names it in /proc/PID/cgroup: "/" or "/a/b", relative to the cgroup2
  // mount. Components are never ".", ".." or empty, and hold no character a cgroup file name
  // cannot (whitespace, control characters); a trailing '/' is dropped.
  std::optional<std::string> ExpectCgroupPath(const toml::node& node, const std::string& path) {
    std::optional<std::string> text = ExpectString(node, path);
    if (!text) return std::nullopt;
    std::string value = *text;
    while (value.size() > 1 && value.back() == '/') value.pop_back();
    auto fail = [&](const std::string& why) {
      AddError(At(node.source()), path, why + ", got " + Quoted(*text));
      return std::nullopt;
    };
    if (value.empty() || value.front() != '/') {
      return fail(
          "must be a cgroup path under the cgroup2 mount starting with '/' "
          "(\"/pod.slice/bulkhead\")");
    }
    for (unsigned char c : value) {
      if (c <= ' ' || c == 0x7f) return fail("must not contain whitespace or control characters");
    }
    if (value != "/") {
      for (size_t start = 1; start <= value.size();) {
        size_t end = value.find('/', start);
        if (end == std::string::npos) end = value.size();
        std::string_view part = std::string_view(value).substr(start, end - start);
        if (part.empty() || part == "." || part == "..") {
          return fail("must not have empty, \".\" or \"..\" components");
        }
        start = end + 1;
      }
    }
    return value;
  }

  // A string holding a path; relative paths are resolved against the config file's directory.
  std::optional<std::string> ExpectPath(const toml::node& node, const std::string& path) {
    std::optional<std::string> text = ExpectString(node, path);
    if (!text) return std::nullopt;
    if (text->empty()) {
      AddError(At(node.source()), path, "must not be empty");
      return std::nullopt;
    }
    return Resolve(*text, node, path);
  }

  std::optional<std::string> Resolve(const std::string& text, const toml::node& node,
                                     const std::string& path) {
    if (!IsAbsolutePath(text) && base_dir_.empty()) {
      AddError(At(node.source()), path,
               "relative path \"" + text +
                   "\" cannot be resolved: the current directory is unknown; use an absolute path");
      return std::nullopt;
    }
    return ResolvePath(text, base_dir_);
  }

  void ParseRoot(const toml::table& root, Config& config) {
    config.source = file_;
    const toml::table* supervisor = nullptr;
    const toml::table* cells = nullptr;
    const toml::node* cells_node = nullptr;
    for (auto [key, node] : InFileOrder(root)) {
      const std::string path = KeySegment(key->str());
      if (key->str() == "supervisor") {
        supervisor = ExpectTable(*node, path);
      } else if (key->str() == "cells") {
        cells_node = node;
        cells = ExpectTable(*node, path, "write each cell as a [cells.NAME] table, not [[cells]]");
      } else if (FindSupervisorKey(key->str()) != nullptr) {
        AddError(At(key->source()), path,
                 "unknown key; " + std::string(key->str()) + " belongs in [supervisor]");
      } else if (FindCellKey(key->str()) != nullptr) {
        AddError(At(key->source()), path,
                 "unknown key; " + std::string(key->str()) + " belongs in a [cells.NAME] table");
      } else {
        UnknownKey(*key, path, kTopLevelKeys);
      }
    }

    ParseSupervisor(supervisor, config.supervisor);

    if (cells_node == nullptr) {
      AddError({}, "cells", "no cells defined; add at least one [cells.NAME] table");
    } else if (cells != nullptr && cells->empty()) {
      AddError(At(cells->source()), "cells",
               "no cells defined; add at least one [cells.NAME] table");
    }
    if (cells == nullptr) return;
    for (auto [key, node] : InFileOrder(*cells)) {
      std::optional<CellConfig> cell = ParseCell(*key, *node, config.supervisor);
      if (cell) config.cells.push_back(std::move(*cell));
    }
    // File order is the order of the [cells.NAME] tables themselves.
    std::stable_sort(
        config.cells.begin(), config.cells.end(),
        [](const CellConfig& a, const CellConfig& b) { return Before(a.position, b.position); });
  }

  // `table` is null when [supervisor] is absent (or not a table): everything takes its default.
  void ParseSupervisor(const toml::table* table, SupervisorConfig& out) {
    out.runtime_dir = default_runtime_dir_;
    SourcePosition runtime_dir_at;
    bool has_control_socket = false;
    if (table != nullptr) {
      for (auto [key, node] : InFileOrder(*table)) {
        const std::string path = JoinKey("supervisor", key->str());
        const std::string_view name = key->str();
        if (name == "runtime_dir") {
          runtime_dir_at = At(node->source());
          if (std::optional<std::string> dir = ExpectPath(*node, path)) {
            out.runtime_dir = std::move(*dir);
          } else {
            runtime_dir_ok_ = false;
          }
        } else if (name == "control_socket") {
          has_control_socket = true;
          if (std::optional<std::string> socket = ExpectPath(*node, path)) {
            out.control_socket = std::move(*socket);
            sockets_.push_back({out.control_socket, path, path, "socket", At(node->source()), ""});
          }
        } else if (name == "max_payload_bytes") {
          if (auto bytes = ExpectInteger(*node, path, 1, kMaxPayloadBytesLimit, " (1 GiB)")) {
            out.max_payload_bytes = static_cast<uint32_t>(*bytes);
          }
        } else if (name == "log_level") {
          if (std::optional<std::string> level = ExpectString(*node, path)) {
            if (Contains(kLogLevels, *level)) {
              out.log_level = std::move(*level);
            } else {
              std::string message =
                  "must be one of debug, info, warning, error; got " + Quoted(*level);
              const std::string_view suggestion = ClosestMatch(*level, kLogLevels);
              if (!suggestion.empty()) {
                message += "; did you mean \"";
                message.append(suggestion);
                message += "\"?";
              }
              AddError(At(node->source()), path, std::move(message));
            }
          }
        } else if (name == "cgroup") {
          if (auto mode = ExpectChoice(*node, path, kCgroupModes)) {
            out.cgroup = static_cast<CgroupMode>(*mode);
          }
        } else if (name == "cgroup_parent") {
          if (std::optional<std::string> parent = ExpectCgroupPath(*node, path)) {
            out.cgroup_parent = std::move(*parent);
          }
        } else if (name == "metrics_listen") {
          ParseMetricsListen(*node, path, out);
        } else if (name == "on_shutdown") {
          if (auto action = ExpectChoice(*node, path, kShutdownActions)) {
            out.on_shutdown = static_cast<ShutdownAction>(*action);
          }
        } else if (name == "control_socket_mode") {
          if (auto mode = ExpectMode(*node, path)) out.control_socket_mode = *mode;
        } else if (name == "control_socket_group") {
          if (auto group = ExpectGroup(*node, path)) out.control_socket_group = *group;
        } else if (name == "control_group") {
          if (auto group = ExpectGroup(*node, path)) out.control_group = *group;
        } else {
          UnknownKey(*key, path, SupervisorKeyNames());
        }
      }
    }
    if (!has_control_socket) {
      out.control_socket = JoinPath(out.runtime_dir, "control.sock");
      if (runtime_dir_ok_) {
        // Reported at supervisor.runtime_dir when that is what made the path.
        sockets_.push_back({out.control_socket, "supervisor.control_socket",
                            "supervisor.control_socket", "default socket", runtime_dir_at,
                            "supervisor.runtime_dir"});
      }
    }
  }

  // `metrics_listen`: a TCP address or an absolute Unix socket path (config/listen_address.h).
  void ParseMetricsListen(const toml::node& node, const std::string& path, SupervisorConfig& out) {
    std::optional<std::string> text = ExpectString(node, path);
    if (!text) return;
    Result<ListenAddress> address = ParseListenAddress(*text);
    if (!address.ok()) {
      AddError(At(node.source()), path, address.status().message());
      return;
    }
    if (!address->is_tcp()) {
      sockets_.push_back({address->path, path, path, "socket", At(node.source()), ""});
    }
    out.metrics_listen = std::move(address).value();
  }

  static std::string Quoted(std::string_view text) {
    std::string segment = KeySegment(text);
    if (segment.front() != '"') segment = "\"" + segment + "\"";
    return segment;
  }

  std::optional<CellConfig> ParseCell(const toml::key& name, const toml::node& node,
                                      const SupervisorConfig& supervisor) {
    const std::string path = JoinKey("cells", name.str());
    const bool name_ok = IsValidCellName(name.str());
    if (!name_ok) {
      AddError(At(name.source()), path,
               "cell name must be 1 to 64 characters of A-Z, a-z, 0-9, '_' and '-', not starting "
               "with '-'");
    }
    const toml::table* table = ExpectTable(node, path, "write the cell as a [cells.NAME] table");
    if (table == nullptr) return std::nullopt;

    CellConfig cell;
    cell.name = std::string(name.str());
    cell.position = At(table->source());
    bool ok = name_ok;
    bool has_command = false;
    bool has_max_concurrent = false;
    // For the warnings: where each element of `command` and the two timeouts were written.
    std::vector<SourcePosition> command_at;
    SourcePosition request_timeout_at;
    SourcePosition stall_timeout_at;
    bool max_unsent_given = false;
    std::optional<SocketUse> explicit_socket;
    // For the restart_max_delay >= restart_delay check: the durations as written, and where.
    std::string restart_delay_text = std::to_string(CellConfig{}.restart_delay.count()) + "ms";
    bool restart_delay_given = false;
    bool restart_delay_ok = true;
    std::optional<std::pair<SourcePosition, std::string>> max_delay_written;
    // For the cpu.max quota, computed once the period is known: the share and where it was written.
    std::optional<std::pair<SourcePosition, uint64_t>> cpu_share;
    bool cpu_max_period_ok = true;
    // For the memory_high <= memory_max check: each as written, and where.
    std::optional<std::pair<SourcePosition, std::string>> memory_max_written;
    std::optional<std::pair<SourcePosition, std::string>> memory_high_written;
    // For the group of `user`: its primary group when it has a database entry, and where it was.
    std::optional<gid_t> user_primary_group;
    std::optional<SourcePosition> user_at;

    for (auto [key, value] : InFileOrder(*table)) {
      const std::string key_path = JoinKey(path, key->str());
      const std::string_view key_name = key->str();
      bool key_ok = true;
      if (key_name == "command") {
        has_command = true;
        key_ok = ParseCommand(*value, key_path, cell.command);
        if (const toml::array* array = value->as_array()) {
          for (const toml::node& element : *array) command_at.push_back(At(element.source()));
        }
      } else if (key_name == "socket") {
        std::optional<std::string> socket = ExpectPath(*value, key_path);
        key_ok = socket.has_value();
        if (socket) {
          cell.socket = std::move(*socket);
          explicit_socket =
              SocketUse{cell.socket, key_path, key_path, "socket", At(value->source()), ""};
        }
      } else if (key_name == "max_concurrent") {
        has_max_concurrent = true;
        auto slots = ExpectInteger(*value, key_path, 1, kMaxConcurrentLimit);
        key_ok = slots.has_value();
        if (slots) cell.max_concurrent = static_cast<uint32_t>(*slots);
      } else if (key_name == "max_queue") {
        auto queue = ExpectInteger(*value, key_path, 0, kMaxQueueLimit);
        key_ok = queue.has_value();
        if (queue) cell.max_queue = static_cast<uint32_t>(*queue);
      } else if (key_name == "max_connections") {
        auto connections = ExpectInteger(*value, key_path, 1, kMaxConnectionsLimit);
        key_ok = connections.has_value();
        if (connections) cell.max_connections = static_cast<uint32_t>(*connections);
      } else if (key_name == "max_unsent_bytes") {
        std::optional<uint64_t> bytes = ExpectSize(*value, key_path, "");
        const uint64_t least = uint64_t{supervisor.max_payload_bytes} + kFrameHeaderBytes;
        if (bytes && *bytes < least) {
          AddError(At(value->source()), key_path,
                   "must hold one full-size reply: at least max_payload_bytes + 16 (" +
                       std::to_string(least) + " bytes), got " + SizeAsWritten(*value));
          bytes.reset();
        }
        key_ok = bytes.has_value();
        if (bytes) {
          cell.max_unsent_bytes = *bytes;
          max_unsent_given = true;
        }
      } else if (key_name == "client_write_timeout") {
        auto timeout = ExpectDuration(*value, key_path, /*allow_zero=*/true);
        key_ok = timeout.has_value();
        if (timeout) cell.client_write_timeout = *timeout;
      } else if (key_name == "queue_timeout") {
        auto timeout = ExpectDuration(*value, key_path, /*allow_zero=*/false);
        key_ok = timeout.has_value();
        if (timeout) cell.queue_timeout = *timeout;
      } else if (key_name == "restart") {
        auto mode = ExpectChoice(*value, key_path, kRestartModes);
        key_ok = mode.has_value();
        if (mode) cell.restart = static_cast<RestartMode>(*mode);
      } else if (key_name == "restart_delay") {
        auto delay = ExpectDuration(*value, key_path, /*allow_zero=*/true);
        key_ok = delay.has_value();
        restart_delay_given = true;
        restart_delay_ok = key_ok;
        if (delay) {
          cell.restart_delay = *delay;
          restart_delay_text = value->as_string()->get();
        }
      } else if (key_name == "restart_max_delay") {
        auto delay = ExpectDuration(*value, key_path, /*allow_zero=*/true);
        key_ok = delay.has_value();
        if (delay) {
          cell.restart_max_delay = *delay;
          max_delay_written.emplace(At(value->source()), value->as_string()->get());
        }
      } else if (key_name == "restart_reset_after") {
        auto after = ExpectDuration(*value, key_path, /*allow_zero=*/false);
        key_ok = after.has_value();
        if (after) cell.restart_reset_after = *after;
      } else if (key_name == "start_limit_burst") {
        auto burst = ExpectInteger(*value, key_path, 1, kMaxStartLimitBurst);
        key_ok = burst.has_value();
        if (burst) cell.start_limit_burst = static_cast<uint32_t>(*burst);
      } else if (key_name == "start_limit_interval") {
        auto interval = ExpectDuration(*value, key_path, /*allow_zero=*/true);
        key_ok = interval.has_value();
        if (interval) cell.start_limit_interval = *interval;
      } else if (key_name == "request_timeout") {
        auto timeout = ExpectDuration(*value, key_path, /*allow_zero=*/true);
        key_ok = timeout.has_value();
        if (timeout) cell.request_timeout = *timeout;
        request_timeout_at = At(value->source());
      } else if (key_name == "stall_timeout") {
        auto timeout = ExpectDuration(*value, key_path, /*allow_zero=*/true);
        key_ok = timeout.has_value();
        if (timeout) cell.stall_timeout = *timeout;
        stall_timeout_at = At(value->source());
      } else if (key_name == "ready") {
        auto mode = ExpectChoice(*value, key_path, kReadyModes);
        key_ok = mode.has_value();
        if (mode) cell.ready = static_cast<ReadyMode>(*mode);
      } else if (key_name == "start_timeout") {
        // "0s", or systemd's "infinity" (TimeoutStartSec=infinity): wait for READY=1 forever.
        auto timeout = value->value_exact<std::string>() == "infinity"
                           ? std::optional<milliseconds>(0)
                           : ExpectDuration(*value, key_path, /*allow_zero=*/true);
        key_ok = timeout.has_value();
        if (timeout) cell.start_timeout = *timeout;
      } else if (key_name == "watchdog") {
        auto interval = ExpectDuration(*value, key_path, /*allow_zero=*/true);
        key_ok = interval.has_value();
        if (interval) cell.watchdog = *interval;
      } else if (key_name == "stop_signal") {
        auto signal = ExpectStopSignal(*value, key_path);
        key_ok = signal.has_value();
        if (signal) cell.stop_signal = *signal;
      } else if (key_name == "kill_mode") {
        auto mode = ExpectChoice(*value, key_path, kKillModes);
        key_ok = mode.has_value();
        if (mode) cell.kill_mode = static_cast<KillMode>(*mode);
      } else if (key_name == "stop_timeout") {
        auto timeout = ExpectDuration(*value, key_path, /*allow_zero=*/false);
        key_ok = timeout.has_value();
        if (timeout) cell.stop_timeout = *timeout;
      } else if (key_name == "environment") {
        key_ok = ParseEnvironment(*value, key_path, cell.environment);
      } else if (key_name == "working_directory") {
        std::optional<std::string> dir = ExpectPath(*value, key_path);
        key_ok = dir.has_value();
        if (dir) cell.working_directory = std::move(*dir);
      } else if (key_name == "cpu_max") {
        auto share = ExpectCpuShare(*value, key_path);
        key_ok = share.has_value();
        if (share) cpu_share.emplace(At(value->source()), *share);
      } else if (key_name == "cpu_max_period") {
        auto period = ExpectDuration(*value, key_path, /*allow_zero=*/true);
        if (period && (*period < kMinCpuMaxPeriod || *period > kMaxCpuMaxPeriod)) {
          AddError(At(value->source()), key_path,
                   "must be between 1ms and 1s (the cpu.max period range), got " +
                       Quoted(value->as_string()->get()));
          period.reset();
        }
        key_ok = period.has_value();
        cpu_max_period_ok = key_ok;
        if (period) {
          cell.cpu_max_period_us = static_cast<uint64_t>(
              std::chrono::duration_cast<std::chrono::microseconds>(*period).count());
        }
      } else if (key_name == "cpu_weight") {
        auto weight = ExpectInteger(*value, key_path, 1, kMaxCpuWeight);
        key_ok = weight.has_value();
        if (weight) cell.cpu_weight = static_cast<uint32_t>(*weight);
      } else if (key_name == "memory_max") {
        cell.memory_max = ExpectSize(
            *value, key_path,
            "a memory.max of 0 would OOM-kill the cell at once; leave memory_max out for no limit");
        key_ok = cell.memory_max.has_value();
        if (key_ok) memory_max_written.emplace(At(value->source()), SizeAsWritten(*value));
      } else if (key_name == "memory_high") {
        cell.memory_high = ExpectSize(*value, key_path,
                                      "a memory.high of 0 would throttle the cell from the start; "
                                      "leave memory_high out for no limit");
        key_ok = cell.memory_high.has_value();
        if (key_ok) memory_high_written.emplace(At(value->source()), SizeAsWritten(*value));
      } else if (key_name == "memory_swap_max") {
        cell.memory_swap_max = ExpectSize(*value, key_path, /*zero_refusal=*/"");
        key_ok = cell.memory_swap_max.has_value();
      } else if (key_name == "pids_max") {
        auto pids = ExpectInteger(*value, key_path, 1, kMaxPidsMax, " (PID_MAX_LIMIT)");
        key_ok = pids.has_value();
        if (pids) cell.pids_max = static_cast<uint64_t>(*pids);
      } else if (key_name == "oom_policy") {
        auto policy = ExpectChoice(*value, key_path, kOomPolicies);
        key_ok = policy.has_value();
        if (policy) cell.oom_policy = static_cast<OomPolicy>(*policy);
      } else if (key_name == "oom_score_adjust") {
        auto adjust = ExpectInteger(*value, key_path, kMinOomScoreAdjust, kMaxOomScoreAdjust,
                                    " (oom_score_adj)");
        key_ok = adjust.has_value();
        if (adjust) cell.oom_score_adjust = static_cast<int>(*adjust);
      } else if (key_name == "output") {
        auto mode = ExpectChoice(*value, key_path, kOutputModes);
        key_ok = mode.has_value();
        if (mode) cell.output = static_cast<OutputMode>(*mode);
      } else if (key_name == "log_line_max") {
        std::optional<uint64_t> bytes = ExpectSize(*value, key_path, "");
        if (bytes && (*bytes < kMinLogLineMax || *bytes > kMaxLogLineMax)) {
          AddError(At(value->source()), key_path,
                   "must be between 64 and 1048576 bytes (1M), got " + SizeAsWritten(*value));
          bytes.reset();
        }
        key_ok = bytes.has_value();
        if (bytes) cell.log_line_max = static_cast<uint32_t>(*bytes);
      } else if (key_name == "log_rate_limit_burst") {
        auto burst = ExpectInteger(*value, key_path, 0, kMaxLogRateLimitBurst);
        key_ok = burst.has_value();
        if (burst) cell.log_rate_limit_burst = static_cast<uint32_t>(*burst);
      } else if (key_name == "log_rate_limit_interval") {
        auto interval = ExpectDuration(*value, key_path, /*allow_zero=*/true);
        key_ok = interval.has_value();
        if (interval) cell.log_rate_limit_interval = *interval;
      } else if (key_name == "user") {
        auto user = ExpectUser(*value, key_path);
        key_ok = user.has_value();
        if (user) {
          cell.user = user->uid;
          cell.user_name = user->name;
          cell.user_home = user->home;
          cell.user_shell = user->shell;
          if (user->has_entry) user_primary_group = user->gid;
          user_at = At(value->source());
        }
      } else if (key_name == "group") {
        cell.group = ExpectGroup(*value, key_path);
        key_ok = cell.group.has_value();
      } else if (key_name == "supplementary_groups") {
        key_ok = ParseGroupList(*value, key_path, cell.supplementary_groups);
        cell.has_supplementary_groups = true;
      } else if (key_name == "umask") {
        auto mask = ExpectMode(*value, key_path);
        key_ok = mask.has_value();
        if (mask) cell.umask = *mask;
      } else if (key_name == "no_new_privileges") {
        auto enabled = ExpectBoolean(*value, key_path);
        key_ok = enabled.has_value();
        if (enabled) cell.no_new_privileges = *enabled;
      } else if (key_name == "socket_mode") {
        auto mode = ExpectMode(*value, key_path);
        key_ok = mode.has_value();
        if (mode) cell.socket_mode = *mode;
      } else if (key_name == "socket_group") {
        cell.socket_group = ExpectGroup(*value, key_path);
        key_ok = cell.socket_group.has_value();
      } else if (key_name == "worker_socket") {
        AddError(At(key->source()), key_path,
                 "unknown key; the worker socket is always <runtime_dir>/NAME.worker.sock");
        key_ok = false;
      } else {
        UnknownKey(*key, key_path, CellKeyNames());
        key_ok = false;
      }
      ok = ok && key_ok;
    }

    if (!has_command) {
      AddError(cell.position, JoinKey(path, "command"), "missing required key");
      ok = false;
    }
    if (!has_max_concurrent) {
      AddError(cell.position, JoinKey(path, "max_concurrent"), "missing required key");
      ok = false;
    }
    // Left out, max_unsent_bytes holds at least two full-size replies (and 64 KiB).
    if (!max_unsent_given) {
      cell.max_unsent_bytes =
          std::max(kDefaultMaxUnsentBytes,
                   2 * (uint64_t{supervisor.max_payload_bytes} + kFrameHeaderBytes) + (64 << 10));
    }
    // The cap may not be below the first step. Left out, it follows a longer restart_delay.
    if (!max_delay_written) {
      cell.restart_max_delay = std::max(cell.restart_max_delay, cell.restart_delay);
    } else if (restart_delay_ok && cell.restart_max_delay < cell.restart_delay) {
      AddError(max_delay_written->first, JoinKey(path, "restart_max_delay"),
               "must be at least restart_delay (" + Quoted(restart_delay_text) +
                   (restart_delay_given ? "" : ", the default") + "), got " +
                   Quoted(max_delay_written->second));
      ok = false;
    }

    // cpu.max quota = share × period; the kernel refuses a quota under 1ms.
    if (cpu_share && cpu_max_period_ok) {
      const uint64_t quota_us = CpuQuotaUs(cpu_share->second, cell.cpu_max_period_us);
      if (quota_us < kMinCpuMaxQuotaUs) {
        AddError(cpu_share->first, JoinKey(path, "cpu_max"),
                 "gives a cpu.max quota of " + std::to_string(quota_us) + " μs per " +
                     std::to_string(cell.cpu_max_period_us) +
                     " μs period, below the kernel's minimum of 1000 μs; raise cpu_max or "
                     "cpu_max_period");
        ok = false;
      } else {
        cell.cpu_max_quota_us = quota_us;
      }
    }
    if (memory_max_written && memory_high_written && *cell.memory_high > *cell.memory_max) {
      AddError(memory_high_written->first, JoinKey(path, "memory_high"),
               "must be at most memory_max (" + memory_max_written->second + "), got " +
                   memory_high_written->second);
      ok = false;
    }

    // systemd.exec(5): the group defaults to the user's primary group. A numeric uid without an
    // entry has none to offer.
    if (user_at && !cell.group) {
      if (user_primary_group) {
        cell.group = user_primary_group;
      } else {
        AddError(*user_at, JoinKey(path, "user"),
                 "uid " + std::to_string(*cell.user) +
                     " has no entry in the user database, so it has no primary group; set group");
        ok = false;
      }
    }

    // Sockets named after the cell need a valid name and a usable runtime_dir.
    if (name_ok) {
      cell.worker_socket = JoinPath(supervisor.runtime_dir, cell.name + ".worker.sock");
      cell.notify_socket = JoinPath(supervisor.runtime_dir, cell.name + ".notify");
      if (runtime_dir_ok_) {
        sockets_.push_back({cell.worker_socket, path, "the worker socket of " + path,
                            "worker socket", cell.position,
                            "supervisor.runtime_dir or the cell name"});
        sockets_.push_back({cell.notify_socket, path, "the notify socket of " + path,
                            "notify socket", cell.position,
                            "supervisor.runtime_dir or the cell name"});
      }
      if (explicit_socket) {
        sockets_.push_back(std::move(*explicit_socket));
      } else {
        cell.socket = JoinPath(supervisor.runtime_dir, cell.name + ".sock");
        const std::string socket_key = JoinKey(path, "socket");
        if (runtime_dir_ok_) {
          sockets_.push_back({cell.socket, socket_key, socket_key, "default socket", cell.position,
                              "supervisor.runtime_dir or the cell name"});
        }
      }
    } else if (explicit_socket) {
      sockets_.push_back(std::move(*explicit_socket));
    }

    if (!ok) return std::nullopt;
    WarnAboutTimeouts(cell, path, request_timeout_at, stall_timeout_at);
    WarnAboutCommand(cell, path, command_at);
    return cell;
  }

  // request_timeout answers a request but leaves its slot taken until the worker answers; only
  // stall_timeout replaces a worker that never does.
  void WarnAboutTimeouts(const CellConfig& cell, const std::string& path,
                         SourcePosition request_timeout_at, SourcePosition stall_timeout_at) {
    const auto text = [](milliseconds d) { return Quoted(std::to_string(d.count()) + "ms"); };
    if (cell.request_timeout.count() > 0 && cell.stall_timeout.count() == 0) {
      AddWarning(request_timeout_at, JoinKey(path, "request_timeout"),
                 "set without stall_timeout: a request answered FAILED timeout keeps its slot "
                 "until the worker answers, so a hung worker holds its slots, and the cell, "
                 "forever; set stall_timeout too (docs/config.md, Timeouts)");
    } else if (cell.request_timeout.count() > 0 && cell.stall_timeout < cell.request_timeout) {
      AddWarning(stall_timeout_at, JoinKey(path, "stall_timeout"),
                 "is shorter than request_timeout (" + text(cell.request_timeout) +
                     "): a worker with one request in flight that is allowed " +
                     text(cell.request_timeout) + " is killed as stalled after " +
                     text(cell.stall_timeout) + "; make stall_timeout at least request_timeout");
    }
  }

  // exec(2) happens later, as another user maybe, on a host that may not be this one: what does
  // not resolve here is a warning, not an error (docs/config.md, "Warnings", says why).
  // `command_at`: the position of each element of `command`.
  void WarnAboutCommand(const CellConfig& cell, const std::string& path,
                        const std::vector<SourcePosition>& command_at) {
    if (command_at.size() != cell.command.size()) return;
    const std::string key = JoinKey(path, "command");
    const std::string& program = cell.command[0];
    const auto under_cwd = [&cell](const std::string& name) {
      return name.starts_with('/') ? name : JoinPath(cell.working_directory, name);
    };
    if (program.find('/') != std::string::npos) {
      if (std::string why = NotExecutable(program); !why.empty()) {
        AddWarning(command_at[0], key + "[0]",
                   program + ": " + why + "; the worker's start will fail (exec)");
      }
    } else {
      std::string search_path = kDefaultWorkerPath;
      for (const auto& [name, value] : cell.environment) {
        if (name == "PATH") search_path = value;
      }
      bool found = false;
      for (size_t begin = 0; !found && begin <= search_path.size();) {
        size_t end = std::min(search_path.find(':', begin), search_path.size());
        // POSIX: an empty PATH element is the current directory, the worker's working_directory.
        std::string dir = search_path.substr(begin, end - begin);
        found = NotExecutable(under_cwd(JoinPath(dir.empty() ? "." : dir, program))).empty();
        begin = end + 1;
      }
      if (!found) {
        AddWarning(command_at[0], key + "[0]",
                   Quoted(program) +
                       " is not an executable file in any directory of the "
                       "worker's PATH (" +
                       search_path + ", from " +
                       (search_path == kDefaultWorkerPath
                            ? std::string("the default; bulkheadd's own "
                                          "PATH is not passed on")
                            : JoinKey(JoinKey(path, "environment"), "PATH")) +
                       "); the worker's start will fail (exec); write an absolute path");
      }
    }
    // python3 app.py: the script is opened by the worker, from its working directory.
    for (size_t i = 1; i < cell.command.size(); ++i) {
      const std::string& arg = cell.command[i];
      if (!LooksLikeRelativeScript(arg)) continue;
      struct stat st {};
      if (::stat(under_cwd(arg).c_str(), &st) == 0) continue;
      std::string message = "relative path " + Quoted(arg) +
                            " is opened by the worker from its working_directory " +
                            Quoted(cell.working_directory) +
                            " (not from the config file's directory), where there is no such "
                            "file; write an absolute path or set working_directory";
      AddWarning(command_at[i], key + "[" + std::to_string(i) + "]", std::move(message));
    }
  }

  // Why exec(2) of `file` would fail here: "" when it is a regular file we may execute.
  static std::string NotExecutable(const std::string& file) {
    struct stat st {};
    if (::stat(file.c_str(), &st) != 0) return std::strerror(errno);
    if (!S_ISREG(st.st_mode)) return "not a regular file";
    if (::access(file.c_str(), X_OK) != 0) return "not executable (no x permission)";
    return "";
  }

  // An argument that reads as a relative path to a file: "app.py", "./run.sh", "lib/main.js";
  // not an option ("-m"), an assignment ("a=b"), a URL or an absolute path.
  static bool LooksLikeRelativeScript(std::string_view arg) {
    if (arg.empty() || arg.front() == '-' || arg.front() == '/' ||
        arg.find_first_of("=: \t") != std::string_view::npos) {
      return false;
    }
    if (arg.find('/') != std::string_view::npos) return true;
    static constexpr std::array<std::string_view, 12> kScriptSuffixes = {
        ".py", ".sh", ".bash", ".js", ".mjs", ".cjs", ".ts", ".rb", ".pl", ".php", ".lua", ".jar"};
    return std::any_of(kScriptSuffixes.begin(), kScriptSuffixes.end(),
                       [arg](std::string_view suffix) { return arg.ends_with(suffix); });
  }

  bool ParseCommand(const toml::node& node, const std::string& path,
                    std::vector<std::string>& argv) {
    const toml::array* array = node.as_array();
    if (array == nullptr) {
      TypeError(
          node, path, "array of strings",
          "write the program and its arguments as command = [\"/usr/bin/worker\", \"--flag\"]");
      return false;
    }
    if (array->empty()) {
      AddError(At(node.source()), path, "must not be empty; give the program and its arguments");
      return false;
    }
    bool ok = true;
    for (size_t i = 0; i < array->size(); ++i) {
      const toml::node& element = *array->get(i);
      const std::string element_path = path + "[" + std::to_string(i) + "]";
      std::optional<std::string> arg = ExpectString(element, element_path, QuoteHint(element));
      if (!arg) {
        ok = false;
        continue;
      }
      if (i == 0) {
        if (arg->empty()) {
          AddError(At(element.source()), element_path, "the program must not be empty");
          ok = false;
          continue;
        }
        // With a '/', a path (resolved like every other path); without, a name looked up in $PATH.
        if (arg->find('/') != std::string::npos) {
          std::optional<std::string> program = Resolve(*arg, element, element_path);
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

  // `supplementary_groups`: an array of group names or ids; may be empty.
  bool ParseGroupList(const toml::node& node, const std::string& path, std::vector<gid_t>& groups) {
    const toml::array* array = node.as_array();
    if (array == nullptr) {
      TypeError(node, path, "array of groups",
                "write supplementary_groups = [\"adm\", 4]; [] for none");
      return false;
    }
    bool ok = true;
    for (size_t i = 0; i < array->size(); ++i) {
      std::optional<gid_t> group =
          ExpectGroup(*array->get(i), path + "[" + std::to_string(i) + "]");
      if (!group) {
        ok = false;
        continue;
      }
      if (std::find(groups.begin(), groups.end(), *group) == groups.end()) groups.push_back(*group);
    }
    return ok;
  }

  bool ParseEnvironment(const toml::node& node, const std::string& path,
                        std::vector<std::pair<std::string, std::string>>& environment) {
    const toml::table* table = ExpectTable(node, path);
    if (table == nullptr) return false;
    bool ok = true;
    for (auto [key, value] : InFileOrder(*table)) {
      const std::string variable_path = JoinKey(path, key->str());
      const std::string_view variable = key->str();
      if (variable.empty() || variable.find('=') != std::string::npos ||
          variable.find('\0') != std::string::npos) {
        AddError(At(key->source()), variable_path,
                 "an environment variable name must be non-empty and contain no '=' or NUL");
        ok = false;
      }
      std::optional<std::string> text = ExpectString(*value, variable_path, QuoteHint(*value));
      if (!text) {
        ok = false;
        continue;
      }
      environment.emplace_back(std::string(variable), std::move(*text));
    }
    return ok;
  }

  // Every socket path fits in sun_path, and no two uses share a path. A clash is reported at the
  // later use (in file order), naming the earlier one.
  void CheckSockets() {
    std::stable_sort(sockets_.begin(), sockets_.end(), [](const SocketUse& a, const SocketUse& b) {
      return Before(a.position, b.position);
    });
    std::map<std::string, const SocketUse*> first_use;
    for (const SocketUse& use : sockets_) {
      if (use.path.size() > kMaxSocketPathBytes) {
        std::string message = use.kind + " " + use.path + " is " + std::to_string(use.path.size()) +
                              " bytes, over the " + std::to_string(kMaxSocketPathBytes) +
                              "-byte limit of a Unix socket path (sun_path)";
        if (!use.shorten.empty()) message += "; shorten " + use.shorten;
        AddError(use.position, use.key, std::move(message));
      }
      auto [it, inserted] = first_use.emplace(use.path, &use);
      if (!inserted) {
        AddError(use.position, use.key,
                 use.kind + " " + use.path + " is also used by " + it->second->owner);
      }
    }
  }

  const std::string file_;
  const std::string base_dir_;
  const std::string default_runtime_dir_;
  const HostFacts host_;
  // False once supervisor.runtime_dir had an error: paths derived from it are then not checked.
  bool runtime_dir_ok_ = true;
  std::vector<SocketUse> sockets_;
  std::vector<ConfigError> errors_;
  std::vector<ConfigError> warnings_;
};

// The absolute directory of `source_path`, or "" when it is relative and the cwd is unknown.
std::string BaseDirectoryOf(const std::string& source_path) {
  const std::string dir = ParentDirectory(source_path);
  if (IsAbsolutePath(dir)) return NormalizePath(dir);
  char cwd[PATH_MAX];
  if (getcwd(cwd, sizeof(cwd)) == nullptr || !IsAbsolutePath(cwd)) return "";
  return ResolvePath(dir, cwd);
}

LoadResult SingleError(const std::string& file, std::string message) {
  LoadResult result;
  result.errors.push_back({file, 0, 0, "", std::move(message)});
  return result;
}

}  // namespace

HostFacts CurrentHostFacts() {
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  return {cpus >= 1 ? static_cast<uint32_t>(std::min<long>(cpus, UINT32_MAX)) : 1u};
}

LoadResult ParseConfig(std::string_view toml_text, const std::string& source_path) {
  return ParseConfig(toml_text, source_path, CurrentHostFacts());
}

LoadResult ParseConfig(std::string_view toml_text, const std::string& source_path,
                       const HostFacts& host) {
  try {
    ConfigParser parser(source_path, BaseDirectoryOf(source_path),
                        DefaultRuntimeDirFromEnvironment(), host);
    return parser.Parse(toml_text);
  } catch (const std::exception& e) {
    return SingleError(source_path,
                       std::string("internal error while loading config: ") + e.what());
  } catch (...) {
    return SingleError(source_path, "internal error while loading config");
  }
}

LoadResult LoadConfigFile(const std::string& path) {
  try {
    UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
    if (!fd) return SingleError(path, Status::FromErrno("cannot open config file").message());
    std::string text;
    char buffer[64 * 1024];
    for (;;) {
      const ssize_t n = read(fd.get(), buffer, sizeof(buffer));
      if (n < 0) {
        if (errno == EINTR) continue;
        return SingleError(path, Status::FromErrno("cannot read config file").message());
      }
      if (n == 0) break;
      text.append(buffer, static_cast<size_t>(n));
      if (text.size() > kMaxConfigFileBytes) {
        return SingleError(path, "config file is larger than " +
                                     std::to_string(kMaxConfigFileBytes >> 20) + " MiB");
      }
    }
    return ParseConfig(text, path);
  } catch (const std::exception& e) {
    return SingleError(path, std::string("internal error while loading config: ") + e.what());
  } catch (...) {
    return SingleError(path, "internal error while loading config");
  }
}

}  // namespace bulkhead::config
