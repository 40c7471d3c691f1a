// SPDX-License-Identifier: MIT
// PressureTrigger: one PSI trigger (Documentation/accounting/psi.rst, "Monitoring for pressure
// thresholds") on a cgroup's cpu.pressure, memory.pressure or io.pressure, or on a file of
// /proc/pressure/: the open descriptor the kernel wakes with POLLPRI when the stall threshold is
// crossed within a window (at most once per window), and with POLLERR once the cgroup is removed.
// Owns the descriptor; closing it removes the trigger. The formats: cell/cgroup_files.h.
// Threading: one owner; Check() never blocks, so it is fine on the loop thread, Wait() is for
// tools and tests.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "base/status.h"
#include "base/unique_fd.h"
#include "cell/cgroup_files.h"

namespace bulkhead::cell {

class PressureTrigger {
 public:
  enum class Event : uint8_t {
    kNone,   // nothing pending
    kFired,  // the threshold was crossed; the kernel's event is consumed by the poll that saw it
    kGone,   // POLLERR: the cgroup was removed (kernfs reports POLLERR with POLLPRI); close it
  };

  // Opens `resource`'s pressure file in the cgroup directory `dir_fd` (`dir_path` names it in
  // errors; CellCgroup::dir_fd() and path()) with O_RDWR | O_NONBLOCK | O_CLOEXEC and writes the
  // threshold ("some 100000 1000000") with its terminating NUL in one write, as psi.rst's example
  // does: /proc/pressure's writer overwrites the last byte written with NUL, so without it the
  // window would lose its last digit. Errors keep the errno: ENOENT (no PSI: a kernel without
  // CONFIG_PSI or booted with psi=0), EINVAL (the kernel refused the threshold), EPERM (an
  // unprivileged writer; see ValidatePressureThreshold), EOPNOTSUPP (psi disabled for the cgroup
  // in cgroup.pressure, Linux >= 6.5). A threshold out of the kernel's bounds fails before any
  // I/O.
  static Result<PressureTrigger> Register(int dir_fd, std::string_view dir_path,
                                          PressureResource resource,
                                          const PressureThreshold& threshold);
  // The same on an absolute path: /proc/pressure/memory watches the whole system.
  static Result<PressureTrigger> RegisterPath(const std::string& path,
                                              const PressureThreshold& threshold);

  // For tests of what watches a trigger: `fd`, already open, taken as the trigger's descriptor (a
  // socket whose urgent data polls POLLPRI stands in for the kernel's event). Nothing is written.
  static PressureTrigger Adopt(UniqueFd fd, std::string path, const PressureThreshold& threshold) {
    return PressureTrigger(std::move(fd), std::move(path), threshold);
  }

  PressureTrigger(PressureTrigger&&) = default;
  PressureTrigger& operator=(PressureTrigger&&) = default;

  // For the loop: libuv's uv_poll_start(..., UV_PRIORITIZED, ...) polls it for POLLPRI (an error
  // status in the callback is the POLLERR of a removed cgroup); then call Check().
  int fd() const { return fd_.get(); }
  const std::string& path() const { return path_; }
  const PressureThreshold& threshold() const { return threshold_; }

  // poll(2) without waiting: kGone on POLLERR, kFired on POLLPRI, else kNone. Errors of poll(2).
  Result<Event> Check() const { return Wait(0); }
  // Waits up to `timeout_ms` (-1: forever) for an event; EINTR is retried with the time left.
  Result<Event> Wait(int timeout_ms) const;

 private:
  PressureTrigger(UniqueFd fd, std::string path, const PressureThreshold& threshold)
      : fd_(std::move(fd)), path_(std::move(path)), threshold_(threshold) {}

  static Result<PressureTrigger> Open(int dir_fd, const std::string& name, std::string path,
                                      const PressureThreshold& threshold);

  UniqueFd fd_;
  std::string path_;
  PressureThreshold threshold_;
};

// "none", "fired", "gone".
std::string_view PressureEventName(PressureTrigger::Event event);

}  // namespace bulkhead::cell
