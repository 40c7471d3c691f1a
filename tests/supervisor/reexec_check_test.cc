// SPDX-License-Identifier: MIT
// ReexecCheck (supervisor/reexec_check.h): `BINARY --reexec-state-versions` run off the loop, its
// output read through the loop, its exit handed in as the reaper would, bounded by a timer of a
// simulated clock. The binaries are small scripts; the time never moves unless the test moves it.
#include "supervisor/reexec_check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <uv.h>

#include <fstream>
#include <optional>
#include <string>

#include "loop/handle_group.h"
#include "supervisor/reexec.h"
#include "tests/helpers/simulated_time_source.h"
#include "tests/helpers/test_support.h"

namespace bulkhead::supervisor {
namespace {

using ::testing::HasSubstr;
using testing::SimulatedTimeSource;
using testing::TempDir;
using testing::WaitFor;

constexpr uint64_t kTimeoutMs = 5'000;

class ReexecCheckTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(uv_loop_init(&loop_), 0); }
  void TearDown() override {
    if (check_) check_->Cancel();
    check_.reset();
    handles_.Close(nullptr);
    uv_run(&loop_, UV_RUN_DEFAULT);
    // Whatever the check started and killed.
    while (::waitpid(-1, nullptr, 0) > 0) {
    }
    EXPECT_EQ(uv_loop_close(&loop_), 0) << "a handle was left open";
  }

  // An executable script in the test's directory.
  std::string Script(const std::string& text) {
    const std::string path = dir_.Join("bulkheadd");
    std::ofstream(path) << text;
    ::chmod(path.c_str(), 0755);
    return path;
  }

  void Start(const std::string& binary) {
    check_.emplace(&loop_, &time_, &handles_);
    Status started = check_->Start(binary, /*version=*/2, kTimeoutMs,
                                   [this](const Status& result) { result_ = result; });
    ASSERT_TRUE(started.ok()) << started.message();
  }

  // Runs the loop and hands every exited child to the check, as the supervisor's reaper does,
  // until the check has answered (false if not within the default deadline).
  bool RunUntilAnswered() {
    return WaitFor([&] {
      uv_run(&loop_, UV_RUN_NOWAIT);
      int status = 0;
      for (pid_t pid; (pid = ::waitpid(-1, &status, WNOHANG)) > 0;) {
        check_->OnChildExit(pid, status);
      }
      return result_.has_value();
    });
  }

  uv_loop_t loop_{};
  SimulatedTimeSource time_;
  loop::HandleGroup handles_;
  TempDir dir_;
  std::optional<ReexecCheck> check_;
  std::optional<Status> result_;
};

TEST_F(ReexecCheckTest, PassesABinaryThatReadsOurVersion) {
  Start(Script("#!/bin/sh\necho 1 2\n"));
  ASSERT_TRUE(RunUntilAnswered());
  EXPECT_TRUE(result_->ok()) << result_->message();
  EXPECT_FALSE(check_->running());
}

TEST_F(ReexecCheckTest, RefusesABinaryThatReadsOtherVersionsOrExitsNonZero) {
  Start(Script("#!/bin/sh\necho 9\n"));
  ASSERT_TRUE(RunUntilAnswered());
  EXPECT_THAT(result_->message(), HasSubstr("--reexec-state-versions: reads 9, this bulkheadd "
                                            "writes 2"));
  result_.reset();
  Start(Script("#!/bin/sh\necho unknown option >&2\nexit 2\n"));
  ASSERT_TRUE(RunUntilAnswered());
  EXPECT_THAT(result_->message(), HasSubstr("exit 2"));
}

// A binary that never answers is given up at the timeout of the loop's clock, and killed; the
// answer comes from the timer, not from the child.
TEST_F(ReexecCheckTest, GivesUpOnASilentBinaryAtTheTimeoutOfTheLoopsClock) {
  Start(Script("#!/bin/sh\nexec sleep 600\n"));
  uv_run(&loop_, UV_RUN_NOWAIT);
  time_.Advance(kTimeoutMs - 1);
  EXPECT_FALSE(result_.has_value());
  EXPECT_TRUE(check_->running());
  time_.Advance(1);
  ASSERT_TRUE(result_.has_value());
  EXPECT_THAT(result_->message(), HasSubstr("no answer within 5000 ms"));
  EXPECT_FALSE(check_->running());
}

TEST_F(ReexecCheckTest, ACancelledCheckNeverAnswers) {
  Start(Script("#!/bin/sh\nexec sleep 600\n"));
  check_->Cancel();
  EXPECT_FALSE(check_->running());
  time_.Advance(kTimeoutMs);
  uv_run(&loop_, UV_RUN_NOWAIT);
  EXPECT_FALSE(result_.has_value());
}

// The path a re-exec executes keeps argv[0]'s symlinks (docs/reexec.md, "Before the exec"): made
// absolute and lexically normal, never resolved; not known from a bare name found through PATH.
TEST(AbsoluteArgv0, KeepsTheSymlinkPathMadeAbsolute) {
  EXPECT_EQ(AbsoluteArgv0("/opt/bulkhead/current/bulkheadd", "/"),
            "/opt/bulkhead/current/bulkheadd");
  EXPECT_EQ(AbsoluteArgv0("current/bulkheadd", "/opt/bulkhead"), "/opt/bulkhead/current/bulkheadd");
  EXPECT_EQ(AbsoluteArgv0("./bin/../current/bulkheadd", "/opt/bulkhead/"),
            "/opt/bulkhead/current/bulkheadd");
  EXPECT_EQ(AbsoluteArgv0("bulkheadd", "/opt/bulkhead"), "");
}

}  // namespace
}  // namespace bulkhead::supervisor
