// SPDX-License-Identifier: MIT
#include "supervisor/reexec_wait.h"

#include <utility>

namespace bulkhead::supervisor {

ReexecWait::ReexecWait(uv_loop_t* loop, loop::TimeSource* time, std::function<void()> look)
    : look_(std::move(look)),
      time_(time),
      bound_(time->CreateTimer([this] {
        ++bound_fires_;
        look_();
      })),
      look_soon_(loop, [this] { look_(); }) {}

void ReexecWait::SetBound(std::optional<uint64_t> deadline_ms) {
  if (!bound_) return;  // closed
  if (!deadline_ms) {
    bound_->Stop();
    return;
  }
  const uint64_t now = time_->NowMs();
  bound_->Start(*deadline_ms > now ? *deadline_ms - now : 0);
}

void ReexecWait::Close(std::function<void()> on_closed) {
  bound_.reset();
  look_soon_.Close(std::move(on_closed));
}

}  // namespace bulkhead::supervisor
