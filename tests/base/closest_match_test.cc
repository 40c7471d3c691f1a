// SPDX-License-Identifier: MIT
// ClosestMatch: the "did you mean" of config keys, choices, cell names and bulkheadctl commands.
#include "base/closest_match.h"

#include <gtest/gtest.h>

#include <array>
#include <string_view>

namespace bulkhead {
namespace {

constexpr std::array<std::string_view, 4> kWords = {"catalog", "max_queue", "status", "ab"};

TEST(ClosestMatch, OtherLetterCaseIsTheMatchWhateverTheDistance) {
  EXPECT_EQ(ClosestMatch("Catalog", kWords), "catalog");
  EXPECT_EQ(ClosestMatch("CATALOG", kWords), "catalog");  // 7 edits apart
  EXPECT_EQ(ClosestMatch("MAX_QUEUE", kWords), "max_queue");
  EXPECT_EQ(ClosestMatch("AB", kWords), "ab");  // shorter than the edits it takes
}

TEST(ClosestMatch, WithinTwoEditsAndFewerThanTheWordHas) {
  EXPECT_EQ(ClosestMatch("catalgo", kWords), "catalog");  // a transposition is one edit
  EXPECT_EQ(ClosestMatch("stats", kWords), "status");
  EXPECT_EQ(ClosestMatch("max_queues", kWords), "max_queue");
  EXPECT_EQ(ClosestMatch("zzz", kWords), "");
  EXPECT_EQ(ClosestMatch("x", kWords), "");  // "ab" is 2 edits: not fewer than 1 character
  EXPECT_EQ(ClosestMatch("CATALOGUE", kWords), "catalog");  // letter case is no edit
  EXPECT_EQ(ClosestMatch("Stats", kWords), "status");
}

}  // namespace
}  // namespace bulkhead
