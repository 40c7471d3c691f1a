// SPDX-License-Identifier: MIT
// LogRing: the bounds (lines and bytes), the sequence numbers a follower reads by, and what it is
// told it missed.
#include "lifecycle/log_ring.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace bulkhead::lifecycle {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(LogRing, KeepsTheNewestLinesWithinTheLineBound) {
  LogRing ring(3, 1024);
  for (const char* line : {"a", "b", "c", "d", "e"}) ring.Append(line);
  EXPECT_EQ(ring.lines(), 3u);
  LogRing::Page page = ring.Read(std::nullopt, std::nullopt);
  EXPECT_THAT(page.lines, ElementsAre("c", "d", "e"));
  EXPECT_EQ(page.next, 5u);
  EXPECT_EQ(page.missed, 0u);
}

TEST(LogRing, KeepsTheNewestLinesWithinTheByteBound) {
  LogRing ring(100, 10);
  for (const char* line : {"1234", "5678", "abcd"}) ring.Append(line);
  EXPECT_EQ(ring.bytes(), 8u);
  EXPECT_THAT(ring.Read(std::nullopt, std::nullopt).lines, ElementsAre("5678", "abcd"));
  // A line over the whole bound is cut to it, and is then the only line.
  ring.Append(std::string(25, 'x'));
  EXPECT_THAT(ring.Read(std::nullopt, std::nullopt).lines, ElementsAre(std::string(10, 'x')));
  EXPECT_EQ(ring.bytes(), 10u);
}

TEST(LogRing, AFollowerReadsFromItsLastNextAndLearnsWhatItMissed) {
  LogRing ring(2, 1024);
  ring.Append("a");
  LogRing::Page first = ring.Read(std::nullopt, std::nullopt);
  EXPECT_THAT(first.lines, ElementsAre("a"));
  EXPECT_THAT(ring.Read(first.next, std::nullopt).lines, IsEmpty());
  for (const char* line : {"b", "c", "d"}) ring.Append(line);
  // b was dropped before it was read.
  LogRing::Page second = ring.Read(first.next, std::nullopt);
  EXPECT_THAT(second.lines, ElementsAre("c", "d"));
  EXPECT_EQ(second.missed, 1u);
  EXPECT_EQ(second.next, 4u);
}

TEST(LogRing, LastLimitsToTheNewest) {
  LogRing ring(10, 1024);
  for (const char* line : {"a", "b", "c"}) ring.Append(line);
  EXPECT_THAT(ring.Read(std::nullopt, 2).lines, ElementsAre("b", "c"));
  EXPECT_THAT(ring.Read(1, 5).lines, ElementsAre("b", "c"));
  EXPECT_THAT(ring.Read(std::nullopt, 0).lines, IsEmpty());
}

// A follower of an earlier bulkheadd asks from beyond this ring's end: it gets every line held.
TEST(LogRing, AFromBeyondTheEndReadsEverything) {
  LogRing ring(10, 1024);
  ring.Append("a");
  LogRing::Page page = ring.Read(50, std::nullopt);
  EXPECT_THAT(page.lines, ElementsAre("a"));
  EXPECT_EQ(page.missed, 0u);
}

}  // namespace
}  // namespace bulkhead::lifecycle
