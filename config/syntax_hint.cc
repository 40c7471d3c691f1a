// SPDX-License-Identifier: MIT
// SyntaxHint (config/syntax_hint.h): finds the bare token around the position on its line and
// names what it looks like, by the parsers that would take it quoted.
#include "config/syntax_hint.h"

#include <algorithm>
#include <cstddef>

#include "base/duration.h"
#include "config/size.h"
#include "config/value_reader.h"

namespace bulkhead::config {
namespace {

// Characters that end a bare value on its line: TOML's separators and a comment.
bool EndsToken(char c) {
  return c == ' ' || c == '\t' || c == ',' || c == ']' || c == '}' || c == '#' || c == '\r' ||
         c == '=' || c == '[' || c == '{';
}

std::string_view Trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

}  // namespace

std::string SyntaxHint(std::string_view toml_text, SourcePosition at) {
  if (at.line < 1 || at.column < 1) return "";
  // The line `at` names.
  size_t begin = 0;
  for (int line = 1; line < at.line; ++line) {
    const size_t newline = toml_text.find('\n', begin);
    if (newline == std::string_view::npos) return "";
    begin = newline + 1;
  }
  std::string_view line = toml_text.substr(begin);
  line = line.substr(0, line.find('\n'));
  // toml++ counts columns in code points; a line with other than ASCII before the value is left
  // alone rather than mis-cut.
  const auto column = static_cast<size_t>(at.column - 1);
  if (column >= line.size() ||
      std::any_of(line.begin(), line.begin() + static_cast<std::ptrdiff_t>(column),
                  [](char c) { return static_cast<unsigned char>(c) >= 0x80; })) {
    return "";
  }
  size_t start = column;
  while (start > 0 && !EndsToken(line[start - 1])) --start;
  size_t end = column;
  while (end < line.size() && !EndsToken(line[end])) ++end;
  const std::string_view token = line.substr(start, end - start);
  if (token.empty() || token.front() < '0' || token.front() > '9') return "";

  std::string_view what;
  if (ParseDuration(token).ok()) {
    what = "durations are strings";
  } else if (ParseSize(token).ok()) {
    what = "sizes with a unit are strings";
  } else if (token.back() == '%') {
    what = "percentages are strings";
  } else {
    return "";
  }
  std::string hint(what);
  hint += ": ";
  // `key = 3s` (also `{ key = 3s }`): the key and the value as they should read; an element of
  // an array has no key of its own.
  const std::string_view before = line.substr(0, start);
  const size_t equals = before.rfind('=');
  std::string_view key;
  if (equals != std::string_view::npos && Trim(before.substr(equals + 1)).empty()) {
    const size_t key_start = before.find_last_of("{,", equals);
    key = Trim(before.substr(key_start == std::string_view::npos ? 0 : key_start + 1,
                             equals - (key_start == std::string_view::npos ? 0 : key_start + 1)));
  }
  if (!key.empty() &&
      std::all_of(key.begin(), key.end(), [](char c) { return IsBareKeyChar(c) || c == '.'; })) {
    hint.append(key);
    hint += " = ";
  } else {
    hint += "write ";
  }
  hint += Quoted(token);
  return hint;
}

}  // namespace bulkhead::config
