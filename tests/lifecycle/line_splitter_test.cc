// SPDX-License-Identifier: MIT
#include "lifecycle/line_splitter.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace bulkhead::lifecycle {
namespace {

struct Line {
  std::string text;
  bool truncated;
  bool operator==(const Line&) const = default;
};

class Collect {
 public:
  explicit Collect(size_t max_line)
      : splitter_(max_line, [this](std::string_view line, bool truncated) {
          lines_.push_back({std::string(line), truncated});
        }) {}
  LineSplitter& splitter() { return splitter_; }
  std::vector<Line> Take() { return std::exchange(lines_, {}); }

 private:
  std::vector<Line> lines_;
  LineSplitter splitter_;
};

TEST(LineSplitter, SplitsOnNewlinesAcrossChunks) {
  Collect c(100);
  c.splitter().Feed("one\ntw");
  EXPECT_EQ(c.Take(), (std::vector<Line>{{"one", false}}));
  EXPECT_EQ(c.splitter().pending(), 2u);
  c.splitter().Feed("o\n\nthree\r\nfo");
  EXPECT_EQ(c.Take(), (std::vector<Line>{{"two", false}, {"", false}, {"three", false}}));
  c.splitter().Finish();
  EXPECT_EQ(c.Take(), (std::vector<Line>{{"fo", false}}));
  c.splitter().Finish();
  EXPECT_TRUE(c.Take().empty());
}

TEST(LineSplitter, LineOfExactlyMaxBytesIsWhole) {
  Collect c(4);
  c.splitter().Feed("abcd\nab");
  c.splitter().Feed("cd\n");
  EXPECT_EQ(c.Take(), (std::vector<Line>{{"abcd", false}, {"abcd", false}}));
}

TEST(LineSplitter, OverLongLineIsTruncatedAtOnceAndItsRestDropped) {
  Collect c(4);
  c.splitter().Feed("abcdefg");
  EXPECT_EQ(c.Take(), (std::vector<Line>{{"abcd", true}}));
  EXPECT_EQ(c.splitter().pending(), 0u);
  c.splitter().Feed(std::string(1000, 'x'));
  EXPECT_TRUE(c.Take().empty());
  c.splitter().Feed("yy\nok\n");
  EXPECT_EQ(c.Take(), (std::vector<Line>{{"ok", false}}));
}

TEST(LineSplitter, OverLongLineBuiltFromPiecesIsTruncated) {
  Collect c(4);
  c.splitter().Feed("ab");
  c.splitter().Feed("cdef\nnext\n");
  EXPECT_EQ(c.Take(), (std::vector<Line>{{"abcd", true}, {"next", false}}));
}

TEST(LineSplitter, FinishForgetsADroppedRest) {
  Collect c(2);
  c.splitter().Feed("abc");
  c.splitter().Finish();
  c.splitter().Feed("de\n");
  EXPECT_EQ(c.Take(), (std::vector<Line>{{"ab", true}, {"de", false}}));
}

TEST(LineSplitter, PendingNeverExceedsMaxLine) {
  Collect c(16);
  for (int i = 0; i < 100; ++i) {
    c.splitter().Feed("0123456789");
    EXPECT_LE(c.splitter().pending(), 16u);
  }
  std::vector<Line> lines = c.Take();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], (Line{"0123456789012345", true}));
}

}  // namespace
}  // namespace bulkhead::lifecycle
