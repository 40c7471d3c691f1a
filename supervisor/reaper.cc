// SPDX-License-Identifier: MIT
#include "supervisor/reaper.h"

#include <sys/wait.h>

#include <cerrno>

namespace bulkhead::supervisor {

pid_t WaitAnyChild(int* status) { return ::waitpid(-1, status, WNOHANG); }

int ReapExitedChildren(const WaitAnyFn& wait,
                       const std::function<void(pid_t pid, int wait_status)>& on_reaped) {
  int reaped = 0;
  while (true) {
    int wait_status = 0;
    pid_t pid = wait(&wait_status);
    if (pid > 0) {
      ++reaped;
      on_reaped(pid, wait_status);
      continue;
    }
    if (pid == 0) return reaped;
    if (errno == EINTR) continue;
    if (errno == ECHILD) return reaped;
    return -errno;
  }
}

}  // namespace bulkhead::supervisor
