// SPDX-License-Identifier: MIT
// CallCell: one request to a cell's front socket and its reply (docs/protocol.md), bounded by an
// overall deadline, and DescribeReply, which turns the reply into what `bulkheadctl call` prints
// and its exit code (docs/control.md). Blocking; thread-safe (each call has its own connection).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "ctl/control_client.h"
#include "ipc/client.h"

namespace bulkhead::ctl {

// Replies larger than this fail: 1 GiB, the largest max_payload_bytes the config accepts.
inline constexpr uint32_t kMaxReplyPayload = 1024 * 1024 * 1024;

struct CallResult {
  // Set on success.
  std::optional<ipc::Client::Reply> reply;
  // On failure: true when the cell's socket refused the connection (no one listens), false when
  // the exchange failed later (closed connection, timeout, malformed reply).
  bool unreachable = false;
  std::string error;  // on failure, naming the socket
};

// Connects to `socket_path`, sends one REQUEST with id 1 and `payload`, and waits until `deadline`
// (none when empty) for the REPLY. REQUIRES: payload.size() <= ipc::kMaxEncodablePayload.
CallResult CallCell(const std::string& socket_path, std::string_view payload, Deadline deadline);

// What bulkheadctl prints for a reply, and how it exits (base/exit_status.h).
struct CallOutcome {
  int exit_code = 0;
  std::string out;  // for stdout: the OK payload
  std::string err;  // for stderr: one line ending in '\n', or empty
};

// OK: exit 0 and the payload on stdout, followed by '\n' unless it already ends with one or `raw`.
// REJECTED (exit kExitRejected), with the RejectDetail's figures:
//   "rejected: payments full (running 2, queued 1)"
//   "rejected: queue timeout"
//   "rejected: unavailable (retry after 950 ms)" or, with no hint, "rejected: unavailable"
// FAILED (exit kExitFailed): "failed: <reason>: <message>", as "failed: worker_died: exit 3".
// BAD_REQUEST (exit kExitBadRequest): "bad request: <reason>: <message>".
// `cell` names the cell when a REJECTED payload is too short to be a RejectDetail.
CallOutcome DescribeReply(const ipc::Client::Reply& reply, std::string_view cell, bool raw);

}  // namespace bulkhead::ctl
