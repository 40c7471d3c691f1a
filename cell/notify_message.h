// SPDX-License-Identifier: MIT
// ParseNotifyMessage: one datagram a worker sent to $NOTIFY_SOCKET, in the sd_notify(3) protocol,
// so that programs written for systemd work unchanged. Pure function over the bytes; reading the
// socket and checking the sender's credentials (SCM_CREDENTIALS) are the caller's. Thread-safe.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace bulkhead::cell {

// The largest datagram accepted, in bytes: systemd's NOTIFY_BUFFER_MAX (PIPE_BUF). Read with a
// buffer one byte larger, or check MSG_TRUNC, to tell a longer datagram from one of exactly this
// size.
inline constexpr size_t kMaxNotifyMessageBytes = 4096;

// What one datagram said. Each field is set only by a well-formed assignment; see
// ParseNotifyMessage for what well-formed means.
struct NotifyMessage {
  bool ready = false;             // READY=1: start-up finished (ready = "notify")
  bool reloading = false;         // RELOADING=1
  bool stopping = false;          // STOPPING=1: the worker is shutting down by itself
  bool watchdog_ping = false;     // WATCHDOG=1: keep-alive
  bool watchdog_trigger = false;  // WATCHDOG=trigger: treat as a missed watchdog now
  // STATUS=...: free-form status text, valid UTF-8; "" (STATUS= with nothing) clears it.
  std::optional<std::string> status;
  std::optional<pid_t> main_pid;  // MAINPID=<pid>, > 0
  std::optional<int> error;       // ERRNO=<errno>, >= 0
  // Lines that were malformed (no '=', empty or invalid name, bad value) or name variables this
  // parser does not act on (FDSTORE=1, EXTEND_TIMEOUT_USEC=..., ...). For debug logs.
  size_t ignored_lines = 0;
};

// Parses `datagram`: variable assignments NAME=VALUE separated by '\n' (sd_notify(3)); a trailing
// newline and empty lines are allowed. NAME is one or more of A-Z, 0-9 and '_'. Values are taken
// as written, with no trimming: READY=1, RELOADING=1, STOPPING=1 and WATCHDOG=1 / WATCHDOG=trigger
// must match exactly; MAINPID and ERRNO are plain decimal numbers (no sign, no spaces) that fit
// pid_t / int; a STATUS that is not valid UTF-8 is ignored. When a variable appears more than once
// the first well-formed assignment wins, as in systemd. Every other line is counted in
// ignored_lines and otherwise skipped.
//
// Errors (the whole datagram is ignored, as systemd does): longer than kMaxNotifyMessageBytes, or
// containing a NUL byte. The message says which, e.g. "notify message of 5000 bytes exceeds the
// 4096-byte limit".
Result<NotifyMessage> ParseNotifyMessage(std::string_view datagram);

}  // namespace bulkhead::cell
