// SPDX-License-Identifier: MIT
#include "loop/time_source.h"

#include <utility>

namespace bulkhead::loop {

namespace {

class LoopTimer final : public Timer {
 public:
  LoopTimer(uv_loop_t* loop, std::function<void()> on_fire) : handle_(new Handle) {
    uv_timer_init(loop, &handle_->timer);
    handle_->timer.data = handle_;
    handle_->on_fire = std::move(on_fire);
  }
  ~LoopTimer() override {
    // The handle is freed by its close callback; the callback cannot run after this.
    uv_close(reinterpret_cast<uv_handle_t*>(&handle_->timer),
             [](uv_handle_t* h) { delete static_cast<Handle*>(h->data); });
  }
  LoopTimer(const LoopTimer&) = delete;
  LoopTimer& operator=(const LoopTimer&) = delete;

  void Start(uint64_t delay_ms) override {
    uv_timer_start(
        &handle_->timer, [](uv_timer_t* t) { static_cast<Handle*>(t->data)->on_fire(); }, delay_ms,
        0);
  }
  void Stop() override { uv_timer_stop(&handle_->timer); }
  bool armed() const override {
    return uv_is_active(reinterpret_cast<const uv_handle_t*>(&handle_->timer)) != 0;
  }

 private:
  struct Handle {
    uv_timer_t timer{};
    std::function<void()> on_fire;
  };
  Handle* handle_;
};

}  // namespace

std::unique_ptr<Timer> LoopTimeSource::CreateTimer(std::function<void()> on_fire) {
  return std::make_unique<LoopTimer>(loop_, std::move(on_fire));
}

}  // namespace bulkhead::loop
