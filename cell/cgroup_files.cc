// SPDX-License-Identifier: MIT
// cgroup v2 interface files as data; see cgroup_files.h. Formats and ranges follow the kernel's
// Documentation/admin-guide/cgroup-v2.rst.
#include "cell/cgroup_files.h"

#include <algorithm>
#include <charconv>

namespace bulkhead::cell {
namespace {

// Bounds of cpu.max the kernel enforces (kernel/sched/core.c: 1 ms minimum quota and period,
// 1 s maximum period); checked here so that the error names the field.
constexpr uint64_t kMinCpuQuotaUs = 1000;
constexpr uint64_t kMinCpuPeriodUs = 1000;
constexpr uint64_t kMaxCpuPeriodUs = 1000000;
constexpr uint32_t kMinCpuWeight = 1;
constexpr uint32_t kMaxCpuWeight = 10000;
constexpr size_t kMaxCellNameLength = 64;
// PSI trigger windows the kernel accepts (psi.rst, "Monitoring for pressure thresholds").
constexpr uint64_t kMinPressureWindowUs = 500'000;
constexpr uint64_t kMaxPressureWindowUs = 10'000'000;

std::string_view Trim(std::string_view text) {
  constexpr std::string_view kSpace = " \t\n";
  size_t begin = text.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  size_t end = text.find_last_not_of(kSpace);
  return text.substr(begin, end - begin + 1);
}

bool ParseU64(std::string_view text, uint64_t* value) {
  if (text.empty()) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *value);
  return ec == std::errc() && end == text.data() + text.size();
}

// A percentage as the kernel prints it ("12.34"): digits and one '.'; no sign, no exponent.
bool ParsePercent(std::string_view text, double* value) {
  if (text.empty() || text.find_first_not_of("0123456789.") != std::string_view::npos) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *value);
  return ec == std::errc() && end == text.data() + text.size() && *value <= 100;
}

// One line of a pressure file after its "some"/"full": space-separated key=value pairs.
Status ParsePressureLine(std::string_view line, PressureLine* out) {
  bool has_total = false;
  while (!(line = Trim(line)).empty()) {
    const size_t end = line.find(' ');
    const std::string_view pair = line.substr(0, end);
    line.remove_prefix(end == std::string_view::npos ? line.size() : end);
    const size_t equals = pair.find('=');
    if (equals == std::string_view::npos) {
      return Status::Error("malformed pressure field \"" + std::string(pair) + "\"");
    }
    const std::string_view key = pair.substr(0, equals);
    const std::string_view value = pair.substr(equals + 1);
    bool ok = true;
    if (key == "avg10") ok = ParsePercent(value, &out->avg10);
    if (key == "avg60") ok = ParsePercent(value, &out->avg60);
    if (key == "avg300") ok = ParsePercent(value, &out->avg300);
    if (key == "total") {
      ok = ParseU64(value, &out->total_us);
      has_total = true;
    }
    if (!ok) return Status::Error("malformed pressure field \"" + std::string(pair) + "\"");
  }
  if (!has_total) return Status::Error("pressure line without total");
  return Status::Ok();
}

// Calls `on_line` for each non-empty line of `text`, without its '\n'.
template <typename F>
void ForEachLine(std::string_view text, F on_line) {
  while (!text.empty()) {
    size_t newline = text.find('\n');
    std::string_view line = text.substr(0, newline);
    if (!line.empty()) on_line(line);
    if (newline == std::string_view::npos) break;
    text.remove_prefix(newline + 1);
  }
}

