// SPDX-License-Identifier: MIT
// SyntaxHint (config/syntax_hint.h): finds the bare token around the position on its line and
// names what it looks like, by the parsers that would take it quoted.
#include "config/syntax_hint.h"

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <utility>

#include "base/ascii.h"
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

// `text` without its blanks; a quoted key ("a b") is kept as written.
std::string WithoutBlanks(std::string_view text) {
  text = Trim(text);
  if (text.find_first_of("\"'") != std::string_view::npos) return std::string(text);
  std::string out;
  for (char c : text) {
    if (c != ' ' && c != '\t') out.push_back(c);
  }
  return out;
}

// The path of a table header line (`[a.b]`, `[[a]]`, a comment after it), "" when the line is
// not one.
std::string HeaderPath(std::string_view line) {
  line = Trim(line);
  if (!line.starts_with('[')) return "";
  const bool array = line.starts_with("[[");
  line.remove_prefix(array ? 2 : 1);
  const size_t close = line.find(array ? "]]" : "]");
  if (close == std::string_view::npos) return "";
  return WithoutBlanks(line.substr(0, close));
}

// A bare or dotted key as written (blanks around the dots allowed), not empty.
bool IsKeyText(std::string_view key) {
  return !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return IsBareKeyChar(c) || c == '.' || c == ' ' || c == '\t';
  });
}

// The key a `key = value` line starts with (bare or dotted), "" otherwise.
std::string_view LineKey(std::string_view line) {
  const size_t equals = line.find('=');
  if (equals == std::string_view::npos) return "";
  const std::string_view key = Trim(line.substr(0, equals));
  return IsKeyText(key) ? key : std::string_view();
}

// The count of `"""` and `'''` on a line is odd: it opens or closes a multi-line string.
bool TogglesMultilineString(std::string_view line) {
  size_t count = 0;
  for (std::string_view quotes : {std::string_view("\"\"\""), std::string_view("'''")}) {
    for (size_t at = line.find(quotes); at != std::string_view::npos;
         at = line.find(quotes, at + 3)) {
      ++count;
    }
  }
  return count % 2 == 1;
}

// Calls `visit(i, c)` for each byte of `text` outside quoted strings, in order, until it returns
// false.
template <typename Visit>
void ForEachUnquoted(std::string_view text, const Visit& visit) {
  char quote = '\0';
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quote != '\0') {
      if (c == '\\' && quote == '"') {
        ++i;
      } else if (c == quote) {
        quote = '\0';
      }
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (!visit(i, c)) {
      return;
    }
  }
}

// How many arrays `text` (a value, or a line inside an array) opens less how many it closes:
// brackets outside quoted strings and before a comment.
int BracketBalance(std::string_view text) {
  int balance = 0;
  ForEachUnquoted(text, [&balance](size_t, char c) {
    if (c == '#') return false;
    if (c == '[') ++balance;
    if (c == ']') --balance;
    return true;
  });
  return balance;
}

// The key, inside the inline table that is the value of `line`, whose value holds `column`
// (0-based): `a = { command = ["x"], stall_timeout = 3s }` at the `s` is "stall_timeout". "" when
// the value is no inline table, or the column is in none of its values, or in a nested table.
std::string InlineKeyAt(std::string_view line, size_t column) {
  const size_t equals = line.find('=');
  if (equals == std::string_view::npos || column > line.size()) return "";
  const size_t brace = line.find_first_not_of(" \t", equals + 1);
  if (brace == std::string_view::npos || line[brace] != '{' || column <= brace) return "";
  const std::string_view inside = line.substr(brace + 1, column - brace - 1);
  // The last `,` and `=` of the table itself: outside strings and arrays.
  size_t separator = std::string_view::npos;
  size_t key_equals = std::string_view::npos;
  int depth = 0;
  bool nested = false;
  ForEachUnquoted(inside, [&](size_t i, char c) {
    if (c == '[') {
      ++depth;
    } else if (c == ']') {
      --depth;
    } else if (c == '{' || c == '}') {
      nested = true;
      return false;
    } else if (depth == 0 && c == ',') {
      separator = i;
    } else if (depth == 0 && c == '=') {
      key_equals = i;
    }
    return true;
  });
  // Inside a string or an array the column is still in that key's value.
  if (nested || key_equals == std::string_view::npos) return "";
  const size_t key_start = separator == std::string_view::npos ? 0 : separator + 1;
  if (key_equals < key_start) return "";
  const std::string_view key = Trim(inside.substr(key_start, key_equals - key_start));
  return IsKeyText(key) ? WithoutBlanks(key) : "";
}

}  // namespace

