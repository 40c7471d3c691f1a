// SPDX-License-Identifier: MIT
// The CPU time a process has used, as the bench charges it to a target: user + system time of
// every thread of the process, the figure /proc/PID/stat gives as utime + stime (proc(5)), read
// from the process's CPU-time clock (clock_getcpuclockid(3)) in nanoseconds instead of clock
// ticks. Thread-safe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>

namespace bulkhead::bench {

// nullopt if the process is gone (or pid <= 0).
std::optional<uint64_t> ProcessCpuNs(pid_t pid);

}  // namespace bulkhead::bench