// A "flat keyed" file (cgroup-v2.rst, "Interface Files / Format"): "KEY VALUE" lines with
// unsigned decimal values. Calls `on_value(key, value)` for every line; fails on a malformed one.
// Unknown keys are the caller's to ignore, since kernels add keys.
template <typename F>
Status ParseFlatKeyed(std::string_view text, F on_value) {
  Status status = Status::Ok();
  ForEachLine(text, [&](std::string_view line) {
    if (!status.ok()) return;
    size_t space = line.find(' ');
    uint64_t value = 0;
    if (space == std::string_view::npos || !ParseU64(Trim(line.substr(space + 1)), &value)) {
      status = Status::Error("malformed flat-keyed line \"" + std::string(line) + "\"");
      return;
    }
    on_value(line.substr(0, space), value);
  });
  return status;
}

}  // namespace

// --- Parsers. ---

Result<std::string> ParseProcSelfCgroup(std::string_view text) {
  std::optional<std::string> path;
  ForEachLine(text, [&](std::string_view line) {
    // cgroup v2 is hierarchy 0 with an empty controller list (cgroups(7), /proc/pid/cgroup).
    if (!path && line.substr(0, 3) == "0::") path = std::string(line.substr(3));
  });
  if (!path) {
    return Status::Error(
        "no cgroup v2 line (\"0::/path\"): the system runs cgroup v1 only; boot with "
        "systemd.unified_cgroup_hierarchy=1");
  }
  if (path->empty() || path->front() != '/') {
    return Status::Error("cgroup v2 path \"" + *path + "\" is not absolute");
  }
  return *std::move(path);
}

Result<std::vector<pid_t>> ParseCgroupProcs(std::string_view text) {
  std::vector<pid_t> pids;
  Status status = Status::Ok();
  ForEachLine(text, [&](std::string_view line) {
    uint64_t pid = 0;
    if (!status.ok()) return;
    if (!ParseU64(Trim(line), &pid) || pid == 0 || pid > INT32_MAX) {
      status = Status::Error("malformed pid \"" + std::string(line) + "\"");
      return;
    }
    pids.push_back(static_cast<pid_t>(pid));
  });
  if (!status.ok()) return status;
  return pids;
}

Result<MemoryEvents> ParseMemoryEvents(std::string_view text) {
  MemoryEvents events;
  bool has_oom = false;
  bool has_oom_kill = false;
  Status status = ParseFlatKeyed(text, [&](std::string_view key, uint64_t value) {
    if (key == "low") events.low = value;
    if (key == "high") events.high = value;
    if (key == "max") events.max = value;
    if (key == "oom") {
      events.oom = value;
      has_oom = true;
    }
    if (key == "oom_kill") {
      events.oom_kill = value;
      has_oom_kill = true;
    }
    if (key == "oom_group_kill") {
      events.oom_group_kill = value;
      events.has_oom_group_kill = true;
    }
  });
  if (!status.ok()) return status;
  if (!has_oom || !has_oom_kill) return Status::Error("memory.events without oom or oom_kill");
  return events;
}

Result<CpuStat> ParseCpuStat(std::string_view text) {
  CpuStat stat;
  bool has_usage = false;
  Status status = ParseFlatKeyed(text, [&](std::string_view key, uint64_t value) {
    if (key == "usage_usec") {
      stat.usage_usec = value;
      has_usage = true;
    }
    if (key == "user_usec") stat.user_usec = value;
    if (key == "system_usec") stat.system_usec = value;
    if (key == "nr_periods") stat.nr_periods = value;
    if (key == "nr_throttled") stat.nr_throttled = value;
    if (key == "throttled_usec") stat.throttled_usec = value;
  });
  if (!status.ok()) return status;
  if (!has_usage) return Status::Error("cpu.stat without usage_usec");
  return stat;
}

Result<CgroupEvents> ParseCgroupEvents(std::string_view text) {
  CgroupEvents events;
  bool has_populated = false;
  Status status = ParseFlatKeyed(text, [&](std::string_view key, uint64_t value) {
    if (key == "populated") {
      events.populated = value != 0;
      has_populated = true;
    }
    if (key == "frozen") events.frozen = value != 0;
  });
  if (!status.ok()) return status;
  if (!has_populated) return Status::Error("cgroup.events without populated");
  return events;
}

