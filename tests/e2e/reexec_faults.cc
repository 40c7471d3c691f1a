// SPDX-License-Identifier: MIT
#include "tests/e2e/reexec_faults.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "base/log.h"
#include "ipc/listen_socket.h"

namespace bulkhead::e2e {

namespace {

using supervisor::ReexecState;

// Whether the fault is still to fire; the first call fires it (and unsets the variable).
std::function<bool()> Once() {
  auto armed = std::make_shared<bool>(true);
  return [armed] {
    if (!*armed) return false;
    *armed = false;
    ::unsetenv(kReexecFaultVariable);
    return true;
  };
}

}  // namespace

supervisor::ReexecHooks ReexecFaultsFromEnvironment() {
  supervisor::ReexecHooks hooks;
  const char* value = ::getenv(kReexecFaultVariable);
  if (value == nullptr) return hooks;
  const std::string spec = value;
  const size_t colon = spec.find(':');
  const std::string fault = spec.substr(0, colon);
  const std::string cell = colon == std::string::npos ? "" : spec.substr(colon + 1);
  std::function<bool()> once = Once();
  LogWarning("test build: re-exec fault " + spec);
  if (fault == "write-state") {
    hooks.write_state = [once](const ReexecState&) {
      return once() ? Status::Error("memfd_create: Too many open files (test fault)")
                    : Status::Ok();
    };
  } else if (fault == "swap-front" || fault == "swap-control" || fault == "swap-metrics") {
    const std::string role = fault.substr(std::string_view("swap-").size());
    hooks.before_exec = [once, role, cell](const ReexecState& state) {
      for (const ReexecState::Listener& listener : state.listeners) {
        if (listener.role != role || listener.cell != cell || !once()) continue;
        // Another listening socket, at PATH.swapped, takes the fd number (dup2 closes the
        // socket named, whose file stays behind).
        Result<ipc::ListeningSocket> other =
            ipc::ClaimListeningSocket(listener.address + ".swapped", 1);
        if (other.ok()) ::dup2(other->fd.get(), listener.fd);
      }
    };
  } else if (fault == "kill-worker") {
    hooks.before_exec = [once, cell](const ReexecState& state) {
      for (const ReexecState::Cell& entry : state.cells) {
        if (entry.name != cell || !entry.worker || !once()) continue;
        ::kill(entry.worker->pid, SIGKILL);
        // A zombie by the exec, its SIGCHLD lost with this image's handler.
        siginfo_t info{};
        ::waitid(P_PID, static_cast<id_t>(entry.worker->pid), &info, WEXITED | WNOWAIT);
      }
    };
  } else if (fault == "refuse-worker") {
    hooks.adopt_worker = [once, cell](const ReexecState::Cell& entry) {
      return entry.name == cell && once()
                 ? Status::Error("cgroup /elsewhere/gen-1 is not a generation of cells/" + cell +
                                 " (test fault)")
                 : Status::Ok();
    };
  }
  return hooks;
}

}  // namespace bulkhead::e2e
