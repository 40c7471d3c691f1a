// SPDX-License-Identifier: MIT
#include "http/syntax.h"

#include <array>
#include <cstddef>
#include <cstdint>

namespace bulkhead::http {
namespace {

enum : uint8_t {
  kTchar = 1,     // tchar (RFC 9110 section 5.6.2)
  kValue = 2,     // field-vchar, SP or HTAB (RFC 9110 section 5.5; obs-text included)
  kTargetOk = 4,  // may appear in a request-target (IsTargetText)
  kRegName = 8,   // unreserved or sub-delims (RFC 3986 section 2): a reg-name's bytes but '%'
};

constexpr std::array<uint8_t, 256> MakeClasses() {
  std::array<uint8_t, 256> classes{};
  for (int c = 0; c < 256; ++c) {
    uint8_t bits = 0;
    const bool alnum = (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
    if (alnum) bits |= kTchar;
    for (char t : std::string_view("!#$%&'*+-.^_`|~")) {
      if (c == t) bits |= kTchar;
    }
    if (c == '\t' || (c >= 0x20 && c != 0x7f)) bits |= kValue;
    if (c >= 0x21 && c <= 0x7e && c != '#') bits |= kTargetOk;
    if (alnum) bits |= kRegName;
    for (char t : std::string_view("-._~!$&'()*+,;=")) {
      if (c == t) bits |= kRegName;
    }
    classes[static_cast<size_t>(c)] = bits;
  }
  return classes;
}

constexpr std::array<uint8_t, 256> kClasses = MakeClasses();

bool All(std::string_view text, uint8_t bit) {
  for (char c : text) {
    if ((kClasses[static_cast<unsigned char>(c)] & bit) == 0) return false;
  }
  return true;
}

bool IsHexDigit(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// *( unreserved / pct-encoded / sub-delims ), not empty.
bool IsRegName(std::string_view text) {
  if (text.empty()) return false;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%') {
      if (i + 2 >= text.size() || !IsHexDigit(text[i + 1]) || !IsHexDigit(text[i + 2])) {
        return false;
      }
      i += 2;
    } else if ((kClasses[static_cast<unsigned char>(text[i])] & kRegName) == 0) {
      return false;
    }
  }
  return true;
}

}  // namespace

bool IsHostAuthority(std::string_view text) {
  std::string_view port;
  if (text.starts_with('[')) {
    // IP-literal: IPv6address or IPvFuture, whose bytes are hex digits, ':', '.' and (IPvFuture)
    // unreserved and sub-delims.
    const size_t close = text.find(']');
    if (close == std::string_view::npos || close == 1) return false;
    for (char c : text.substr(1, close - 1)) {
      if (c != ':' && (kClasses[static_cast<unsigned char>(c)] & kRegName) == 0) return false;
    }
    const std::string_view rest = text.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') return false;
    port = rest.empty() ? rest : rest.substr(1);
  } else {
    const size_t colon = text.rfind(':');
    const std::string_view host = text.substr(0, colon);
    if (!IsRegName(host)) return false;
    if (colon != std::string_view::npos) port = text.substr(colon + 1);
  }
  for (char c : port) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

bool IsToken(std::string_view text) { return !text.empty() && All(text, kTchar); }

bool IsFieldValue(std::string_view text) { return All(text, kValue); }

bool IsTargetText(std::string_view piece) { return All(piece, kTargetOk); }

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const auto x = static_cast<unsigned char>(a[i]);
    const auto y = static_cast<unsigned char>(b[i]);
    if (x == y) continue;
    // Equal but for case only if they differ in the 0x20 bit and are letters.
    if ((x ^ y) != 0x20) return false;
    const unsigned char lower = x | 0x20;
    if (lower < 'a' || lower > 'z') return false;
  }
  return true;
}

void AppendHex(std::string* out, unsigned long long value, int min_digits) {
  constexpr std::string_view kDigits = "0123456789abcdef";
  char text[16];
  int n = 0;
  do {
    text[sizeof text - 1 - n] = kDigits[value & 0xf];
    value >>= 4;
    ++n;
  } while (value != 0);
  for (; n < min_digits && n < static_cast<int>(sizeof text); ++n) text[sizeof text - 1 - n] = '0';
  out->append(text + sizeof text - n, static_cast<size_t>(n));
}

}  // namespace bulkhead::http