Result<MemoryStat> ParseMemoryStat(std::string_view text) {
  MemoryStat stat;
  int required = 0;
  Status status = ParseFlatKeyed(text, [&](std::string_view key, uint64_t value) {
    if (key == "anon") {
      stat.anon = value;
      ++required;
    }
    if (key == "file") {
      stat.file = value;
      ++required;
    }
    if (key == "inactive_file") {
      stat.inactive_file = value;
      ++required;
    }
    if (key == "active_file") stat.active_file = value;
  });
  if (!status.ok()) return status;
  if (required != 3) return Status::Error("memory.stat without anon, file or inactive_file");
  return stat;
}

uint64_t CgroupUsage::working_set() const {
  return memory_current - std::min(memory_current, memory_stat.inactive_file);
}

std::string_view PressureFile(PressureResource resource) {
  switch (resource) {
    case PressureResource::kCpu:
      return "cpu.pressure";
    case PressureResource::kMemory:
      return "memory.pressure";
    case PressureResource::kIo:
      return "io.pressure";
  }
  return "?";
}

std::string_view PressureName(PressureResource resource) {
  std::string_view file = PressureFile(resource);
  return file.substr(0, file.find('.'));
}

Result<Pressure> ParsePressure(std::string_view text) {
  Pressure pressure;
  bool has_some = false;
  Status status = Status::Ok();
  ForEachLine(text, [&](std::string_view line) {
    if (!status.ok()) return;
    const size_t space = line.find(' ');
    const std::string_view kind = line.substr(0, space);
    if (kind != "some" && kind != "full") return;
    PressureLine parsed;
    status = ParsePressureLine(space == std::string_view::npos ? "" : line.substr(space), &parsed);
    if (!status.ok()) return;
    if (kind == "some") {
      pressure.some = parsed;
      has_some = true;
    } else {
      pressure.full = parsed;
    }
  });
  if (!status.ok()) return status;
  if (!has_some) return Status::Error("pressure file without a \"some\" line");
  return pressure;
}

std::string FormatPressureThreshold(const PressureThreshold& threshold) {
  return std::string(threshold.kind == PressureKind::kSome ? "some " : "full ") +
         std::to_string(threshold.stall_us) + ' ' + std::to_string(threshold.window_us);
}

Status ValidatePressureThreshold(const PressureThreshold& threshold) {
  if (threshold.window_us < kMinPressureWindowUs || threshold.window_us > kMaxPressureWindowUs) {
    return Status::Error("pressure trigger window " + std::to_string(threshold.window_us) +
                         " us outside [500000, 10000000]");
  }
  if (threshold.stall_us == 0 || threshold.stall_us > threshold.window_us) {
    return Status::Error("pressure trigger stall " + std::to_string(threshold.stall_us) +
                         " us outside [1, window " + std::to_string(threshold.window_us) + "]");
  }
  return Status::Ok();
}

std::vector<std::string> ParseControllers(std::string_view text) {
  std::vector<std::string> controllers;
  while (true) {
    text = Trim(text);
    if (text.empty()) break;
    size_t end = text.find_first_of(" \t\n");
    controllers.emplace_back(text.substr(0, end));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end);
  }
  return controllers;
}

Result<std::optional<uint64_t>> ParseMaxValue(std::string_view text) {
  std::string_view value = Trim(text);
  if (value == "max") return std::optional<uint64_t>();
  uint64_t number = 0;
  if (!ParseU64(value, &number)) {
    return Status::Error("expected \"max\" or a number, got \"" + std::string(value) + "\"");
  }
  return std::optional<uint64_t>(number);
}

std::string FormatMaxValue(std::optional<uint64_t> value) {
  return value ? std::to_string(*value) : std::string("max");
}

std::string FormatCpuMax(std::optional<uint64_t> quota_us, uint64_t period_us) {
  return FormatMaxValue(quota_us) + ' ' + std::to_string(period_us);
}

