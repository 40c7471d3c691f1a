// SPDX-License-Identifier: MIT
// ValueReader and the key-path helpers (config/value_reader.h). toml++ may throw in here; the
// caller (config/config.cc) catches.
#include "config/value_reader.h"

#include <algorithm>

#include "base/check.h"
#include "base/closest_match.h"
#include "base/duration.h"
#include "base/lexical_path.h"
#include "base/status.h"
#include "config/identity.h"
#include "config/size.h"

namespace bulkhead::config {

using std::chrono::milliseconds;

namespace {

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

// Optimal string alignment distance (Levenshtein plus adjacent transpositions), so that both
// "max_queu" and "max_qeue" are one or two edits from "max_queue".
}  // namespace

bool IsBareKeyChar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

SourcePosition At(const toml::source_region& region) {
  return {static_cast<int>(region.begin.line), static_cast<int>(region.begin.column)};
}

bool Before(const SourcePosition& a, const SourcePosition& b) {
  return a.line != b.line ? a.line < b.line : a.column < b.column;
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

// For argv and environment values: a number or boolean was probably meant as its text.
std::string_view QuoteHint(const toml::node& node) {
  return node.is_number() || node.is_boolean() ? "quote it" : "";
}

bool Contains(std::span<const std::string_view> list, std::string_view word) {
  return std::find(list.begin(), list.end(), word) != list.end();
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

// A size as written, for messages naming it: "256M" quoted, 1048576 bare.
std::string SizeAsWritten(const toml::node& node) {
  if (const toml::value<std::string>* text = node.as_string()) return Quoted(text->get());
  if (const toml::value<int64_t>* integer = node.as_integer()) {
    return std::to_string(integer->get());
  }
  return "";
}

std::string Quoted(std::string_view text) {
  std::string segment = KeySegment(text);
  if (segment.front() != '"') segment = "\"" + segment + "\"";
  return segment;
}

void ValueReader::AddError(SourcePosition at, std::string key, std::string message) {
  errors_.push_back({file_, at.line, at.column, std::move(key), std::move(message)});
}

void ValueReader::AddWarning(SourcePosition at, std::string key, std::string message) {
  warnings_.push_back({file_, at.line, at.column, std::move(key), std::move(message)});
}

LoadResult ValueReader::Finish(std::optional<Config> config) {
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

void ValueReader::UnknownKey(const toml::key& key, const std::string& path,
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

void ValueReader::TypeError(const toml::node& node, const std::string& path,
                            std::string_view expected, std::string_view hint) {
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

const toml::table* ValueReader::ExpectTable(const toml::node& node, const std::string& path,
                                            std::string_view hint) {
  const toml::table* table = node.as_table();
  if (table == nullptr) TypeError(node, path, "table", hint);
  return table;
}

std::optional<std::string> ValueReader::ExpectString(const toml::node& node,
                                                     const std::string& path,
                                                     std::string_view hint) {
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

std::optional<int64_t> ValueReader::ExpectInteger(const toml::node& node, const std::string& path,
                                                  int64_t min, int64_t max,
                                                  std::string_view max_note) {
  const toml::value<int64_t>* value = node.as_integer();
  if (value == nullptr) {
    TypeError(node, path, "integer");
    return std::nullopt;
  }
  const int64_t number = value->get();
  if (number < min || number > max) {
    std::string message = "must be between " + std::to_string(min) + " and " + std::to_string(max) +
                          std::string(max_note) + ", got " + std::to_string(number);
    AddError(At(node.source()), path, std::move(message));
    return std::nullopt;
  }
  return number;
}

std::optional<milliseconds> ValueReader::ExpectDuration(const toml::node& node,
                                                        const std::string& path, bool allow_zero) {
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
std::optional<uint64_t> ValueReader::ExpectSize(const toml::node& node, const std::string& path,
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

std::optional<uint64_t> ValueReader::ExpectSizeBetween(const toml::node& node,
                                                       const std::string& path, uint64_t min,
                                                       uint64_t max, std::string_view max_note) {
  std::optional<uint64_t> bytes = ExpectSize(node, path, "");
  if (bytes && (*bytes < min || *bytes > max)) {
    AddError(At(node.source()), path,
             "must be between " + std::to_string(min) + " and " + std::to_string(max) +
                 std::string(max_note) + ", got " + SizeAsWritten(node));
    return std::nullopt;
  }
  return bytes;
}

std::optional<bool> ValueReader::ExpectBoolean(const toml::node& node, const std::string& path) {
  const toml::value<bool>* value = node.as_boolean();
  if (value == nullptr) {
    TypeError(node, path, "boolean", node.is_string() ? "write true or false without quotes" : "");
    return std::nullopt;
  }
  return value->get();
}

// A string that must be one of `choices`; returns its index.
std::optional<size_t> ValueReader::ExpectChoice(const toml::node& node, const std::string& path,
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

// A string holding a path; relative paths are resolved against the config file's directory.
std::optional<std::string> ValueReader::ExpectPath(const toml::node& node,
                                                   const std::string& path) {
  std::optional<std::string> text = ExpectString(node, path);
  if (!text) return std::nullopt;
  if (text->empty()) {
    AddError(At(node.source()), path, "must not be empty");
    return std::nullopt;
  }
  return Resolve(*text, node, path);
}

std::optional<std::string> ValueReader::Resolve(const std::string& text, const toml::node& node,
                                                const std::string& path) {
  if (!IsAbsolutePath(text) && base_dir_.empty()) {
    AddError(At(node.source()), path,
             "relative path \"" + text +
                 "\" cannot be resolved: the current directory is unknown; use an absolute path");
    return std::nullopt;
  }
  return ResolvePath(text, base_dir_);
}

std::optional<std::string> ValueReader::ExpectIdentity(const toml::node& node,
                                                       const std::string& path) {
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

std::optional<gid_t> ValueReader::ExpectGroup(const toml::node& node, const std::string& path) {
  std::optional<std::string> text = ExpectIdentity(node, path);
  if (!text) return std::nullopt;
  Result<gid_t> group = ResolveGroup(*text);
  if (!group.ok()) {
    AddError(At(node.source()), path, group.status().message());
    return std::nullopt;
  }
  return group.value();
}

std::optional<uint32_t> ValueReader::ExpectMode(const toml::node& node, const std::string& path) {
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

std::optional<KeyValue> ValueReader::ExpectValue(const ValueSpec& spec, const toml::node& node,
                                                 const std::string& path) {
  KeyValue value;
  switch (spec.kind) {
    case ValueKind::kInteger: {
      std::optional<int64_t> number = ExpectInteger(node, path, spec.min, spec.max, spec.max_note);
      if (!number) return std::nullopt;
      value.number = *number;
      return value;
    }
    case ValueKind::kDuration: {
      std::optional<milliseconds> duration = ExpectDuration(node, path, spec.min == 0);
      if (!duration) return std::nullopt;
      value.duration = *duration;
      return value;
    }
    case ValueKind::kSize: {
      std::optional<uint64_t> bytes =
          ExpectSizeBetween(node, path, static_cast<uint64_t>(spec.min),
                            static_cast<uint64_t>(spec.max), spec.max_note);
      if (!bytes) return std::nullopt;
      value.number = static_cast<int64_t>(*bytes);
      return value;
    }
    case ValueKind::kChoice: {
      std::optional<size_t> index = ExpectChoice(node, path, spec.choices);
      if (!index) return std::nullopt;
      value.number = static_cast<int64_t>(*index);
      value.text = spec.choices[*index];
      return value;
    }
    case ValueKind::kBoolean: {
      std::optional<bool> flag = ExpectBoolean(node, path);
      if (!flag) return std::nullopt;
      value.flag = *flag;
      return value;
    }
    case ValueKind::kPath: {
      std::optional<std::string> resolved = ExpectPath(node, path);
      if (!resolved) return std::nullopt;
      value.text = std::move(*resolved);
      return value;
    }
    case ValueKind::kMode: {
      std::optional<uint32_t> mode = ExpectMode(node, path);
      if (!mode) return std::nullopt;
      value.number = *mode;
      return value;
    }
    case ValueKind::kGroup: {
      std::optional<gid_t> group = ExpectGroup(node, path);
      if (!group) return std::nullopt;
      value.number = *group;
      return value;
    }
    case ValueKind::kOwn:
      break;
  }
  BH_CHECK(false);  // a kOwn key is read by its own code
  return std::nullopt;
}

}  // namespace bulkhead::config
