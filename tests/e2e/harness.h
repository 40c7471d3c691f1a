// SPDX-License-Identifier: MIT
// The end-to-end harness: runs the built bulkheadd on a temporary config with its sockets in a
// fresh temporary directory (testing::TempDir), waits until it serves, talks to it (control socket,
// cell sockets, bulkheadctl), and stops it, checking that it exits 0. Also RunProcess, to run any
// built binary and capture its output. No GoogleTest dependency: failures found in a destructor
// go to HarnessOptions::on_failure, so benchmarks and demos can use it too.
//
// Processes: bulkheadd is the harness's child (proc::BulkheaddProcess), killed and reaped by pid,
// never by name. It gets PR_SET_PDEATHSIG SIGTERM, so it stops its workers if the test process
// dies. The harness makes
// the test process a child subreaper (PR_SET_CHILD_SUBREAPER), so that workers orphaned by a
// killed bulkheadd become its children and KillOrphanedWorkers can kill and reap them by pid.
//
// Threading: Start, Stop, Kill and the destructor on the thread that constructed the Harness
// (PDEATHSIG follows the thread that forked); Status, Cell, WaitForCell, Call and Connect from any
// thread once Start has returned.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "cell/process.h"
#include "ipc/client.h"
#include "proc/bulkheadd_process.h"
#include "tests/helpers/test_support.h"

namespace bulkhead::e2e {

// Absolute paths of built binaries (BULKHEAD_BUILD_DIR of this build), as BuildPath and
// TestWorkerPath of the shared test helpers.
using testing::BuildPath;
using testing::TestWorkerPath;
std::string BulkheaddPath();    // supervisor/bulkheadd
std::string BulkheadctlPath();  // ctl/bulkheadctl

// One [cells.NAME] table of the generated config (docs/config.md).
struct CellSpec {
  std::string name;
  // The worker's argv; empty means {TestWorkerPath()}.
  std::vector<std::string> command = {};
  uint32_t max_concurrent = 1;
  uint32_t max_queue = 0;
  std::string queue_timeout = "1s";
  std::string restart_delay = "100ms";
  // [cells.NAME.environment]: variables added to the worker's environment (the supervisor passes
  // the worker nothing else of its own environment but PATH).
  std::vector<std::pair<std::string, std::string>> environment = {};
  // worker_connections ("one-per-request", "multiplex"); empty leaves the key out (the default).
  std::string worker_connections = {};
  // More keys for the [cells.NAME] table, verbatim, e.g. "stop_timeout = \"300ms\"\n".
  std::string extra_toml = {};
  // Start waits until this cell is running; false for a cell meant to stay in backoff.
  bool wait_running = true;
};

struct HarnessOptions {
  std::vector<CellSpec> cells;
  // Extra lines for the [supervisor] table, e.g. "max_payload_bytes = 1024\n".
  std::string supervisor_toml;
  // The bulkheadd binary to run; empty: BulkheaddPath(). (A re-exec test runs a copy it can
  // replace.)
  std::string binary;
  // Arguments for bulkheadd after `--config FILE`, e.g. {"--log-level", "warning"}.
  std::vector<std::string> args = {};
  // How long Start waits for the control socket to answer and the cells to run.
  std::chrono::milliseconds start_timeout{10000};
  // How long Stop waits after SIGTERM before SIGKILL. Above what bulkheadd itself may take with
  // the default stop_timeout of 5 s (in-flight requests drain for up to 5 s, then the worker has
  // 5 s between stop_signal and SIGKILL), so that Stop does not kill a bulkheadd that is on time.
  std::chrono::milliseconds stop_timeout{15000};
  // Entries ("NAME=value") added to, or replacing in, the test's environment for bulkheadd, e.g.
  // "NOTIFY_SOCKET=/tmp/.../notify".
  std::vector<std::string> env = {};
  // RLIMIT_NOFILE (soft and hard) for bulkheadd, set between fork and exec; 0 inherits the test's.
  uint64_t max_open_files = 0;
  // bulkheadd's /proc/self/oom_score_adj, set between fork and exec (a supervisor started at a
  // non-zero score, as some init setups do); nullopt inherits the test's. Lowering it needs root.
  std::optional<int> oom_score_adj;
  // Receives what the destructor found wrong: bulkheadd exited non-zero, by a signal, or did not
  // stop. Default: printed to stderr. GoogleTest users pass [](auto& m) { ADD_FAILURE() << m; }.
  std::function<void(const std::string& message)> on_failure;
};

// Outcome of RunProcess.
struct ProcessResult {
  int wait_status = 0;     // as from waitpid
  bool timed_out = false;  // killed with SIGKILL when its time ran out
  std::string out;         // everything it wrote to stdout
  std::string err;         // everything it wrote to stderr
  // The exit code, or -1 when it was killed by a signal.
  int exit_code() const;
  // "exit 3" / "signal 9", plus stdout and stderr, for assertion messages.
  std::string Describe() const;
};

// Runs argv[0] (a path) with `argv`, `input` on stdin, the test's environment plus `env` entries
// ("NAME=value", overriding), and waits at most `timeout`, then SIGKILLs and reaps it. The child
// is reaped by pid. Errors: fork or memfd_create failures.
Result<ProcessResult> RunProcess(const std::vector<std::string>& argv, std::string_view input = "",
                                 std::chrono::milliseconds timeout = std::chrono::seconds(30),
                                 const std::vector<std::string>& env = {});

// `argv` run through /bin/sh with $JOURNAL_STREAM set to its stderr's "DEVICE:INODE", as systemd
// does for a unit whose stderr is the journal (systemd.exec(5)): the program then writes the
// journal's "<N>" priority prefixes (base/log.h, StderrLogStyle).
std::vector<std::string> WithStderrAsJournal(const std::vector<std::string>& argv);

// Polling with a deadline and temporary directories come from the shared test helpers.
using testing::TempDir;
using testing::WaitFor;

class Harness {
 public:
  // Writes the config to dir()/bulkhead.toml, with [supervisor] runtime_dir = dir()/run. Nothing
  // is started.
  explicit Harness(HarnessOptions options);
  // Stops bulkheadd if it runs and reports (on_failure) unless it exited 0; then kills and reaps
  // orphaned workers and removes dir().
  ~Harness();
  Harness(const Harness&) = delete;
  Harness& operator=(const Harness&) = delete;

