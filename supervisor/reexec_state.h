// SPDX-License-Identifier: MIT
// ReexecState: what one bulkheadd image hands the next across `execve` of itself (docs/reexec.md):
// the listening sockets by fd number, each cell's worker and lifecycle figures, its counters and
// cumulative histograms. A versioned JSON document in a memfd, as systemd's daemon-reexec passes
// its state. Plain data and pure codecs, plus two small fd helpers; thread-compatible.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "admission/adaptive_limit.h"
#include "admission/cell_counters.h"
#include "admission/latency_histogram.h"
#include "base/status.h"
#include "base/unique_fd.h"
#include "control/metrics_text.h"

namespace bulkhead::supervisor {

struct ReexecState {
  // The version this build writes, and every version it reads (docs/reexec.md, "Versions"): a
  // change an older reader would misread bumps kVersion and keeps the older ones readable.
  // 2: cells in backoff and failed are carried (an older reader would take them for stopped);
  // a version 1 state holds none, and reads as before.
  // 3: the start limit's window and crash loop of each cell are carried (an older reader would
  // count a crash-looping cell's starts afresh and let it run on past its start limit); a version
  // 1 or 2 state has none, and reads as before (the window starts afresh).
  // 4: an adaptive cell's controller is carried (its limit, base and changes by cause: an older
  // reader would put the limit back at its floor and the changes-by-cause counters, which scrapes
  // before add up with, back at 0); a version 1 to 3 state has none, and reads as before (the
  // controller starts afresh).
  static constexpr int kVersion = 4;
  static constexpr std::array<int, 4> kReadableVersions = {1, 2, 3, 4};
  // The document's "format" tag: anything else is not a state of ours.
  static constexpr std::string_view kFormat = "bulkheadd-reexec-state";

  // One listening socket kept open across the exec.
  struct Listener {
    // "control", "metrics", or a cell's: "front" (its Unix socket), "listen" (a TCP address, in
    // config order), "worker" (its workers' socket), "notify" (its NOTIFY_SOCKET).
    std::string role;
    // The cell it belongs to; empty for "control" and "metrics".
    std::string cell;
    int fd = -1;
    // What it is bound to, as getsockname gives it: a path for a Unix socket, "HOST:PORT" for TCP.
    // The new image checks the fd still is this socket before adopting it.
    std::string address;
  };

  // A cell's live worker.
  struct Worker {
    pid_t pid = 0;
    pid_t pgid = 0;
    // Its generation's cgroup directory ("" without cgroups).
    std::string cgroup_path;
    // The read ends of its stdout and stderr pipes; -1 when not captured.
    int stdout_fd = -1;
    int stderr_fd = -1;
    // It had signalled readiness (READY=1, the probe, or exec for ready = "exec").
    bool ready = false;
    // How long it had run at the exec, in ms.
    uint64_t uptime_ms = 0;
  };

  // A connection handed over open: a cell's client accepted while accept was paused, or between
  // two requests, or a control connection between two requests. The new image serves it.
  struct Connection {
    // The cell whose client it is; "" for a control connection.
    std::string cell;
    int fd = -1;
    bool tcp = false;  // else a Unix one
  };

