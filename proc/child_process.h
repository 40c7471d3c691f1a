// SPDX-License-Identifier: MIT
// ChildProcess: one process a tool or test started (bulkheadd, bulkheadctl, a worker), known by
// pid only: started with fork + execve (exec failures reported synchronously through a
// close-on-exec pipe, as libuv's uv_spawn does), waited on with a deadline, stopped with a signal
// and, after a grace period, SIGKILL (to its process group too when it leads one), and always
// reaped. Never signals anything by name. Thread-compatible: one thread at a time per object;
// Start may run on several threads at once (see Start).
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace bulkhead::proc {

// Interval of every polling loop in proc/.
inline constexpr std::chrono::milliseconds kPollInterval{2};

struct ChildOptions {
  // argv[0] is the program's path (execve(2): no PATH search). Not empty.
  std::vector<std::string> argv;
  // "NAME=value" entries that replace or extend this process's environment for the child.
  std::vector<std::string> env = {};
  // Descriptors the child gets as 0, 1 and 2 (still owned by the caller). -1: /dev/null for
  // stdin, this process's own stdout and stderr for the others.
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  // prctl(2) PR_SET_PDEATHSIG: the child gets this signal when the thread that started it exits,
  // so a killed tool or test leaves nothing running; 0: none. A child whose parent died before the
  // request exits at once.
  int parent_death_signal = SIGTERM;
  // setpgid(0, 0): the child leads its own process group, and Kill reaches the whole group.
  bool own_process_group = false;
  // RLIMIT_NOFILE (soft and hard) of the child; 0 inherits this process's.
  uint64_t max_open_files = 0;
  // Written to the child's /proc/self/oom_score_adj (proc(5)); unset inherits this process's.
  std::optional<int> oom_score_adj = std::nullopt;
};

// What WaitUntil saw.
enum class WaitOutcome { kReady, kExited, kTimedOut, kInterrupted };

class ChildProcess {
 public:
  // Starts `options.argv` and returns once it has exec'd. `name` is used in messages. In the
  // child, before execve: the parent-death signal, the process group, descriptors 0-2, the
  // limits, an empty signal mask (a test's blocked signals are not the child's business);
  // descriptors this process opened O_CLOEXEC stay behind. Only async-signal-safe calls run after
  // the fork. Errors: pipe or fork failures, or the failed step in the child with its errno
  // ("exec /x/bulkheadd: No such file or directory"); that child is reaped here.
  // Threads: a fork on another thread at the same moment can inherit the report pipe and delay
  // this call until its own child execs.
  static Result<ChildProcess> Start(std::string name, const ChildOptions& options);

  // Starts `argv` as bulkheadd starts a worker (cell::Spawn: own session and process group, an
  // empty environment, `listen_fd`, a listening stream socket still owned by the caller, as fd 3
  // with LISTEN_FDS=1).
  static Result<ChildProcess> StartWorker(const std::vector<std::string>& argv, int listen_fd);

  ChildProcess() = default;
  // Stop(kDestructorGrace) unless the process was reaped already.
  ~ChildProcess();
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // -1 when nothing was started; still the pid once reaped.
  pid_t pid() const { return pid_; }
  const std::string& name() const { return name_; }
  // "NAME (pid N)", for messages.
  std::string Who() const;

  // Reaps the process if it has exited (waitpid WNOHANG); true while it has not. False too once
  // waitpid fails for the pid (it is no child of ours: exit_description says so).
  bool Running();
  // Set once reaped: the waitpid(2) status.
  const std::optional<int>& wait_status() const { return wait_status_; }
  // "exit 0", "signal 15" (cell::DescribeWaitStatus) once reaped, "waitpid: <errno text>" once
  // lost; empty before.
  std::string exit_description() const;

  // Polls the exit every kPollInterval for up to `timeout`: the wait status, or nullopt.
  std::optional<int> WaitExit(std::chrono::milliseconds timeout);

  // Calls `ready` every kPollInterval until it returns true (kReady), the process exits (kExited:
  // checked before each call, so a process that died is never taken for ready), `timeout` passes
  // (kTimedOut) or `*interrupted` is set (kInterrupted; may be null).
  WaitOutcome WaitUntil(const std::function<bool()>& ready, std::chrono::milliseconds timeout,
                        const std::atomic<bool>* interrupted = nullptr);

  // Sends `signum` (unless the process has exited already) and waits up to `grace` for the exit.
  // Returns the wait status; if the process outlives `grace`, Kill and an error naming it.
  Result<int> Stop(std::chrono::milliseconds grace, int signum = SIGTERM);
  // Stop with SIGTERM; Ok only if it ended by itself with one of the `accepted` exit descriptions
  // ("exit 0", "signal 15"). Errors: "NAME (pid N) ended with exit 1", or Stop's.
  Status StopExpecting(std::chrono::milliseconds grace, const std::vector<std::string>& accepted);
  // SIGKILL to the process group when the process leads one, and to the pid; then a blocking reap.
  // Returns the wait status; nullopt when there was nothing to kill.
  std::optional<int> Kill();

 private:
  ChildProcess(pid_t pid, std::string name, bool leads_group)
      : pid_(pid), name_(std::move(name)), leads_group_(leads_group) {}
  bool reaped() const { return wait_status_.has_value(); }

  pid_t pid_ = -1;
  std::string name_;
  bool leads_group_ = false;
  std::optional<int> wait_status_;
  std::string lost_;  // why waitpid failed, once it did
};

}  // namespace bulkhead::proc
