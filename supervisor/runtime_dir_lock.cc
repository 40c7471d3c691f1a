// SPDX-License-Identifier: MIT
#include "supervisor/runtime_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <string_view>

#include "supervisor/reexec.h"

namespace bulkhead::supervisor {

namespace {

// True when `path` names the same inode as the open `fd`.
bool SameFile(int fd, const std::string& path) {
  struct stat by_fd;
  struct stat by_path;
  return ::fstat(fd, &by_fd) == 0 && ::lstat(path.c_str(), &by_path) == 0 &&
         by_fd.st_dev == by_path.st_dev && by_fd.st_ino == by_path.st_ino;
}

// The pid a running instance wrote to its lock file, "" when none can be read (it may be
// between its flock and its write).
std::string HolderPid(int fd) {
  char text[32];
  ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
  if (n <= 0) return {};
  std::string_view pid(text, static_cast<size_t>(n));
  while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.remove_suffix(1);
  if (pid.empty() || pid.find_first_not_of("0123456789") != std::string_view::npos) return {};
  return std::string(pid);
}

}  // namespace

RuntimeDirLock::~RuntimeDirLock() { Release(); }

Result<RuntimeDirLock> RuntimeDirLock::Acquire(const std::string& runtime_dir) {
  RuntimeDirLock lock;
  lock.path_ = runtime_dir + "/" + kRuntimeDirLockName;
  // The file may be removed by the holder's Release between our open and our flock: then we hold
  // a lock on an unlinked inode that no one else will see, so try again on the new file.
  for (int attempt = 0; attempt < 8; ++attempt) {
    UniqueFd fd(
        ::open(lock.path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0644));
    if (!fd) return Status::FromErrno("open " + lock.path_);
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK) return Status::FromErrno("flock " + lock.path_);
      std::string pid = HolderPid(fd.get());
      return Status::Error("runtime_dir " + runtime_dir + " is in use by " +
                           (pid.empty() ? "another bulkheadd" : "bulkheadd pid " + pid) +
                           " (it holds the lock on " + lock.path_ + ")");
    }
    if (!SameFile(fd.get(), lock.path_)) continue;
    // 0644 whatever the umask: anyone may read which pid holds the directory.
    if (::fchmod(fd.get(), 0644) != 0) return Status::FromErrno("chmod " + lock.path_);
    const std::string pid = std::to_string(::getpid()) + "\n";
    if (::ftruncate(fd.get(), 0) != 0) return Status::FromErrno("truncate " + lock.path_);
    if (::pwrite(fd.get(), pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
      return Status::FromErrno("write " + lock.path_);
    }
    lock.fd_ = std::move(fd);
    return lock;
  }
  return Status::Error("cannot lock " + lock.path_ + ": it keeps being replaced");
}

Result<RuntimeDirLock> RuntimeDirLock::Adopt(UniqueFd fd, const std::string& runtime_dir) {
  RuntimeDirLock lock;
  lock.path_ = runtime_dir + "/" + kRuntimeDirLockName;
  if (!SameFile(fd.get(), lock.path_)) {
    return Status::Error("fd " + std::to_string(fd.get()) + " is not " + lock.path_);
  }
  // The flock belongs to the open file description: locking again through it succeeds at once
  // when it holds the lock, and fails (EWOULDBLOCK) when another description does.
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) return Status::FromErrno("flock " + lock.path_);
  Status cloexec = SetCloexec(fd.get());
  if (!cloexec.ok()) return Status::Error(lock.path_ + ": " + cloexec.message());
  lock.fd_ = std::move(fd);
  return lock;
}

void RuntimeDirLock::Release() {
  if (!fd_.valid()) return;
  // Unlinked while still locked, so that no other instance can lock this inode in between.
  if (SameFile(fd_.get(), path_)) ::unlink(path_.c_str());
  fd_.Reset();
}

}  // namespace bulkhead::supervisor
