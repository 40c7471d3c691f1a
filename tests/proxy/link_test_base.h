// SPDX-License-Identifier: MIT
// What the worker link tests share: a libuv loop the test runs by hand, and the worker socket a
// link connects to (a listening Unix socket in a temporary directory), whose accepted end the test
// plays. SIGPIPE is ignored, as bulkheadd's main() does: a write to a worker that closed its end
// is EPIPE. TearDown runs the close callbacks and checks that no handle was left open.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <uv.h>

#include <functional>
#include <string>

#include "base/unique_fd.h"
#include "tests/helpers/test_support.h"

namespace bulkhead::proxy {

class LinkTestBase : public ::testing::Test {
 protected:
  void SetUp() override {
    ::signal(SIGPIPE, SIG_IGN);
    ASSERT_EQ(uv_loop_init(&loop_), 0);
    path_ = dir_.path() + "/w.sock";
    Result<UniqueFd> listening = bulkhead::testing::ListenUnix(path_);
    ASSERT_TRUE(listening.ok()) << listening.status().message();
    listen_ = std::move(listening).value();
  }

  void TearDown() override {
    uv_run(&loop_, UV_RUN_DEFAULT);  // close callbacks of the handles the test closed
    EXPECT_EQ(uv_loop_close(&loop_), 0) << "a handle was left open";
  }

  // The worker's end of the connection a link just opened.
  UniqueFd AcceptWorkerEnd() {
    UniqueFd fd(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    EXPECT_TRUE(fd.valid());
    return fd;
  }

  // Runs the loop without blocking until `done` holds, or a deadline passes (false).
  bool RunUntil(const std::function<bool()>& done) {
    return bulkhead::testing::WaitFor([&] {
      uv_run(&loop_, UV_RUN_NOWAIT);
      return done();
    });
  }

  bulkhead::testing::TempDir dir_;
  uv_loop_t loop_{};
  std::string path_;
  UniqueFd listen_;
};

}  // namespace bulkhead::proxy
