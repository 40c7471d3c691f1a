// SPDX-License-Identifier: MIT
// What a cell's privilege keys (docs/config.md, "Privileges") mean for its worker and its
// sockets: the credentials Spawn takes, the USER/LOGNAME/HOME/SHELL variables (systemd.exec(5)
// "Environment variables in spawned processes"), and who may use the cell's socket files. Pure
// functions of the config; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cell/process.h"
#include "config/config.h"
#include "ipc/listen_socket.h"

namespace bulkhead::lifecycle {

// The worker's credentials when `user`, `group` or `supplementary_groups` is set: uid = `user`
// (else the supervisor's), gid = `group` (else the user's primary group, else the supervisor's),
// supplementary groups exactly `supplementary_groups` (empty when absent). nullopt when none of the
// three is set: the worker keeps the supervisor's credentials.
std::optional<cell::Credentials> WorkerCredentials(const config::CellConfig& cell);

// Appends USER, LOGNAME, HOME and SHELL from the user database entry of `user`, each unless
// `environment` ("NAME=VALUE" entries) already has it: the config's [environment] wins, as
// Environment= does over these in systemd. Nothing without `user` or for a numeric uid without
// an entry.
void AppendUserEnvironment(const config::CellConfig& cell, std::vector<std::string>* environment);

// The client socket: `socket_mode`, group `socket_group` when set.
ipc::SocketAccess FrontSocketAccess(const config::CellConfig& cell);

// The worker socket (<runtime_dir>/NAME.worker.sock): mode 0600, owned by the supervisor's user,
// whatever the umask. Only bulkheadd connects to it; the worker gets the listening socket as fd 3
// (LISTEN_FDS) and never opens the path, so no other user, the cell's own included, may reach the
// worker past admission.
ipc::SocketAccess WorkerSocketAccess();

// The cell's NOTIFY_SOCKET: mode 0600, owned by the worker's uid and gid when `user` / `group`
// are set, so that the worker, and no other user but root, can send to it.
ipc::SocketAccess NotifySocketAccess(const config::CellConfig& cell);

}  // namespace bulkhead::lifecycle
