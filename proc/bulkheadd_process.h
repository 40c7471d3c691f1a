// SPDX-License-Identifier: MIT
// BulkheaddProcess: one bulkheadd run from the outside, as bench/, bulkhead-demo and the e2e
// harness need it: start `bulkheadd --config FILE` with its output in a log file, wait until its
// control socket (docs/control.md) shows the cells running, read cell figures, stop it (SIGTERM,
// SIGKILL after a grace, by pid) and collect its exit status and log. Also the small pieces that
// each of them wrote again: a TOML string for a generated config, the build directory.
//
// Threading: Start, WaitUntilRunning, Stop, Kill and the destructor on the thread that
// constructed the object (PR_SET_PDEATHSIG follows the thread that forked); Control, Cell and
// SeenWorkerPids from any thread once Start has returned.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "ctl/control_client.h"
#include "proc/child_process.h"

namespace bulkhead::proc {

// What tools read of one element of a `status` response's "cells" array (docs/control.md).
struct CellStatus {
  std::string name;
  std::string state;  // "starting", "running", "backoff", "stopping", "stopped", "failed"
  pid_t pid = 0;      // the worker's, 0 while none runs
  std::string socket;
  uint64_t running = 0;  // requests in the worker now
  uint64_t queued = 0;   // requests in the cell's queue now
  uint64_t ok = 0;       // replies OK since bulkheadd started
  uint64_t rejected = 0;
  uint64_t failed = 0;
};

struct BulkheaddOptions {
  std::string binary;  // path of bulkheadd
  std::string config_path;
  std::string control_socket;  // where the config's runtime_dir puts control.sock
  std::string log_path;        // bulkheadd's stdout and stderr, appended
  // Arguments after `--config config_path`, e.g. {"--log-level", "warning"}.
  std::vector<std::string> args = {};
  // "NAME=value" entries replacing or extending this process's environment for bulkheadd.
  std::vector<std::string> env = {};
  // RLIMIT_NOFILE and /proc/self/oom_score_adj of bulkheadd (ChildOptions); 0 / unset inherit.
  uint64_t max_open_files = 0;
  std::optional<int> oom_score_adj = std::nullopt;
  // Grace between the stop signal and SIGKILL. bulkheadd itself takes up to twice a cell's
  // stop_timeout (drain, then the worker's stop_signal-to-SIGKILL), 5 s each by default.
  std::chrono::milliseconds stop_timeout{10000};
  // Deadline of one control-socket exchange.
  std::chrono::milliseconds control_timeout{5000};
  // When set, the waits give up as soon as it is (a tool's SIGINT handler sets it); may be null.
  const std::atomic<bool>* interrupted = nullptr;
};

class BulkheaddProcess {
 public:
  explicit BulkheaddProcess(BulkheaddOptions options);
  // Stop() if bulkheadd still runs (its outcome is the caller's to check before).
  ~BulkheaddProcess();
  BulkheaddProcess(const BulkheaddProcess&) = delete;
  BulkheaddProcess& operator=(const BulkheaddProcess&) = delete;

  // Starts `binary --config config_path args...` (stdin /dev/null, stdout and stderr appended to
  // log_path, PR_SET_PDEATHSIG SIGTERM so that it stops its workers if this process dies), in this
  // process's process group. May be called again once the last run was reaped. Errors: already
  // running, the log cannot be opened, fork or exec failed ("bulkheadd: exec PATH: ...").
  Status Start();
  // Polls the control socket until every cell in `cells` is "running" with a worker pid. Errors:
  // "bulkheadd exited during startup with exit 3" (at once, not after `timeout`), "bulkheadd was
  // not ready within N ms (what it showed last)", "interrupted".
  Status WaitUntilRunning(const std::vector<std::string>& cells, std::chrono::milliseconds timeout);

  // Started and not reaped yet (it may have exited meanwhile: Alive() reaps).
  bool running() const { return process_.pid() > 0 && !process_.wait_status(); }
  // bulkheadd's pid while running(), else -1.
  pid_t pid() const { return running() ? process_.pid() : -1; }
  // Reaps bulkheadd if it has exited; true while it runs.
  bool Alive() { return process_.Running(); }
  // "exit 0", "signal 9" once reaped; empty before.
  std::string exit_description() const { return process_.exit_description(); }

  // One exchange on the control socket (QueryControl, control_timeout). The worker pids of a
  // status response are remembered (SeenWorkerPids; the latest of each cell is SIGKILLed with
  // bulkheadd when Stop has to kill it).
  ctl::ControlReply Control(const nlohmann::json& request);
  // {"command":"status","cell":NAME}, parsed. Errors: no answer, {"ok":false}, not one cell.
  Result<CellStatus> Cell(const std::string& name);
  // Polls Cell(name) until `done` holds: that status. Errors: bulkheadd exited, interrupted, or
  // "cell NAME: condition not reached within N ms (state S running R queued Q)".
  Result<CellStatus> WaitForCell(const std::string& name,
                                 const std::function<bool(const CellStatus&)>& done,
                                 std::chrono::milliseconds timeout);

  // `signum`, then waits up to stop_timeout for the exit: the wait status. If bulkheadd outlives
  // it: SIGKILL to bulkheadd and to the process groups of the workers the last status responses
  // named (each leads its own, cell::Spawn), and an error. An error too when nothing runs.
  Result<int> Stop(int signum = SIGTERM);
  // Stop, Ok only for "exit 0"; errors say how it ended instead.
  Status StopCleanly();
  // SIGKILL to bulkheadd alone (a crash), then reaps it; its workers keep running.
  void Kill();
  // For a process that is the child subreaper (prctl PR_SET_CHILD_SUBREAPER), after Kill:
  // SIGKILLs (process group and pid) and reaps every worker that a status response named and that
  // is now this process's own child. Never signals a pid that is not.
  void KillOrphanedWorkers();
  // Every worker pid seen in a status response so far.
  std::set<pid_t> SeenWorkerPids() const;

  const BulkheaddOptions& options() const { return options_; }
  // What bulkheadd has written to stdout and stderr so far; empty if the log cannot be read.
  std::string Log() const;

 private:
  void Remember(const nlohmann::json& response);
  std::string WaitProblem(WaitOutcome outcome, std::chrono::milliseconds timeout) const;

  BulkheaddOptions options_;
  ChildProcess process_;
  mutable std::mutex mu_;
  std::set<pid_t> seen_workers_;               // guarded by mu_
  std::map<std::string, pid_t> last_workers_;  // cell -> its worker in the last response; mu_
};

// A TOML basic string, "..." with '"', '\' and control characters escaped, for generated configs.
std::string TomlString(std::string_view text);

// The build directory of a program built into BUILD_DIR/<folder>/<program> (bulkhead-bench,
// bulkhead-demo), from /proc/self/exe; "build" if that cannot be read.
std::string BuildDirOfThisProgram();

}  // namespace bulkhead::proc
