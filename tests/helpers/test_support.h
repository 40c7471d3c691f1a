// SPDX-License-Identifier: MIT
// Helpers for tests that start real processes: paths of built binaries, temporary directories,
// listening Unix sockets, polling with a deadline (never a bare sleep), and ChildGuard, which
// kills and reaps a test's child by pid. Thread-compatible; used from the test's main thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/temp_dir.h"
#include "base/unique_fd.h"

#ifndef BULKHEAD_BUILD_DIR
#error "BULKHEAD_BUILD_DIR is defined by bulkhead_add_test() in tests/CMakeLists.txt"
#endif

namespace bulkhead::testing {

// Absolute path of a file in the build tree, e.g. BuildPath("examples/bulkhead-echo").
inline std::string BuildPath(std::string_view relative) {
  std::string path = BULKHEAD_BUILD_DIR;
  path += '/';
  path += relative;
  return path;
}
// The helper worker built from tests/helpers/test_worker.cc.
inline std::string TestWorkerPath() { return BuildPath("tests/helpers/bulkhead-test-worker"); }
// An example worker built from examples/, e.g. ExamplePath("bulkhead-gateway").
inline std::string ExamplePath(std::string_view name) {
  return BuildPath("examples/" + std::string(name));
}

// Default deadline of the polling helpers: generous, since CI machines stall.
inline constexpr std::chrono::milliseconds kDefaultTimeout{10000};

// A fresh directory /tmp/bulkhead-test-XXXXXX (short, so socket paths stay under 108 bytes),
// removed with its contents by the destructor. Aborts the test binary if it cannot be created.
class TempDir : public bulkhead::TempDir {
 public:
  // Creates /tmp/bulkhead-test-XXXXXX; aborts the test binary if it cannot.
  TempDir();
};

// A SOCK_STREAM | SOCK_CLOEXEC Unix socket bound to `path` and listening (backlog 128).
Result<UniqueFd> ListenUnix(const std::string& path);
// A SOCK_STREAM | SOCK_CLOEXEC TCP socket listening on 127.0.0.1 at a port the kernel picked, and
// its address "127.0.0.1:PORT": holds a port, so that a bind to it fails.
struct TcpListener {
  UniqueFd fd;
  std::string address;
};
Result<TcpListener> ListenTcpLoopback();
// A SOCK_STREAM | SOCK_CLOEXEC TCP socket connected (blocking) to `address`, a numeric
// "127.0.0.1:8081" or "[::1]:8081" as status reports a cell's listen addresses.
Result<UniqueFd> ConnectTcp(std::string_view address);

// Calls `done` every 2 ms until it returns true (-> true) or `timeout` passes (-> false).
bool WaitFor(const std::function<bool()>& done,
             std::chrono::milliseconds timeout = kDefaultTimeout);

// The whole content of a file; nullopt if it cannot be read.
std::optional<std::string> ReadFile(const std::string& path);
// Writes `content` to path + ".tmp" then rename()s it over `path`, so readers see all or nothing.
Status WriteFileAtomically(const std::string& path, std::string_view content);
// Creates `path` as an empty file (one already there is kept): the flag a test raises for a worker
// waiting on it (the test worker's `wait-file` command, --notify-ready-when-file). Aborts the test
// binary if it cannot.
void CreateFlag(const std::string& path);

// Owns a process started by a test. The destructor, unless the process was already reaped,
// sends SIGKILL to its process group (-pid: children spawned by cell::Spawn lead their own
// group) and to the pid itself, then reaps it with waitpid(pid). Never signals by name.
class ChildGuard {
 public:
  explicit ChildGuard(pid_t pid = -1) : pid_(pid) {}
  ~ChildGuard() { Kill(); }
  ChildGuard(const ChildGuard&) = delete;
  ChildGuard& operator=(const ChildGuard&) = delete;

  pid_t pid() const { return pid_; }
  void Reset(pid_t pid) {
    Kill();
    pid_ = pid;
  }

  // Polls waitpid(pid, WNOHANG) until the process exits or `timeout` passes. Returns its wait
  // status (and forgets the pid), or nullopt on timeout.
  std::optional<int> WaitExit(std::chrono::milliseconds timeout = kDefaultTimeout);

  // SIGKILL to the group and the pid, then waitpid; returns the wait status, or nullopt if there
  // was no process.
  std::optional<int> Kill();

 private:
  pid_t pid_;
};

// Frees descriptor number `fd` for a scope, for tests that need a specific number (fd 3 of
// sd_listen_fds(3)) in a process where a harness (ctest) may have left it open. An occupant is
// parked on a close-on-exec copy and put back, with its flags, by the destructor; whatever the
// test left on `fd` is closed then.
class ScopedFdSlot {
 public:
  explicit ScopedFdSlot(int fd);
  ~ScopedFdSlot();
  ScopedFdSlot(const ScopedFdSlot&) = delete;
  ScopedFdSlot& operator=(const ScopedFdSlot&) = delete;

 private:
  int fd_;
  int parked_ = -1;
  int parked_flags_ = 0;
};

// Makes this process the child subreaper (prctl PR_SET_CHILD_SUBREAPER), so that orphaned
// descendants (a worker's double-forked grandchild) are reparented to it and can be reaped by pid
// with ChildGuard instead of lingering as zombies. Returns false if the kernel refuses.
bool BecomeSubreaper();

// True while `pid` names a process that has not yet been reaped (kill(pid, 0) succeeds).
bool ProcessExists(pid_t pid);

// Fields 3 and 4 of /proc/<pid>/stat (proc(5)).
struct ProcStat {
  char state = '?';  // 'R', 'S', 'D', 'Z' (zombie: exited, not yet reaped), ...
  pid_t ppid = -1;
};
// nullopt once the process is gone (reaped) or /proc/<pid>/stat cannot be parsed.
std::optional<ProcStat> ReadProcStat(pid_t pid);

// Every process whose parent is `parent` and whose state is 'Z', from a scan of /proc.
std::vector<pid_t> ZombieChildrenOf(pid_t parent);

}  // namespace bulkhead::testing
