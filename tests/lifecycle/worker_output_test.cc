// SPDX-License-Identifier: MIT
// WorkerOutput on a real loop with simulated time, the test writing as the worker: lines are
// logged with the stream and pid, lines over log_rate_limit_burst in a window are dropped, and
// how many is said when the window ends (its timer), or at once when the output closes.
#include "lifecycle/worker_output.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <uv.h>

#include <optional>
#include <string>

#include "base/unique_fd.h"
#include "tests/helpers/captured_log.h"
#include "tests/helpers/simulated_time_source.h"

namespace bulkhead::lifecycle {
namespace {

using bulkhead::testing::CapturedLog;
using bulkhead::testing::SimulatedTimeSource;

constexpr pid_t kWorkerPid = 4242;

class WorkerOutputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(uv_loop_init(&loop_), 0);
    config_.name = "pay";
    config_.log_rate_limit_burst = 2;
    config_.log_rate_limit_interval = std::chrono::milliseconds(1000);
    output_.emplace(&loop_, &time_, config_);
    cell::SpawnOptions options;
    Status prepared = output_->Prepare(&options);
    ASSERT_TRUE(prepared.ok()) << prepared.message();
    // The worker's stdout: the test's own copy of the write end the child would get.
    stdout_.Reset(::dup(options.stdout_fd));
    ASSERT_TRUE(stdout_.valid());
    output_->Spawned(kWorkerPid);
  }
  void TearDown() override {
    if (output_) {
      stdout_.Reset();
      output_->WorkerExited();
      Close();
    }
    EXPECT_EQ(uv_loop_close(&loop_), 0) << "a handle was left open";
  }
  void Close() {
    bool closed = false;
    output_->Close([&] { closed = true; });
    uv_run(&loop_, UV_RUN_DEFAULT);
    EXPECT_TRUE(closed);
    output_.reset();
  }
  void Write(std::string_view text) {
    ASSERT_EQ(::write(stdout_.get(), text.data(), text.size()), static_cast<ssize_t>(text.size()));
    uv_run(&loop_, UV_RUN_NOWAIT);  // the pipe holds it: one poll reads it
  }

  uv_loop_t loop_{};
  SimulatedTimeSource time_;
  config::CellConfig config_;
  CapturedLog log_{LogLevel::kInfo};
  UniqueFd stdout_;
  std::optional<WorkerOutput> output_;
};

TEST_F(WorkerOutputTest, LinesOverTheBurstAreCountedAndSaidWhenTheWindowEnds) {
  Write("one\ntwo\nthree\nfour\nfive\n");
  ASSERT_EQ(log_.lines().size(), 2u) << log_.Text();
  EXPECT_EQ(log_.lines()[0].message, "one");
  EXPECT_EQ(log_.lines()[0].cell, "pay");
  EXPECT_EQ(log_.lines()[0].pid, kWorkerPid);
  EXPECT_EQ(log_.lines()[1].message, "two");
  time_.Advance(999);
  EXPECT_EQ(log_.Count("suppressed"), 0u);
  time_.Advance(1);
  ASSERT_EQ(log_.Count("suppressed"), 1u) << log_.Text();
  EXPECT_EQ(log_.Find("suppressed")->message,
            "suppressed 3 lines of worker output (more than 2 lines in 1000 ms: "
            "log_rate_limit_burst, log_rate_limit_interval)");
  EXPECT_EQ(log_.Find("suppressed")->level, LogLevel::kWarning);
  // A new window: two more lines are logged.
  Write("six\nseven\n");
  EXPECT_EQ(log_.lines().size(), 5u) << log_.Text();
  EXPECT_EQ(log_.lines().back().message, "seven");
  EXPECT_EQ(time_.armed_timers(), 0u) << "nothing dropped in this window: no timer";
}

TEST_F(WorkerOutputTest, ClosingSaysWhatTheOpenWindowDropped) {
  Write("a\nb\nc\n");
  EXPECT_EQ(log_.lines().size(), 2u) << log_.Text();
  stdout_.Reset();
  output_->WorkerExited();
  Close();
  ASSERT_EQ(log_.Count("suppressed 1 lines"), 1u) << log_.Text();
}

// Every WorkerOutput of the thread reads into one buffer, allocated at the first read (an idle
// cell holds none): two cells whose workers interleave unterminated lines still get each line
// whole, with their own cell and pid, and what a worker left unterminated at its exit is drained
// through the same buffer.
TEST_F(WorkerOutputTest, TwoCellsSharingTheReadBufferKeepTheirPartialLines) {
  config::CellConfig other_config = config_;
  other_config.name = "orders";
  WorkerOutput other(&loop_, &time_, other_config);
  cell::SpawnOptions options;
  ASSERT_TRUE(other.Prepare(&options).ok());
  UniqueFd other_stdout(::dup(options.stdout_fd));
  ASSERT_TRUE(other_stdout.valid());
  other.Spawned(kWorkerPid + 1);
  auto write_other = [&](std::string_view text) {
    ASSERT_EQ(::write(other_stdout.get(), text.data(), text.size()),
              static_cast<ssize_t>(text.size()));
    uv_run(&loop_, UV_RUN_NOWAIT);
  };

  Write("pay starts ");
  write_other("orders starts ");
  Write("and ends\n");
  write_other("and ends\nand leaves this unterminated");
  ASSERT_EQ(log_.lines().size(), 2u) << log_.Text();
  EXPECT_EQ(log_.lines()[0].message, "pay starts and ends");
  EXPECT_EQ(log_.lines()[0].cell, "pay");
  EXPECT_EQ(log_.lines()[0].pid, kWorkerPid);
  EXPECT_EQ(log_.lines()[1].message, "orders starts and ends");
  EXPECT_EQ(log_.lines()[1].cell, "orders");
  EXPECT_EQ(log_.lines()[1].pid, kWorkerPid + 1);

  // The pipe still holds bytes when the worker is reaped: the drain reads them.
  ASSERT_EQ(::write(other_stdout.get(), ", then this\n", 12), 12);
  other_stdout.Reset();
  other.WorkerExited();
  ASSERT_EQ(log_.lines().size(), 3u) << log_.Text();
  EXPECT_EQ(log_.lines()[2].message, "and leaves this unterminated, then this");
  EXPECT_EQ(log_.lines()[2].cell, "orders");
  bool closed = false;
  other.Close([&] { closed = true; });
  // The fixture's output stays open: run the loop only until this one's handles are closed.
  for (int i = 0; i < 10 && !closed; ++i) uv_run(&loop_, UV_RUN_NOWAIT);
  EXPECT_TRUE(closed);
}

}  // namespace
}  // namespace bulkhead::lifecycle