  struct Cell {
    std::string name;
    // Lifecycle::StateName: "stopped", "starting", "running", "stopping", "backoff", "failed".
    std::string state;
    uint64_t starts = 0;
    uint64_t restarts = 0;
    // How the last worker ended ("exit 3", ...; Lifecycle::last_exit), "" before any end.
    std::string last_exit;
    // How long it had been in `state` at the exec, in ms (status's state_since_ms goes on).
    uint64_t in_state_ms = 0;
    // Restarts per reason, by RestartReasonName ("crash", "oom", ...); a reason a newer build adds
    // is kept by name and ignored by an older reader.
    std::map<std::string, uint64_t> restarts_by_reason;
    // The restart policy's count of failures in a row (backoff grows with it).
    uint32_t consecutive_failures = 0;
    // In backoff: ms left until the next start, as a duration (the new image's loop clock starts
    // afresh); 0 otherwise.
    uint64_t next_start_in_ms = 0;
    // Failed: why (Lifecycle::reason), and whether it gave up at its start limit.
    std::string reason;
    bool gave_up = false;
    // The start limit's window (version 3; cell::RestartPolicy::Window): each start recorded as
    // its age in ms at the exec, oldest first; whether the cell is crash-looping and its short
    // runs in a row; in backoff while crash-looping, the state detail's words for it
    // ("crash-looping: 5 starts in 60s"), "" otherwise.
    std::vector<uint64_t> start_ages_ms;
    bool crash_looping = false;
    uint32_t short_runs = 0;
    std::string crash_loop;
    // Version 4: its start was held for the cells it needs (OrderStep::kWaitingToStart): the new
    // image asks for that start again once every cell is taken over, and it waits for its needs
    // there as it did here. False in an older state.
    bool start_held = false;
    std::optional<Worker> worker;
    // An adaptive cell's controller (version 4; AdaptiveLimit::Carried); none for a fixed cell
    // and in an older state.
    std::optional<admission::AdaptiveLimit::Carried> adaptive;
    admission::CellCounters counters;
    // Cumulative histograms (the recent window is not kept).
    admission::LatencyHistogram::Counts queue_wait;
    admission::LatencyHistogram::Counts duration;
  };

  // Version() of the image that wrote it ("0.1.0"), for log lines.
  std::string written_by;
  // The supervisor's uptime at the exec, in ms: status's uptime continues from it.
  uint64_t uptime_ms = 0;
  // Re-execs of this bulkheadd before this one (status's reexec.count is this + 1 after it).
  uint64_t reexecs = 0;
  // The metrics endpoint's address as status shows it ("127.0.0.1:40123"), "" without one.
  std::string metrics_bound;
  // The binary bulkheadd was first started as (an absolute path; /proc/self/exe then): what a
  // re-exec executes, also once the running file was moved aside. "" when not known.
  std::string binary;
  control::ReloadCounts reloads;
  // The runtime_dir lock's fd (it holds the flock: supervisor/runtime_dir_lock.h).
  int lock_fd = -1;
  // The access log's counters at the exec (bulkhead_access_log_lines_total, ..._dropped_total),
  // so that the new image's continue from them; 0 without an access log.
  uint64_t access_log_lines = 0;
  uint64_t access_log_dropped = 0;
  std::vector<Listener> listeners;
  std::vector<Connection> connections;
  std::vector<Cell> cells;

  // The document: {"format": kFormat, "version": kVersion, ...}, one line of JSON. Never fails.
  std::string Encode() const;
  // Reads a document any version of kReadableVersions wrote. Keys it does not know are ignored; a
  // key it knows but misses takes its default. Errors, one line each: not JSON, not an object,
  // another format ("not a bulkheadd re-exec state"), a version this build does not read ("reexec
  // state version 9 is not readable by this bulkheadd 0.1.0 (it reads 1 2)"), a field of the wrong
  // type or out of range ("cells[0].counters.ok: ...").
  static Result<ReexecState> Decode(std::string_view document);

  // The fds the state names (the lock, listeners, connections, worker pipes), which must survive
  // the exec.
  std::vector<int> Fds() const;
};

// What `bulkheadd --reexec-state-versions` prints: the readable versions, space separated ("1").
std::string ReadableVersionsLine();
// Parses that line as another binary printed it. Errors: empty, or a word that is not a positive
// integer ("--reexec-state-versions printed \"x\": not a version").
Result<std::vector<int>> ParseVersionsLine(std::string_view line);

// A sealed memfd ("bulkheadd-reexec-state", MFD_CLOEXEC) holding `document`, its offset at 0.
// Errors: memfd_create or write, with errno.
Result<UniqueFd> WriteStateMemfd(std::string_view document);
// Everything readable from `fd` from offset 0 (pread: the fd's offset is not used). Errors: read,
// with errno, or more than kMaxStateBytes.
Result<std::string> ReadStateFd(int fd);
// Bound on a state document: a corrupt fd number must not make the new image read a disk.
inline constexpr size_t kMaxStateBytes = size_t{64} * 1024 * 1024;

}  // namespace bulkhead::supervisor
