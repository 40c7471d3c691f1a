// SPDX-License-Identifier: MIT
// ChildProcess: one process the bench started, known by pid only: started as bulkheadd (fork +
// exec, log to a file) or as a socket-activated worker (cell::Spawn, LISTEN_FDS=1), stopped with
// SIGTERM and, after a deadline, SIGKILL, and always reaped. Never signals anything by name.
// Thread-compatible: owned and used by the bench's main thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "base/status.h"

namespace bulkhead::bench {

class ChildProcess {
 public:
  // Starts `binary --config config_path` with stdout and stderr appended to `log_path`. The child
  // stays in the bench's process group and gets SIGTERM if the bench dies first (PR_SET_PDEATHSIG),
  // so an interrupted bench leaves no daemon behind.
  static Result<ChildProcess> StartBulkheadd(const std::string& binary,
                                             const std::string& config_path,
                                             const std::string& log_path);

  // Starts `argv` with `listen_fd` (a listening stream socket, still owned by the caller) as its
  // fd 3, as bulkheadd starts a worker (cell::Spawn: LISTEN_FDS=1, LISTEN_PID, own session and
  // process group, empty environment).
  static Result<ChildProcess> StartWorker(const std::vector<std::string>& argv, int listen_fd);

  ChildProcess() = default;
  ~ChildProcess();
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }

  // Reaps the process if it has exited (without blocking); true while it runs.
  bool Running();

  // "exit 0", "signal 15" once reaped; empty before.
  const std::string& exit_description() const { return exit_description_; }

  // Process groups to SIGKILL if this process has to be killed (a daemon's workers lead their own
  // groups and would otherwise outlive it).
  void AddDependentGroup(pid_t group_leader) { dependents_.push_back(group_leader); }

  // SIGTERM, then polls for the exit until `timeout` passes; then SIGKILL (to the process group
  // too when the process leads one, and to every dependent group) and a blocking reap. Ok if the
  // process ended within `timeout` with one of `accepted` exit descriptions.
  Status Stop(std::chrono::milliseconds timeout, const std::vector<std::string>& accepted);

 private:
  ChildProcess(pid_t pid, std::string name, bool leads_group)
      : pid_(pid), name_(std::move(name)), leads_group_(leads_group) {}
  void Kill();

  pid_t pid_ = -1;
  std::string name_;
  bool leads_group_ = false;
  std::string exit_description_;
  std::vector<pid_t> dependents_;
};

}  // namespace bulkhead::bench
