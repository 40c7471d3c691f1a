// SPDX-License-Identifier: MIT
// Exit codes of bulkheadd and bulkheadctl, in one place (documented in README and docs/).
#pragma once

namespace bulkhead {

// bulkheadd
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;        // runtime failure (socket in use, cannot bind, ...)
inline constexpr int kExitUsage = 2;          // bad command-line arguments
inline constexpr int kExitConfigInvalid = 3;  // the config file was refused

// bulkheadctl `call` outcomes, beyond kExitOk / kExitFailure / kExitUsage
inline constexpr int kExitRejected = 4;     // reply REJECTED (full, queue_timeout, unavailable)
inline constexpr int kExitFailed = 5;       // reply FAILED (worker error or worker death)
inline constexpr int kExitBadRequest = 6;   // reply BAD_REQUEST
inline constexpr int kExitUnreachable = 7;  // no supervisor answered on the socket
// bulkheadctl `status CELL` and `is-active`: the cell is not running. LSB's "program is not
// running" status code, which `systemctl status` and `systemctl is-active` exit with; the same
// number as kExitConfigInvalid, which only `reload` returns.
inline constexpr int kExitNotRunning = 3;
// bulkheadctl: the supervisor refused the command for the caller's credentials (a response with
// "code":"permission_denied"). sysexits(3) EX_NOPERM.
inline constexpr int kExitPermissionDenied = 77;
// bulkheadctl reexec: its --timeout ended while the re-exec was still under way (settling or
// draining); bulkheadd goes on with it, and `bulkheadctl status` shows its end. Neither done nor
// failed: sysexits(3) EX_TEMPFAIL.
inline constexpr int kExitReexecUnderWay = 75;

// Exit codes of a worker child that could not exec its command (tini, POSIX shells).
inline constexpr int kExitExecNotExecutable = 126;
inline constexpr int kExitExecNotFound = 127;

}  // namespace bulkhead
