// SPDX-License-Identifier: MIT
// ValueReader: reads typed values (strings, integers, durations, sizes, paths, choices) out of
// toml++ nodes for the section parsers of config/, recording every refusal as an error at the
// node's file:line:col under its dotted key ("cells.a.max_queue"), and the key-path helpers those
// messages use. Internal to config/ (it exposes toml++, which nothing outside config/ sees).
// Thread-compatible: one ValueReader per parse.
#pragma once

#include <sys/types.h>
#include <toml++/toml.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/closest_match.h"
#include "config/config.h"
#include "config/config_keys.h"

namespace bulkhead::config {

// A character of a TOML bare key: A-Z, a-z, 0-9, '_', '-'.
bool IsBareKeyChar(char c);

SourcePosition At(const toml::source_region& region);
// File order: line, then column.
bool Before(const SourcePosition& a, const SourcePosition& b);
// One segment of a dotted key path, quoted as TOML would need it: `payments`, `"my cell"`.
std::string KeySegment(std::string_view key);
// `parent`.`key`, with `key` quoted as needed.
std::string JoinKey(std::string_view parent, std::string_view key);
// `dir`/`file`, with one '/' between them.
std::string JoinPath(std::string_view dir, std::string_view file);
// `text` in double quotes, escaped as a TOML string: "\"256M\"".
std::string Quoted(std::string_view text);
// A size as written, for messages naming it: "256M" quoted, 1048576 bare.
std::string SizeAsWritten(const toml::node& node);
// For argv and environment values: a number or boolean was probably meant as its text.
std::string_view QuoteHint(const toml::node& node);
bool Contains(std::span<const std::string_view> list, std::string_view word);
// The entries of a table in file order (toml::table iterates in key order).
std::vector<std::pair<const toml::key*, const toml::node*>> InFileOrder(const toml::table& table);

class ValueReader {
 public:
  // `file` names the config in errors; `base_dir` is the absolute directory relative paths are
  // resolved against, or "" if unknown; `host` bounds what depends on this host (cpu_max).
  ValueReader(std::string file, std::string base_dir, HostFacts host)
      : file_(std::move(file)), base_dir_(std::move(base_dir)), host_(host) {}

  const std::string& file() const { return file_; }
  // The absolute directory relative paths are resolved against (the config file's), or "".
  const std::string& base_dir() const { return base_dir_; }
  const HostFacts& host() const { return host_; }

  void AddError(SourcePosition at, std::string key, std::string message);
  void AddWarning(SourcePosition at, std::string key, std::string message);
  // The result: `config` unless an error was added, and the errors and warnings sorted by
  // position (stable, so errors at one place keep the order they were found in).
  LoadResult Finish(std::optional<Config> config);

  // "unknown key", with the closest of `known` as a suggestion.
  void UnknownKey(const toml::key& key, const std::string& path,
                  std::span<const std::string_view> known);
  // "expected `expected`, got <type> (`hint`)".
  void TypeError(const toml::node& node, const std::string& path, std::string_view expected,
                 std::string_view hint = {});

  // Each Expect* returns the value, or nullopt (or nullptr) after adding the error at `node`.
  const toml::table* ExpectTable(const toml::node& node, const std::string& path,
                                 std::string_view hint = {});
  // A string without NUL.
  std::optional<std::string> ExpectString(const toml::node& node, const std::string& path,
                                          std::string_view hint = {});
  // An integer in [min, max]; `max_note` follows max in the message (" (1 GiB)").
  std::optional<int64_t> ExpectInteger(const toml::node& node, const std::string& path, int64_t min,
                                       int64_t max, std::string_view max_note = {});
  // A duration string (base/duration.h), at most 24h; 0 only with `allow_zero`.
  std::optional<std::chrono::milliseconds> ExpectDuration(const toml::node& node,
                                                          const std::string& path, bool allow_zero);
  // A size in bytes: a TOML integer, or a string ParseSize accepts (config/size.h).
  // `zero_refusal` is why 0 is refused, or "" when 0 is allowed.
  std::optional<uint64_t> ExpectSize(const toml::node& node, const std::string& path,
                                     std::string_view zero_refusal);
  // A size in [min, max] bytes; `max_note` follows max in the message (" bytes (1M)").
  std::optional<uint64_t> ExpectSizeBetween(const toml::node& node, const std::string& path,
                                            uint64_t min, uint64_t max, std::string_view max_note);
  std::optional<bool> ExpectBoolean(const toml::node& node, const std::string& path);
  // A string that must be one of `choices`; returns its index.
  std::optional<size_t> ExpectChoice(const toml::node& node, const std::string& path,
                                     std::span<const std::string_view> choices);
  // A non-empty string holding a path; relative paths are resolved against base_dir.
  std::optional<std::string> ExpectPath(const toml::node& node, const std::string& path);
  // An octal permission string, "0660" (config/identity.h), 0..0777.
  std::optional<uint32_t> ExpectMode(const toml::node& node, const std::string& path);
  // A group: a name (string) or a numeric id (integer, or a string of digits), resolved now
  // (config/identity.h).
  std::optional<gid_t> ExpectGroup(const toml::node& node, const std::string& path);
  // A user or group as written: a name, or a numeric id as its digits.
  std::optional<std::string> ExpectIdentity(const toml::node& node, const std::string& path);
  // The value of a key whose ValueSpec has a kind (not kOwn), checked against its range, by the
  // Expect* of that kind.
  std::optional<KeyValue> ExpectValue(const ValueSpec& spec, const toml::node& node,
                                      const std::string& path);
  // `text` resolved against base_dir (lexically); an error at `node` when it is relative and
  // base_dir is unknown.
  std::optional<std::string> Resolve(const std::string& text, const toml::node& node,
                                     const std::string& path);

 private:
  const std::string file_;
  const std::string base_dir_;
  const HostFacts host_;
  std::vector<ConfigError> errors_;
  std::vector<ConfigError> warnings_;
};

}  // namespace bulkhead::config