std::string SyntaxErrorKey(std::string_view toml_text, SourcePosition at) {
  if (at.line < 1) return "";
  std::string header;
  bool in_string = false;
  // A multi-line array still open (`command = [` and its elements' lines): an error on its lines,
  // or on the line after one that never closes, is the array's key's, not the next key's.
  std::string open_array;
  int array_depth = 0;
  size_t begin = 0;
  for (int number = 1; begin <= toml_text.size(); ++number) {
    const size_t newline = toml_text.find('\n', begin);
    std::string_view line = toml_text.substr(
        begin, newline == std::string_view::npos ? std::string_view::npos : newline - begin);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (in_string) {
      if (number == at.line) return open_array.empty() ? header : open_array;
    } else if (array_depth > 0) {
      if (number == at.line) return open_array;
      array_depth += BracketBalance(line);
      if (array_depth <= 0) open_array.clear();
    } else {
      std::string path = HeaderPath(line);
      const std::string key = WithoutBlanks(LineKey(line));
      const std::string full = header.empty() || key.empty() ? key : header + "." + key;
      if (number == at.line) {
        if (!path.empty()) return path;
        if (key.empty()) return header;
        // `a = { stall_timeout = 3s }`: the key inside the inline table too.
        const std::string inner = InlineKeyAt(line, static_cast<size_t>(at.column - 1));
        return inner.empty() ? full : full + "." + inner;
      }
      if (!path.empty()) {
        header = std::move(path);
      } else if (!key.empty()) {
        array_depth = BracketBalance(line.substr(line.find('=') + 1));
        if (array_depth > 0) open_array = full;
      }
    }
    if (TogglesMultilineString(line)) in_string = !in_string;
    if (newline == std::string_view::npos) break;
    begin = newline + 1;
  }
  return "";
}

SourcePosition EndOf(std::string_view toml_text) {
  const size_t last_newline = toml_text.rfind('\n');
  const size_t tail = last_newline == std::string_view::npos ? toml_text.size()
                                                             : toml_text.size() - last_newline - 1;
  return SourcePosition{static_cast<int>(1 + std::count(toml_text.begin(), toml_text.end(), '\n')),
                        static_cast<int>(1 + tail)};
}

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
  // `stall_timeout = 3 s`: toml++ stops at the unit, after the number and a blank; the value is
  // the number and its unit.
  if (start < end && IsAsciiLetter(line[start])) {
    size_t number_end = start;
    while (number_end > 0 && (line[number_end - 1] == ' ' || line[number_end - 1] == '\t')) {
      --number_end;
    }
    if (number_end < start && number_end > 0 && IsAsciiDigit(line[number_end - 1])) {
      start = number_end;
      while (start > 0 && !EndsToken(line[start - 1])) --start;
    }
  }
  const std::string_view token = line.substr(start, end - start);
  if (token.empty() || !IsAsciiDigit(token.front())) return "";

  std::string_view what;
  std::string value(token);  // as it should read, quotes left out
  if (ParseDuration(token).ok()) {
    what = "durations are strings";
  } else if (ParseSize(token).ok()) {
    what = "sizes with a unit are strings";
  } else if (std::optional<std::string> duration = SuggestDuration(token)) {
    // `1.5s`, `3sec`, `3 s`: a duration in another form; the hint shows the accepted one.
    what = "durations are strings";
    value = std::move(*duration);
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
  hint += Quoted(value);
  return hint;
}

}  // namespace bulkhead::config
