// SPDX-License-Identifier: MIT
// CellSnapshot: a consistent copy of one cell's figures (state, worker, admission, counters,
// compartment), taken on the loop thread; status (control socket) and metrics render it.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "admission/adaptive_limit.h"
#include "admission/bulkhead.h"
#include "admission/cell_counters.h"
#include "admission/latency_histogram.h"
#include "cell/cgroup.h"
#include "lifecycle/compartment.h"
#include "lifecycle/lifecycle.h"
#include "lifecycle/restart_reason.h"

namespace bulkhead::control {

// The cell's concurrency limit (docs/adaptive-concurrency.md, "What operators see"). For a fixed
// cell only `adaptive` (false) and `limit` (max_concurrent) mean anything.
struct ConcurrencySnapshot {
  bool adaptive = false;
  uint32_t limit = 0;  // what the Bulkhead admits up to now
  uint32_t floor = 0;
  uint32_t ceiling = 0;
  admission::AdaptiveLimit::Phase phase = admission::AdaptiveLimit::Phase::kSlowStart;
  admission::GrowthHold hold = admission::GrowthHold::kNone;
  std::array<bool, admission::kSignalCount> signals{};  // live, indexed by admission::Signal
  // Why each kernel signal is off ("" when live; always "" for service_time), indexed by
  // admission::Signal: lifecycle::WorkerRunner::KernelSignalsOff.
  std::array<std::string, admission::kSignalCount> signals_off{};
  std::optional<uint64_t> base_us;  // nullopt while being measured
  // How long ago a clean window last went into the base, ms; nullopt while base_us is.
  std::optional<uint64_t> base_age_ms;
  uint32_t ratio_permille = 0;  // of the last closed window; 0 before the first
  uint32_t throttled_permille = 0;
  uint32_t memory_permille = 0;
  // The memory fit (AdaptiveLimit::memory_fit: the most requests whose working set stays under
  // the memory cut); nullopt before a memory sample with a request running.
  std::optional<uint32_t> memory_fit;
  // The memory ceiling while it holds (AdaptiveLimit::memory_ceiling: one below the limit a memory
  // cut came at), else nullopt; the ms left of its hold (0 when none holds).
  std::optional<uint32_t> memory_ceiling;
  uint64_t memory_ceiling_left_ms = 0;
  // cpu.pressure events that held growth without a cut (no other cell was waiting for a CPU).
  uint64_t cpu_pressure_spared = 0;
  // The wall-clock time (ms since the Unix epoch) the snapshot was taken: each change's wall time
  // is wall_now_ms - its ago_ms, so bulkheadctl prints what the JSON says.
  uint64_t wall_now_ms = 0;
  struct Change {
    uint64_t ago_ms = 0;  // how long before the snapshot
    uint32_t from = 0;
    uint32_t to = 0;
    admission::LimitCause cause = admission::LimitCause::kBounds;
    uint32_t permille = 0;  // admission::LimitChange::permille
  };
  std::vector<Change> changes;  // newest first, at most AdaptiveLimit::kRecentChanges
  std::array<uint64_t, admission::kLimitCauseCount> changes_by_cause{};
};

// A consistent copy of a cell's figures, for the control socket.
struct CellSnapshot {
  std::string name;
  lifecycle::Lifecycle::State state = lifecycle::Lifecycle::State::kStopped;
  uint64_t state_since_ms = 0;  // how long the cell has been in `state`
  std::string state_detail;     // Lifecycle::StateDetail(): why it does not serve; empty if running
  // While the cell's start is held for the cells it needs (supervisor/start_order.h): those not
  // running yet, in `needs` order, each with its state name ("starting"; "waiting" when its own
  // start is held too, supervisor::UnreadyStateName) and, in backoff, the time until its next
  // start; else empty.
  struct Need {
    std::string cell;
    std::string state;
    uint64_t next_start_in_ms = 0;  // state "backoff" only
    // State "waiting" only: the stopped or failed cell down its chain of needs that holds it
    // (supervisor::IdleCellBehind); "" when none does.
    std::string held_by;
  };
  std::vector<Need> waiting_for;
  // With waiting_for: how long the start has been held (the "waiting" state's age, which
  // state_since_ms, the lifecycle's stopped or failed, is not).
  uint64_t held_for_ms = 0;
  pid_t pid = 0;
  // The worker swap of an overlapping restart (lifecycle/worker_swap.h): its phase ("idle" when
  // none runs), the other worker's pid (the next one before the handover, the previous one
  // after; 0 when none), one line on it, and why the last one failed (empty if it did not).
  std::string swap_phase = "idle";
  pid_t swap_pid = 0;
  std::string swap_detail;
  std::string restart_failed;
  std::string socket;
  // The TCP addresses of `listen` as bound ("127.0.0.1:43817": a port 0 of the config replaced by
  // the port the kernel picked).
  std::vector<std::string> listen;
  std::string worker_socket;
  // As configured: max_concurrent is the key's value (an adaptive cell's ceiling); the limit in
  // force is concurrency.limit.
  admission::Bulkhead::Limits limits;
  ConcurrencySnapshot concurrency;
  uint32_t running = 0;
  uint32_t queued = 0;
  uint32_t clients = 0;
  uint32_t max_connections = 0;
  uint32_t connection_limit = 0;  // min(max_connections, the cell's share of the budget)
  uint32_t worker_connections = 0;
  uint64_t starts = 0;
  uint64_t restarts = 0;
  std::string last_exit;          // "exit 3", "signal 9", "start failed: ...", or empty
  std::string reason;             // why failed / stopped by policy ("gave up: ..."), or empty
  std::string status_text;        // the worker's last STATUS= (sd_notify), or empty
  uint64_t uptime_ms = 0;         // of the current worker, 0 when none
  uint64_t next_start_in_ms = 0;  // in backoff: time until the next start
  admission::CellCounters counters;
  // Every set limit is in force (limit_states has no kNotEnforced) and the cgroup is readable:
  // never true without a cgroup.
  bool limits_enforced = false;
  std::string limits_note;  // why limits are not enforced, when they are not
  // Lifecycle::CrashLooping(): the start limit was hit and no worker has run well since.
  bool crash_looping = false;
  std::array<lifecycle::LimitState, cell::kLimitCount> limit_states{};  // indexed by cell::Limit
  std::string cgroup_path;
  cell::CgroupLimits cgroup_limits;         // as configured
  std::optional<cell::CgroupStats> cgroup;  // read from the kernel now; nullopt without a cgroup
  // OOM kills in the cell's cgroup since bulkheadd opened it, whether or not the worker died: one
  // per decision of the kernel's OOM killer (cell::CountOomKills).
  uint64_t oom_kills = 0;
  // Admitted requests without an outcome yet: queued, running ones not yet answered (a request
  // answered by request_timeout keeps its slot, in `running`, until the worker answers), and
  // answered ones whose reply is not yet written whole to the client.
  uint32_t in_flight = 0;
  // Reply bytes held for the cell's clients, not yet written to their sockets (max_unsent_bytes).
  uint64_t unsent_bytes = 0;
  // Queue wait (admission to dispatch, for dispatched requests) and request duration (admission to
  // the outcome, for dispatched requests), since the supervisor started and over the recent window.
  admission::LatencyHistogram::Counts queue_wait;
  admission::LatencyHistogram::Counts request_duration;
  admission::LatencyHistogram::Counts recent_queue_wait;
  admission::LatencyHistogram::Counts recent_request_duration;
  lifecycle::RestartCounts restarts_by_reason{};
};

}  // namespace bulkhead::control
