// SPDX-License-Identifier: MIT
// QueryCellStatus: one `status` request on bulkheadd's control socket (newline-delimited JSON, one
// request line, one response line), reduced to the figures the bench checks. Blocking; each call
// uses its own connection, so it is safe from any thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "base/status.h"

namespace bulkhead::bench {

// One element of the response's "cells" array.
struct CellStatus {
  std::string name;
  std::string state;  // "running", "backoff", "stopping", "stopped"
  pid_t pid = 0;      // the worker's, 0 while none runs
  std::string socket;
  uint64_t running = 0;  // requests in the worker now
  uint64_t queued = 0;   // requests in the cell's queue now
  uint64_t ok = 0;       // replies OK since bulkheadd started
  uint64_t rejected = 0;
  uint64_t failed = 0;
};

// Sends {"command":"status","cell":CELL} to `control_socket` and parses the answer. Errors name
// the socket and errno, a response that is not {"ok":true,...} with one well-formed cell, or no
// complete response line within `timeout`.
Result<CellStatus> QueryCellStatus(const std::string& control_socket, const std::string& cell,
                                   std::chrono::milliseconds timeout);

}  // namespace bulkhead::bench
