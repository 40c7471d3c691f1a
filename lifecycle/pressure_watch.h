// SPDX-License-Identifier: MIT
// PressureWatch: the kernel signals of an adaptive cell (docs/adaptive-concurrency.md, "The runner
// (lifecycle side)"): its PSI triggers on cpu.pressure and memory.pressure (cell::PressureTrigger),
// watched on the loop for POLLPRI, and which signals are live (the triggers watched, and those fed
// by the supervisor's poll of cpu.stat and memory.*: supervisor/cgroup_poll.h, which owns the one
// timer that reads the cells' cgroups). Hands what it sees to its callbacks (the runner's
// DataPathControl); never holds the controller. REQUIRES: loop thread only.
#pragma once

#include <uv.h>

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "admission/adaptive_limit.h"
#include "base/status.h"
#include "cell/cgroup.h"
#include "cell/pressure_trigger.h"
#include "loop/handle_group.h"

namespace bulkhead::lifecycle {

class PressureWatch {
 public:
  struct Callbacks {
    // A trigger's POLLPRI: kCpuPressure or kMemoryPressure.
    std::function<void(admission::Signal)> on_fired;
    // The kernel signals live now changed: admission::SignalBit of each (kServiceTime never).
    std::function<void(uint8_t)> on_signals;
  };
  // Registers a trigger: cell::PressureTrigger::Register on the cgroup's directory, or a test's.
  using Registrar = std::function<Result<cell::PressureTrigger>(
      const cell::CellCgroup&, cell::PressureResource, const cell::PressureThreshold&)>;

  // What the watch should do now (Follow). A null cgroup: nothing (a fixed cell, or no cgroup).
  struct Want {
    const cell::CellCgroup* cgroup = nullptr;
    bool memory_trigger = false;  // the memory controller is enabled for the cell
    bool cpu_trigger = false;     // admission::RegistersCpuTrigger(cpu.max)
    // What the supervisor's polls feed: SignalBit(kCpuThrottling) with a cpu.max quota,
    // SignalBit(kMemoryUsage) with memory.max (each with its controller enabled).
    uint8_t polled_signals = 0;
  };

  // Log lines name `cell_name`, which outlives the watch. A null `registrar`: the kernel's
  // (PressureTrigger::Register).
  PressureWatch(uv_loop_t* loop, const std::string* cell_name, Callbacks callbacks,
                Registrar registrar = nullptr);
  ~PressureWatch();
  PressureWatch(const PressureWatch&) = delete;
  PressureWatch& operator=(const PressureWatch&) = delete;

  // Registers the triggers wanted and not yet tried, closes those no longer wanted (all of them
  // when the cgroup changes), and tells on_signals when what is live changed. Cheap when nothing
  // changed: call it after every event. A trigger that failed (no PSI: ENOENT; refused; its watch
  // failed, or POLLERR: the cgroup went) is not tried again until it is no longer wanted. A write
  // refused with EPERM (no CAP_SYS_RESOURCE on Linux >= 6.5, which then takes only windows of whole
  // 2 s) is tried again with a 2 s window and twice the stall.
  void Follow(const Want& want);
  // The signals live now (SignalBit of each).
  uint8_t live() const { return live_; }
  // Why `signal`'s trigger (kCpuPressure or kMemoryPressure) is off though wanted: its
  // registration or its watch failed ("no PSI: ..." when the kernel has none, ENOENT); "" when
  // it is watched or not wanted. For status (docs/control.md, "signals_off").
  const std::string& failure(admission::Signal signal) const;
  // Closes the triggers; `on_closed` runs from the last close callback.
  void Close(std::function<void()> on_closed);

 private:
  // One trigger's state.
  enum class TriggerState : uint8_t {
    kOff,      // not wanted (or not yet registered)
    kWatched,  // registered, its descriptor polled for POLLPRI
    kFailed,   // wanted, but registration or its watch failed; tried again once unwanted
  };
  struct Trigger {
    admission::Signal signal = admission::Signal::kMemoryPressure;
    cell::PressureResource resource = cell::PressureResource::kMemory;
    admission::PsiThreshold threshold{};
    TriggerState state = TriggerState::kOff;
    std::optional<cell::PressureTrigger> trigger;  // kWatched
    uv_poll_t* poll = nullptr;                     // kWatched
    std::string failure;                           // kFailed: why
    PressureWatch* watch = nullptr;
  };

  void Sync(Trigger* t, bool wanted);
  void Register(Trigger* t);
  // Closes its watch and its descriptor; `state` next.
  void Release(Trigger* t, TriggerState state);
  static void OnPoll(uv_poll_t* handle, int status, int events);
  void TellSignals();

  uv_loop_t* loop_;
  const std::string* cell_name_;
  Callbacks callbacks_;
  Registrar registrar_;
  const cell::CellCgroup* cgroup_ = nullptr;
  std::array<Trigger, 2> triggers_;
  uint8_t polled_signals_ = 0;
  uint8_t live_ = 0;
  bool eperm_logged_ = false;
  loop::HandleGroup handles_;
};

}  // namespace bulkhead::lifecycle
