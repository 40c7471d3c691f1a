// SPDX-License-Identifier: MIT
// The runtime directory's lock: <runtime_dir>/bulkheadd.pid, held with flock(2) LOCK_EX for the
// whole life of a bulkheadd and holding its pid in decimal (a pid file, as daemons keep in /run).
// A second instance on the same runtime_dir is refused at once, its error naming the running
// instance's pid, before it touches any socket. The lock goes with the process: a SIGKILLed
// bulkheadd leaves the file, unlocked, and the next instance takes it over. Blocking calls that
// return at once (LOCK_NB); startup and shutdown on the loop thread.
#pragma once

#include <string>

#include "base/status.h"
#include "base/unique_fd.h"

namespace bulkhead::supervisor {

inline constexpr char kRuntimeDirLockName[] = "bulkheadd.pid";

class RuntimeDirLock {
 public:
  RuntimeDirLock() = default;
  RuntimeDirLock(RuntimeDirLock&&) noexcept = default;
  RuntimeDirLock& operator=(RuntimeDirLock&&) noexcept = default;
  // Release().
  ~RuntimeDirLock();

  // Opens or creates `runtime_dir`/bulkheadd.pid (mode 0644, never through a symlink), locks it
  // without waiting and writes getpid() to it. Errors: "runtime_dir /run/bulkhead is in use by
  // bulkheadd pid 4242 (it holds the lock on /run/bulkhead/bulkheadd.pid)", or the failed call
  // with the path. REQUIRES: `runtime_dir` exists.
  static Result<RuntimeDirLock> Acquire(const std::string& runtime_dir);

  // A re-exec (docs/reexec.md): the lock's fd (the flock belongs to its open file description,
  // which the exec keeps), and, in the new image, the lock taken back from it: `fd` must hold
  // LOCK_EX on `runtime_dir`/bulkheadd.pid (checked: a second LOCK_EX|LOCK_NB through the same
  // description succeeds only then). Errors: fstat's, flock's, or "fd 5 is not
  // /run/bulkhead/bulkheadd.pid".
  int fd() const { return fd_.get(); }
  static Result<RuntimeDirLock> Adopt(UniqueFd fd, const std::string& runtime_dir);

  // Removes the file if it is still the one this lock holds, then unlocks. Idempotent.
  void Release();

  bool held() const { return fd_.valid(); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  UniqueFd fd_;
};

}  // namespace bulkhead::supervisor
