// SPDX-License-Identifier: MIT
#include "base/status.h"

#include <cerrno>

#include <gtest/gtest.h>

namespace bulkhead {
namespace {

TEST(Status, FromErrnoNamesCallAndError) {
  Status s = Status::FromErrno("bind /run/x.sock", EADDRINUSE);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.error_number(), EADDRINUSE);
  EXPECT_EQ(s.message(), "bind /run/x.sock: Address already in use");
}

TEST(Result, HoldsValueOrStatus) {
  Result<int> good(7);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 7);
  Result<int> bad(Status::Error("nope"));
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "nope");
}

TEST(ResultDeathTest, ValueOfFailedResultCrashes) {
  Result<int> bad(Status::Error("nope"));
  EXPECT_DEATH((void)bad.value(), "check failed");
}

}  // namespace
}  // namespace bulkhead
