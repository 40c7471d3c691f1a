// SPDX-License-Identifier: MIT
// The checks of `needs` across the file: every name is a cell of the file, and no cell needs
// itself through others (a cycle would hold each of its cells' start forever). The graph walk is
// pure (NeedsCycles); CheckNeeds reports through the ValueReader at each offending
// `cells.NAME.needs[I]`. Internal to config/ (its tests call NeedsCycles). Thread-compatible.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"

namespace bulkhead::config {

class ValueReader;  // config/value_reader.h

// One node of the needs graph: a [cells.NAME] table's name and its `needs` as written (the
// parsed list for a valid cell; for a cell refused for another key, the array's elements by index,
// "" where an element is no cell name, and so refused already).
struct CellNeeds {
  std::string name;
  std::vector<std::string> needs;
};

// One cycle of the needs graph, found at the need that closes it: cells[cell].needs[need] names
// path.front(), and path walks the cycle from it to `cell`'s name ("a", "b" for a -> b -> a).
struct NeedsCycle {
  size_t cell = 0;
  size_t need = 0;
  std::vector<std::string> path;
  // "a -> b -> a".
  std::string Describe() const;
};

// Every cycle, one per need that closes one in a depth-first walk in file order (cells, then
// their needs); a need naming no cell of `cells` is skipped. Empty for an acyclic graph.
std::vector<NeedsCycle> NeedsCycles(std::span<const CellNeeds> cells);

// Adds an error at each `cells.NAME.needs[I]` of `cells` (every [cells.NAME] of the file, valid or
// not, so that a cell's wrong need is reported with its other errors) that names no cell in
// `known_names` (a cell refused for another key is not unknown; "did you mean" ignores case), and
// at the need that closes each cycle among `cells`. `config.positions` holds the elements'
// positions.
void CheckNeeds(std::span<const CellNeeds> cells, const Config& config,
                std::span<const std::string> known_names, ValueReader& reader);

}  // namespace bulkhead::config
