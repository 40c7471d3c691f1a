// SPDX-License-Identifier: MIT
// WaitForFile: woken when another thread writes what it waits for, and a deadline that ends the
// wait with false rather than hanging.
#include "tests/helpers/file_wait.h"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <optional>
#include <string>
#include <thread>

#include "tests/helpers/test_support.h"

namespace bulkhead::testing {
namespace {

bool Holds(const std::string& path, const std::string& text) {
  const std::optional<std::string> content = ReadFile(path);
  return content && content->find(text) != std::string::npos;
}

TEST(WaitForFile, ReturnsOnceAnotherThreadWritesWhatItWaitsFor) {
  TempDir dir;
  const std::string path = dir.path() + "/log";
  std::ofstream(path) << "first\n";
  std::thread writer([&path] { std::ofstream(path, std::ios::app) << "second\n"; });
  EXPECT_TRUE(WaitForFile(
      path, [&path] { return Holds(path, "second"); }, kDefaultTimeout));
  writer.join();
}

TEST(WaitForFile, SeesAFileRenamedIntoPlace) {
  TempDir dir;
  const std::string path = dir.path() + "/flag";
  std::thread writer([&path] { EXPECT_TRUE(WriteFileAtomically(path, "go").ok()); });
  EXPECT_TRUE(WaitForFile(
      path, [&path] { return Holds(path, "go"); }, kDefaultTimeout));
  writer.join();
}

TEST(WaitForFile, ReturnsFalseWhenTheTimeoutPassesFirst) {
  TempDir dir;
  const std::string path = dir.path() + "/never";
  int looks = 0;
  EXPECT_FALSE(WaitForFile(
      path,
      [&] {
        ++looks;
        return false;
      },
      std::chrono::milliseconds(20)));
  EXPECT_GE(looks, 1);
}

}  // namespace
}  // namespace bulkhead::testing
