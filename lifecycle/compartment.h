// SPDX-License-Identifier: MIT
// A cell's compartment as the kernel holds it: its cgroup v2 tree and limits, and whether each
// limit is in force (for status and metrics).
#pragma once

#include <cstdint>
#include <string>

#include "cell/cgroup.h"

namespace bulkhead::lifecycle {

// The kernel side of a cell: where its cgroup lives (null tree: limits not enforced) and the limits
// written to it (cgroup v2: cpu.max, cpu.weight, memory.max, memory.high, memory.swap.max,
// pids.max).
struct CellCompartment {
  const cell::CgroupTree* tree = nullptr;
  cell::CgroupLimits limits;
  std::string not_enforced_reason;  // why tree is null, shown by status
  // cgroup = "required": a worker never starts unless every limit is written (a failed start
  // otherwise, its reason in last_exit). "auto": what can be written is, the rest is logged.
  bool required = false;
};

// Whether one limit of a cell (cell::Limit) is in force, for status and metrics.
enum class LimitState : uint8_t {
  kEnforced,     // set, and the kernel holds the configured value
  kUnlimited,    // not set: nothing to enforce
  kNotEnforced,  // set (or its reset failed), but the kernel does not hold it
};
// "enforced", "unlimited", "not enforced".
const char* LimitStateName(LimitState state);

}  // namespace bulkhead::lifecycle
