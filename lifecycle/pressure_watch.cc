// SPDX-License-Identifier: MIT
#include "lifecycle/pressure_watch.h"

#include <cerrno>
#include <utility>

#include "base/check.h"
#include "base/log.h"

namespace bulkhead::lifecycle {

namespace {

// The window an unprivileged writer may use on Linux >= 6.5 (a whole multiple of 2 s), μs.
constexpr uint64_t kUnprivilegedWindowUs = 2'000'000;

Result<cell::PressureTrigger> RegisterOnCgroup(const cell::CellCgroup& cgroup,
                                               cell::PressureResource resource,
                                               const cell::PressureThreshold& threshold) {
  return cell::PressureTrigger::Register(cgroup.dir_fd(), cgroup.path(), resource, threshold);
}

}  // namespace

PressureWatch::PressureWatch(uv_loop_t* loop, const std::string* cell_name, Callbacks callbacks,
                             Registrar registrar)
    : loop_(loop),
      cell_name_(cell_name),
      callbacks_(std::move(callbacks)),
      registrar_(registrar ? std::move(registrar) : Registrar(RegisterOnCgroup)) {
  triggers_[0].threshold = admission::kMemoryTrigger;
  triggers_[1].signal = admission::Signal::kCpuPressure;
  triggers_[1].resource = cell::PressureResource::kCpu;
  triggers_[1].threshold = admission::kCpuTrigger;
  for (Trigger& t : triggers_) t.watch = this;
}

PressureWatch::~PressureWatch() = default;

void PressureWatch::Follow(const Want& want) {
  if (want.cgroup != cgroup_) {
    for (Trigger& t : triggers_) Release(&t, TriggerState::kOff);
    cgroup_ = want.cgroup;
  }
  const bool on = cgroup_ != nullptr;
  Sync(&triggers_[0], on && want.memory_trigger);
  Sync(&triggers_[1], on && want.cpu_trigger);
  polled_signals_ = on ? want.polled_signals : 0;
  TellSignals();
}

void PressureWatch::Sync(Trigger* t, bool wanted) {
  if (!wanted) {
    Release(t, TriggerState::kOff);
  } else if (t->state == TriggerState::kOff) {
    Register(t);
  }
}

void PressureWatch::Register(Trigger* t) {
  cell::PressureThreshold threshold{.kind = cell::PressureKind::kSome,
                                    .stall_us = t->threshold.stall_us,
                                    .window_us = t->threshold.window_us};
  Result<cell::PressureTrigger> made = registrar_(*cgroup_, t->resource, threshold);
  if (!made.ok() && made.status().error_number() == EPERM &&
      threshold.window_us < kUnprivilegedWindowUs) {
    // The same share of stall over the window an unprivileged writer may use.
    threshold.stall_us = threshold.stall_us * kUnprivilegedWindowUs / threshold.window_us;
    threshold.window_us = kUnprivilegedWindowUs;
    if (!std::exchange(eperm_logged_, true)) {
      Log(LogLevel::kInfo, *cell_name_, 0,
          std::string(cell::PressureFile(t->resource)) + " refused a 1 s window (" +
              made.status().message() +
              ": no CAP_SYS_RESOURCE): PSI triggers use 2 s windows and twice the stall");
    }
    made = registrar_(*cgroup_, t->resource, threshold);
  }
  const std::string what = std::string(admission::SignalName(t->signal));
  if (!made.ok()) {
    // ENOENT: no PSI (CONFIG_PSI off, or psi=0); status shows the signal off, and why.
    const bool no_psi = made.status().error_number() == ENOENT;
    Log(no_psi ? LogLevel::kInfo : LogLevel::kWarning, *cell_name_, 0,
        what + " signal off: " + made.status().message());
    t->state = TriggerState::kFailed;
    t->failure = (no_psi ? "no PSI: " : "trigger refused: ") + made.status().message();
    return;
  }
  Result<uv_poll_t*> poll = handles_.TryOpen(uv_poll_init, loop_, made->fd());
  int rc = poll.ok() ? uv_poll_start(*poll, UV_PRIORITIZED, &PressureWatch::OnPoll) : 0;
  if (!poll.ok() || rc != 0) {
    if (poll.ok()) handles_.Close(*poll);
    t->failure = "cannot watch " + made->path() + ": " +
                 (poll.ok() ? std::string(uv_strerror(rc)) : poll.status().message());
    Log(LogLevel::kWarning, *cell_name_, 0, what + " signal off: " + t->failure);
    t->state = TriggerState::kFailed;
    return;
  }
  (*poll)->data = t;
  t->trigger.emplace(std::move(made).value());
  t->poll = *poll;
  t->state = TriggerState::kWatched;
  t->failure.clear();
  Log(LogLevel::kDebug, *cell_name_, 0,
      "PSI trigger on " + t->trigger->path() + ": " +
          cell::FormatPressureThreshold(t->trigger->threshold()));
}

void PressureWatch::Release(Trigger* t, TriggerState state) {
  if (t->poll != nullptr) {
    // uv_close stops the poll at once (epoll_ctl DEL): the descriptor may close after it.
    handles_.Close(t->poll);
    t->poll = nullptr;
  }
  t->trigger.reset();  // closing the descriptor removes the trigger
  t->state = state;
  if (state != TriggerState::kFailed) t->failure.clear();
}

const std::string& PressureWatch::failure(admission::Signal signal) const {
  BH_CHECK(signal == admission::Signal::kCpuPressure ||
           signal == admission::Signal::kMemoryPressure);
  return triggers_[signal == admission::Signal::kCpuPressure ? 1 : 0].failure;
}

void PressureWatch::OnPoll(uv_poll_t* handle, int status, int events) {
  auto* t = static_cast<Trigger*>(handle->data);
  PressureWatch* self = t->watch;
  // libuv hands POLLERR with POLLPRI over as UV_PRIORITIZED (sysfs and kernfs report both), and
  // a removed cgroup's trigger polls so for good: a poll(2) of its own tells it from the kernel's
  // event, which the loop's epoll already consumed (that poll then sees nothing).
  Result<cell::PressureTrigger::Event> now =
      status < 0 ? Result<cell::PressureTrigger::Event>(cell::PressureTrigger::Event::kGone)
                 : t->trigger->Check();
  if (!now.ok() || *now == cell::PressureTrigger::Event::kGone) {
    // POLLERR: the cgroup was removed (or the descriptor broke).
    std::string why = t->trigger->path() + ": " +
                      (status < 0 ? std::string(uv_strerror(status))
                       : now.ok() ? std::string("POLLERR (its cgroup was removed)")
                                  : now.status().message());
    Log(LogLevel::kWarning, *self->cell_name_, 0,
        std::string(admission::SignalName(t->signal)) + " signal off: " + why);
    self->Release(t, TriggerState::kFailed);
    t->failure = std::move(why);
    self->TellSignals();
    return;
  }
  if ((events & UV_PRIORITIZED) != 0 && self->callbacks_.on_fired) {
    self->callbacks_.on_fired(t->signal);
  }
}

void PressureWatch::TellSignals() {
  uint8_t live = polled_signals_;
  for (const Trigger& t : triggers_) {
    if (t.state == TriggerState::kWatched) live |= admission::SignalBit(t.signal);
  }
  if (live == live_) return;
  live_ = live;
  if (callbacks_.on_signals) callbacks_.on_signals(live_);
}

void PressureWatch::Close(std::function<void()> on_closed) {
  for (Trigger& t : triggers_) Release(&t, TriggerState::kOff);
  cgroup_ = nullptr;
  handles_.Close(std::move(on_closed));
}

}  // namespace bulkhead::lifecycle
