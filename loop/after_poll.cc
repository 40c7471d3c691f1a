// SPDX-License-Identifier: MIT
#include "loop/after_poll.h"

#include <utility>

namespace bulkhead::loop {

AfterPoll::AfterPoll(uv_loop_t* loop, std::function<void()> callback)
    : callback_(std::move(callback)),
      check_(handles_.Open(uv_check_init, loop)),
      idle_(handles_.Open(uv_idle_init, loop)) {
  check_->data = this;
}

void AfterPoll::Request() {
  if (handles_.closing()) return;
  // Check handles run right after the poll of each iteration. An active idle handle makes that
  // poll return at once (uv_backend_timeout() is 0): the callback waits for no timer and no I/O.
  uv_check_start(check_, &AfterPoll::OnCheck);
  uv_idle_start(idle_, [](uv_idle_t*) {});
}

bool AfterPoll::requested() const {
  return !handles_.closing() && uv_is_active(reinterpret_cast<const uv_handle_t*>(check_)) != 0;
}

void AfterPoll::OnCheck(uv_check_t* handle) {
  auto* self = static_cast<AfterPoll*>(handle->data);
  uv_check_stop(self->check_);
  uv_idle_stop(self->idle_);
  self->callback_();
}

void AfterPoll::Close(std::function<void()> on_closed) { handles_.Close(std::move(on_closed)); }

}  // namespace bulkhead::loop
