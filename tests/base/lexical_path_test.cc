// SPDX-License-Identifier: MIT
// Lexical path arithmetic: normalisation, resolution against a base, parent directory.
#include "base/lexical_path.h"

#include <gtest/gtest.h>

namespace bulkhead {
namespace {

TEST(LexicalPath, IsAbsolutePath) {
  EXPECT_TRUE(IsAbsolutePath("/"));
  EXPECT_TRUE(IsAbsolutePath("/run"));
  EXPECT_FALSE(IsAbsolutePath("run"));
  EXPECT_FALSE(IsAbsolutePath("./run"));
  EXPECT_FALSE(IsAbsolutePath(""));
}

TEST(LexicalPath, NormalizePath) {
  EXPECT_EQ(NormalizePath("/run/bulkhead"), "/run/bulkhead");
  EXPECT_EQ(NormalizePath("//run///bulkhead//"), "/run/bulkhead");
  EXPECT_EQ(NormalizePath("/run/./bulkhead/."), "/run/bulkhead");
  EXPECT_EQ(NormalizePath("/run/x/../bulkhead"), "/run/bulkhead");
  EXPECT_EQ(NormalizePath("/run/a/b/../../c"), "/run/c");
  EXPECT_EQ(NormalizePath("/.."), "/");
  EXPECT_EQ(NormalizePath("/../../run"), "/run");
  EXPECT_EQ(NormalizePath("/"), "/");
  EXPECT_EQ(NormalizePath("///"), "/");
  EXPECT_EQ(NormalizePath("a/b"), "a/b");
  EXPECT_EQ(NormalizePath("a/.."), ".");
  EXPECT_EQ(NormalizePath("../a"), "../a");
  EXPECT_EQ(NormalizePath("a/../../b"), "../b");
  EXPECT_EQ(NormalizePath("../.."), "../..");
  EXPECT_EQ(NormalizePath("."), ".");
  EXPECT_EQ(NormalizePath(""), ".");
  EXPECT_EQ(NormalizePath("..."), "...");  // A name, not a parent.
}

TEST(LexicalPath, ResolvePath) {
  EXPECT_EQ(ResolvePath("/abs/./x", "/etc"), "/abs/x");
  EXPECT_EQ(ResolvePath("x.sock", "/etc/bulkhead"), "/etc/bulkhead/x.sock");
  EXPECT_EQ(ResolvePath("../run/x.sock", "/etc/bulkhead"), "/etc/run/x.sock");
  EXPECT_EQ(ResolvePath(".", "/etc/bulkhead"), "/etc/bulkhead");
  EXPECT_EQ(ResolvePath("../../../..", "/etc/bulkhead"), "/");
  EXPECT_EQ(ResolvePath("x", "/"), "/x");
}

TEST(LexicalPath, ParentDirectory) {
  EXPECT_EQ(ParentDirectory("/etc/bulkhead.toml"), "/etc");
  EXPECT_EQ(ParentDirectory("/etc/bulkhead/main.toml"), "/etc/bulkhead");
  EXPECT_EQ(ParentDirectory("/bulkhead.toml"), "/");
  EXPECT_EQ(ParentDirectory("//bulkhead.toml"), "/");
  EXPECT_EQ(ParentDirectory("/etc//bulkhead.toml"), "/etc");
  EXPECT_EQ(ParentDirectory("conf/bulkhead.toml"), "conf");
  EXPECT_EQ(ParentDirectory("bulkhead.toml"), ".");
  EXPECT_EQ(ParentDirectory("a/b/"), "a");
  EXPECT_EQ(ParentDirectory("/"), "/");
  EXPECT_EQ(ParentDirectory(""), ".");
}

}  // namespace
}  // namespace bulkhead
