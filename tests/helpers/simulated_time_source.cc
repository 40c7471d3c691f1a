// SPDX-License-Identifier: MIT
#include "tests/helpers/simulated_time_source.h"

#include "base/check.h"

namespace bulkhead::testing {

class SimulatedTimeSource::SimTimer final : public loop::Timer {
 public:
  SimTimer(SimulatedTimeSource* source, std::function<void()> on_fire)
      : source_(source), on_fire_(std::move(on_fire)) {
    ++source_->live_timers_;
  }
  ~SimTimer() override {
    source_->Disarm(this);
    --source_->live_timers_;
  }
  void Start(uint64_t delay_ms) override { source_->Arm(this, delay_ms); }
  void Stop() override { source_->Disarm(this); }
  bool armed() const override { return armed_; }

 private:
  friend class SimulatedTimeSource;
  SimulatedTimeSource* source_;
  std::function<void()> on_fire_;
  bool armed_ = false;
  Key key_{};
};

SimulatedTimeSource::~SimulatedTimeSource() {
  // Every timer must go before its source: a timer that outlives it would disarm into freed
  // memory.
  BH_CHECK(live_timers_ == 0);
}

std::unique_ptr<loop::Timer> SimulatedTimeSource::CreateTimer(std::function<void()> on_fire) {
  return std::make_unique<SimTimer>(this, std::move(on_fire));
}

void SimulatedTimeSource::Arm(SimTimer* timer, uint64_t delay_ms) {
  Disarm(timer);
  timer->key_ = Key{now_ms_ + delay_ms, ++sequence_};
  timer->armed_ = true;
  armed_.emplace(timer->key_, timer);
}

void SimulatedTimeSource::Disarm(SimTimer* timer) {
  if (!timer->armed_) return;
  armed_.erase(timer->key_);
  timer->armed_ = false;
}

std::optional<uint64_t> SimulatedTimeSource::NextDeadline() const {
  if (armed_.empty()) return std::nullopt;
  return armed_.begin()->first.first;
}

void SimulatedTimeSource::Advance(uint64_t ms) {
  const uint64_t until = now_ms_ + ms;
  while (!armed_.empty() && armed_.begin()->first.first <= until) {
    SimTimer* timer = armed_.begin()->second;
    if (timer->key_.first > now_ms_) now_ms_ = timer->key_.first;
    Disarm(timer);
    // The callback may destroy its own timer (hence the copy), or others, or arm any of them again.
    std::function<void()> on_fire = timer->on_fire_;
    on_fire();
  }
  now_ms_ = until;
}

}  // namespace bulkhead::testing
