// SPDX-License-Identifier: MIT
// The version comes from CMake's PROJECT_VERSION, and the --version line names the program.
#include "base/version.h"

#include <gtest/gtest.h>

namespace bulkhead {
namespace {

TEST(Version, IsTheProjectVersion) { EXPECT_EQ(Version(), BULKHEAD_PROJECT_VERSION); }

TEST(Version, TheLineNamesTheProgramThenTheVersion) {
  EXPECT_EQ(VersionLine("bulkheadd"), std::string("bulkheadd ") + BULKHEAD_PROJECT_VERSION);
}

}  // namespace
}  // namespace bulkhead
