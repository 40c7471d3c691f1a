// SPDX-License-Identifier: MIT
// The key tables. Each entry names the fields its key fills; tests/config/config_keys_test.cc
// parses every key and checks that the entry covers exactly what the parser wrote.
#include "config/config_keys.h"

#include <algorithm>
#include <array>

namespace bulkhead::config {
namespace {

// A key that fills the fields `Members` of `Config` (CellConfig or SupervisorConfig).
template <typename Entry, typename Config, auto... Members>
constexpr Entry MakeKey(auto id, std::string_view name, auto reload) {
  return Entry{
      id,
      name,
      reload,
      [](const Config& a, const Config& b) { return (... || !(a.*Members == b.*Members)); },
      [](Config& to, const Config& from) { ((to.*Members = from.*Members), ...); },
  };
}

template <auto... Members>
constexpr CellKey Cell(CellKeyId id, std::string_view name, CellReload reload) {
  return MakeKey<CellKey, CellConfig, Members...>(id, name, reload);
}

template <auto... Members>
constexpr SupervisorKey Supervisor(SupervisorKeyId id, std::string_view name,
                                   SupervisorReload reload) {
  return MakeKey<SupervisorKey, SupervisorConfig, Members...>(id, name, reload);
}

using C = CellConfig;
using K = CellKeyId;
using R = CellReload;

constexpr auto kCellKeys = std::to_array<CellKey>({
    Cell<&C::command>(K::kCommand, "command", R::kRestart),
    // The front connections and worker links are made for it when the cell is added.
    Cell<&C::protocol>(K::kProtocol, "protocol", R::kRefused),
    Cell<&C::max_concurrent>(K::kMaxConcurrent, "max_concurrent", R::kAdmission),
    Cell<&C::max_queue>(K::kMaxQueue, "max_queue", R::kAdmission),
    Cell<&C::queue_timeout>(K::kQueueTimeout, "queue_timeout", R::kAdmission),
    // Read at each accept; the supervisor splits its descriptor budget anew after a reload.
    Cell<&C::max_connections>(K::kMaxConnections, "max_connections", R::kAdmission),
    // Read at each reply and each client_write_timeout tick.
    Cell<&C::max_unsent_bytes>(K::kMaxUnsentBytes, "max_unsent_bytes", R::kAdmission),
    Cell<&C::client_write_timeout>(K::kClientWriteTimeout, "client_write_timeout", R::kAdmission),
    // Read at each accept: connections opened after a reload get the new one.
    Cell<&C::header_timeout>(K::kHeaderTimeout, "header_timeout", R::kAdmission),
    Cell<&C::restart>(K::kRestart, "restart", R::kPolicy),
    Cell<&C::restart_delay>(K::kRestartDelay, "restart_delay", R::kPolicy),
    Cell<&C::restart_max_delay>(K::kRestartMaxDelay, "restart_max_delay", R::kPolicy),
    Cell<&C::restart_reset_after>(K::kRestartResetAfter, "restart_reset_after", R::kPolicy),
    Cell<&C::start_limit_burst>(K::kStartLimitBurst, "start_limit_burst", R::kPolicy),
    Cell<&C::start_limit_interval>(K::kStartLimitInterval, "start_limit_interval", R::kPolicy),
    Cell<&C::request_timeout>(K::kRequestTimeout, "request_timeout", R::kPolicy),
    Cell<&C::stall_timeout>(K::kStallTimeout, "stall_timeout", R::kPolicy),
    Cell<&C::ready, &C::ready_http_path>(K::kReady, "ready", R::kRestart),
    // Told to the worker in its environment at spawn: the next worker gets it.
    Cell<&C::worker_connections>(K::kWorkerConnections, "worker_connections", R::kRestart),
    // Read when the next worker is spawned; a start under way keeps the timeout it began with.
    Cell<&C::start_timeout>(K::kStartTimeout, "start_timeout", R::kPolicy),
    Cell<&C::watchdog>(K::kWatchdog, "watchdog", R::kRestart),
    Cell<&C::stop_signal>(K::kStopSignal, "stop_signal", R::kPolicy),
    // Read by the WorkerRunner when it sends stop_signal: the next stop follows it.
    Cell<&C::kill_mode>(K::kKillMode, "kill_mode", R::kPolicy),
    Cell<&C::stop_timeout>(K::kStopTimeout, "stop_timeout", R::kPolicy),
    // Bound once, when the cell is added.
    Cell<&C::socket>(K::kSocket, "socket", R::kRefused),
    Cell<&C::listen>(K::kListen, "listen", R::kRefused),
    Cell<&C::environment>(K::kEnvironment, "environment", R::kRestart),
    Cell<&C::working_directory>(K::kWorkingDirectory, "working_directory", R::kRestart),
    Cell<&C::cpu_max_quota_us>(K::kCpuMax, "cpu_max", R::kCgroup),
    Cell<&C::cpu_max_period_us>(K::kCpuMaxPeriod, "cpu_max_period", R::kCgroup),
    Cell<&C::cpu_weight>(K::kCpuWeight, "cpu_weight", R::kCgroup),
    Cell<&C::memory_max>(K::kMemoryMax, "memory_max", R::kCgroup),
    Cell<&C::memory_high>(K::kMemoryHigh, "memory_high", R::kCgroup),
    Cell<&C::memory_swap_max>(K::kMemorySwapMax, "memory_swap_max", R::kCgroup),
    Cell<&C::pids_max>(K::kPidsMax, "pids_max", R::kCgroup),
    // memory.oom.group, rewritten live with the limits.
    Cell<&C::oom_policy>(K::kOomPolicy, "oom_policy", R::kCgroup),
    // Set in the child before exec: the next worker gets it.
    Cell<&C::oom_score_adjust>(K::kOomScoreAdjust, "oom_score_adjust", R::kRestart),
    // Read by WorkerOutput at each spawn (WorkerRunner::Reconfigure hands them over): the new
    // worker's pipes follow them.
    Cell<&C::output>(K::kOutput, "output", R::kRestart),
    Cell<&C::log_line_max>(K::kLogLineMax, "log_line_max", R::kRestart),
    Cell<&C::log_rate_limit_burst>(K::kLogRateLimitBurst, "log_rate_limit_burst", R::kRestart),
    Cell<&C::log_rate_limit_interval>(K::kLogRateLimitInterval, "log_rate_limit_interval",
                                      R::kRestart),
    // Credentials are set in the child before exec (docs/config.md, "Privileges").
    Cell<&C::user, &C::user_name, &C::user_home, &C::user_shell>(K::kUser, "user", R::kRestart),
    Cell<&C::group>(K::kGroup, "group", R::kRestart),
    Cell<&C::supplementary_groups, &C::has_supplementary_groups>(
        K::kSupplementaryGroups, "supplementary_groups", R::kRestart),
    Cell<&C::umask>(K::kUmask, "umask", R::kRestart),
    Cell<&C::no_new_privileges>(K::kNoNewPrivileges, "no_new_privileges", R::kRestart),
    // The socket file's mode and group are set when it is bound.
    Cell<&C::socket_mode>(K::kSocketMode, "socket_mode", R::kRefused),
    Cell<&C::socket_group>(K::kSocketGroup, "socket_group", R::kRefused),
});

using S = SupervisorConfig;
using SK = SupervisorKeyId;
using SR = SupervisorReload;

constexpr auto kSupervisorKeys = std::to_array<SupervisorKey>({
    Supervisor<&S::runtime_dir>(SK::kRuntimeDir, "runtime_dir", SR::kRefused),
    Supervisor<&S::control_socket>(SK::kControlSocket, "control_socket", SR::kRefused),
    Supervisor<&S::max_payload_bytes>(SK::kMaxPayloadBytes, "max_payload_bytes", SR::kRefused),
    Supervisor<&S::log_level>(SK::kLogLevel, "log_level", SR::kLive),
    Supervisor<&S::cgroup>(SK::kCgroup, "cgroup", SR::kRefused),
    Supervisor<&S::cgroup_parent>(SK::kCgroupParent, "cgroup_parent", SR::kRefused),
    Supervisor<&S::metrics_listen>(SK::kMetricsListen, "metrics_listen", SR::kRefused),
    Supervisor<&S::on_shutdown>(SK::kOnShutdown, "on_shutdown", SR::kRefused),
    Supervisor<&S::control_socket_mode>(SK::kControlSocketMode, "control_socket_mode",
                                        SR::kRefused),
    Supervisor<&S::control_socket_group>(SK::kControlSocketGroup, "control_socket_group",
                                         SR::kRefused),
    Supervisor<&S::control_group>(SK::kControlGroup, "control_group", SR::kRefused),
});

// Each table holds every id once, at its own index, so that a table can be indexed by id.
template <typename Table, typename Id>
constexpr bool IndexedById(const Table& table, Id count) {
  if (table.size() != static_cast<size_t>(count)) return false;
  for (size_t i = 0; i < table.size(); ++i) {
    if (static_cast<size_t>(table[i].id) != i) return false;
  }
  return true;
}
static_assert(IndexedById(kCellKeys, CellKeyId::kCount), "kCellKeys must follow CellKeyId");
static_assert(IndexedById(kSupervisorKeys, SupervisorKeyId::kCount),
              "kSupervisorKeys must follow SupervisorKeyId");

template <typename Table>
constexpr auto NamesOf(const Table& table) {
  std::array<std::string_view, std::tuple_size_v<Table>> names{};
  for (size_t i = 0; i < table.size(); ++i) names[i] = table[i].name;
  return names;
}
constexpr auto kCellKeyNames = NamesOf(kCellKeys);
constexpr auto kSupervisorKeyNames = NamesOf(kSupervisorKeys);

template <typename Table>
auto Find(const Table& table, std::string_view name) -> decltype(&table[0]) {
  auto it = std::find_if(table.begin(), table.end(),
                         [name](const auto& key) { return key.name == name; });
  return it == table.end() ? nullptr : &*it;
}

}  // namespace

std::span<const CellKey> CellKeys() { return kCellKeys; }

std::span<const std::string_view> CellKeyNames() { return kCellKeyNames; }

const CellKey* FindCellKey(std::string_view name) { return Find(kCellKeys, name); }

std::span<const SupervisorKey> SupervisorKeys() { return kSupervisorKeys; }

std::span<const std::string_view> SupervisorKeyNames() { return kSupervisorKeyNames; }

const SupervisorKey* FindSupervisorKey(std::string_view name) {
  return Find(kSupervisorKeys, name);
}

}  // namespace bulkhead::config
