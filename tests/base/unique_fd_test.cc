// SPDX-License-Identifier: MIT
#include "base/unique_fd.h"

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace bulkhead {
namespace {

bool IsOpen(int fd) { return fcntl(fd, F_GETFD) != -1; }

TEST(UniqueFd, ClosesInDestructor) {
  int raw = -1;
  {
    UniqueFd fd(open("/dev/null", O_RDONLY | O_CLOEXEC));
    raw = fd.get();
    ASSERT_TRUE(IsOpen(raw));
  }
  EXPECT_FALSE(IsOpen(raw));
}

TEST(UniqueFd, MoveTransfersOwnership) {
  UniqueFd a(open("/dev/null", O_RDONLY | O_CLOEXEC));
  int raw = a.get();
  UniqueFd b(std::move(a));
  EXPECT_FALSE(a.valid());
  EXPECT_EQ(b.get(), raw);
  UniqueFd c;
  c = std::move(b);
  EXPECT_EQ(c.get(), raw);
  EXPECT_TRUE(IsOpen(raw));
}

TEST(UniqueFd, ReleaseDoesNotClose) {
  UniqueFd a(open("/dev/null", O_RDONLY | O_CLOEXEC));
  int raw = a.Release();
  EXPECT_FALSE(a.valid());
  EXPECT_TRUE(IsOpen(raw));
  close(raw);
}

}  // namespace
}  // namespace bulkhead
