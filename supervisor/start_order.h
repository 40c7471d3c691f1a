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

#include "admission/availability.h"
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
  uint64_t next_start_at_ms = 0;  // kBackoff: when its next worker starts (Clock ms); else unread
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

// What the callers of a cell whose start is held (kWaitingToStart) are told of that start.
struct HeldStart {
  bool stuck = false;      // IdleCellBehind names a cell: no start is due until an operator's
  uint64_t due_at_ms = 0;  // not stuck: the latest next start (Clock ms) of a need in backoff,
                           // down the chain of held needs too; 0 when none is in backoff
  bool operator==(const HeldStart&) const = default;
};

// The held start of `held_cell` as its needs stand: stuck behind an idle cell, else due no
// sooner than the last of its needs in backoff starts again (a retry before that is refused).
HeldStart HeldStartOf(std::span<const OrderNode> nodes, std::string_view held_cell);

// What a cell's callers are told (admission::Availability) given its lifecycle's availability
// and its start order: a held start that is not stuck is a start due (Retry-After), at its
// needs' next start when one is in backoff, else at a time not known; a stuck one is none due.
admission::Availability ShownAvailability(const admission::Availability& lifecycle, OrderStep step,
                                          const HeldStart& held);

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
