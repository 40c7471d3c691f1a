// SPDX-License-Identifier: MIT
// RestartPolicy: what follows the end of a cell's worker: start again after an exponential backoff
// with jitter, stay stopped (restart = "never" / "on-failure"), and, once the start limit is hit,
// keep starting on a slower, capped backoff while crash-looping (Kubernetes' CrashLoopBackOff) or
// give up (systemd.service(5) Restart=, RestartSec=, RestartMaxDelaySec=; systemd.unit(5)
// StartLimitBurst=, StartLimitIntervalSec=). Pure: no clock of its own (callers pass `now_ms`,
// monotonic milliseconds), no I/O. Not thread-safe: one owner, the loop thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace bulkhead::cell {

// systemd.service(5) Restart= subset.
enum class RestartMode {
  kAlways,     // start again after every end, clean or not
  kOnFailure,  // start again unless the worker exited with status 0
  kNever,      // never start again by itself; only an operator's start or restart does
};
const char* RestartModeName(RestartMode mode);  // "always", "on-failure", "never"

// What hitting the start limit leads to (the config's start_limit_action).
enum class StartLimitAction {
  // Crash-looping: keep starting, at most one start per start_limit_interval / start_limit_burst
  // (12 s with the defaults) or per max_delay_ms if that is shorter (it caps every wait), the
  // backoff doubling on up to max_delay_ms (Kubernetes' CrashLoopBackOff: it never gives up).
  kBackoff,
  // Give up: no more starts until an operator's start or restart (systemd's start limit).
  kFail,
};
const char* StartLimitActionName(StartLimitAction action);  // "backoff", "fail"

class RestartPolicy {
 public:
  struct Options {
    RestartMode mode = RestartMode::kAlways;
    // The first backoff delay, in ms. Each further restart doubles it, up to max_delay_ms.
    uint64_t delay_ms = 100;
    // The cap of the backoff delay, in ms (Kubernetes' CrashLoopBackOff cap). REQUIRES: >=
    // delay_ms.
    uint64_t max_delay_ms = 300'000;
    // A worker that ran at least this long (from its start to its end, in ms) sends the delay back
    // to delay_ms and clears the start limit's history but for its own start.
    uint64_t reset_after_ms = 10'000;
    // At most this many starts within start_limit_interval_ms; the restart that would make one
    // more gives up instead. REQUIRES: >= 1.
    uint32_t start_limit_burst = 5;
    // The sliding window of the start limit, in ms. 0: no start limit (never crash-looping).
    uint64_t start_limit_interval_ms = 60'000;
    // What the restart that would exceed the start limit does.
    StartLimitAction start_limit_action = StartLimitAction::kBackoff;
  };

  // Returns a number in [0, 1), uniformly distributed. Called once per restart decision.
  using Jitter = std::function<double()>;
  // A jitter source of its own, a std::mt19937_64 seeded with `seed` (tests: a fixed seed gives a
  // fixed sequence).
  static Jitter SeededJitter(uint64_t seed);
  // Seeded from std::random_device, so that cells that fail together do not restart in lockstep:
  // one std::mt19937_64 per thread, seeded at its first use, that every RandomJitter of the thread
  // draws from (the function holds no state, so a cell pays nothing for its jitter source).
  static Jitter RandomJitter();
  // Always 0: every delay is the full backoff step. For tests.
  static Jitter NoJitter();

  // The largest share of a backoff step that jitter takes off: a step of d ms becomes a delay in
  // (d - d * kJitterFraction, d]. Jitter only shortens a delay, so none ever exceeds max_delay_ms,
  // and none is longer than the step the operator configured.
  static constexpr double kJitterFraction = 0.2;

  enum class Verdict {
    kRestart,  // start again after delay_ms
    kStay,     // stay stopped: the restart mode says so
    kGiveUp,   // the start limit is reached and start_limit_action is kFail: the cell is failed
  };
  struct Decision {
    Verdict verdict = Verdict::kRestart;
    uint64_t delay_ms = 0;  // kRestart: ms from the end to the next start, jitter applied
    // kRestart: crash-looping (see crash_looping()), so delay_ms is at least the crash loop's
    // step; kGiveUp: always true.
    bool crash_looping = false;
    // This end hit the start limit while not crash-looping: the loop begins here.
    bool crash_loop_began = false;
    // kStay: why, e.g. `restart = "never"`; kGiveUp: "gave up: 5 starts in 60s, last exit 1";
    // kRestart while crash-looping: "crash-looping: 5 starts in 60s" when this exit hit the
    // start limit, "crash-looping: 7 ends in a row within 10s of the start" after (the caller
    // has the exit); else empty.
    std::string reason;
  };

  // REQUIRES: options valid (see Options); `jitter` returns values in [0, 1) (checked).
  RestartPolicy(Options options, Jitter jitter);

  // A worker is being started at `now_ms`. Call once per spawn attempt, before the spawn, whether
  // or not its exec then succeeds: failed execs count as starts.
  void RecordStart(uint64_t now_ms);

