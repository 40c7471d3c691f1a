// SPDX-License-Identifier: MIT
#include "config/cell_needs.h"

#include <algorithm>
#include <cstdint>
#include <optional>

#include "base/closest_match.h"
#include "config/value_reader.h"

namespace bulkhead::config {
namespace {

std::optional<size_t> IndexOf(std::span<const CellNeeds> cells, std::string_view name) {
  for (size_t i = 0; i < cells.size(); ++i) {
    if (cells[i].name == name) return i;
  }
  return std::nullopt;
}

// Depth-first walk with the usual three colours: a need that reaches a cell still on the stack
// closes a cycle.
class CycleFinder {
 public:
  explicit CycleFinder(std::span<const CellNeeds> cells)
      : cells_(cells), colour_(cells.size(), Colour::kUnseen) {}

  std::vector<NeedsCycle> Run() {
    for (size_t i = 0; i < cells_.size(); ++i) {
      if (colour_[i] == Colour::kUnseen) Visit(i);
    }
    return std::move(cycles_);
  }

 private:
  enum class Colour : uint8_t {
    kUnseen,   // not reached yet
    kOnStack,  // reached, its needs being walked: a need back to it closes a cycle
    kDone,     // it and everything it needs walked
  };

  void Visit(size_t cell) {
    colour_[cell] = Colour::kOnStack;
    stack_.push_back(cell);
    const std::vector<std::string>& needs = cells_[cell].needs;
    for (size_t n = 0; n < needs.size(); ++n) {
      std::optional<size_t> target = needs[n].empty() ? std::nullopt : IndexOf(cells_, needs[n]);
      if (!target) continue;
      if (colour_[*target] == Colour::kOnStack) {
        NeedsCycle cycle{cell, n, {}};
        auto from = std::find(stack_.begin(), stack_.end(), *target);
        for (auto it = from; it != stack_.end(); ++it) cycle.path.push_back(cells_[*it].name);
        cycles_.push_back(std::move(cycle));
      } else if (colour_[*target] == Colour::kUnseen) {
        Visit(*target);
      }
    }
    stack_.pop_back();
    colour_[cell] = Colour::kDone;
  }

  std::span<const CellNeeds> cells_;
  std::vector<Colour> colour_;
  std::vector<size_t> stack_;
  std::vector<NeedsCycle> cycles_;
};

}  // namespace

std::string NeedsCycle::Describe() const {
  std::string text;
  for (const std::string& name : path) text += name + " -> ";
  return text + (path.empty() ? "" : path.front());
}

std::vector<NeedsCycle> NeedsCycles(std::span<const CellNeeds> cells) {
  return CycleFinder(cells).Run();
}

void CheckNeeds(std::span<const CellNeeds> cells, const Config& config,
                std::span<const std::string> known_names, ValueReader& reader) {
  std::vector<std::string_view> candidates(known_names.begin(), known_names.end());
  const auto need_key = [](const CellNeeds& cell, size_t n) {
    return JoinKey("cells", cell.name) + ".needs[" + std::to_string(n) + "]";
  };
  for (const CellNeeds& cell : cells) {
    for (size_t n = 0; n < cell.needs.size(); ++n) {
      const std::string& name = cell.needs[n];
      if (name.empty()) continue;  // refused already, as no cell name
      if (std::find(known_names.begin(), known_names.end(), name) != known_names.end()) continue;
      std::string message = "no cell named " + Quoted(name);
      if (std::string_view close = ClosestMatch(name, candidates); !close.empty()) {
        message += "; did you mean " + Quoted(close) + "?";
      } else {
        message += "; needs names other [cells.NAME] tables of this file";
      }
      const std::string key = need_key(cell, n);
      reader.AddError(config.PositionOf(key), key, std::move(message));
    }
  }
  for (const NeedsCycle& cycle : NeedsCycles(cells)) {
    const CellNeeds& cell = cells[cycle.cell];
    const std::string key = need_key(cell, cycle.need);
    reader.AddError(config.PositionOf(key), key,
                    "cycle: " + cycle.Describe() +
                        "; each cell of it would wait for the others to be ready forever; remove "
                        "one of these needs");
  }
}

}  // namespace bulkhead::config
