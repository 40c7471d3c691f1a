// SPDX-License-Identifier: MIT
// ReexecWait: what wakes a re-exec that waits (ReexecPhase::kSettling, kDraining): events, not a
// poll. Whatever the wait is for tells it that something may have changed (Notify: a cell moved,
// a worker swap or teardown ended, a cell's last request in flight was answered); it then looks
// once, after the poll of this loop iteration (loop::AfterPoll), however many events came. One
// timer stands for the bound (the settle or drain deadline), set by the caller from its phase in
// one place (Supervisor::ArmReexecBound). REQUIRES: loop thread only.
#pragma once

#include <uv.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include "loop/after_poll.h"
#include "loop/time_source.h"

namespace bulkhead::supervisor {

class ReexecWait {
 public:
  // `look` runs on the loop thread after a Notify (once per batch) or at the bound; it may feed
  // cells events and call any method of this class. `loop` and `time` outlive this.
  ReexecWait(uv_loop_t* loop, loop::TimeSource* time, std::function<void()> look);
  ReexecWait(const ReexecWait&) = delete;
  ReexecWait& operator=(const ReexecWait&) = delete;

  // The deadline (loop ms, `time`'s clock) at which `look` runs even when no event came; a
  // deadline passed already runs it at the next turn. nullopt: no bound (the timer disarmed).
  // Nothing once closed.
  void SetBound(std::optional<uint64_t> deadline_ms);
  // Something the wait is for may have changed: `look` runs once after this loop iteration's
  // poll. Safe from any callback on the loop thread (a cell's observer included: `look` runs
  // later, never inside the caller).
  void Notify() { look_soon_.Request(); }
  // Whether a look is due after this iteration's poll.
  bool notified() const { return look_soon_.requested(); }
  // Looks run by the bound's timer so far (what a test counts: an event-driven wait ends with 0).
  uint64_t bound_fires() const { return bound_fires_; }

  // Disarms the bound and closes the handles; `on_closed` runs from the last close callback. No
  // look runs afterwards.
  void Close(std::function<void()> on_closed);

 private:
  std::function<void()> look_;
  loop::TimeSource* time_;
  std::unique_ptr<loop::Timer> bound_;
  loop::AfterPoll look_soon_;
  uint64_t bound_fires_ = 0;
};

}  // namespace bulkhead::supervisor
