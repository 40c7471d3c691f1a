// SPDX-License-Identifier: MIT
#include "ctl/stop_waves.h"

#include <algorithm>

namespace bulkhead::ctl {

std::vector<std::vector<std::string>> StopWaves(
    const std::vector<std::string>& cells,
    const std::map<std::string, std::vector<std::string>>& needs) {
  std::vector<std::vector<std::string>> waves;
  std::vector<std::string> left = cells;
  // True when a cell still left (other than `name`) needs `name`.
  auto needed = [&left, &needs](const std::string& name) {
    return std::any_of(left.begin(), left.end(), [&](const std::string& other) {
      auto it = needs.find(other);
      return other != name && it != needs.end() &&
             std::find(it->second.begin(), it->second.end(), name) != it->second.end();
    });
  };
  while (!left.empty()) {
    std::vector<std::string> wave;
    for (const std::string& cell : left) {
      if (!needed(cell)) wave.push_back(cell);
    }
    if (wave.empty()) wave = left;  // a cycle: the rest together
    std::erase_if(left, [&wave](const std::string& cell) {
      return std::find(wave.begin(), wave.end(), cell) != wave.end();
    });
    waves.push_back(std::move(wave));
  }
  return waves;
}

}  // namespace bulkhead::ctl
