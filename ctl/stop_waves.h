// SPDX-License-Identifier: MIT
// The order in which `bulkheadctl stop` stops several cells (`stop --all`, `stop A B`): a cell
// stops before the cells it needs, as bulkheadd's own shutdown does (supervisor/start_order.h
// CellsToStop; docs/config.md "Dependencies"). Pure: no I/O. Thread-compatible.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace bulkhead::ctl {

// Splits `cells` into waves to stop one after the other: each wave holds the cells of those left
// that no other cell left needs (a cell's needs: `needs`, the status's "needs" of each cell; a
// cell missing from it needs nothing), in the order of `cells`. Needs naming cells outside
// `cells` are ignored (a cell not being stopped holds nothing back). The needs graph is acyclic
// (the config refuses cycles); were it not, the cells of a cycle make one last wave together.
std::vector<std::vector<std::string>> StopWaves(
    const std::vector<std::string>& cells,
    const std::map<std::string, std::vector<std::string>>& needs);

}  // namespace bulkhead::ctl
