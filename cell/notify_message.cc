// SPDX-License-Identifier: MIT
// ParseNotifyMessage: one pass over the lines, no allocation but for STATUS. Thread-safe.
#include "cell/notify_message.h"

#include <climits>

namespace bulkhead::cell {
namespace {

bool IsNameChar(char c) { return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'; }

bool IsValidName(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (!IsNameChar(c)) return false;
  }
  return true;
}

// A plain decimal number in [min, max]: digits only, no sign, no leading or trailing space.
std::optional<int64_t> ParseDecimal(std::string_view text, int64_t min, int64_t max) {
  if (text.empty() || text.size() > 19) return std::nullopt;
  int64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    const int digit = c - '0';
    if (value > (max - digit) / 10) return std::nullopt;  // value * 10 + digit > max
    value = value * 10 + digit;
  }
  if (value < min || value > max) return std::nullopt;
  return value;
}

// RFC 3629 UTF-8: no overlong forms, no surrogates (U+D800..U+DFFF), nothing above U+10FFFF.
bool IsValidUtf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto byte = static_cast<unsigned char>(text[i]);
    size_t length = 0;
    uint32_t code = 0;
    uint32_t min = 0;
    if (byte < 0x80) {
      ++i;
      continue;
    } else if ((byte & 0xE0) == 0xC0) {
      length = 2;
      code = byte & 0x1F;
      min = 0x80;
    } else if ((byte & 0xF0) == 0xE0) {
      length = 3;
      code = byte & 0x0F;
      min = 0x800;
    } else if ((byte & 0xF8) == 0xF0) {
      length = 4;
      code = byte & 0x07;
      min = 0x10000;
    } else {
      return false;
    }
    if (text.size() - i < length) return false;
    for (size_t k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xC0) != 0x80) return false;
      code = (code << 6) | (next & 0x3F);
    }
    if (code < min || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return false;
    i += length;
  }
  return true;
}

// Applies one NAME=VALUE line; false if the line is not one this parser acts on.
bool Apply(std::string_view name, std::string_view value, NotifyMessage& message) {
  if (name == "READY") {
    if (value != "1") return false;
    message.ready = true;
  } else if (name == "RELOADING") {
    if (value != "1") return false;
    message.reloading = true;
  } else if (name == "STOPPING") {
    if (value != "1") return false;
    message.stopping = true;
  } else if (name == "WATCHDOG") {
    if (value == "1") {
      message.watchdog_ping = true;
    } else if (value == "trigger") {
      message.watchdog_trigger = true;
    } else {
      return false;
    }
  } else if (name == "STATUS") {
    if (message.status || !IsValidUtf8(value)) return false;
    message.status = std::string(value);
  } else if (name == "MAINPID") {
    std::optional<int64_t> pid = ParseDecimal(value, 1, INT_MAX);
    if (message.main_pid || !pid) return false;
    message.main_pid = static_cast<pid_t>(*pid);
  } else if (name == "ERRNO") {
    std::optional<int64_t> error = ParseDecimal(value, 0, INT_MAX);
    if (message.error || !error) return false;
    message.error = static_cast<int>(*error);
  } else {
    return false;
  }
  return true;
}

}  // namespace

Result<NotifyMessage> ParseNotifyMessage(std::string_view datagram) {
  if (datagram.size() > kMaxNotifyMessageBytes) {
    return Status::Error("notify message of " + std::to_string(datagram.size()) +
                         " bytes exceeds the " + std::to_string(kMaxNotifyMessageBytes) +
                         "-byte limit");
  }
  if (datagram.find('\0') != std::string_view::npos) {
    return Status::Error("notify message contains a NUL byte");
  }
  NotifyMessage message;
  size_t begin = 0;
  while (begin < datagram.size()) {
    size_t end = datagram.find('\n', begin);
    if (end == std::string_view::npos) end = datagram.size();
    const std::string_view line = datagram.substr(begin, end - begin);
    begin = end + 1;
    if (line.empty()) continue;
    const size_t equals = line.find('=');
    if (equals == std::string_view::npos || !IsValidName(line.substr(0, equals)) ||
        !Apply(line.substr(0, equals), line.substr(equals + 1), message)) {
      ++message.ignored_lines;
    }
  }
  return message;
}

}  // namespace bulkhead::cell
