// SPDX-License-Identifier: MIT
#include "lifecycle/health_probe.h"

#include <algorithm>
#include <utility>

#include "base/check.h"
#include "base/log.h"

namespace bulkhead::lifecycle {

uint64_t HealthProbe::LivenessIntervalMs(uint64_t stall_timeout_ms) {
  return std::clamp<uint64_t>(stall_timeout_ms / 4, 100, 10'000);
}

const char* HealthProbe::StateName(State state) {
  switch (state) {
    case State::kOff:
      return "off";
    case State::kReadiness:
      return "readiness";
    case State::kLiveness:
      return "liveness";
  }
  return "?";
}

HealthProbe::HealthProbe(uv_loop_t* loop, loop::TimeSource* time, loop::AfterPoll* after_poll,
                         const std::string* cell_name, Callbacks callbacks)
    : time_(time),
      after_poll_(after_poll),
      cell_name_(cell_name),
      callbacks_(std::move(callbacks)),
      attempt_(loop),
      timer_(time->CreateTimer([this] { OnTimer(); })) {}

HealthProbe::~HealthProbe() { BH_CHECK(state_ == State::kOff); }

uint64_t HealthProbe::IntervalMs() const {
  return state_ == State::kReadiness ? kReadyIntervalMs : LivenessIntervalMs(stall_timeout_ms_);
}

void HealthProbe::Follow(State want, pid_t pid, const config::CellConfig& config) {
  pid_ = pid;
  socket_ = config.worker_socket;
  path_ = config.ready_http_path;
  const uint64_t stall_timeout_ms = static_cast<uint64_t>(config.stall_timeout.count());
  const uint64_t interval =
      want == State::kReadiness ? kReadyIntervalMs : LivenessIntervalMs(stall_timeout_ms);
  stall_timeout_ms_ = stall_timeout_ms;
  if (want == state_ && (want == State::kOff || interval == interval_ms_)) return;
  const bool entered = want != state_;
  state_ = want;
  verdict_ = false;
  if (state_ == State::kOff) {
    timer_->Stop();
    attempt_.Cancel();
    answer_.clear();
    return;
  }
  // Liveness counts from its entry (the readiness, or the reload that turned it on).
  if (entered) healthy_ms_ = time_->NowMs();
  interval_ms_ = IntervalMs();
  // The timer's deadline, from the state: a starting worker is probed at once (the connection
  // waits in the worker socket's backlog until the worker accepts it, and the answer comes as
  // soon as it serves); a running one after an interval.
  timer_->Start(state_ == State::kReadiness ? 0 : interval_ms_);
}

void HealthProbe::OnTimer() {
  if (state_ == State::kOff) return;
  timer_->Start(interval_ms_);
  const uint64_t now = time_->NowMs();
  if (state_ == State::kLiveness && now - healthy_ms_ >= stall_timeout_ms_) {
    // Decided after the next poll, which may read a 2xx (OnAfterPoll).
    verdict_ = true;
    after_poll_->Request();
  }
  if (attempt_.busy()) {
    if (now - attempt_started_ms_ < kAttemptTimeoutMs) return;
    // A timeout fails the attempt, even after the status line (as kubelet's httpGet: the answer
    // is the whole response).
    const int status = attempt_.status_code();
    attempt_.Cancel();
    const std::string within = " within " + std::to_string(kAttemptTimeoutMs) + " ms";
    NoteAnswer(status == 0 ? "no answer" + within
                           : std::to_string(status) + " whose body did not end" + within);
  }
  attempt_started_ms_ = now;
  attempt_.Start(socket_, path_, [this](const HttpProbe::Outcome& outcome) { OnOutcome(outcome); });
}

void HealthProbe::OnOutcome(const HttpProbe::Outcome& outcome) {
  NoteAnswer(outcome.what);
  if (!outcome.healthy) return;
  if (state_ == State::kReadiness) {
    // Last: the callback moves the lifecycle, which makes the runner Follow another state.
    callbacks_.on_ready("GET " + path_ + " answered " + outcome.what);
    return;
  }
  healthy_ms_ = time_->NowMs();
}

void HealthProbe::OnAfterPoll() {
  // A 2xx read by the poll moved healthy_ms_: the silence did not last stall_timeout.
  const uint64_t now = time_->NowMs();
  if (!std::exchange(verdict_, false) || state_ != State::kLiveness ||
      now - healthy_ms_ < stall_timeout_ms_) {
    return;
  }
  std::string last = "last answer: " + (answer_.empty() ? "none" : answer_);
  if (attempt_.busy()) {
    last = "the probe sent " + std::to_string(now - attempt_started_ms_) +
           " ms ago is unanswered; " + last;
  }
  callbacks_.on_stalled("health probe GET " + path_ + ": no 2xx for " +
                        std::to_string(now - healthy_ms_) + " ms (" + last + ")");
}

void HealthProbe::NoteAnswer(const std::string& what) {
  if (what == answer_) return;
  answer_ = what;
  Log(LogLevel::kDebug, *cell_name_, pid_, "health probe GET " + path_ + ": " + what);
}

}  // namespace bulkhead::lifecycle
