// SPDX-License-Identifier: MIT
// AfterPoll on a real libuv loop: a verdict requested from a timer is given only after the bytes
// that waited in a socket when the timer fired have been read (issue 11, item 3).
#include "loop/after_poll.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include <cstddef>
#include <string>

namespace bulkhead::loop {
namespace {

class AfterPollTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(uv_loop_init(&loop_), 0); }
  // Each test runs its close callbacks itself, while the handles' owners live.
  void TearDown() override { EXPECT_EQ(uv_loop_close(&loop_), 0) << "a handle was left open"; }
  uv_loop_t loop_{};
};

struct Reader {
  uv_pipe_t pipe{};
  size_t bytes = 0;
  char buffer[64];
};

// The premise, then the fix: libuv runs an expired timer before it reads what waits in a socket;
// the AfterPoll callback runs once it has.
TEST_F(AfterPollTest, TheVerdictSeesWhatWaitedInASocketWhenTheTimerFired) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  Reader reader;
  reader.pipe.data = &reader;
  ASSERT_EQ(uv_pipe_init(&loop_, &reader.pipe, 0), 0);
  ASSERT_EQ(uv_pipe_open(&reader.pipe, sv[0]), 0);
  uv_read_start(
      reinterpret_cast<uv_stream_t*>(&reader.pipe),
      [](uv_handle_t* handle, size_t, uv_buf_t* buf) {
        auto* r = static_cast<Reader*>(handle->data);
        *buf = uv_buf_init(r->buffer, sizeof r->buffer);
      },
      [](uv_stream_t* stream, ssize_t nread, const uv_buf_t*) {
        if (nread > 0) static_cast<Reader*>(stream->data)->bytes += static_cast<size_t>(nread);
      });
  // The reply is in the socket before the loop runs, as after a SIGSTOP of the supervisor.
  ASSERT_EQ(::write(sv[1], "reply", 5), 5);

  size_t bytes_when_timer_fired = SIZE_MAX;
  size_t bytes_at_verdict = SIZE_MAX;
  int verdicts = 0;
  AfterPoll after(&loop_, [&] {
    ++verdicts;
    bytes_at_verdict = reader.bytes;
    uv_close(reinterpret_cast<uv_handle_t*>(&reader.pipe), nullptr);
  });
  struct TimerState {
    AfterPoll* after;
    Reader* reader;
    size_t* bytes_when_fired;
  } state{&after, &reader, &bytes_when_timer_fired};
  uv_timer_t timer;
  uv_timer_init(&loop_, &timer);
  timer.data = &state;
  uv_timer_start(
      &timer,
      [](uv_timer_t* t) {
        auto* s = static_cast<TimerState*>(t->data);
        *s->bytes_when_fired = s->reader->bytes;
        s->after->Request();
        s->after->Request();  // once is enough: the callback runs once
      },
      0, 0);
  uv_run(&loop_, UV_RUN_DEFAULT);

  EXPECT_EQ(bytes_when_timer_fired, 0u) << "libuv read the socket before running the timer";
  EXPECT_EQ(bytes_at_verdict, 5u);
  EXPECT_EQ(verdicts, 1);
  after.Close(nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&timer), nullptr);
  uv_run(&loop_, UV_RUN_DEFAULT);  // the close callbacks, while `after` and `timer` live
  ::close(sv[1]);
}

// The poll before the callback does not block until the next timer (or forever, with none).
TEST_F(AfterPollTest, ThePollBeforeTheVerdictDoesNotBlock) {
  bool ran = false;
  AfterPoll after(&loop_, [&] { ran = true; });
  uv_timer_t far;
  uv_timer_init(&loop_, &far);
  uv_timer_start(
      &far, [](uv_timer_t*) {}, 60000, 0);
  uv_run(&loop_, UV_RUN_NOWAIT);  // a fresh loop has setup work pending: its poll would not block
  EXPECT_GT(uv_backend_timeout(&loop_), 0) << "the poll would wait for the far timer";
  EXPECT_FALSE(ran);
  after.Request();
  EXPECT_TRUE(after.requested());
  EXPECT_EQ(uv_backend_timeout(&loop_), 0);
  uv_run(&loop_, UV_RUN_NOWAIT);
  EXPECT_TRUE(ran);
  EXPECT_FALSE(after.requested());
  uv_timer_stop(&far);
  uv_close(reinterpret_cast<uv_handle_t*>(&far), nullptr);
  bool closed = false;
  after.Close([&] { closed = true; });
  uv_run(&loop_, UV_RUN_DEFAULT);
  EXPECT_TRUE(closed);
}

TEST_F(AfterPollTest, CloseDropsAPendingVerdict) {
  bool ran = false;
  AfterPoll after(&loop_, [&] { ran = true; });
  after.Request();
  after.Close(nullptr);
  after.Request();
  uv_run(&loop_, UV_RUN_DEFAULT);
  EXPECT_FALSE(ran);
}

}  // namespace
}  // namespace bulkhead::loop
