// SPDX-License-Identifier: MIT
// Listening Unix sockets for the supervisor: claims a path (reclaiming a stale socket file left by
// a killed run, refusing one that a live process still serves) and binds it. Blocking calls, but
// each returns at once on a Unix socket: used at startup on the loop thread.
#pragma once

#include <string>

#include "base/status.h"
#include "base/unique_fd.h"

namespace bulkhead::supervisor {

enum class StaleCheck {
  kRefuseLive,    // a socket that accepts a connection belongs to a live instance: refuse
  kAlwaysReclaim  // the path is ours alone (worker sockets): remove whatever socket is there
};

enum class Blocking {
  kNonBlocking,  // for the supervisor's own libuv listeners
  kBlocking      // for a socket handed to a worker, which may accept() in blocking mode
};

// Returns a listening SOCK_STREAM socket bound to `path` (SOCK_CLOEXEC, and SOCK_NONBLOCK unless
// kBlocking), with `backlog`. Errors name the path: "socket /run/bulkhead/x.sock is in use by
// another process",
// "/run/x.sock exists and is not a socket", "bind /run/x.sock: Permission denied".
Result<UniqueFd> ClaimListeningSocket(const std::string& path, int backlog, StaleCheck check,
                                      Blocking blocking = Blocking::kNonBlocking);

// Creates `path` and its missing parents with `mode` (like mkdir -p). Error names the directory.
Status MakeDirectories(const std::string& path, unsigned mode);

}  // namespace bulkhead::supervisor
