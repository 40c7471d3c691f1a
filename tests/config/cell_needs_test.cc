// SPDX-License-Identifier: MIT
// `needs` (config/cell_needs.h): the cycle finder as a table (a graph in, the cycles out), and the
// errors ParseConfig gives for a bad list, an unknown name and a cycle, each at the element's
// file:line:col.
#include "config/cell_needs.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "tests/config/config_test_util.h"

namespace bulkhead::config {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

struct CycleCase {
  const char* label;
  std::vector<std::pair<std::string, std::vector<std::string>>> graph;  // name, needs
  std::vector<std::string> cycles;  // "cells[cell].needs[need]: a -> b -> a"
};

std::vector<CellNeeds> CellsOf(const CycleCase& c) {
  std::vector<CellNeeds> cells;
  for (const auto& [name, needs] : c.graph) cells.push_back({name, needs});
  return cells;
}

TEST(NeedsCycles, Table) {
  const std::vector<CycleCase> cases = {
      {"no needs", {{"a", {}}, {"b", {}}}, {}},
      {"chain", {{"a", {"b"}}, {"b", {"c"}}, {"c", {}}}, {}},
      {"diamond", {{"a", {"b", "c"}}, {"b", {"d"}}, {"c", {"d"}}, {"d", {}}}, {}},
      {"self", {{"a", {"a"}}}, {"0.0: a -> a"}},
      {"two", {{"a", {"b"}}, {"b", {"a"}}}, {"1.0: a -> b -> a"}},
      {"three, entered in the middle",
       {{"x", {"b"}}, {"a", {"b"}}, {"b", {"c"}}, {"c", {"a"}}},
       {"1.0: b -> c -> a -> b"}},
      {"unknown names skipped", {{"a", {"nope", "b"}}, {"b", {}}}, {}},
      {"two separate cycles",
       {{"a", {"b"}}, {"b", {"a"}}, {"c", {"d"}}, {"d", {"c"}}},
       {"1.0: a -> b -> a", "3.0: c -> d -> c"}},
      {"second need closes it", {{"a", {"c", "b"}}, {"b", {"a"}}, {"c", {}}}, {"1.0: a -> b -> a"}},
  };
  for (const CycleCase& c : cases) {
    std::vector<std::string> found;
    for (const NeedsCycle& cycle : NeedsCycles(CellsOf(c))) {
      found.push_back(std::to_string(cycle.cell) + "." + std::to_string(cycle.need) + ": " +
                      cycle.Describe());
    }
    EXPECT_EQ(found, c.cycles) << c.label;
  }
}

TEST(ParseConfig, NeedsReadInFileOrder) {
  Config config = MustParse(R"([supervisor]
runtime_dir = "/run/bh"
[cells.front]
command = ["x"]
max_concurrent = 1
needs = ["catalog", "auth"]
[cells.catalog]
command = ["x"]
max_concurrent = 1
[cells.auth]
command = ["x"]
max_concurrent = 1
needs = ["catalog"]
)");
  ASSERT_EQ(config.cells.size(), 3u);
  EXPECT_THAT(config.cells[0].needs, ElementsAre("catalog", "auth"));
  EXPECT_THAT(config.cells[1].needs, IsEmpty());
  EXPECT_THAT(config.cells[2].needs, ElementsAre("catalog"));
}

TEST(ParseConfig, NeedsCycleNamedAtTheNeedThatClosesIt) {
  EXPECT_THAT(Errors(R"([supervisor]
runtime_dir = "/run/bh"
[cells.a]
command = ["x"]
max_concurrent = 1
needs = ["c", "b"]
[cells.b]
command = ["x"]
max_concurrent = 1
needs = ["a"]
[cells.c]
command = ["x"]
max_concurrent = 1
)"),
              ElementsAre(At(10, 10, "cells.b.needs[0]",
                             "cycle: a -> b -> a; each cell of it would wait for the others to be "
                             "ready forever; remove one of these needs")));
}

TEST(ParseConfig, NeedsItself) {
  EXPECT_THAT(Errors(R"([supervisor]
runtime_dir = "/run/bh"
[cells.a]
command = ["x"]
max_concurrent = 1
needs = ["a"]
)"),
              ElementsAre(At(6, 10, "cells.a.needs[0]",
                             "cycle: a -> a; each cell of it would wait for the others to be "
                             "ready forever; remove one of these needs")));
}

TEST(ParseConfig, NeedsUnknownCell) {
  EXPECT_THAT(Errors(R"([supervisor]
runtime_dir = "/run/bh"
[cells.catalog]
command = ["x"]
max_concurrent = 1
[cells.front]
command = ["x"]
max_concurrent = 1
needs = ["catalog", "catalgo", "zzz"]
)"),
              ElementsAre(At(9, 21, "cells.front.needs[1]",
                             "no cell named \"catalgo\"; did you mean \"catalog\"?"),
                          At(9, 32, "cells.front.needs[2]",
                             "no cell named \"zzz\"; needs names other [cells.NAME] tables of "
                             "this file")));
}

TEST(ParseConfig, NeedsACellRefusedForAnotherKeyIsNotUnknown) {
  EXPECT_THAT(
      Errors(R"([supervisor]
runtime_dir = "/run/bh"
[cells.catalog]
command = ["x"]
max_concurrent = 0
[cells.front]
command = ["x"]
max_concurrent = 1
needs = ["catalog"]
)"),
      ElementsAre(At(5, 18, "cells.catalog.max_concurrent", "must be between 1 and 65535, got 0")));
}

// A cell refused for another key still has its needs checked, in the same round: its wrong need
// was reported only once the other error was fixed. "did you mean" ignores case.
TEST(ParseConfig, NeedsOfACellRefusedForAnotherKeyAreCheckedWithIt) {
  EXPECT_THAT(
      Errors(R"([supervisor]
runtime_dir = "/run/bh"
[cells.catalog]
command = ["x"]
max_concurrent = 1
[cells.front]
command = ["x"]
max_concurrent = 0
needs = ["Catalog", 7, "front"]
)"),
      ElementsAre(At(8, 18, "cells.front.max_concurrent", "must be between 1 and 65535, got 0"),
                  At(9, 10, "cells.front.needs[0]",
                     "no cell named \"Catalog\"; did you mean \"catalog\"?"),
                  At(9, 21, "cells.front.needs[1]", "expected string, got integer"),
                  At(9, 24, "cells.front.needs[2]",
                     "cycle: front -> front; each cell of it would wait for the others to be ready "
                     "forever; remove one of these needs")));
}

TEST(ParseConfig, NeedsBadList) {
  EXPECT_THAT(
      Errors(R"([supervisor]
runtime_dir = "/run/bh"
[cells.b]
command = ["x"]
max_concurrent = 1
[cells.a]
command = ["x"]
max_concurrent = 1
needs = ["b", 3, "b", "-x"]
[cells.c]
command = ["x"]
max_concurrent = 1
needs = "b"
)"),
      ElementsAre(At(9, 15, "cells.a.needs[1]", "expected string, got integer"),
                  At(9, 18, "cells.a.needs[2]", "\"b\" is already in needs; name each cell once"),
                  At(9, 23, "cells.a.needs[3]",
                     "must name a cell (1 to 64 characters of A-Z, a-z, 0-9, '_' and "
                     "'-'), got \"-x\""),
                  At(13, 9, "cells.c.needs",
                     "expected array of strings, got string (write the cells this one "
                     "needs as needs = [\"catalog\", \"auth\"])")));
}

}  // namespace
}  // namespace bulkhead::config
