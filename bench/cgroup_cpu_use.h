// SPDX-License-Identifier: MIT
// CgroupCpuUse: a cell's cgroup CPU use over a bench's measured rounds, from status JSON's
// "cgroup" (cpu.stat) and "limits" (cpu.max): the CPUs it used, the share of its cpu.max quota
// that is, and the share of periods in which it was throttled. What tells whether a concurrency
// limit kept the quota busy (docs/benchmarks.md, "Adaptive concurrency"). Pure; thread-compatible.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace bulkhead::bench {

struct CgroupCpuUse {
  uint64_t usage_us = 0;   // cpu.stat usage_usec, summed over the rounds
  uint64_t periods = 0;    // cpu.stat nr_periods, summed
  uint64_t throttled = 0;  // cpu.stat nr_throttled, summed
  double seconds = 0;      // wall time of the rounds
  double quota_share = 0;  // cpu.max quota / period (0.2 at 20%); 0 without a quota
  bool read = false;       // a round with the cgroup's numbers was added (or, from Of, read)

  // One reading of a cell's status JSON (CellStatusJson); read false without its "cgroup".
  static CgroupCpuUse Of(const nlohmann::json& cell_json);
  // Adds one round: readings `before` and `after` (Of), `round_seconds` apart. A round without
  // both readings, or whose usage went back (a new cgroup), adds nothing.
  void Add(const CgroupCpuUse& before, const CgroupCpuUse& after, double round_seconds);
  // "cpu 0.187, quota used 0.93, throttled 0.61 of periods" (CPUs used, that over the quota,
  // throttled periods over all); "cpu 0.187" without a quota; "" before a round was added.
  std::string Describe() const;
};

}  // namespace bulkhead::bench
