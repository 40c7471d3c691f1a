// SPDX-License-Identifier: MIT
// ASCII character classes and case mapping for the config's scanners (durations, sizes, CPU
// shares, syntax hints): locale-independent, unlike <cctype>, and never true for a byte >= 0x80.
// Pure; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace bulkhead {

constexpr bool IsAsciiDigit(char c) { return c >= '0' && c <= '9'; }
constexpr bool IsAsciiLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
// The C locale's isspace(3): blank, tab, newline, carriage return, vertical tab, form feed.
constexpr bool IsAsciiSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
constexpr char ToLowerAscii(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}
constexpr char ToUpperAscii(char c) {
  return c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c;
}
// `text` with every ASCII upper-case letter in lower case; other bytes as they are.
inline std::string ToLowerAscii(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = ToLowerAscii(c);
  return out;
}

}  // namespace bulkhead
