// SPDX-License-Identifier: MIT
// HandleGroup on a real libuv loop: on_closed waits for every member's close callback and every
// part, members closed one by one leave the group, a failed init leaves nothing to close, and
// breaking the rule (freeing the group with a handle open, closing a member twice, a part called
// twice) crashes loudly.
#include "loop/handle_group.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include <functional>
#include <memory>

#include "base/unique_fd.h"

namespace bulkhead::loop {
namespace {

class HandleGroupTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(uv_loop_init(&loop_), 0); }
  void TearDown() override { EXPECT_EQ(uv_loop_close(&loop_), 0) << "a handle was left open"; }
  uv_loop_t loop_{};
};

TEST_F(HandleGroupTest, OnClosedRunsOnceEveryMembersCloseCallbackRan) {
  HandleGroup group;
  uv_timer_t* timer = group.Open(uv_timer_init, &loop_);
  uv_check_t* check = group.Open(uv_check_init, &loop_);
  uv_pipe_t* pipe = group.Open(uv_pipe_init, &loop_, 0);
  ASSERT_NE(timer, nullptr);
  ASSERT_NE(check, nullptr);
  ASSERT_NE(pipe, nullptr);
  EXPECT_EQ(group.pending(), 3u);
  // The members are usable handles whose data is the owner's.
  int fired = 0;
  timer->data = &fired;
  uv_timer_start(
      timer, [](uv_timer_t* t) { ++*static_cast<int*>(t->data); }, 0, 0);
  uv_run(&loop_, UV_RUN_NOWAIT);
  EXPECT_EQ(fired, 1);

  int closed = 0;
  group.Close([&] { ++closed; });
  EXPECT_TRUE(group.closing());
  // uv_close only asks: the callbacks come from the loop.
  EXPECT_EQ(closed, 0);
  EXPECT_FALSE(group.closed());
  EXPECT_EQ(uv_is_closing(reinterpret_cast<uv_handle_t*>(check)), 1);
  uv_run(&loop_, UV_RUN_DEFAULT);
  EXPECT_EQ(closed, 1);
  EXPECT_TRUE(group.closed());
  EXPECT_EQ(group.pending(), 0u);
}

TEST_F(HandleGroupTest, AMemberClosedAloneLeavesTheGroupAndItsMemoryGoesWithItsCallback) {
  HandleGroup group;
  uv_timer_t* first = group.Open(uv_timer_init, &loop_);
  uv_timer_t* second = group.Open(uv_timer_init, &loop_);
  group.Close(first);
  EXPECT_EQ(group.pending(), 2u) << "closing, its callback not yet run";
  uv_run(&loop_, UV_RUN_NOWAIT);
  EXPECT_EQ(group.pending(), 1u);
  EXPECT_FALSE(group.closing());

  // A group whose members all closed one by one still closes (at once: nothing pending).
  group.Close(second);
  uv_run(&loop_, UV_RUN_NOWAIT);
  bool closed = false;
  group.Close([&] { closed = true; });
  EXPECT_TRUE(closed);
}

TEST_F(HandleGroupTest, PartsAreWaitedForWhetherTheyCloseAtOnceOrLater) {
  HandleGroup group;
  uv_idle_t* idle = group.Open(uv_idle_init, &loop_);
  ASSERT_NE(idle, nullptr);
  std::function<void()> at_once = group.Part();
  std::function<void()> later = group.Part();
  at_once();  // a part with nothing to close calls back before the group's Close
  bool closed = false;
  group.Close([&] { closed = true; });
  uv_run(&loop_, UV_RUN_DEFAULT);
  EXPECT_FALSE(closed) << "a part is still closing";
  EXPECT_EQ(group.pending(), 1u);
  later();
  EXPECT_TRUE(closed);
}

TEST_F(HandleGroupTest, AFailedInitLeavesNothingToClose) {
  HandleGroup group;
  // uv_poll_init refuses a descriptor that is not open.
  Result<uv_poll_t*> refused = group.TryOpen(uv_poll_init, &loop_, -1);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(), uv_strerror(UV_EBADF));
  EXPECT_EQ(group.pending(), 0u);
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd a(sv[0]);
  UniqueFd b(sv[1]);
  Result<uv_poll_t*> poll = group.TryOpen(uv_poll_init, &loop_, a.get());
  ASSERT_TRUE(poll.ok()) << poll.status().message();
  bool closed = false;
  group.Close([&] { closed = true; });
  uv_run(&loop_, UV_RUN_DEFAULT);
  EXPECT_TRUE(closed);
}

TEST_F(HandleGroupTest, OnClosedMayDestroyTheOwnerOfTheGroup) {
  struct Owner {
    HandleGroup group;
  };
  auto* owner = new Owner;
  ASSERT_NE(owner->group.Open(uv_timer_init, &loop_), nullptr);
  owner->group.Close([owner] { delete owner; });
  uv_run(&loop_, UV_RUN_DEFAULT);  // ASan reports a use after the delete, should there be one
}

using HandleGroupDeathTest = HandleGroupTest;

TEST_F(HandleGroupDeathTest, DestroyingAGroupWithAHandleOpenCrashes) {
  EXPECT_DEATH(
      {
        uv_loop_t loop;
        uv_loop_init(&loop);
        HandleGroup group;
        group.Open(uv_timer_init, &loop);
      },
      "check failed");
}

TEST_F(HandleGroupDeathTest, DestroyingAGroupWhileAMemberIsClosingCrashes) {
  EXPECT_DEATH(
      {
        uv_loop_t loop;
        uv_loop_init(&loop);
        HandleGroup group;
        group.Close(group.Open(uv_timer_init, &loop));
      },
      "check failed");
}

TEST_F(HandleGroupDeathTest, ClosingAMemberTwiceCrashes) {
  EXPECT_DEATH(
      {
        uv_loop_t loop;
        uv_loop_init(&loop);
        HandleGroup group;
        uv_timer_t* timer = group.Open(uv_timer_init, &loop);
        group.Close(timer);
        group.Close(timer);
      },
      "check failed");
}

TEST_F(HandleGroupDeathTest, APartCalledTwiceCrashes) {
  EXPECT_DEATH(
      {
        HandleGroup group;
        std::function<void()> part = group.Part();
        part();
        part();
      },
      "check failed");
}

}  // namespace
}  // namespace bulkhead::loop
