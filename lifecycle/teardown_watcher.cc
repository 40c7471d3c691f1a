// SPDX-License-Identifier: MIT
#include "lifecycle/teardown_watcher.h"

#include <algorithm>
#include <utility>

#include "base/check.h"
#include "base/log.h"

namespace bulkhead::lifecycle {

TeardownWatcher::TeardownWatcher(loop::TimeSource* time, const std::string* cell_name)
    : time_(time), cell_name_(cell_name), timer_(time->CreateTimer([this] { OnTimer(); })) {}

void TeardownWatcher::Start(Generation* generation, uint64_t kill_from_ms,
                            std::function<void()> then) {
  BH_CHECK(generation != nullptr);
  generation_ = generation;
  then_ = std::move(then);
  kill_from_ms_ = kill_from_ms;
  started_ms_ = time_->NowMs();
  warned_ = false;
  if (started_ms_ >= kill_from_ms_) generation_->KillAll();
  timer_->Start(0);
}

void TeardownWatcher::Cancel() {
  timer_->Stop();
  generation_ = nullptr;
  then_ = nullptr;
}

void TeardownWatcher::OnTimer() {
  if (generation_ == nullptr) return;
  Result<bool> empty = generation_->IsEmpty();
  if (empty.ok() && *empty) {
    generation_ = nullptr;
    // Last: `then` may start the next generation, and with it another watch.
    std::exchange(then_, nullptr)();
    return;
  }
  // Not empty yet: kill again (a process may have forked meanwhile) and look again. The next
  // generation never starts beside a survivor of this one.
  timer_->Start(kPollMs);
  const uint64_t now = time_->NowMs();
  if (now >= kill_from_ms_) generation_->KillAll();
  if (!warned_ && now > std::max(started_ms_, kill_from_ms_) + kWarnAfterMs) {
    warned_ = true;
    Log(LogLevel::kError, *cell_name_, 0,
        generation_->Describe() + " still has processes " + std::to_string(kWarnAfterMs / 1000) +
            " s after cgroup.kill" + (empty.ok() ? "" : ": " + empty.status().message()));
  }
}

}  // namespace bulkhead::lifecycle
