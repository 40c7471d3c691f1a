// SPDX-License-Identifier: MIT
// Reaping every exited child: the loop bulkheadd runs on each SIGCHLD, as PID 1 or as a child
// subreaper (prctl(2) PR_SET_CHILD_SUBREAPER), where orphans reparented to it are its children too.
// Pure of any loop or table; REQUIRES: called on the thread that owns the children (the
// supervisor's loop thread).
#pragma once

#include <sys/types.h>

#include <functional>

namespace bulkhead::supervisor {

// One non-blocking wait: as waitpid(-1, status, WNOHANG) (waitpid(2)): > 0 a reaped pid with
// *status set, 0 when children remain but none has exited, -1 with errno (ECHILD: no children).
using WaitAnyFn = std::function<pid_t(int* status)>;

// The real one: waitpid(-1, status, WNOHANG).
pid_t WaitAnyChild(int* status);

// Calls `wait` until it returns 0 or fails with ECHILD, retrying EINTR, and hands each reaped
// (pid, wait status) to `on_reaped` in the order they came. Signals coalesce (signal(7): one
// pending SIGCHLD may stand for many exits), so one call must drain every exited child; children
// that exit while it runs are reaped too. Any other errno ends the loop and is returned as the
// negative errno (the caller logs it); otherwise returns how many children were reaped.
// `on_reaped` may spawn new children: they are reaped by this same call if they exit before it
// ends.
int ReapExitedChildren(const WaitAnyFn& wait,
                       const std::function<void(pid_t pid, int wait_status)>& on_reaped);

}  // namespace bulkhead::supervisor
