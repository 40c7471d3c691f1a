// SPDX-License-Identifier: MIT
// QueryControl: one request/response exchange on bulkheadd's control socket (newline-delimited
// JSON over a Unix stream socket; docs/control.md). Blocking; for bulkheadctl and tests, never a
// libuv loop. Thread-safe: each call uses its own connection.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "ctl/deadline.h"

namespace bulkhead::ctl {

// The longest response line QueryControl reads: 16 MiB (a status line is about 700 bytes a cell).
inline constexpr size_t kMaxResponseLine = size_t{16} * 1024 * 1024;

struct ControlReply {
  // The response object, whether its "ok" is true or false. Empty on failure.
  std::optional<nlohmann::json> response;
  // On failure: true when no supervisor answered (connect failed; the connection closed, failed
  // or timed out before a whole response line), false when the line was not a JSON object.
  bool unreachable = false;
  // On failure, one line naming the socket: "cannot connect to /run/bulkhead/control.sock: No
  // such file or directory", "... timed out waiting for a response", "... response is not JSON".
  std::string error;
  // On a failed connect(2): its errno, or ENOTSOCK when the path is there but is no socket
  // (connect(2) answers ECONNREFUSED for such a path). 0 when the connect succeeded.
  int connect_error = 0;
  // On failure: something answered, but not as bulkheadd's control socket does (one JSON object
  // on one line): bytes and then a close without a line (a frames cell's socket answers the
  // request line with a BAD_REQUEST frame), or a line that is not a JSON object (an HTTP cell's
  // "HTTP/1.1 400 Bad Request"). The error then says "did not answer as a bulkheadd control
  // socket"; `unreachable` stays as it was (true for the first, false for the second).
  bool not_control = false;
};

// The line bulkheadctl prints for an unreachable `reply`: `cannot reach bulkheadd at PATH: WHAT
// (HINT)`. The hint asks "is it running?" only when nothing listens at the path (no such file,
// connection refused); a socket the caller may not open says who may, a file that is no socket
// says so, a socket that answered as no control socket (not_control) asks whether it is a
// cell's.
std::string DescribeUnreachable(const ControlReply& reply);

// Connects to `socket_path`, writes `request` as one line, reads one response line and closes.
// Waits at most until `deadline` (no limit when empty) for all of it. Never throws.
ControlReply QueryControl(const std::string& socket_path, const nlohmann::json& request,
                          Deadline deadline);

// {"command":"status"}, or {"command":"status","cell":CELL} when `cell` is not empty.
nlohmann::json StatusRequest(const std::string& cell = "");

// {"command":COMMAND,"cell":CELL}, for the lifecycle commands "start", "stop" and "restart".
nlohmann::json CellCommandRequest(const std::string& command, const std::string& cell);

// What `bulkheadctl start|stop|restart` makes of the supervisor's answer to CellCommandRequest:
// {"ok":true,"result":"ok"} succeeds; so does {"ok":false,"result":"already started"} for
// "start", "already stopped" and "stop in progress" for "stop", and "restart in progress" for
// "restart" (the cell is already where it was asked to go, or on its way there, as a second
// `systemctl restart` succeeds), which returns that text as a note. Anything else fails with the
// supervisor's "error".
struct CommandOutcome {
  bool success = false;
  std::string note;   // on success: "already started", "restart in progress", ..., or empty
  std::string error;  // on failure: "restart in progress", "no cell named x", ...
  // On failure: the supervisor refused the caller ("code":"permission_denied").
  bool permission_denied = false;
};
CommandOutcome InterpretCellCommand(const std::string& command, const nlohmann::json& response);

// True for a refusal for the caller's credentials: {"ok":false,"code":"permission_denied",...}.
bool IsPermissionDenied(const nlohmann::json& response);

}  // namespace bulkhead::ctl
