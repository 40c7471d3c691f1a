// SPDX-License-Identifier: MIT
// Helpers shared by the programs that run inside the test VM (cgroup_probe,
// supervisor_compartments): output lines, small file reads of cgroup and /proc files, and reaping
// by pid. Reaping records every wait status in one table, so REQUIRES: ReapAvailable/WaitForExit
// called from one thread only.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>

namespace bulkhead::vm {

// printf to stdout as one line with one write(2): no stdio buffer that a forked child could
// inherit and flush twice, and lines of several threads never interleave. Truncated at 2 KiB.
void Print(const char* format, ...) __attribute__((format(printf, 1, 2)));
// printf into a string (truncated at 2 KiB).
std::string Str(const char* format, ...) __attribute__((format(printf, 1, 2)));

// The whole file without trailing newlines, or "<path: strerror>" when it cannot be read.
std::string ReadText(const std::string& path);
// The value of `key` in a flat-keyed file ("key value" lines: memory.events, cpu.stat), or -1.
long long FlatKey(const std::string& path, const std::string& key);

// Reaps every child that has exited (waitpid(-1, WNOHANG)) into the table WaitForExit reads.
void ReapAvailable();
// Reaps until `pid` has been reaped: its wait status, or nullopt once `deadline` passed.
std::optional<int> WaitForExit(pid_t pid, std::chrono::milliseconds deadline);
// The wait status of `pid` if ReapAvailable or WaitForExit has reaped it, else nullopt.
std::optional<int> ReapedStatus(pid_t pid);
// "still running", "killed by signal 9", "exited 3".
std::string DescribeStatus(std::optional<int> status);
bool KilledBySigkill(std::optional<int> status);
// kill(pid, 0) says ESRCH: no such process (reaped, or never a child of ours and gone).
bool Gone(pid_t pid);
// Calls `condition` every `interval` until it holds (true) or `deadline` passes (false).
bool PollUntil(const std::function<bool()>& condition, std::chrono::milliseconds deadline,
               std::chrono::milliseconds interval);
// The ppid field of /proc/<pid>/stat (read after the last ')': comm may hold anything), or 0.
int ParentOf(pid_t pid);

}  // namespace bulkhead::vm
