// SPDX-License-Identifier: MIT
#include "base/temp_dir.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

namespace bulkhead {
namespace {

TEST(TempDir, CreatesAShortDirectoryAndRemovesItWithItsContents) {
  std::string path;
  {
    TempDir dir;
    EXPECT_EQ(dir.path(), "");
    ASSERT_TRUE(dir.Create("bh-unit").ok());
    path = dir.path();
    EXPECT_EQ(path.rfind("/tmp/bh-unit-", 0), 0u) << path;
    EXPECT_EQ(path.size(), std::string("/tmp/bh-unit-XXXXXX").size());
    std::filesystem::create_directory(dir.Join("sub"));
    std::ofstream(dir.Join("sub/file")) << "x";
    EXPECT_EQ(dir.Join("a.sock"), path + "/a.sock");
    EXPECT_TRUE(std::filesystem::exists(path + "/sub/file"));
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(TempDir, CreateFailureNamesThePattern) {
  TempDir dir;
  Status status = dir.Create("no/such/parent");
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("mkdtemp /tmp/no/such/parent-XXXXXX"), std::string::npos)
      << status.message();
  EXPECT_EQ(dir.path(), "");
}

}  // namespace
}  // namespace bulkhead