std::string_view LimitName(Limit limit) {
  switch (limit) {
    case Limit::kCpuMax:
      return "cpu_max";
    case Limit::kCpuWeight:
      return "cpu_weight";
    case Limit::kMemoryMax:
      return "memory_max";
    case Limit::kMemoryHigh:
      return "memory_high";
    case Limit::kMemorySwapMax:
      return "memory_swap_max";
    case Limit::kPidsMax:
      return "pids_max";
  }
  return "?";
}

std::string_view LimitFile(Limit limit) {
  switch (limit) {
    case Limit::kCpuMax:
      return "cpu.max";
    case Limit::kCpuWeight:
      return "cpu.weight";
    case Limit::kMemoryMax:
      return "memory.max";
    case Limit::kMemoryHigh:
      return "memory.high";
    case Limit::kMemorySwapMax:
      return "memory.swap.max";
    case Limit::kPidsMax:
      return "pids.max";
  }
  return "?";
}

std::string_view LimitController(Limit limit) {
  std::string_view file = LimitFile(limit);
  return file.substr(0, file.find('.'));
}

bool LimitIsSet(const CgroupLimits& limits, Limit limit) {
  switch (limit) {
    case Limit::kCpuMax:
      return limits.cpu_quota_us.has_value();
    case Limit::kCpuWeight:
      return limits.cpu_weight.has_value();
    case Limit::kMemoryMax:
      return limits.memory_max.has_value();
    case Limit::kMemoryHigh:
      return limits.memory_high.has_value();
    case Limit::kMemorySwapMax:
      return limits.memory_swap_max.has_value();
    case Limit::kPidsMax:
      return limits.pids_max.has_value();
  }
  return false;
}

bool LimitsWritten::ok() const {
  for (const Status& status : limits) {
    if (!status.ok()) return false;
  }
  return oom_group.ok();
}

Status LimitsWritten::status() const {
  std::string message;
  auto add = [&](std::string_view name, const Status& status) {
    if (status.ok()) return;
    if (!message.empty()) message += "; ";
    message += std::string(name) + ": " + status.message();
  };
  for (size_t i = 0; i < kLimitCount; ++i) add(LimitName(static_cast<Limit>(i)), limits[i]);
  add("memory.oom.group", oom_group);
  return message.empty() ? Status::Ok() : Status::Error(message);
}

Status ValidateCellName(std::string_view name) {
  if (name.empty() || name.size() > kMaxCellNameLength) {
    return Status::Error("cell name \"" + std::string(name) + "\" must have 1 to " +
                         std::to_string(kMaxCellNameLength) + " characters");
  }
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-';
    if (!ok) {
      return Status::Error("cell name \"" + std::string(name) +
                           "\" may only contain A-Z a-z 0-9 _ - (it names a cgroup directory)");
    }
  }
  return Status::Ok();
}

Status ValidateLimits(const CgroupLimits& limits) {
  uint64_t period = limits.cpu_period_us.value_or(kDefaultCpuPeriodUs);
  if (period < kMinCpuPeriodUs || period > kMaxCpuPeriodUs) {
    return Status::Error("cpu_period_us " + std::to_string(period) + " outside [" +
                         std::to_string(kMinCpuPeriodUs) + ", " + std::to_string(kMaxCpuPeriodUs) +
                         "]");
  }
  if (limits.cpu_quota_us && *limits.cpu_quota_us < kMinCpuQuotaUs) {
    return Status::Error("cpu_quota_us " + std::to_string(*limits.cpu_quota_us) + " below " +
                         std::to_string(kMinCpuQuotaUs));
  }
  if (limits.cpu_weight &&
      (*limits.cpu_weight < kMinCpuWeight || *limits.cpu_weight > kMaxCpuWeight)) {
    return Status::Error("cpu_weight " + std::to_string(*limits.cpu_weight) +
                         " outside [1, 10000]");
  }
  return Status::Ok();
}

}  // namespace bulkhead::cell
