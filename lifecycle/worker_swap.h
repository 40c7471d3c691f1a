// SPDX-License-Identifier: MIT
// WorkerSwap: a planned restart with overlap (`bulkheadctl restart` with restart_overlap = true,
// docs/config.md "Restarts"), as one explicit state machine: the next worker generation starts
// beside the one serving, takes new requests only once it is ready, and the previous one finishes
// what it has in flight (bounded by stop_timeout) before it is stopped. Kubernetes' rolling update
// with maxSurge=1, maxUnavailable=0, for one worker. Like Lifecycle it does no I/O, arms no timer
// and sends no signal: each call returns the actions the WorkerRunner carries out, and Deadline()
// says when OnTimer is due, derived from the phase in one place. Time is the caller's ms
// (loop::TimeSource::NowMs). REQUIRES: loop thread only.
#pragma once

#include <signal.h>

#include <cstdint>
#include <string>
#include <vector>

namespace bulkhead::lifecycle {

class WorkerSwap {
 public:
  // "the previous worker" is the one that served when the swap began; "the next worker" the one
  // it started.
  enum class Phase : uint8_t {
    kIdle,        // No second generation: nothing of a swap runs. No deadline.
    kStarting,    // The next worker runs beside the previous one, which alone gets new requests;
                  // the next is not ready yet. Deadline: start_timeout after the spawn (none
                  // with start_timeout 0).
    kAbandoning,  // The next worker failed to get ready (or the swap was cancelled) and got
                  // SIGKILL; the previous one serves on. Waits for the next one's reap. No
                  // deadline (SIGKILL cannot be refused).
    kDraining,    // The next worker took over (handover): new requests go to it only; the
                  // previous one finishes what it has in flight and gets nothing new. Deadline:
                  // stop_timeout after the handover (then SIGKILL).
    kSignalled,   // The previous one has nothing in flight and got stop_signal. Deadline: the
                  // same, stop_timeout after the handover (then SIGKILL).
    kKilled,      // The previous one got SIGKILL. Waits for its reap. No deadline.
  };
  static constexpr size_t kPhaseCount = 6;
  // "idle", "starting", "abandoning", "draining", "signalled", "killed".
  static const char* PhaseName(Phase phase);

  struct Action {
    enum class Type : uint8_t {
      // Give the next worker the worker socket's path and every new request; retire the
      // previous one's connections (they carry what runs to its end, then close). Then
      // PreviousDrained is due when nothing runs on them (at once when nothing does).
      kHandover,
      // kill(2) `signal` (stop_signal) to the previous worker.
      kSignalPrevious,
      // SIGKILL to the previous worker's processes.
      kKillPrevious,
      // SIGKILL to the next worker's processes (it never took a request).
      kKillNext,
    };
    Type type = Type::kHandover;
    int signal = 0;  // kSignalPrevious
    bool operator==(const Action&) const = default;
  };

  struct Options {
    // Bound of the wait for the next worker's readiness, ms; 0: none (the cell's start_timeout).
    uint64_t start_timeout_ms = 90'000;
    // Bound of the previous worker's drain and stop together, ms (the cell's stop_timeout).
    uint64_t stop_timeout_ms = 5000;
    int stop_signal = SIGTERM;
  };

  explicit WorkerSwap(Options options) : options_(options) {}

  // The next worker was spawned at `now_ms` beside the serving one. REQUIRES: kIdle.
  std::vector<Action> Begin(uint64_t now_ms);
  // The next worker is ready (READY=1, the probe's 2xx, its first accept): handover. Ignored
  // outside kStarting (a late READY=1).
  std::vector<Action> NextReady(uint64_t now_ms);
  // The next worker was reaped (`why`: "exit 1"). kStarting: the swap failed, the previous one
  // serves on; kAbandoning: the swap is over. REQUIRES: kStarting or kAbandoning.
  std::vector<Action> NextExited(const std::string& why);
  // The previous worker has nothing in flight any more. Ignored outside kDraining.
  std::vector<Action> PreviousDrained();
  // The previous worker was reaped, and what it left is gone: the swap is over.
  // REQUIRES: kDraining, kSignalled or kKilled.
  void PreviousExited();
  // Deadline() passed.
  std::vector<Action> OnTimer(uint64_t now_ms);
  // The next worker cannot take over (its exec failed, the worker socket cannot be handed over):
  // it is killed, the previous one serves on, and failure() says `why`. Ignored outside
  // kStarting.
  std::vector<Action> Fail(const std::string& why);
  // The restart is superseded before the handover (a restart without overlap, a stop, the
  // serving worker's crash or stall, each with its own outcome): the next worker is killed and the
  // swap is over without a failure; dropped() says `why`, for the log. Ignored outside kStarting.
  std::vector<Action> Cancel(const std::string& why);

  Phase phase() const { return phase_; }
  // When OnTimer is due (caller's ms), 0 for none: follows from the phase alone.
  uint64_t Deadline() const;
  // A next worker exists (kStarting, kAbandoning) / a previous one exists (kDraining ... kKilled).
  bool has_next() const { return phase_ == Phase::kStarting || phase_ == Phase::kAbandoning; }
  bool has_previous() const {
    return phase_ == Phase::kDraining || phase_ == Phase::kSignalled || phase_ == Phase::kKilled;
  }
  // Why the last swap failed ("the next worker exited before it was ready (exit 1); the previous
  // one serves on"); empty when the last one succeeded, was cancelled or none ran. Kept until the
  // next Begin, or until ForgetFailure (a worker the lifecycle started runs: the cell was
  // restarted after all).
  const std::string& failure() const { return failure_; }
  void ForgetFailure() { failure_.clear(); }
  // Why the last swap was cancelled (Cancel's `why`); empty when it was not.
  const std::string& dropped() const { return dropped_; }
  // One line for status while a swap runs ("starting the next worker beside the serving one,
  // waiting for its readiness (start_timeout 90 s)"); empty in kIdle.
  std::string Detail() const;

  // Reload: applies to the next Begin; a swap under way keeps its deadlines.
  void SetOptions(Options options) { next_options_ = options; }

 private:
  // kStarting -> kAbandoning, the next worker killed; `failed`: failure_ is `why`, else dropped_.
  void Abandon(std::string why, bool failed, std::vector<Action>& actions);

  Options options_;
  Options next_options_ = options_;
  Phase phase_ = Phase::kIdle;
  uint64_t began_ms_ = 0;     // kStarting: the spawn
  uint64_t handover_ms_ = 0;  // kDraining, kSignalled: the handover
  std::string failure_;
  std::string dropped_;
};

}  // namespace bulkhead::lifecycle
