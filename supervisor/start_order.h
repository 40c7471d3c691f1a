// SPDX-License-Identifier: MIT
// Start and stop order between cells (`needs`, docs/config.md "Dependencies"): pure functions
// from the cells' needs, lifecycle states and ordering steps to the cells that may start or stop
// now. The Supervisor holds each cell's OrderStep and feeds these the whole set whenever a cell
// changes state. The needs graph is acyclic and names only cells of the set (config/cell_needs.h
// refuses the rest); a need naming no node counts as a stopped cell. Thread-compatible.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lifecycle/lifecycle.h"

namespace bulkhead::supervisor {

// Where a cell stands in the ordering, beside its lifecycle state. One value per cell.
enum class OrderStep : uint8_t {
  kFree,            // nothing held: the lifecycle alone decides (started or stopped cells alike)
  kWaitingToStart,  // a start was asked (boot, start, restart, a reload adding it) and is held
                    // until every cell it needs is running; its lifecycle state is stopped or
                    // failed (no worker)
  kStopHeld,        // shutdown: its stop is held until every cell that needs it has stopped
  kStopAsked,       // shutdown: Stop was called, its on_stopped has not run yet
  kStopped,         // shutdown: its on_stopped ran
};

// What the ordering reads of one cell. Views into the caller's data, valid for one call.
struct OrderNode {
  std::string_view name;
  std::span<const std::string> needs;
  lifecycle::Lifecycle::State state = lifecycle::Lifecycle::State::kStopped;
  OrderStep step = OrderStep::kFree;
};

// A need that is not ready: the needed cell's name and lifecycle state, and whether its own start
// is held for its needs (OrderStep::kWaitingToStart; its lifecycle state is then stopped or
// failed, but it starts by itself once they run).
struct UnreadyNeed {
  std::string cell;
  lifecycle::Lifecycle::State state = lifecycle::Lifecycle::State::kStopped;
  bool held = false;
  bool operator==(const UnreadyNeed&) const = default;
};

// For a need whose own start is held (UnreadyNeed::held): the first cell down its chain of needs,
// depth first in `needs` order, that is stopped or failed and not held itself, i.e. that does not
// start by itself, which holds the whole chain until an operator starts it; "" when every held
// start down the chain is on its way. (edge -> front (waiting) -> db (stopped): "db".)
std::string IdleCellBehind(std::span<const OrderNode> nodes, std::string_view held_cell);

// The state an operator reads for `need`, as status names a cell: "waiting" when its start is
// held, else its lifecycle state's name ("starting", "backoff", "stopped", ...).
const char* UnreadyStateName(const UnreadyNeed& need);

// The needs of nodes[index] whose cell is not running (ready), in `needs` order.
std::vector<UnreadyNeed> UnreadyNeeds(std::span<const OrderNode> nodes, size_t index);

// The indices, ascending, of the nodes in kWaitingToStart whose needs are all running.
std::vector<size_t> CellsToStart(std::span<const OrderNode> nodes);

// The indices, ascending, of the nodes in kStopHeld that no node in kStopHeld or kStopAsked needs:
// dependents stop first, cells without relation together.
std::vector<size_t> CellsToStop(std::span<const OrderNode> nodes);

// The indices of `nodes` (or of those at `among`), each after the cells it needs that are among
// them, else in the given order: the order in which to ask for their starts, so that a held
// start names the cells it waits for as they are ("waiting", "starting"), not "stopped" before
// their own start was asked. Needs form no cycle (the config refuses one); a node whose needs
// cannot be ordered comes last, in the given order.
std::vector<size_t> NeedsFirst(std::span<const OrderNode> nodes, std::span<const size_t> among);

// "catalog (starting), auth (stopped), search (waiting)", for status and the log.
std::string DescribeUnready(std::span<const UnreadyNeed> unready);

}  // namespace bulkhead::supervisor
