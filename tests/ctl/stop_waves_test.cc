// SPDX-License-Identifier: MIT
// StopWaves: `bulkheadctl stop` of several cells stops a cell before the cells it needs, in
// waves, as bulkheadd's shutdown does.
#include "ctl/stop_waves.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace bulkhead::ctl {
namespace {

using ::testing::ElementsAre;
using Waves = std::vector<std::vector<std::string>>;

TEST(StopWaves, ACellStopsBeforeTheCellsItNeeds) {
  // Config order: the needs first, as a file often lists them.
  const std::map<std::string, std::vector<std::string>> needs = {
      {"db", {}}, {"front", {"db"}}, {"edge", {"front"}}};
  EXPECT_EQ(StopWaves({"db", "front", "edge"}, needs), (Waves{{"edge"}, {"front"}, {"db"}}));
}

TEST(StopWaves, UnrelatedCellsAndSharedNeedsStopTogetherInTheGivenOrder) {
  const std::map<std::string, std::vector<std::string>> needs = {
      {"app", {"db", "cache"}}, {"admin", {"db"}}, {"cache", {}}, {"logs", {}}};
  EXPECT_EQ(StopWaves({"db", "cache", "app", "admin", "logs"}, needs),
            (Waves{{"app", "admin", "logs"}, {"db", "cache"}}));
}

TEST(StopWaves, ANeedOutsideTheCellsStoppedHoldsNothingBack) {
  const std::map<std::string, std::vector<std::string>> needs = {{"front", {"db"}}};
  // A stop of db alone does not wait for front, which is not being stopped (a started cell keeps
  // running when its need stops).
  EXPECT_EQ(StopWaves({"db"}, needs), (Waves{{"db"}}));
  EXPECT_EQ(StopWaves({"front"}, needs), (Waves{{"front"}}));
  EXPECT_THAT(StopWaves({}, needs), ElementsAre());
}

TEST(StopWaves, ACycleEndsInOneLastWaveRatherThanLooping) {
  const std::map<std::string, std::vector<std::string>> needs = {
      {"a", {"b"}}, {"b", {"a"}}, {"c", {"a"}}};
  EXPECT_EQ(StopWaves({"a", "b", "c"}, needs), (Waves{{"c"}, {"a", "b"}}));
}

}  // namespace
}  // namespace bulkhead::ctl
