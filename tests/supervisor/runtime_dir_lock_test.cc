// SPDX-License-Identifier: MIT
// The runtime_dir lock (supervisor/runtime_dir_lock.h): one holder at a time, the refusal names
// the holder's pid, and a released or abandoned lock file can be taken again.
#include "supervisor/runtime_dir_lock.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "tests/helpers/test_support.h"

namespace bulkhead::supervisor {
namespace {

bool Exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

TEST(RuntimeDirLock, SecondHolderIsRefusedWithThePid) {
  testing::TempDir dir;
  Result<RuntimeDirLock> first = RuntimeDirLock::Acquire(dir.path());
  ASSERT_TRUE(first.ok()) << first.status().message();
  const std::string path = dir.Join("bulkheadd.pid");
  EXPECT_EQ(first->path(), path);
  EXPECT_EQ(testing::ReadFile(path), std::to_string(::getpid()) + "\n");

  // flock(2) locks belong to the open file description: a second open conflicts even here.
  Result<RuntimeDirLock> second = RuntimeDirLock::Acquire(dir.path());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().message(),
            "runtime_dir " + dir.path() + " is in use by bulkheadd pid " +
                std::to_string(::getpid()) + " (it holds the lock on " + path + ")");
  EXPECT_TRUE(first->held());

  first->Release();
  EXPECT_FALSE(Exists(path));
  Result<RuntimeDirLock> third = RuntimeDirLock::Acquire(dir.path());
  EXPECT_TRUE(third.ok()) << third.status().message();
}

// A SIGKILLed holder leaves its file, unlocked, with its old pid: the next instance takes it.
// Found by a new-user trial: under umask 077 the lock file was 0600 (and the runtime_dir 0700).
TEST(RuntimeDirLock, LockFileIs0644WhateverTheUmask) {
  testing::TempDir dir;
  const mode_t old_umask = ::umask(077);
  Result<RuntimeDirLock> lock = RuntimeDirLock::Acquire(dir.path());
  ::umask(old_umask);
  ASSERT_TRUE(lock.ok()) << lock.status().message();
  struct stat st {};
  ASSERT_EQ(::stat(lock->path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
}

TEST(RuntimeDirLock, AbandonedFileIsTakenOver) {
  testing::TempDir dir;
  const std::string path = dir.Join("bulkheadd.pid");
  ASSERT_TRUE(testing::WriteFileAtomically(path, "999999999\n").ok());
  Result<RuntimeDirLock> lock = RuntimeDirLock::Acquire(dir.path());
  ASSERT_TRUE(lock.ok()) << lock.status().message();
  EXPECT_EQ(testing::ReadFile(path), std::to_string(::getpid()) + "\n");
}

// Release removes the file only while it is the locked one.
TEST(RuntimeDirLock, ReleaseLeavesAReplacementAlone) {
  testing::TempDir dir;
  const std::string path = dir.Join("bulkheadd.pid");
  Result<RuntimeDirLock> lock = RuntimeDirLock::Acquire(dir.path());
  ASSERT_TRUE(lock.ok()) << lock.status().message();
  ASSERT_EQ(::unlink(path.c_str()), 0);
  ASSERT_TRUE(testing::WriteFileAtomically(path, "1\n").ok());
  lock->Release();
  EXPECT_EQ(testing::ReadFile(path), "1\n");
}

}  // namespace
}  // namespace bulkhead::supervisor
