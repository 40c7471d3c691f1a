// SPDX-License-Identifier: MIT
// PressureTrigger; see pressure_trigger.h. Source: Documentation/accounting/psi.rst.
#include "cell/pressure_trigger.h"

#include <fcntl.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

namespace bulkhead::cell {
namespace {

int64_t MonotonicMs() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000 + now.tv_nsec / 1000000;
}

}  // namespace

Result<PressureTrigger> PressureTrigger::Register(int dir_fd, std::string_view dir_path,
                                                  PressureResource resource,
                                                  const PressureThreshold& threshold) {
  const std::string name(PressureFile(resource));
  std::string path(dir_path);
  if (path.empty() || path.back() != '/') path += '/';
  path += name;
  return Open(dir_fd, name, std::move(path), threshold);
}

Result<PressureTrigger> PressureTrigger::RegisterPath(const std::string& path,
                                                      const PressureThreshold& threshold) {
  return Open(AT_FDCWD, path, path, threshold);
}

Result<PressureTrigger> PressureTrigger::Open(int dir_fd, const std::string& name, std::string path,
                                              const PressureThreshold& threshold) {
  if (Status valid = ValidatePressureThreshold(threshold); !valid.ok()) {
    return Status::Error(path + ": " + valid.message());
  }
  UniqueFd fd(openat(dir_fd, name.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC));
  if (!fd) return Status::FromErrno("open " + path);
  const std::string text = FormatPressureThreshold(threshold);
  while (true) {
    // One write, the NUL included (see Register).
    const ssize_t n = write(fd.get(), text.c_str(), text.size() + 1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno("write \"" + text + "\" to " + path);
    if (static_cast<size_t>(n) != text.size() + 1) {
      return Status::FromErrno("write \"" + text + "\" to " + path + " (short write)", EIO);
    }
    break;
  }
  return PressureTrigger(std::move(fd), std::move(path), threshold);
}

Result<PressureTrigger::Event> PressureTrigger::Wait(int timeout_ms) const {
  const int64_t deadline = MonotonicMs() + timeout_ms;
  while (true) {
    pollfd entry{fd_.get(), POLLPRI, 0};
    const int n = poll(&entry, 1, timeout_ms);
    if (n < 0 && errno == EINTR) {
      if (timeout_ms > 0)
        timeout_ms = static_cast<int>(std::max<int64_t>(0, deadline - MonotonicMs()));
      continue;
    }
    if (n < 0) return Status::FromErrno("poll " + path_);
    if (n == 0) return Event::kNone;
    // A removed cgroup reports POLLERR with POLLPRI: gone wins (psi.rst's example checks it first).
    if ((entry.revents & (POLLERR | POLLNVAL)) != 0) return Event::kGone;
    if ((entry.revents & POLLPRI) != 0) return Event::kFired;
    return Event::kNone;
  }
}

std::string_view PressureEventName(PressureTrigger::Event event) {
  switch (event) {
    case PressureTrigger::Event::kNone:
      return "none";
    case PressureTrigger::Event::kFired:
      return "fired";
    case PressureTrigger::Event::kGone:
      return "gone";
  }
  return "?";
}

}  // namespace bulkhead::cell
