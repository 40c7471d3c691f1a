// SPDX-License-Identifier: MIT
// The limit and OOM keys of a cell (config/limits.h).
#include "config/limits.h"

#include <chrono>

#include "base/check.h"
#include "base/status.h"
#include "config/cpu_share.h"

namespace bulkhead::config {
namespace {

using std::chrono::milliseconds;

// cgroup-v2.rst: cpu.max takes a period of 1ms to 1s and a quota of at least 1ms (the kernel's
// min_cfs_quota_period and max_cfs_quota_period).
constexpr milliseconds kMinCpuMaxPeriod{1};
constexpr milliseconds kMaxCpuMaxPeriod{1000};
constexpr uint64_t kMinCpuMaxQuotaUs = 1000;

}  // namespace

bool LimitsParser::ParseKey(CellKeyId id, const toml::node& value, const std::string& key_path,
                            CellConfig& cell) {
  bool key_ok = false;
  switch (id) {
    case CellKeyId::kCpuMax: {
      auto share = ExpectCpuShare(value, key_path);
      key_ok = share.has_value();
      if (share) cpu_share_.emplace(At(value.source()), *share);
      break;
    }
    case CellKeyId::kCpuMaxPeriod: {
      auto period = reader_.ExpectDuration(value, key_path, /*allow_zero=*/true);
      if (period && (*period < kMinCpuMaxPeriod || *period > kMaxCpuMaxPeriod)) {
        reader_.AddError(At(value.source()), key_path,
                         "must be between 1ms and 1s (the cpu.max period range), got " +
                             Quoted(value.as_string()->get()));
        period.reset();
      }
      key_ok = period.has_value();
      cpu_max_period_ok_ = key_ok;
      if (period) {
        cell.cpu_max_period_us = static_cast<uint64_t>(
            std::chrono::duration_cast<std::chrono::microseconds>(*period).count());
      }
      break;
    }
    case CellKeyId::kMemoryMax: {
      cell.memory_max = reader_.ExpectSize(
          value, key_path,
          "a memory.max of 0 would OOM-kill the cell at once; leave memory_max out for no limit");
      key_ok = cell.memory_max.has_value();
      if (key_ok) memory_max_written_.emplace(At(value.source()), SizeAsWritten(value));
      break;
    }
    case CellKeyId::kMemoryHigh: {
      cell.memory_high =
          reader_.ExpectSize(value, key_path,
                             "a memory.high of 0 would throttle the cell from the start; "
                             "leave memory_high out for no limit");
      key_ok = cell.memory_high.has_value();
      if (key_ok) memory_high_written_.emplace(At(value.source()), SizeAsWritten(value));
      break;
    }
    default:
      BH_CHECK(false);  // cell_table.cc hands over only the keys above
  }
  return key_ok;
}

bool LimitsParser::Finish(const std::string& path, CellConfig& cell) {
  bool ok = true;
  if (cpu_share_ && cpu_max_period_ok_) {
    const uint64_t quota_us = CpuQuotaUs(cpu_share_->second, cell.cpu_max_period_us);
    if (quota_us < kMinCpuMaxQuotaUs) {
      reader_.AddError(cpu_share_->first, JoinKey(path, "cpu_max"),
                       "gives a cpu.max quota of " + std::to_string(quota_us) + " μs per " +
                           std::to_string(cell.cpu_max_period_us) +
                           " μs period, below the kernel's minimum of 1000 μs; raise cpu_max or "
                           "cpu_max_period");
      ok = false;
    } else {
      cell.cpu_max_quota_us = quota_us;
    }
  }
  if (memory_max_written_ && memory_high_written_ && *cell.memory_high > *cell.memory_max) {
    reader_.AddError(memory_high_written_->first, JoinKey(path, "memory_high"),
                     "must be at most memory_max (" + memory_max_written_->second + "), got " +
                         memory_high_written_->second);
    ok = false;
  }
  return ok;
}

// `cpu_max`: a CPU share, in thousandths of a percent (config/cpu_share.h), no more than the
// host's CPUs.
std::optional<uint64_t> LimitsParser::ExpectCpuShare(const toml::node& node,
                                                     const std::string& path) {
  std::optional<std::string> text = reader_.ExpectString(
      node, path, "write a share of one CPU as a percentage string, such as \"50%\"");
  if (!text) return std::nullopt;
  Result<uint64_t> share = ParseCpuShare(*text);
  if (!share.ok()) {
    reader_.AddError(At(node.source()), path, share.status().message());
    return std::nullopt;
  }
  const uint64_t host_share = uint64_t{reader_.host().cpus} * 100 * kCpuShareScale;
  if (share.value() > host_share) {
    reader_.AddError(At(node.source()), path,
                     *text + " is above the 100% × " + std::to_string(reader_.host().cpus) +
                         (reader_.host().cpus == 1 ? " CPU" : " CPUs") + " of this host");
    return std::nullopt;
  }
  return share.value();
}

}  // namespace bulkhead::config
