// SPDX-License-Identifier: MIT
// The client side of the control/ server tests: a non-blocking Unix stream connection, a read of
// whatever it holds now, and writes paced by the server's loop. Used from the test thread, which
// also runs the server's loop.
#pragma once

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <uv.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "base/unique_fd.h"

namespace bulkhead::control::testing {

// Connects to the Unix socket at `path` (SOCK_NONBLOCK | SOCK_CLOEXEC); a failure fails the test.
inline UniqueFd ConnectUnix(const std::string& path) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  EXPECT_TRUE(fd.valid()) << std::strerror(errno);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0)
      << path << ": " << std::strerror(errno);
  return fd;
}

// Appends what `fd` holds now to `received`; true once the peer has closed the connection (EOF
// or an error other than EAGAIN).
inline bool ReadNow(int fd, std::string* received) {
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      received->append(buf, static_cast<size_t>(n));
      continue;
    }
    return n == 0 || (errno != EAGAIN && errno != EINTR);
  }
}

// Writes "1\n", "2\n", ... to `fd` from a timer of `loop`, one every `period_ms` of the loop's
// clock, `count` of them, or until a write fails. Paced by the loop that runs the server, a write
// is never late against that server's timers, however loaded the machine. Close() it, then run the
// loop, before the loop is closed.
class PacedWriter {
 public:
  PacedWriter(uv_loop_t* loop, int fd, uint64_t period_ms, int count) : fd_(fd), count_(count) {
    uv_timer_init(loop, &timer_);
    timer_.data = this;
    uv_timer_start(
        &timer_,
        [](uv_timer_t* t) {
          auto* self = static_cast<PacedWriter*>(t->data);
          std::string line = std::to_string(self->sent_ + 1) + "\n";
          // MSG_NOSIGNAL: a connection the server closed ends the writes, not the test (SIGPIPE).
          if (::send(self->fd_, line.data(), line.size(), MSG_NOSIGNAL) !=
                  static_cast<ssize_t>(line.size()) ||
              ++self->sent_ == self->count_) {
            uv_timer_stop(t);
          }
        },
        period_ms, period_ms);
  }
  PacedWriter(const PacedWriter&) = delete;
  PacedWriter& operator=(const PacedWriter&) = delete;

  void Close() { uv_close(reinterpret_cast<uv_handle_t*>(&timer_), nullptr); }

 private:
  int fd_;
  int count_;
  int sent_ = 0;
  uv_timer_t timer_{};
};

}  // namespace bulkhead::control::testing
