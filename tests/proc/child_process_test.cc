// SPDX-License-Identifier: MIT
// ChildProcess (proc/child_process.h) with /bin/sh children: what Start reports, how WaitUntil and
// Stop end, and that Kill reaches the process group.
#include "proc/child_process.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <cerrno>
#include <chrono>

#include "tests/helpers/test_support.h"

namespace bulkhead::proc {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;

ChildProcess StartOrDie(const ChildOptions& options) {
  Result<ChildProcess> child = ChildProcess::Start("sh", options);
  EXPECT_TRUE(child.ok()) << child.status().message();
  return child.ok() ? std::move(child).value() : ChildProcess();
}

TEST(ChildProcess, ExecFailureIsReportedByStartWithTheErrno) {
  Result<ChildProcess> child =
      ChildProcess::Start("missing", ChildOptions{.argv = {"/nonexistent/bulkheadd"}});
  ASSERT_FALSE(child.ok());
  EXPECT_EQ(child.status().message(),
            "missing: exec /nonexistent/bulkheadd: No such file or directory");
  EXPECT_EQ(child.status().error_number(), ENOENT);
}

TEST(ChildProcess, WaitExitGivesTheExitStatusAndTheEnvironmentReachesTheChild) {
  ChildProcess child =
      StartOrDie({.argv = {"/bin/sh", "-c", "test \"$BH_PROC_TEST\" = yes && exit 3"},
                  .env = {"BH_PROC_TEST=yes"}});
  std::optional<int> status = child.WaitExit(milliseconds(10000));
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 3) << child.exit_description();
  EXPECT_EQ(child.exit_description(), "exit 3");
  EXPECT_FALSE(child.Running());
}

TEST(ChildProcess, WaitUntilSaysWhenTheProcessExitedInsteadOfBecomingReady) {
  ChildProcess child = StartOrDie({.argv = {"/bin/sh", "-c", "exit 1"}});
  EXPECT_EQ(child.WaitUntil([] { return false; }, milliseconds(10000)), WaitOutcome::kExited);
  EXPECT_EQ(child.exit_description(), "exit 1");
}

TEST(ChildProcess, WaitUntilTimesOutAndStopEndsTheProcessWithSigterm) {
  ChildProcess child = StartOrDie({.argv = {"/bin/sh", "-c", "exec sleep 30"}});
  EXPECT_EQ(child.WaitUntil([] { return false; }, milliseconds(50)), WaitOutcome::kTimedOut);
  EXPECT_TRUE(child.StopExpecting(milliseconds(10000), {"signal 15"}).ok());
  EXPECT_EQ(child.exit_description(), "signal 15");
}

TEST(ChildProcess, StopEscalatesToSigkillForTheWholeProcessGroup) {
  testing::TempDir dir;
  const std::string ready = dir.Join("ready");
  // The shell ignores SIGTERM, and so does its `sleep` child, which stays in the group.
  ChildProcess child = StartOrDie(
      {.argv = {"/bin/sh", "-c", "trap '' TERM; : > \"$0\"; while :; do sleep 30; done", ready},
       .own_process_group = true});
  ASSERT_GT(child.pid(), 0);
  ASSERT_EQ(
      child.WaitUntil([&] { return testing::ReadFile(ready).has_value(); }, milliseconds(10000)),
      WaitOutcome::kReady);
  const pid_t group = child.pid();
  Result<int> stopped = child.Stop(milliseconds(200));
  ASSERT_FALSE(stopped.ok());
  EXPECT_THAT(stopped.status().message(),
              HasSubstr("did not exit within 200 ms of signal 15; killed with SIGKILL"));
  EXPECT_EQ(child.exit_description(), "signal 9");
  // The orphaned `sleep` got SIGKILL too: the group empties (once init has reaped it).
  EXPECT_TRUE(testing::WaitFor([&] { return ::kill(-group, 0) != 0 && errno == ESRCH; }));
}

}  // namespace
}  // namespace bulkhead::proc
