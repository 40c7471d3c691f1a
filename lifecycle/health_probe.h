// SPDX-License-Identifier: MIT
// HealthProbe: the HTTP health probe of a cell with ready = "http:/PATH" (docs/config.md), over a
// worker's life, as kubelet's readiness and liveness probes. While the worker starts it GETs PATH
// (one HttpProbe attempt at a time) at once and then every kReadyIntervalMs until a 2xx makes it
// ready (start_timeout bounds the wait: the Lifecycle's timer); while it runs with stall_timeout,
// every quarter of stall_timeout (100 ms to 10 s), and no 2xx for stall_timeout is a stall. An
// attempt gets kAttemptTimeoutMs to answer, its body included. The WorkerRunner says which state
// it wants after every event and reload (Follow); the probe tells it of readiness and of a stall,
// the latter decided after the loop's next poll (loop::AfterPoll), which may read a 2xx that
// waited in the socket. REQUIRES: loop thread only.
#pragma once

#include <sys/types.h>
#include <uv.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "config/config.h"
#include "lifecycle/http_probe.h"
#include "loop/after_poll.h"
#include "loop/time_source.h"

namespace bulkhead::lifecycle {

class HealthProbe {
 public:
  // How often a starting worker is probed, ms.
  static constexpr uint64_t kReadyIntervalMs = 150;
  // How long one attempt may take before it counts as unanswered and the next one starts
  // (Kubernetes' timeoutSeconds default), ms.
  static constexpr uint64_t kAttemptTimeoutMs = 1000;
  // How often a running worker is probed: every quarter of `stall_timeout_ms`, within 100 ms to
  // 10 s.
  static uint64_t LivenessIntervalMs(uint64_t stall_timeout_ms);

  enum class State : uint8_t {
    // No probing (ready is not http, no worker, or a running worker without stall_timeout): the
    // timer is disarmed, no attempt runs, no verdict waits, last_answer() is "".
    kOff,
    // The worker starts: the timer is due at once on entry, then every kReadyIntervalMs; each
    // tick starts an attempt unless one younger than kAttemptTimeoutMs runs. The first 2xx calls
    // on_ready, once.
    kReadiness,
    // The worker runs with stall_timeout: the timer ticks every LivenessIntervalMs from entry.
    // healthy_ms_ is the last 2xx (or the entry): a tick at or past healthy_ms_ + stall_timeout
    // requests a verdict after the next poll, which calls on_stalled unless a 2xx came meanwhile.
    kLiveness,
  };
  static const char* StateName(State state);  // "off", "readiness", "liveness"

  struct Callbacks {
    // A 2xx in kReadiness: `what` for the lifecycle's log line ("GET /healthz answered 200").
    std::function<void(std::string what)> on_ready;
    // No 2xx for stall_timeout in kLiveness: `why` names the silence ("health probe GET /healthz:
    // no 2xx for 2000 ms (last answer: 503)").
    std::function<void(std::string why)> on_stalled;
  };

  // Log lines name `cell_name` (outlives the probe). `time` and `after_poll` outlive it too.
  HealthProbe(uv_loop_t* loop, loop::TimeSource* time, loop::AfterPoll* after_poll,
              const std::string* cell_name, Callbacks callbacks);
  // REQUIRES: state() is kOff (an attempt's handle must close on the loop).
  ~HealthProbe();
  HealthProbe(const HealthProbe&) = delete;
  HealthProbe& operator=(const HealthProbe&) = delete;

  // Moves to `want` for the worker `pid` (log lines), probing GET config.ready_http_path on
  // config.worker_socket with config.stall_timeout: a new state starts as its comment says; the
  // same state with another interval is re-timed from now (an attempt in flight goes on); kOff
  // cancels everything. The attempt of a state left for another goes on, its answer counting for
  // the new state.
  void Follow(State want, pid_t pid, const config::CellConfig& config);
  // From the shared AfterPoll: a liveness verdict requested by a tick is given now.
  void OnAfterPoll();

  State state() const { return state_; }
  // The last attempt's answer ("200", "503", "connect: Connection refused", "no answer within
  // 1000 ms"), "" before the first in this state.
  const std::string& last_answer() const { return answer_; }
  // An attempt is in flight.
  bool busy() const { return attempt_.busy(); }

 private:
  uint64_t IntervalMs() const;
  void OnTimer();
  void OnOutcome(const HttpProbe::Outcome& outcome);
  // Logs an answer that differs from the last one (debug), and keeps it for messages.
  void NoteAnswer(const std::string& what);

  loop::TimeSource* time_;
  loop::AfterPoll* after_poll_;
  const std::string* cell_name_;
  Callbacks callbacks_;
  HttpProbe attempt_;
  std::unique_ptr<loop::Timer> timer_;

  State state_ = State::kOff;
  pid_t pid_ = 0;
  std::string socket_;
  std::string path_;
  uint64_t stall_timeout_ms_ = 0;
  uint64_t interval_ms_ = 0;
  uint64_t attempt_started_ms_ = 0;
  uint64_t healthy_ms_ = 0;  // kLiveness: the last 2xx, or the entry
  bool verdict_ = false;     // kLiveness: a verdict waits for the next poll
  std::string answer_;
};

}  // namespace bulkhead::lifecycle
