// SPDX-License-Identifier: MIT
// The keys of [cells.NAME] and [supervisor], one table each: every key's name as docs/config.md
// spells it, the CellConfig / SupervisorConfig fields it fills, the kind and range of its value,
// and how a reload applies a change of it (docs/config.md, "Reload"). The config parser reads
// every key whose ValueSpec has a kind from the table alone (ValueReader::ExpectValue, then the
// entry's `store`), and keeps code of its own only for the keys of kind kOwn; it takes its
// unknown-key suggestions from the names; control/reload_plan.cc classifies changes with the
// reload classes. Pure data; thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
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
  kConcurrency,
  kMinConcurrent,
  kLatencyTolerance,
  kMaxQueue,
  kQueueTimeout,
  kMaxConnections,
  kMaxUnsentBytes,
  kClientWriteTimeout,
  kHeaderTimeout,
  kIdleTimeout,
  kRestart,
  kRestartDelay,
  kRestartMaxDelay,
  kRestartResetAfter,
  kStartLimitBurst,
  kStartLimitInterval,
  kStartLimitAction,
  kRequestTimeout,
  kStallTimeout,
  kReady,
  kWorkerConnections,
  kStartTimeout,
  kNeeds,
  kWatchdog,
  kStopSignal,
  kKillMode,
  kStopTimeout,
  kRestartOverlap,
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

// What a key's value is, for the parser (ValueReader::ExpectValue says what each refuses, and
// how). Each message names the key and its file:line:col.
enum class ValueKind : uint8_t {
  kOwn,       // read by code of its own, a case of the section parser's switch (cell_table.cc,
              // limits.cc, privileges.cc, supervisor_table.cc): a value that other keys or the
              // [supervisor] table bound, or that is not one of the kinds below
  kInteger,   // a TOML integer in [min, max]
  kDuration,  // a duration string (base/duration.h), at most 24h; "0s" only with min 0
  kSize,      // bytes in [min, max]: an integer, or a string with a unit ("256M", config/size.h)
  kChoice,    // a string, one of `choices`
  kBoolean,   // true or false
  kPath,      // a non-empty path, resolved against the config file's directory
  kMode,      // an octal permission string ("0660"), at most 0777 (config/identity.h)
  kGroup,     // a group name or numeric gid, resolved when the file is read (config/identity.h)
};

struct ValueSpec {
  ValueKind kind = ValueKind::kOwn;
  // kInteger, kSize: the bounds; kDuration: min 0 allows "0s", 1 refuses it ("must be greater
  // than 0").
  int64_t min = 0;
  int64_t max = 0;
  // Follows max in the range message: " (PID_MAX_LIMIT)", " bytes (1M)".
  std::string_view max_note;
  // kChoice: the accepted strings, in the order of the enum the field holds.
  std::span<const std::string_view> choices;
};

// A value read by ValueReader::ExpectValue, for the entry's `store`.
struct KeyValue {
  // kInteger, kSize (bytes), kChoice (the index into `choices`), kMode, kGroup (the gid).
  int64_t number = 0;
  std::chrono::milliseconds duration{0};  // kDuration
  bool flag = false;                      // kBoolean
  std::string text;                       // kPath; kChoice: the choice as written
};

struct CellKey {
  CellKeyId id;
  std::string_view name;
  CellReload reload;
  ValueSpec value;
  // Writes what ExpectValue read into the key's first field (an enum field gets the choice's
  // index, a string field its text). Null for kind kOwn.
  void (*store)(CellConfig& cell, const KeyValue& value);
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
  kAccessLog,
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
  ValueSpec value;
  void (*store)(SupervisorConfig& supervisor, const KeyValue& value);
  bool (*differs)(const SupervisorConfig& a, const SupervisorConfig& b);
  void (*copy)(SupervisorConfig& to, const SupervisorConfig& from);
};

// Every key of [supervisor], indexed by SupervisorKeyId, in the order of docs/config.md.
std::span<const SupervisorKey> SupervisorKeys();
std::span<const std::string_view> SupervisorKeyNames();
const SupervisorKey* FindSupervisorKey(std::string_view name);

}  // namespace bulkhead::config
