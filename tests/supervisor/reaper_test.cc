// SPDX-License-Identifier: MIT
// ReapExitedChildren: drains every exited child per call (SIGCHLDs coalesce), retries EINTR, stops
// at 0 or ECHILD; with a scripted wait and with 30 real children exiting at the same moment.
#include "supervisor/reaper.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "base/unique_fd.h"
#include "tests/helpers/test_support.h"

namespace bulkhead::supervisor {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

// One scripted answer of the fake wait: a pid (> 0) with its status, 0, or -1 with an errno.
struct Answer {
  pid_t pid;
  int status_or_errno;
};

class ScriptedWait {
 public:
  explicit ScriptedWait(std::vector<Answer> script) : script_(std::move(script)) {}
  pid_t operator()(int* status) {
    if (next_ >= script_.size()) {
      ADD_FAILURE() << "wait called after the script ended";
      errno = ECHILD;
      return -1;
    }
    const Answer& a = script_[next_++];
    if (a.pid > 0) *status = a.status_or_errno;
    if (a.pid < 0) errno = a.status_or_errno;
    return a.pid;
  }
  size_t calls() const { return next_; }

 private:
  std::vector<Answer> script_;
  size_t next_ = 0;
};

TEST(ReapExitedChildren, DrainsUntilNoneHasExitedAndRetriesEintr) {
  ScriptedWait wait({{11, 0x100}, {12, 9}, {-1, EINTR}, {13, 0}, {0, 0}});
  std::vector<std::pair<pid_t, int>> reaped;
  int n =
      ReapExitedChildren(std::ref(wait), [&](pid_t pid, int s) { reaped.emplace_back(pid, s); });
  EXPECT_EQ(n, 3);
  EXPECT_THAT(reaped, ElementsAre(Pair(11, 0x100), Pair(12, 9), Pair(13, 0)));
  EXPECT_EQ(wait.calls(), 5u);
}

TEST(ReapExitedChildren, EchildEndsTheLoopWithoutAnError) {
  ScriptedWait wait({{7, 0}, {-1, ECHILD}});
  int n = ReapExitedChildren(std::ref(wait), [](pid_t, int) {});
  EXPECT_EQ(n, 1);
  EXPECT_EQ(wait.calls(), 2u);
}

TEST(ReapExitedChildren, OtherErrorsAreReturnedNegated) {
  ScriptedWait wait({{-1, EINVAL}});
  EXPECT_EQ(ReapExitedChildren(std::ref(wait), [](pid_t, int) {}), -EINVAL);
}

TEST(ReapExitedChildren, ThirtyChildrenExitingAtOnceAreAllReapedInOneCall) {
  constexpr int kChildren = 30;
  // Each child blocks on the pipe until the parent closes the write end: they all exit together.
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  UniqueFd read_end(fds[0]), write_end(fds[1]);
  std::set<pid_t> children;
  for (int i = 0; i < kChildren; ++i) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(fds[1]);
      char byte;
      while (::read(fds[0], &byte, 1) < 0 && errno == EINTR) {
      }
      ::_exit(i % 5);
    }
    children.insert(pid);
  }
  write_end.Reset();
  // Until every child is a zombie, so that one call finds all 30 at once, as after a single
  // coalesced SIGCHLD.
  ASSERT_TRUE(testing::WaitFor([&] {
    for (pid_t pid : children) {
      std::optional<testing::ProcStat> stat = testing::ReadProcStat(pid);
      if (!stat || stat->state != 'Z') return false;
    }
    return true;
  }));
  std::set<pid_t> reaped;
  int n = ReapExitedChildren(WaitAnyChild, [&](pid_t pid, int s) {
    EXPECT_TRUE(WIFEXITED(s));
    reaped.insert(pid);
  });
  EXPECT_EQ(n, kChildren);
  EXPECT_EQ(reaped, children);
  EXPECT_TRUE(::waitpid(-1, nullptr, WNOHANG) < 0 && errno == ECHILD);
}

}  // namespace
}  // namespace bulkhead::supervisor
