// SPDX-License-Identifier: MIT
// LimitsParser: the keys of [cells.NAME] that limit what the cell's processes may use, the cgroup
// v2 limits (cpu_max, cpu_max_period, cpu_weight, memory_max, memory_high, memory_swap_max,
// pids_max; the kernel's Documentation/admin-guide/cgroup-v2.rst) and the OOM keys (oom_policy,
// oom_score_adjust; systemd.service(5) OOMPolicy=, systemd.exec(5) OOMScoreAdjust=), with their
// checks across keys. LimitsParser reads cpu_max, cpu_max_period, memory_max and memory_high; the
// others are read from their ValueSpec (config/config_keys.h). Internal to config/; one per cell
// table, thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "config/config.h"
#include "config/config_keys.h"
#include "config/value_reader.h"

namespace bulkhead::config {

class LimitsParser {
 public:
  explicit LimitsParser(ValueReader& reader) : reader_(reader) {}

  // Reads the key `id` (cpu_max, cpu_max_period, memory_max or memory_high) at `value` into
  // `cell`; false after adding its error.
  bool ParseKey(CellKeyId id, const toml::node& value, const std::string& key_path,
                CellConfig& cell);
  // Once the cell's table is read: computes cpu_max_quota_us from cpu_max and cpu_max_period
  // (refused under the kernel's 1ms), and checks memory_high <= memory_max. `path` is the cell's
  // key path ("cells.a"). False after adding an error.
  bool Finish(const std::string& path, CellConfig& cell);

 private:
  // `cpu_max`: a CPU share, in thousandths of a percent (config/cpu_share.h), no more than the
  // host's CPUs.
  std::optional<uint64_t> ExpectCpuShare(const toml::node& node, const std::string& path);

  ValueReader& reader_;
  // For the cpu.max quota, computed once the period is known: the share and where it was written.
  std::optional<std::pair<SourcePosition, uint64_t>> cpu_share_;
  bool cpu_max_period_ok_ = true;
  // For the memory_high <= memory_max check: each as written, and where.
  std::optional<std::pair<SourcePosition, std::string>> memory_max_written_;
  std::optional<std::pair<SourcePosition, std::string>> memory_high_written_;
};

}  // namespace bulkhead::config
