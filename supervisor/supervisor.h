// SPDX-License-Identifier: MIT
// Supervisor: bulkheadd's core. One libuv loop on one thread runs every cell, the control socket
// and the signal handling: SIGCHLD reaps workers by pid, SIGTERM/SIGINT stop every cell and end
// Run() with 0. REQUIRES: constructed, run and destroyed on one thread; SIGPIPE ignored by the
// caller.
#pragma once

#include <uv.h>

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "cell/cgroup.h"
#include "config/config.h"
#include "supervisor/cell.h"
#include "supervisor/connection_budget.h"
#include "supervisor/control_server.h"
#include "supervisor/request.h"

namespace bulkhead::supervisor {

class Supervisor {
 public:
  explicit Supervisor(config::Config config);
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Creates the runtime directory, claims and binds every socket, starts every worker and runs the
  // loop until a stop signal. Returns a process exit code (base/exit_status.h); a socket that
  // cannot be claimed fails startup before any worker starts.
  int Run();

  // The control socket's request handler: one JSON request line in, one JSON response line out.
  std::string HandleControl(const std::string& request_line);

 private:
  static void OnSignal(uv_signal_t* handle, int signum);
  void ReapChildren();
  void BeginShutdown(int signum);
  void FinishShutdown();
  void CloseAll();

  // Delegates the cgroup subtree per the config's `cgroup` mode. Fails only in "required" mode.
  Status SetUpCgroups();
  const config::CellConfig& ConfigOf(const std::string& name) const;
  // Computes the client connection budget from RLIMIT_NOFILE once every socket is bound, and gives
  // each cell its share (supervisor/connection_budget.h).
  void SetUpConnectionBudget();

  config::Config config_;
  std::optional<cell::CgroupTree> cgroup_tree_;
  std::string cgroup_note_;  // why limits are not enforced ("" when they are)
  uv_loop_t loop_{};
  RequestPool pool_;
  uint64_t client_budget_ = UINT64_MAX;
  std::vector<std::unique_ptr<Cell>> cells_;
  std::unique_ptr<ControlServer> control_;
  uv_signal_t sigchld_{}, sigterm_{}, sigint_{}, sighup_{}, sigusr1_{}, sigusr2_{};
  uint64_t started_at_ms_ = 0;
  bool shutting_down_ = false;
  int cells_running_ = 0;
  int closing_ = 0;
  int exit_code_ = 0;
};

}  // namespace bulkhead::supervisor
