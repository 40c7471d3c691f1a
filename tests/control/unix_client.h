// SPDX-License-Identifier: MIT
// The client side of the control/ server tests: a non-blocking Unix stream connection and a read
// of whatever it holds now. Used from the test thread, which also runs the server's loop.
#pragma once

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
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

}  // namespace bulkhead::control::testing
