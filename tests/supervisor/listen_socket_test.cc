// SPDX-License-Identifier: MIT
// Claiming socket files (ipc/listen_socket.h): a live socket is refused whatever its type, a
// stale one is reclaimed, the mode is exact whatever the umask, and a SocketFile removes only the
// inode it bound.
#include "ipc/listen_socket.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include <cstring>
#include <string>
#include <utility>

#include "lifecycle/notify_socket.h"
#include "lifecycle/worker_privileges.h"
#include "tests/helpers/test_support.h"

namespace bulkhead::supervisor {
namespace {

using ::testing::HasSubstr;

sockaddr_un Address(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

// A socket of `type` bound to `path` (and listening, for SOCK_STREAM).
UniqueFd BoundSocket(const std::string& path, int type) {
  UniqueFd fd(::socket(AF_UNIX, type | SOCK_CLOEXEC, 0));
  EXPECT_TRUE(fd.valid());
  const sockaddr_un addr = Address(path);
  EXPECT_EQ(::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0) << path;
  if (type == SOCK_STREAM) {
    EXPECT_EQ(::listen(fd.get(), 8), 0);
  }
  return fd;
}

std::pair<dev_t, ino_t> Inode(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return {0, 0};
  return {st.st_dev, st.st_ino};
}

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

TEST(ListenSocket, LiveSocketIsRefusedAndLeftInPlace) {
  testing::TempDir dir;
  const std::string path = dir.Join("x.sock");
  UniqueFd live = BoundSocket(path, SOCK_STREAM);
  const auto before = Inode(path);
  Result<ipc::ListeningSocket> claimed = ipc::ClaimListeningSocket(path, 8);
  ASSERT_FALSE(claimed.ok());
  EXPECT_EQ(claimed.status().message(), "socket " + path +
                                            " is in use by another process (is another bulkheadd "
                                            "running?)");
  EXPECT_EQ(Inode(path), before);
}

TEST(ListenSocket, StaleSocketIsReclaimed) {
  testing::TempDir dir;
  const std::string path = dir.Join("x.sock");
  BoundSocket(path, SOCK_STREAM).Reset();  // closed: the file stays, no one listens
  Result<ipc::ListeningSocket> claimed = ipc::ClaimListeningSocket(path, 8);
  ASSERT_TRUE(claimed.ok()) << claimed.status().message();
  EXPECT_TRUE(claimed->file.recorded());
  // The path leads to the new listener now.
  UniqueFd client(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const sockaddr_un addr = Address(path);
  EXPECT_EQ(::connect(client.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
}

// A worker's helper that escaped PR_SET_PDEATHSIG may keep a killed run's worker socket (its fd 3)
// open: the socket still accepts, but the process that called listen(2) is gone, so it is stale.
TEST(ListenSocket, SocketHeldOnlyByProcessesOfADeadListenerIsReclaimed) {
  testing::TempDir dir;
  const std::string path = dir.Join("x.worker.sock");
  UniqueFd inherited(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(inherited.valid());
  const sockaddr_un addr = Address(path);
  ASSERT_EQ(::bind(inherited.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
  // The "dead supervisor": it calls listen(2) on the socket this process also holds, and exits.
  const pid_t listener = ::fork();
  ASSERT_GE(listener, 0);
  if (listener == 0) ::_exit(::listen(inherited.get(), 8) == 0 ? 0 : 1);
  testing::ChildGuard guard(listener);
  std::optional<int> status = guard.WaitExit();
  ASSERT_TRUE(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0);

  Result<ipc::ListeningSocket> claimed = ipc::ClaimListeningSocket(path, 8);
  ASSERT_TRUE(claimed.ok()) << claimed.status().message();
  EXPECT_TRUE(claimed->file.recorded());
}

TEST(ListenSocket, NotASocketIsRefused) {
  testing::TempDir dir;
  const std::string path = dir.Join("x.sock");
  ASSERT_TRUE(testing::WriteFileAtomically(path, "data").ok());
  Result<ipc::ListeningSocket> claimed = ipc::ClaimListeningSocket(path, 8);
  ASSERT_FALSE(claimed.ok());
  EXPECT_EQ(claimed.status().message(), path + " exists and is not a socket");
}

// The worker socket leads past admission: 0600 and the supervisor's own, even under umask 000.
TEST(ListenSocket, WorkerSocketModeIgnoresTheUmask) {
  testing::TempDir dir;
  const std::string path = dir.Join("x.worker.sock");
  const mode_t old_umask = ::umask(0);
  Result<ipc::ListeningSocket> claimed =
      ipc::ClaimListeningSocket(path, 8, ipc::Blocking::kBlocking, lifecycle::WorkerSocketAccess());
  ::umask(old_umask);
  ASSERT_TRUE(claimed.ok()) << claimed.status().message();
  EXPECT_EQ(ModeOf(path), 0600u);
  struct stat st {};
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, ::geteuid());
}

// The runtime_dir bulkheadd creates is 0755 whatever the umask: under umask 077 it was 0700, and a
// cell's worker running as another user could not send READY=1 to its notify socket in it.
TEST(MakeDirectories, CreatedDirectoriesGetTheModeWhateverTheUmask) {
  testing::TempDir dir;
  const std::string existing = dir.Join("existing");
  ASSERT_EQ(::mkdir(existing.c_str(), 0700), 0);
  const std::string path = existing + "/run/bulkhead";
  const mode_t old_umask = ::umask(077);
  Status made = ipc::MakeDirectories(path, 0755);
  ::umask(old_umask);
  ASSERT_TRUE(made.ok()) << made.message();
  for (const std::string& created : {existing + "/run", path}) {
    struct stat st {};
    ASSERT_EQ(::stat(created.c_str(), &st), 0) << created;
    EXPECT_EQ(st.st_mode & 07777, 0755u) << created;
  }
  // A directory that was there keeps its own mode.
  struct stat st {};
  ASSERT_EQ(::stat(existing.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
}

TEST(SocketFile, RemoveLeavesAReplacementAlone) {
  testing::TempDir dir;
  const std::string path = dir.Join("x.sock");
  Result<ipc::ListeningSocket> ours = ipc::ClaimListeningSocket(path, 8);
  ASSERT_TRUE(ours.ok()) << ours.status().message();
  ASSERT_EQ(::unlink(path.c_str()), 0);  // behind our back
  UniqueFd theirs = BoundSocket(path, SOCK_STREAM);
  const auto replacement = Inode(path);
  EXPECT_FALSE(ours->file.Remove());
  EXPECT_EQ(Inode(path), replacement);
}

TEST(SocketFile, RemoveUnlinksItsOwnFileOnce) {
  testing::TempDir dir;
  const std::string path = dir.Join("x.sock");
  Result<ipc::ListeningSocket> ours = ipc::ClaimListeningSocket(path, 8);
  ASSERT_TRUE(ours.ok()) << ours.status().message();
  ipc::SocketFile moved = std::move(ours->file);
  EXPECT_FALSE(ours->file.Remove());  // moved from: owns nothing
  EXPECT_TRUE(moved.Remove());
  EXPECT_EQ(Inode(path), (std::pair<dev_t, ino_t>{0, 0}));
  EXPECT_FALSE(moved.Remove());
}

class NotifySocketClaim : public ::testing::Test {
 protected:
  NotifySocketClaim() { uv_loop_init(&loop_); }
  ~NotifySocketClaim() override {
    uv_run(&loop_, UV_RUN_DEFAULT);
    EXPECT_EQ(uv_loop_close(&loop_), 0);
  }
  uv_loop_t loop_;
};

// A notify socket is claimed like the others: a live datagram socket is not taken over.
TEST_F(NotifySocketClaim, LiveNotifySocketIsRefused) {
  testing::TempDir dir;
  const std::string path = dir.Join("x.notify");
  UniqueFd live = BoundSocket(path, SOCK_DGRAM);
  const auto before = Inode(path);
  lifecycle::NotifySocket notify(&loop_, [](pid_t, const cell::NotifyMessage&) {});
  Status bound = notify.Bind(path);
  EXPECT_THAT(bound.message(), HasSubstr("socket " + path + " is in use by another process"));
  EXPECT_FALSE(notify.bound());
  notify.Close(nullptr);
  EXPECT_EQ(Inode(path), before);
}

TEST_F(NotifySocketClaim, StaleNotifySocketIsReclaimedAndRemovedOnClose) {
  testing::TempDir dir;
  const std::string path = dir.Join("x.notify");
  BoundSocket(path, SOCK_DGRAM).Reset();
  const mode_t old_umask = ::umask(0);
  lifecycle::NotifySocket notify(&loop_, [](pid_t, const cell::NotifyMessage&) {});
  ipc::SocketAccess access;
  access.mode = 0600;
  Status bound = notify.Bind(path, access);
  ::umask(old_umask);
  ASSERT_TRUE(bound.ok()) << bound.message();
  EXPECT_EQ(ModeOf(path), 0600u);
  notify.Close(nullptr);
  uv_run(&loop_, UV_RUN_DEFAULT);  // the close callback, before `notify` goes
  EXPECT_EQ(Inode(path), (std::pair<dev_t, ino_t>{0, 0}));
}

}  // namespace
}  // namespace bulkhead::supervisor
