// SPDX-License-Identifier: MIT
// DefaultRuntimeDir: $RUNTIME_DIRECTORY, then /run/bulkhead for root, then $XDG_RUNTIME_DIR, then
// /tmp/bulkhead-<uid>.
#include "base/runtime_dir.h"

#include <gtest/gtest.h>

namespace bulkhead {
namespace {

TEST(DefaultRuntimeDir, PrefersSystemdRuntimeDirectory) {
  EXPECT_EQ(DefaultRuntimeDir(0, "/run/bulkhead-unit", "/run/user/0"), "/run/bulkhead-unit");
  EXPECT_EQ(DefaultRuntimeDir(1000, "/run/bulkhead-unit", "/run/user/1000"), "/run/bulkhead-unit");
}

TEST(DefaultRuntimeDir, TakesFirstOfSeveralSystemdRuntimeDirectories) {
  EXPECT_EQ(DefaultRuntimeDir(0, "/run/a:/run/b", ""), "/run/a");
}

TEST(DefaultRuntimeDir, RootUsesRunEvenWithXdg) {
  EXPECT_EQ(DefaultRuntimeDir(0, "", "/run/user/0"), "/run/bulkhead");
}

TEST(DefaultRuntimeDir, UserUsesXdgRuntimeDir) {
  EXPECT_EQ(DefaultRuntimeDir(1000, "", "/run/user/1000"), "/run/user/1000/bulkhead");
  EXPECT_EQ(DefaultRuntimeDir(1000, "", "/run/user/1000/"), "/run/user/1000/bulkhead");
}

TEST(DefaultRuntimeDir, UserFallsBackToTmp) {
  EXPECT_EQ(DefaultRuntimeDir(1000, "", ""), "/tmp/bulkhead-1000");
}

TEST(DefaultRuntimeDir, IgnoresRelativeVariables) {
  EXPECT_EQ(DefaultRuntimeDir(1000, "run/x", "run/user"), "/tmp/bulkhead-1000");
  EXPECT_EQ(DefaultRuntimeDir(0, "run/x", ""), "/run/bulkhead");
}

}  // namespace
}  // namespace bulkhead
