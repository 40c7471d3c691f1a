// SPDX-License-Identifier: MIT
// The keys of [cells.NAME] and [supervisor], one table each: every key's name as docs/config.md
// spells it, the CellConfig / SupervisorConfig fields it fills, and how a reload applies a change
// of it (docs/config.md, "Reload"). The config parser dispatches on the key ids (a switch without a
// default, so a key added here and not parsed does not compile) and takes its unknown-key
// suggestions from the names; control/reload_plan.cc classifies changes with the reload classes.
// Pure data; thread-safe.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

#include "config/config.h"

namespace bulkhead::config {

// How a reload applies a changed cell key, for a cell that stays (docs/config.md, "Reload").
enum class CellReload {
  kAdmission,  // live: the admission limits, read at each accept, dispatch and reply
  kCgroup,     // live: written to the cell's cgroup files at once
  kPolicy,     // live: lifecycle policy, read at the next start, stop, end or request check
  kRestart,    // the cell's worker is replaced (its front socket and clients stay)
  kRefused,    // set when the front socket is bound: the reload is refused
};

// One id per key of [cells.NAME], in the order of kCellKeys.
enum class CellKeyId {
  kCommand,
  kProtocol,
  kMaxConcurrent,
  kMaxQueue,
  kQueueTimeout,
  kMaxConnections,
  kMaxUnsentBytes,
  kClientWriteTimeout,
  kHeaderTimeout,
  kRestart,
  kRestartDelay,
  kRestartMaxDelay,
  kRestartResetAfter,
  kStartLimitBurst,
  kStartLimitInterval,
  kRequestTimeout,
  kStallTimeout,
  kReady,
  kWorkerConnections,
  kStartTimeout,
  kWatchdog,
  kStopSignal,
  kKillMode,
  kStopTimeout,
  kSocket,
  kListen,
  kEnvironment,
  kWorkingDirectory,
  kCpuMax,
  kCpuMaxPeriod,
  kCpuWeight,
  kMemoryMax,
  kMemoryHigh,
  kMemorySwapMax,
  kPidsMax,
  kOomPolicy,
  kOomScoreAdjust,
  kOutput,
  kLogLineMax,
  kLogRateLimitBurst,
  kLogRateLimitInterval,
  kUser,
  kGroup,
  kSupplementaryGroups,
  kUmask,
  kNoNewPrivileges,
  kSocketMode,
  kSocketGroup,
  kCount,  // not a key
};

struct CellKey {
  CellKeyId id;
  std::string_view name;
  CellReload reload;
  // Whether the fields this key fills differ between `a` and `b`.
  bool (*differs)(const CellConfig& a, const CellConfig& b);
  // Copies the fields this key fills from `from` to `to`.
  void (*copy)(CellConfig& to, const CellConfig& from);
};

// Every key of [cells.NAME], indexed by CellKeyId, in the order of docs/config.md's reference
// (which is also the order reload lists changed keys in).
std::span<const CellKey> CellKeys();
// The names of CellKeys(), in the same order.
std::span<const std::string_view> CellKeyNames();
// nullptr when `name` is not a cell key.
const CellKey* FindCellKey(std::string_view name);

// How a reload applies a changed [supervisor] key.
enum class SupervisorReload {
  kLive,     // applied at once
  kRefused,  // the reload is refused: restart bulkheadd to change it
};

// One id per key of [supervisor], in the order of kSupervisorKeys.
enum class SupervisorKeyId {
  kRuntimeDir,
  kControlSocket,
  kMaxPayloadBytes,
  kLogLevel,
  kCgroup,
  kCgroupParent,
  kMetricsListen,
  kOnShutdown,
  kControlSocketMode,
  kControlSocketGroup,
  kControlGroup,
  kCount,  // not a key
};

struct SupervisorKey {
  SupervisorKeyId id;
  std::string_view name;
  SupervisorReload reload;
  bool (*differs)(const SupervisorConfig& a, const SupervisorConfig& b);
  void (*copy)(SupervisorConfig& to, const SupervisorConfig& from);
};

// Every key of [supervisor], indexed by SupervisorKeyId, in the order of docs/config.md.
std::span<const SupervisorKey> SupervisorKeys();
std::span<const std::string_view> SupervisorKeyNames();
const SupervisorKey* FindSupervisorKey(std::string_view name);

}  // namespace bulkhead::config
