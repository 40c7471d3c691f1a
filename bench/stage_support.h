// SPDX-License-Identifier: MIT
// What the bench's stages share to set themselves up and tear themselves down: writing and reading
// the small text files of a stage's directory (configurations, logs, wrk's output), and starting
// and stopping the stage's bulkheadd and workers with the bench's deadlines. Threading: the thread
// that started the processes; StartBenchBulkheadd and StopBenchProcesses block.
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "proc/bulkheadd_process.h"
#include "proc/child_process.h"

namespace bulkhead::bench {

// Writes `text` to `path` (created or truncated). Errors: "cannot write PATH".
Status WriteText(const std::string& path, const std::string& text);
// The whole of `path`; empty when it cannot be read.
std::string ReadText(const std::string& path);

// The [supervisor] table every bench's config starts with: runtime_dir ROOT/run (what
// StartBenchBulkheadd expects), `log_level` ("warning": nothing per request or per restart; a
// bench that reads bulkheadd's info lines asks for "info"), and `cgroup` when not empty ("off"
// keeps bulkheadd away from the host's /sys/fs/cgroup; "" leaves the key out). Ends with a
// newline.
std::string BenchSupervisorToml(const std::string& root, const std::string& cgroup = "off",
                                const std::string& log_level = "warning");

// Writes `config` to ROOT/bench.toml and starts BIN_DIR/supervisor/bulkheadd on it into `*out`
// (control socket ROOT/run/control.sock, log ROOT/bulkheadd.log, 10 s deadlines), giving up when
// `*interrupted` is set. The config's runtime_dir must be ROOT/run.
Status StartBenchBulkheadd(const std::string& bin_dir, const std::string& root,
                           const std::string& config, const std::atomic<bool>* interrupted,
                           std::optional<proc::BulkheaddProcess>* out);

// The flag SIGINT and SIGTERM set once CatchStopSignals() ran: one for the process, which a
// bench's loops watch and hand to StartBenchBulkheadd and RunClosedLoop.
std::atomic<bool>& StopRequested();
// Installs the handlers (std::signal) that set StopRequested().
void CatchStopSignals();

// `cell`'s object of a status control request (docs/control.md), or null when bulkheadd did not
// answer with one.
nlohmann::json CellStatusJson(proc::BulkheaddProcess& bulkheadd, const std::string& cell);

// Stops each started worker of `workers` (SIGTERM; "signal 15" or "exit 0" expected), then
// `*bulkheadd` if it runs (StopCleanly), each within 10 s. Returns the first error, after trying
// every one.
Status StopBenchProcesses(const std::vector<proc::ChildProcess*>& workers,
                          std::optional<proc::BulkheaddProcess>* bulkheadd);

}  // namespace bulkhead::bench
