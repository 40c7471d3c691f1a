// SPDX-License-Identifier: MIT
#include "lifecycle/worker_swap.h"

#include <utility>

#include "base/check.h"

namespace bulkhead::lifecycle {

const char* WorkerSwap::PhaseName(Phase phase) {
  switch (phase) {
    case Phase::kIdle:
      return "idle";
    case Phase::kStarting:
      return "starting";
    case Phase::kAbandoning:
      return "abandoning";
    case Phase::kDraining:
      return "draining";
    case Phase::kSignalled:
      return "signalled";
    case Phase::kKilled:
      return "killed";
  }
  return "?";
}

std::vector<WorkerSwap::Action> WorkerSwap::Begin(uint64_t now_ms) {
  BH_CHECK(phase_ == Phase::kIdle);
  options_ = next_options_;
  failure_.clear();
  dropped_.clear();
  phase_ = Phase::kStarting;
  began_ms_ = now_ms;
  return {};
}

std::vector<WorkerSwap::Action> WorkerSwap::NextReady(uint64_t now_ms) {
  if (phase_ != Phase::kStarting) return {};
  phase_ = Phase::kDraining;
  handover_ms_ = now_ms;
  return {Action{.type = Action::Type::kHandover, .signal = 0}};
}

std::vector<WorkerSwap::Action> WorkerSwap::NextExited(const std::string& why) {
  BH_CHECK(has_next());
  std::vector<Action> actions;
  if (phase_ == Phase::kStarting) {
    // Its process group may hold what it forked: killed as after any worker's end.
    Abandon("the next worker exited before it was ready (" + why + ")", /*failed=*/true, actions);
  }
  phase_ = Phase::kIdle;
  return actions;
}

std::vector<WorkerSwap::Action> WorkerSwap::PreviousDrained() {
  if (phase_ != Phase::kDraining) return {};
  phase_ = Phase::kSignalled;
  return {Action{.type = Action::Type::kSignalPrevious, .signal = options_.stop_signal}};
}

void WorkerSwap::PreviousExited() {
  BH_CHECK(has_previous());
  phase_ = Phase::kIdle;
}

std::vector<WorkerSwap::Action> WorkerSwap::OnTimer(uint64_t now_ms) {
  const uint64_t deadline = Deadline();
  if (deadline == 0 || now_ms < deadline) return {};  // a stale timer
  std::vector<Action> actions;
  switch (phase_) {
    case Phase::kStarting:
      Abandon("the next worker was not ready within start_timeout (" +
                  std::to_string(options_.start_timeout_ms) + " ms)",
              /*failed=*/true, actions);
      break;
    case Phase::kDraining:
    case Phase::kSignalled:
      // stop_timeout bounds the drain and the stop together, as for a stop (lifecycle.h).
      phase_ = Phase::kKilled;
      actions.push_back(Action{.type = Action::Type::kKillPrevious, .signal = 0});
      break;
    case Phase::kIdle:
    case Phase::kAbandoning:
    case Phase::kKilled:
      break;
  }
  return actions;
}

std::vector<WorkerSwap::Action> WorkerSwap::Fail(const std::string& why) {
  std::vector<Action> actions;
  if (phase_ == Phase::kStarting) Abandon(why, /*failed=*/true, actions);
  return actions;
}

std::vector<WorkerSwap::Action> WorkerSwap::Cancel(const std::string& why) {
  std::vector<Action> actions;
  if (phase_ == Phase::kStarting) Abandon(why, /*failed=*/false, actions);
  return actions;
}

uint64_t WorkerSwap::Deadline() const {
  switch (phase_) {
    case Phase::kStarting:
      return options_.start_timeout_ms == 0 ? 0 : began_ms_ + options_.start_timeout_ms;
    case Phase::kDraining:
    case Phase::kSignalled:
      return handover_ms_ + options_.stop_timeout_ms;
    case Phase::kIdle:
    case Phase::kAbandoning:
    case Phase::kKilled:
      return 0;
  }
  return 0;
}

std::string WorkerSwap::Detail() const {
  switch (phase_) {
    case Phase::kIdle:
      return {};
    case Phase::kStarting:
      return "restart: the next worker starts beside the serving one, which takes every request "
             "until the next is ready";
    case Phase::kAbandoning:
      return (failure_.empty() ? "restart cancelled: " + dropped_ : "restart failed: " + failure_) +
             "; waiting for the next worker's end";
    case Phase::kDraining:
      return "restart: the next worker serves; the previous one finishes what it has in flight";
    case Phase::kSignalled:
      return "restart: the next worker serves; the previous one was sent its stop_signal";
    case Phase::kKilled:
      return "restart: the next worker serves; the previous one was killed at stop_timeout";
  }
  return {};
}

void WorkerSwap::Abandon(std::string why, bool failed, std::vector<Action>& actions) {
  if (failed) {
    failure_ = std::move(why) + "; the previous worker serves on";
  } else {
    dropped_ = std::move(why);
  }
  phase_ = Phase::kAbandoning;
  actions.push_back(Action{.type = Action::Type::kKillNext, .signal = 0});
}

}  // namespace bulkhead::lifecycle
