// SPDX-License-Identifier: MIT
#include "supervisor/start_order.h"

#include <algorithm>

namespace bulkhead::supervisor {
namespace {

const OrderNode* Find(std::span<const OrderNode> nodes, std::string_view name) {
  for (const OrderNode& node : nodes) {
    if (node.name == name) return &node;
  }
  return nullptr;
}

}  // namespace

std::vector<UnreadyNeed> UnreadyNeeds(std::span<const OrderNode> nodes, size_t index) {
  std::vector<UnreadyNeed> unready;
  for (const std::string& need : nodes[index].needs) {
    const OrderNode* node = Find(nodes, need);
    const lifecycle::Lifecycle::State state =
        node == nullptr ? lifecycle::Lifecycle::State::kStopped : node->state;
    const bool held = node != nullptr && node->step == OrderStep::kWaitingToStart;
    if (state != lifecycle::Lifecycle::State::kRunning) unready.push_back({need, state, held});
  }
  return unready;
}

std::vector<size_t> CellsToStart(std::span<const OrderNode> nodes) {
  std::vector<size_t> startable;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].step == OrderStep::kWaitingToStart && UnreadyNeeds(nodes, i).empty()) {
      startable.push_back(i);
    }
  }
  return startable;
}

std::vector<size_t> CellsToStop(std::span<const OrderNode> nodes) {
  std::vector<size_t> stoppable;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].step != OrderStep::kStopHeld) continue;
    const bool needed = std::any_of(nodes.begin(), nodes.end(), [&](const OrderNode& other) {
      return (other.step == OrderStep::kStopHeld || other.step == OrderStep::kStopAsked) &&
             std::find(other.needs.begin(), other.needs.end(), nodes[i].name) != other.needs.end();
    });
    if (!needed) stoppable.push_back(i);
  }
  return stoppable;
}

std::vector<size_t> NeedsFirst(std::span<const OrderNode> nodes, std::span<const size_t> among) {
  std::vector<size_t> order;
  std::vector<size_t> left(among.begin(), among.end());
  auto is_left = [&](std::string_view name) {
    return std::any_of(left.begin(), left.end(), [&](size_t i) { return nodes[i].name == name; });
  };
  // Rounds of Kahn's algorithm over the few cells of a config: each round takes, in the given
  // order, every node none of whose needs is still left.
  while (!left.empty()) {
    std::vector<size_t> ready;
    for (size_t i : left) {
      if (std::none_of(nodes[i].needs.begin(), nodes[i].needs.end(), is_left)) ready.push_back(i);
    }
    if (ready.empty()) break;  // a cycle: the config refuses one; the rest follow as given
    for (size_t i : ready) {
      order.push_back(i);
      left.erase(std::find(left.begin(), left.end(), i));
    }
  }
  order.insert(order.end(), left.begin(), left.end());
  return order;
}

namespace {

std::string IdleCellBehind(std::span<const OrderNode> nodes, std::string_view held_cell,
                           std::vector<std::string_view>& seen) {
  if (std::find(seen.begin(), seen.end(), held_cell) != seen.end()) return "";  // a cycle
  seen.push_back(held_cell);
  const OrderNode* node = Find(nodes, held_cell);
  if (node == nullptr) return "";
  for (const std::string& need : node->needs) {
    const OrderNode* needed = Find(nodes, need);
    if (needed == nullptr) continue;
    if (needed->step == OrderStep::kWaitingToStart) {
      std::string idle = IdleCellBehind(nodes, need, seen);
      if (!idle.empty()) return idle;
    } else if (needed->state == lifecycle::Lifecycle::State::kStopped ||
               needed->state == lifecycle::Lifecycle::State::kFailed) {
      return need;
    }
  }
  return "";
}

}  // namespace

std::string IdleCellBehind(std::span<const OrderNode> nodes, std::string_view held_cell) {
  std::vector<std::string_view> seen;
  return IdleCellBehind(nodes, held_cell, seen);
}

namespace {

// The latest next start among held_cell's needs in backoff, and among those of its held needs.
uint64_t LastNeedStartAtMs(std::span<const OrderNode> nodes, std::string_view held_cell,
                           std::vector<std::string_view>& seen) {
  if (std::find(seen.begin(), seen.end(), held_cell) != seen.end()) return 0;  // a cycle
  seen.push_back(held_cell);
  const OrderNode* node = Find(nodes, held_cell);
  if (node == nullptr) return 0;
  uint64_t last = 0;
  for (const std::string& need : node->needs) {
    const OrderNode* needed = Find(nodes, need);
    if (needed == nullptr) continue;
    if (needed->step == OrderStep::kWaitingToStart) {
      last = std::max(last, LastNeedStartAtMs(nodes, need, seen));
    } else if (needed->state == lifecycle::Lifecycle::State::kBackoff) {
      last = std::max(last, needed->next_start_at_ms);
    }
  }
  return last;
}

}  // namespace

HeldStart HeldStartOf(std::span<const OrderNode> nodes, std::string_view held_cell) {
  if (!IdleCellBehind(nodes, held_cell).empty()) return {.stuck = true};
  std::vector<std::string_view> seen;
  return {.due_at_ms = LastNeedStartAtMs(nodes, held_cell, seen)};
}

admission::Availability ShownAvailability(const admission::Availability& lifecycle, OrderStep step,
                                          const HeldStart& held) {
  using NextStart = admission::Availability::NextStart;
  admission::Availability shown = lifecycle;
  if (step != OrderStep::kWaitingToStart || held.stuck || shown.next_start != NextStart::kNone) {
    return shown;
  }
  shown.next_start = held.due_at_ms == 0 ? NextStart::kUnknown : NextStart::kAt;
  shown.next_start_at_ms = held.due_at_ms;
  return shown;
}

const char* UnreadyStateName(const UnreadyNeed& need) {
  return need.held ? "waiting" : lifecycle::Lifecycle::StateName(need.state);
}

std::string DescribeUnready(std::span<const UnreadyNeed> unready) {
  std::string text;
  for (const UnreadyNeed& need : unready) {
    if (!text.empty()) text += ", ";
    text += need.cell + " (" + UnreadyStateName(need) + ")";
  }
  return text;
}

}  // namespace bulkhead::supervisor
