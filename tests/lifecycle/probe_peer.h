// SPDX-License-Identifier: MIT
// The worker's side of the HTTP health probe (ready = "http:/PATH"), for tests that run the
// prober's loop themselves (HealthProbeTest, WorkerRunnerTest): the next probe connection on the
// worker socket, its request head read, and an answer written. Used on the test's thread.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <string>
#include <string_view>

#include "base/unique_fd.h"
#include "tests/helpers/test_support.h"

namespace bulkhead::lifecycle::testing {

// A probe connection waits in the backlog of the listening socket `listening` now.
inline bool ProbeWaits(int listening) {
  pollfd p{.fd = listening, .events = POLLIN, .revents = 0};
  return ::poll(&p, 1, 0) == 1;
}

// Accepts the next probe connection on `listening` (blocking or not: it is polled first) and
// reads its request head into `head`, calling `run_loop` (one iteration of the prober's loop)
// between looks. Fails the test, and returns an invalid fd, when none comes within the default
// deadline.
inline UniqueFd AcceptProbe(int listening, const std::function<void()>& run_loop,
                            std::string* head) {
  UniqueFd conn;
  EXPECT_TRUE(bulkhead::testing::WaitFor([&] {
    run_loop();
    if (!ProbeWaits(listening)) return false;
    conn.Reset(::accept4(listening, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    return conn.valid();
  })) << "no probe connection";
  if (!conn.valid()) return conn;
  EXPECT_TRUE(bulkhead::testing::WaitFor([&] {
    run_loop();
    char buffer[512];
    ssize_t n = ::read(conn.get(), buffer, sizeof buffer);
    if (n > 0) head->append(buffer, static_cast<size_t>(n));
    return head->find("\r\n\r\n") != std::string::npos;
  })) << *head;
  return conn;
}

// Writes `answer` whole on the probe connection `conn`.
inline void AnswerProbe(const UniqueFd& conn, std::string_view answer) {
  ASSERT_EQ(::write(conn.get(), answer.data(), answer.size()), static_cast<ssize_t>(answer.size()));
}

}  // namespace bulkhead::lifecycle::testing