  // Replaces the cells (and the extra [supervisor] lines, when given) and rewrites config_path(),
  // for reload tests: a running bulkheadd reads it on `bulkheadctl reload` or SIGHUP.
  void RewriteConfig(std::vector<CellSpec> cells,
                     std::optional<std::string> supervisor_toml = std::nullopt);

  // Starts bulkheadd --config config_path(), stderr and stdout appended to log_path(), and waits
  // until the control socket answers and every cell with wait_running is "running" with a pid.
  // May be called again after Stop or Kill (same config, same sockets). On failure bulkheadd is
  // killed and reaped, and the message includes its log.
  bulkhead::Status Start();
  // `signum` (SIGTERM), then waits for the exit (SIGKILL after stop_timeout). Returns the wait
  // status; an error when nothing was running or bulkheadd had to be killed.
  Result<int> Stop(int signum = SIGTERM);
  // SIGKILL to bulkheadd (a crash), then reaps it. Its workers keep running: see
  // KillOrphanedWorkers.
  void Kill();
  // SIGKILLs (process group and pid) and reaps every worker that a status response named and that
  // is now the test process's own child (orphaned by Kill, then adopted by the subreaper).
  void KillOrphanedWorkers();
  // Every worker pid seen in a status response so far.
  std::set<pid_t> SeenWorkerPids() const;

  bool running() const { return daemon_->running(); }
  pid_t pid() const { return daemon_->pid(); }
  const std::string& dir() const { return dir_.path(); }
  std::string config_path() const { return dir_.Join("bulkhead.toml"); }
  std::string runtime_dir() const { return dir_.Join("run"); }
  std::string control_socket() const { return runtime_dir() + "/control.sock"; }
  std::string log_path() const { return dir_.Join("bulkheadd.log"); }
  std::string CellSocket(const std::string& cell) const {
    return runtime_dir() + "/" + cell + ".sock";
  }
  std::string WorkerSocket(const std::string& cell) const {
    return runtime_dir() + "/" + cell + ".worker.sock";
  }
  // What bulkheadd has written to stderr and stdout so far.
  std::string Log() const;

  // {"command":"status"} (or for one cell) on the control socket: the response object, or
  // {"ok":false,"error":"..."} when no valid response came within 5 s.
  nlohmann::json Status(const std::string& cell = "");
  // The cell's object in Status(cell), or null.
  nlohmann::json Cell(const std::string& name);
  // Polls Cell(name) until `predicate` holds; false after `timeout`.
  bool WaitForCell(const std::string& name,
                   const std::function<bool(const nlohmann::json&)>& predicate,
                   std::chrono::milliseconds timeout = std::chrono::seconds(10));

  // A new connection to the cell's front socket.
  Result<ipc::Client> Connect(const std::string& cell);
  // One request on a new connection; each read and write bounded by `timeout`.
  Result<ipc::Client::Reply> Call(const std::string& cell, std::string_view payload,
                                  std::chrono::milliseconds timeout = std::chrono::seconds(10));

  // Runs bulkheadctl --socket control_socket() `args...`.
  Result<ProcessResult> Ctl(const std::vector<std::string>& args, std::string_view input = "");

 private:
  void Report(const std::string& message) const;
  void WriteConfig() const;

  HarnessOptions options_;
  TempDir dir_;
  std::optional<proc::BulkheaddProcess> daemon_;  // always set: built once dir_ exists
};

// "exit 3", "signal 9", "signal 11 (core dumped)" for a waitpid status.
using cell::DescribeWaitStatus;

}  // namespace bulkhead::e2e