  // The worker of the last RecordStart ended at `now_ms`. `clean`: it exited with status 0 (an exit
  // the supervisor forced, a signal, an exec failure or a stall are never clean).
  // `exit_description` is shown in the give-up reason after "last ", as given: "exit 1",
  // "signal 9", "start failed: exec /bin/x: No such file or directory".
  //
  // In order: an uptime of at least reset_after_ms resets the backoff to its first step, ends
  // a crash loop and, unless MarkStartFailed was called, forgets the starts before this worker's
  // (only its own start still counts
  // towards the start limit, with either start_limit_action; systemd's start limit, which counts
  // every start, differs here); the restart mode may say to stay stopped; the next delay is the
  // current step with jitter; if starting at now_ms + delay would make more than start_limit_burst
  // starts within the start_limit_interval_ms that ends then, the start limit is hit: with kFail
  // the policy gives up, with kBackoff the cell is crash-looping from here on. While crash-looping
  // the step is at least CrashLoopStepMs(), jitter applied after. Then the step doubles for next
  // time (capped) and the decision is kRestart.
  Decision OnExit(uint64_t now_ms, bool clean, std::string_view exit_description);

  // The worker of the last RecordStart did not come up: it was stopped at its start_timeout
  // (systemd's TimeoutStartSec=). Its end then keeps the start limit's history, however long it
  // ran: a start that failed is no run that ends a crash loop's count. Until the next RecordStart.
  void MarkStartFailed() { start_failed_ = true; }

  // Forgets every start, goes back to the first backoff step and ends a crash loop (`bulkheadctl
  // restart`).
  void Reset();
  // A re-exec (docs/reexec.md): the backoff step the previous image had reached (steps()), so
  // that the next delay grows on from there. Capped as the policy caps it.
  void RestoreSteps(uint32_t steps);
  // The start limit's history as a re-exec carries it (docs/reexec.md): each recorded start as
  // its age (ms before `now_ms`, oldest first; durations, since the clocks of the two images
  // differ), whether the cell is crash-looping, and its short runs in a row.
  struct Window {
    std::vector<uint64_t> start_ages_ms;
    bool crash_looping = false;
    uint32_t short_runs = 0;
  };
  Window CarryWindow(uint64_t now_ms) const;
  // A re-exec, in the new image before any start: the history `window` describes, its starts
  // taken back from `now_ms` (a start older than the clock's reading counts at 0), so that the
  // start limit counts them and a crash loop goes on as one. REQUIRES: no start recorded yet.
  void RestoreWindow(const Window& window, uint64_t now_ms);

  // New options (a config reload) from the next call on. Recorded starts and the backoff step are
  // kept: a lower start_limit_burst or shorter interval counts the starts already made, a lower
  // max_delay_ms caps the next step. REQUIRES: options valid (see Options).
  void SetOptions(const Options& options);

  // The backoff step of the next restart, before jitter: min(delay_ms * 2^steps, max_delay_ms),
  // and at least CrashLoopStepMs() while crash-looping.
  uint64_t NextStepMs() const;
  // The least step while crash-looping, in ms: start_limit_interval_ms / start_limit_burst, the
  // rate the start limit allows (12 s with the defaults), at most max_delay_ms.
  uint64_t CrashLoopStepMs() const;
  // The start limit was hit (with kBackoff: the cell keeps starting on the crash loop's backoff;
  // with kFail: it gave up), and no worker has ended after running reset_after_ms since, nor was
  // Reset() called. A worker that runs well ends the crash loop only when it ends; callers that
  // show the state now also look at the uptime of the worker running (Lifecycle::CrashLooping).
  bool crash_looping() const { return crash_looping_; }
  // Ends of workers in a row that ran less than reset_after_ms (an exec failure counts).
  uint32_t short_runs() const { return short_runs_; }
  // Backoff doublings since the last reset (stops growing at the cap).
  uint32_t steps() const { return steps_; }
  // Starts recorded within the start limit window that ends at `now_ms` (every one, up to 1024 or
  // start_limit_burst + 1 if that is more).
  uint32_t StartsWithin(uint64_t now_ms) const;
  const Options& options() const { return options_; }

 private:
  Options options_;
  Jitter jitter_;
  uint32_t steps_ = 0;
  bool crash_looping_ = false;
  bool start_failed_ = false;  // MarkStartFailed since the last RecordStart
  uint32_t short_runs_ = 0;
  // How many start times are kept at most: start_limit_burst + 1, and at least 1024, so that
  // StartsWithin counts the real starts when a low max_delay_ms paces a crash loop faster than
  // the start limit does (a count that reached it is a floor).
  size_t StartsKept() const;

  // Start times (ms), oldest first; only those that may still fall in a window are kept, at most
  // StartsKept() of them. A vector, not a deque: empty, it allocates nothing, and it holds a
  // handful of entries at the start limit's pace (the oldest leave from the front).
  std::vector<uint64_t> starts_;
  bool has_start_ = false;
  uint64_t last_start_ms_ = 0;
};

}  // namespace bulkhead::cell
