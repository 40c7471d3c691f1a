// SPDX-License-Identifier: MIT
// The faults of bulkheadd-reexec-faults, a test-only build of bulkheadd (tests/e2e/CMakeLists.txt,
// BULKHEAD_TEST_REEXEC_FAULTS in supervisor/main.cc; never installed): one fault, named by
// $BULKHEAD_TEST_REEXEC_FAULT, at its failure point of docs/reexec.md. Each fires once, then
// leaves the environment, so that the images executed after it and a later re-exec run clean.
#pragma once

#include "supervisor/reexec_hooks.h"

namespace bulkhead::e2e {

// The variable, read once at start:
//   write-state         the old image fails to write the state (failure 3)
//   swap-front:CELL     the old image puts another listening socket (bound at the front
//                       socket's path + ".swapped") in place of CELL's front socket's fd just
//                       before execve (failure 6)
//   swap-control        the same for the control socket (failure 6)
//   swap-metrics        the same for the metrics socket, when metrics_listen is a Unix path
//                       (failure 6)
//   refuse-worker:CELL  the new image refuses CELL's worker, as a foreign cgroup path would
//                       (failure 6)
//   kill-worker:CELL    the old image SIGKILLs CELL's worker just before execve and waits until it
//                       is a zombie, not reaped (failure 7)
// Unset or unknown: no hook.
inline constexpr const char* kReexecFaultVariable = "BULKHEAD_TEST_REEXEC_FAULT";
supervisor::ReexecHooks ReexecFaultsFromEnvironment();

}  // namespace bulkhead::e2e
