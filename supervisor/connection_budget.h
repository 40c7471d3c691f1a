// SPDX-License-Identifier: MIT
// The client connection budget: how many client connections the cells' front sockets may hold
// open together, so that clients can never take the file descriptors the supervisor needs for
// itself: worker connections (one per slot), spawning workers (the exec-error pipe), cgroup and
// /proc files, the control socket. Without it, enough clients exhaust RLIMIT_NOFILE, and then every
// cell's requests fail with "cannot connect to worker: Too many open files" and spawns fail and
// count toward the start limit. The budget is split among the cells at startup, so that a flood of
// connections to one cell never takes another cell's share. A connection over a cell's limit is
// refused (docs/protocol.md, "Connection limits"). Pure functions, plus two that read the process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/status.h"
#include "config/config.h"

namespace bulkhead::supervisor {

// Descriptors kept back beyond the worker connections and what is open when the budget is set:
// the connection libuv has already accepted when it asks whether to keep it, spawns in progress
// (two pipe ends each), cgroup and /proc files read for status, control connections, the log.
inline constexpr size_t kDescriptorHeadroom = 64;

// The most connections the supervisor keeps open to the worker of a cell configured so:
// max_concurrent (one per slot), or 1 with worker_connections = "multiplex" (docs/config.md).
uint64_t WorkerLinksOf(const config::CellConfig& cell);

// The budget for a process whose soft RLIMIT_NOFILE is `nofile`, with `open_now` descriptors open
// and up to `worker_links` worker connections to come: nofile - open_now - worker_links -
// kDescriptorHeadroom, or 0 when that is not positive.
uint64_t ClientConnectionBudget(uint64_t nofile, uint64_t open_now, uint64_t worker_links);

// Splits `budget` among cells whose configured limits are `max_connections` (each >= 1): a cell
// gets its max_connections when they all fit; otherwise a share of `budget` in proportion to its
// max_connections, rounded down, capped at its max_connections, and at least 1 (so the shares may
// exceed a budget smaller than the number of cells by at most one each; the headroom absorbs it).
// Returns one limit per cell, in order.
std::vector<uint32_t> ShareConnectionBudget(uint64_t budget,
                                            const std::vector<uint32_t>& max_connections);

// getrlimit(RLIMIT_NOFILE) soft limit (RLIM_INFINITY as UINT64_MAX).
Result<uint64_t> NofileSoftLimit();
// Entries of /proc/self/fd, not counting the directory's own descriptor.
Result<size_t> OpenDescriptorCount();

}  // namespace bulkhead::supervisor
