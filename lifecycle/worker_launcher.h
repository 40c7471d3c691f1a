// SPDX-License-Identifier: MIT
// WorkerLauncher: how a WorkerRunner starts its worker processes and signals them, the seam
// between it and the kernel's process calls (ninja's CommandRunner, which its tests replace with
// a FakeCommandRunner). The real one is cell::Spawn and kill(2); a test gives the runner a fake
// that records what was asked and plays the worker's part itself (answering on fd 3, sending
// sd_notify datagrams, being reaped when the test says). What goes through a cell's cgroup
// (cgroup.kill, cgroup.procs) is the cgroup's, not the launcher's. REQUIRES: loop thread only.
#pragma once

#include <sys/types.h>

#include "base/status.h"
#include "cell/process.h"

namespace bulkhead::lifecycle {

class WorkerLauncher {
 public:
  virtual ~WorkerLauncher() = default;
  // Starts a worker, as cell::Spawn does (its contract): the pid once it has exec'd, or the
  // error, naming the step and its errno.
  virtual Result<pid_t> Spawn(const cell::SpawnOptions& options) = 0;
  // Starts a worker without waiting for its exec, as cell::SpawnStarted does: the caller watches
  // the PendingExec. This default waits (Spawn) and hands back an exec already confirmed, which a
  // fake launcher keeps.
  virtual Result<cell::StartedChild> SpawnStarted(const cell::SpawnOptions& options) {
    Result<pid_t> pid = Spawn(options);
    if (!pid.ok()) return pid.status();
    return cell::StartedChild{*pid, cell::PendingExec()};
  }
  // kill(2): `signal` to the process `pid` (> 0) or to the process group -`pid` (< 0). Errors
  // (ESRCH: gone already) are ignored.
  virtual void Kill(pid_t pid, int signal) = 0;
};

// The real launcher: cell::Spawn and kill(2). Stateless; one for the process.
WorkerLauncher& SystemWorkerLauncher();

}  // namespace bulkhead::lifecycle
