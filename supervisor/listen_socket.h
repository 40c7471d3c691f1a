// SPDX-License-Identifier: MIT
// Listening Unix sockets for the supervisor: claims a path (reclaiming a stale socket file left by
// a killed run, refusing one that a live process still serves) and binds it. Blocking calls, but
// each returns at once on a Unix socket: used at startup on the loop thread.
#pragma once

#include <sys/types.h>

#include <optional>
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

// Who may use a socket file: connect(2) and sendto(2) on a Unix socket need write permission on
// it (unix(7)), and search permission on every directory of its path.
struct SocketAccess {
  // Permission bits of the socket file, exactly (the process umask does not apply).
  unsigned mode = 0660;
  // The file's owner and group; unset = the creating process's fsuid / fsgid.
  std::optional<uid_t> owner;
  std::optional<gid_t> group;
};

// Makes the socket file of `fd` (bound or about to be) carry `access`: the mode is set on the
// socket inode before bind(2), which Linux copies (minus the umask) to the file, so the file is
// never wider than `access.mode`; after bind, chmod(2) and chown(2) on `path` make it exact.
// REQUIRES: kBeforeBind with an unbound `fd`, then kAfterBind once bind(2) succeeded. Errors name
// the path: "chown /run/bulkhead/a.sock to group 4: Operation not permitted".
enum class BindPhase { kBeforeBind, kAfterBind };
Status ApplySocketAccess(int fd, const std::string& path, const SocketAccess& access,
                         BindPhase phase);

// Returns a listening SOCK_STREAM socket bound to `path` (SOCK_CLOEXEC, and SOCK_NONBLOCK unless
// kBlocking), with `backlog`. Errors name the path: "socket /run/bulkhead/x.sock is in use by
// another process",
// "/run/x.sock exists and is not a socket", "bind /run/x.sock: Permission denied".
// With `access`, the file's mode, owner and group are set before listen(2) (ApplySocketAccess), so
// no client outside them can ever connect; without, the mode follows the process umask.
Result<UniqueFd> ClaimListeningSocket(const std::string& path, int backlog, StaleCheck check,
                                      Blocking blocking = Blocking::kNonBlocking,
                                      const std::optional<SocketAccess>& access = std::nullopt);

// Creates `path` and its missing parents with `mode` (like mkdir -p). Error names the directory.
Status MakeDirectories(const std::string& path, unsigned mode);

}  // namespace bulkhead::supervisor
