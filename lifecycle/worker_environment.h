// SPDX-License-Identifier: MIT
// What a cell's worker starts with, built from its config alone (docs/architecture.md,
// "Processes"): its argv, its whole environment, the listening socket as descriptor 3 with its
// sd_listen_fds(3) name, its credentials, umask, no_new_privileges, oom_score_adj, working
// directory and parent-death signal. Pure: no I/O, no process, nothing of bulkheadd's own
// environment; the WorkerRunner adds what each spawn has of its own (the cgroup, the output
// pipes). Thread-compatible.
#pragma once

#include <cstdint>
#include <string>

#include "cell/process.h"
#include "config/config.h"

namespace bulkhead::lifecycle {

// cell::SpawnOptions for a worker of `config`: every field but cgroup_fd, stdout_fd and stderr_fd.
//
// The environment is `config.environment`, in its order, without the names bulkheadd sets itself
// (NOTIFY_SOCKET, WATCHDOG_USEC, WATCHDOG_PID, BULKHEAD_MAX_PAYLOAD_BYTES,
// BULKHEAD_WORKER_CONNECTIONS), then PATH=config::kDefaultWorkerPath when it has no PATH (systemd's
// default), NOTIFY_SOCKET=`notify_socket` (sd_notify(3)), BULKHEAD_MAX_PAYLOAD_BYTES=`max_payload`
// (docs/protocol.md), BULKHEAD_WORKER_CONNECTIONS=multiplex for a multiplexed cell only,
// WATCHDOG_USEC with a watchdog (its period in μs), and with `user` set USER, LOGNAME, HOME and
// SHELL unless the config gives them (systemd.exec(5)). LISTEN_FDS=1, LISTEN_PID and
// LISTEN_FDNAMES=<cell name> follow from `listen_fd` and listen_fd_name: Spawn sets them, since
// LISTEN_PID is the child's pid.
cell::SpawnOptions BuildWorkerEnvironment(const config::CellConfig& config,
                                          const std::string& notify_socket, uint32_t max_payload,
                                          int listen_fd);

}  // namespace bulkhead::lifecycle
