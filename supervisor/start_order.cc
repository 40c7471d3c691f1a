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
