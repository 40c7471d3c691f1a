// SPDX-License-Identifier: MIT
// ReexecHooks: test-only fault injection at the failure points of a re-exec (docs/reexec.md,
// "Failure paths"). bulkheadd leaves every hook empty; only the test build bulkheadd-reexec-faults
// (tests/e2e/reexec_faults.h, never installed) sets them, so the faults themselves are compiled
// into that build alone. Each hook is called on the loop thread, or before the loop first runs.
#pragma once

#include <functional>

#include "base/status.h"
#include "supervisor/reexec_state.h"

namespace bulkhead::supervisor {

struct ReexecHooks {
  // Old image, the state captured, before it is encoded and written to its memfd: an error fails
  // the write as memfd_create or write would (failure 3).
  std::function<Status(const ReexecState& state)> write_state;
  // Old image, the state written, just before execve: may close a listening socket the state
  // names (failure 6) or kill a worker it names (failure 7).
  std::function<void(const ReexecState& state)> before_exec;
  // New image, for each cell whose worker is about to be adopted: an error refuses the worker, as
  // a cgroup path that is not a generation of its cell does (failure 6).
  std::function<Status(const ReexecState::Cell& cell)> adopt_worker;
};

}  // namespace bulkhead::supervisor
