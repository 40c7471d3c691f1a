// SPDX-License-Identifier: MIT
// The key tables. Each entry names the fields its key fills and the kind and range of its value;
// tests/config/config_keys_test.cc parses every key and checks that the entry covers exactly what
// the parser wrote.
#include "config/config_keys.h"

#include <algorithm>
#include <array>
#include <optional>
#include <type_traits>

#include "config/size.h"

namespace bulkhead::config {
namespace {

using std::chrono::milliseconds;

// The value kinds, as the tables below write them.
constexpr ValueSpec Integer(int64_t min, int64_t max, std::string_view max_note = {}) {
  return {ValueKind::kInteger, min, max, max_note, {}};
}
constexpr ValueSpec Size(int64_t min, int64_t max, std::string_view max_note = {}) {
  return {ValueKind::kSize, min, max, max_note, {}};
}
// A duration that may be "0s" (often: off), and one that must be longer.
constexpr ValueSpec kDurationOrZero = {ValueKind::kDuration, 0, 0, {}, {}};
constexpr ValueSpec kPositiveDuration = {ValueKind::kDuration, 1, 0, {}, {}};
constexpr ValueSpec Choice(std::span<const std::string_view> choices) {
  return {ValueKind::kChoice, 0, 0, {}, choices};
}
constexpr ValueSpec kBoolean = {ValueKind::kBoolean, 0, 0, {}, {}};
constexpr ValueSpec kPath = {ValueKind::kPath, 0, 0, {}, {}};
constexpr ValueSpec kMode = {ValueKind::kMode, 0, 0, {}, {}};
constexpr ValueSpec kGroup = {ValueKind::kGroup, 0, 0, {}, {}};
constexpr ValueSpec kOwn = {};

// The ranges.
constexpr int64_t kMaxConcurrentLimit = 65535;
constexpr int64_t kMaxQueueLimit = 1'000'000;
// fs.nr_open's default: no process can hold more descriptors than this.
constexpr int64_t kMaxConnectionsLimit = 1'048'576;
constexpr int64_t kMaxStartLimitBurst = 1000;
constexpr int64_t kMaxLogRateLimitBurst = 1'000'000;
// cgroup-v2.rst: cpu.weight is in [1, 10000].
constexpr int64_t kMaxCpuWeight = 10000;
// PID_MAX_LIMIT on 64-bit kernels (include/linux/threads.h): no cell can hold more tasks.
constexpr int64_t kMaxPidsMax = 4'194'304;
constexpr int64_t kMaxPayloadBytesLimit = int64_t{1} << 30;  // 1 GiB.

// The choices, each in the order of the enum its field holds.
constexpr std::array<std::string_view, 2> kProtocols = {"frames", "http"};
constexpr std::array<std::string_view, 2> kConcurrencyModes = {"fixed", "adaptive"};
constexpr std::array<std::string_view, 3> kRestartModes = {"always", "on-failure", "never"};
constexpr std::array<std::string_view, 2> kStartLimitActions = {"backoff", "fail"};
constexpr std::array<std::string_view, 2> kWorkerConnectionModes = {"one-per-request", "multiplex"};
constexpr std::array<std::string_view, 2> kKillModes = {"control-group", "mixed"};
constexpr std::array<std::string_view, 2> kOomPolicies = {"kill", "continue"};
constexpr std::array<std::string_view, 3> kOutputModes = {"log", "inherit", "null"};
// log_level is a string field: it gets the text.
constexpr std::array<std::string_view, 4> kLogLevels = {"debug", "info", "warning", "error"};
constexpr std::array<std::string_view, 3> kCgroupModes = {"auto", "required", "off"};
constexpr std::array<std::string_view, 3> kShutdownActions = {"exit", "poweroff", "reboot"};

template <typename T>
struct Unwrapped {
  using type = T;
};
template <typename T>
struct Unwrapped<std::optional<T>> {
  using type = T;
};

// A field a KeyValue can be stored into (std::optional of one as well).
template <typename Field>
concept Storable = std::is_same_v<Field, milliseconds> || std::is_same_v<Field, std::string> ||
    std::is_integral_v<Field> || std::is_enum_v<Field>;

// The value of a field of type `Field` (Storable) from what ExpectValue read.
template <typename Field>
Field FieldValue(const KeyValue& value) {
  if constexpr (std::is_same_v<Field, milliseconds>) {
    return value.duration;
  } else if constexpr (std::is_same_v<Field, bool>) {
    return value.flag;
  } else if constexpr (std::is_same_v<Field, std::string>) {
    return value.text;
  } else {
    return static_cast<Field>(value.number);  // an integer, or an enum from its choice's index
  }
}

template <typename Config, auto Member>
void Store(Config& config, const KeyValue& value) {
  using Field = typename Unwrapped<std::remove_cvref_t<decltype(config.*Member)>>::type;
  config.*Member = FieldValue<Field>(value);
}

// A key that fills the fields `First, Rest...` of `Config` (CellConfig or SupervisorConfig); a
// value of a kind other than kOwn is stored into `First`.
template <typename Entry, typename Config, auto First, auto... Rest>
constexpr Entry MakeKey(auto id, std::string_view name, auto reload, ValueSpec value) {
  using Field =
      typename Unwrapped<std::remove_cvref_t<decltype(std::declval<Config&>().*First)>>::type;
  void (*store)(Config&, const KeyValue&) = nullptr;
  if constexpr (Storable<Field>) {
    if (value.kind != ValueKind::kOwn) store = &Store<Config, First>;
  }
  return Entry{
      id,
      name,
      reload,
      value,
      store,
      [](const Config& a, const Config& b) {
        return !(a.*First == b.*First) || (... || !(a.*Rest == b.*Rest));
      },
      [](Config& to, const Config& from) {
        to.*First = from.*First;
        ((to.*Rest = from.*Rest), ...);
      },
  };
}

template <auto... Members>
constexpr CellKey Cell(CellKeyId id, std::string_view name, CellReload reload, ValueSpec value) {
  return MakeKey<CellKey, CellConfig, Members...>(id, name, reload, value);
}

template <auto... Members>
constexpr SupervisorKey Supervisor(SupervisorKeyId id, std::string_view name,
                                   SupervisorReload reload, ValueSpec value) {
  return MakeKey<SupervisorKey, SupervisorConfig, Members...>(id, name, reload, value);
}

using C = CellConfig;
using K = CellKeyId;
using R = CellReload;

// kOwn keys, and where their code is: command, latency_tolerance (a percentage), socket, listen,
// max_unsent_bytes (at least one reply of max_payload_bytes), ready ("http:/PATH"), start_timeout
// ("infinity"), stop_signal, environment, needs (cell_table.cc; across cells config/cell_needs.cc);
// cpu_max, cpu_max_period, memory_max, memory_high (limits.cc); user, supplementary_groups
// (privileges.cc).
constexpr auto kCellKeys = std::to_array<CellKey>({
    Cell<&C::command>(K::kCommand, "command", R::kRestart, kOwn),
    // The front connections and worker links are made for it when the cell is added.
    Cell<&C::protocol>(K::kProtocol, "protocol", R::kRefused, Choice(kProtocols)),
    Cell<&C::max_concurrent>(K::kMaxConcurrent, "max_concurrent", R::kAdmission,
                             Integer(1, kMaxConcurrentLimit)),
    // The adaptive mode's keys: CellDataPath::Reconfigure makes, drops or rebounds its
    // AdaptiveLimit (docs/adaptive-concurrency.md, "Reload").
    Cell<&C::concurrency>(K::kConcurrency, "concurrency", R::kAdmission, Choice(kConcurrencyModes)),
    Cell<&C::min_concurrent>(K::kMinConcurrent, "min_concurrent", R::kAdmission,
                             Integer(1, kMaxConcurrentLimit)),
    Cell<&C::latency_tolerance>(K::kLatencyTolerance, "latency_tolerance", R::kAdmission, kOwn),
    Cell<&C::max_queue>(K::kMaxQueue, "max_queue", R::kAdmission, Integer(0, kMaxQueueLimit)),
    Cell<&C::queue_timeout>(K::kQueueTimeout, "queue_timeout", R::kAdmission, kPositiveDuration),
    // Read at each accept; the supervisor splits its descriptor budget anew after a reload.
    Cell<&C::max_connections>(K::kMaxConnections, "max_connections", R::kAdmission,
                              Integer(1, kMaxConnectionsLimit)),
    // Read at each reply and each client_write_timeout tick.
    Cell<&C::max_unsent_bytes>(K::kMaxUnsentBytes, "max_unsent_bytes", R::kAdmission, kOwn),
    Cell<&C::client_write_timeout>(K::kClientWriteTimeout, "client_write_timeout", R::kAdmission,
                                   kDurationOrZero),
    // Read at each accept: connections opened after a reload get the new one.
    Cell<&C::header_timeout>(K::kHeaderTimeout, "header_timeout", R::kAdmission, kDurationOrZero),
    // Read at each accept: connections opened after a reload get the new one.
    Cell<&C::idle_timeout>(K::kIdleTimeout, "idle_timeout", R::kAdmission, kDurationOrZero),
    Cell<&C::restart>(K::kRestart, "restart", R::kPolicy, Choice(kRestartModes)),
    Cell<&C::restart_delay>(K::kRestartDelay, "restart_delay", R::kPolicy, kDurationOrZero),
    Cell<&C::restart_max_delay>(K::kRestartMaxDelay, "restart_max_delay", R::kPolicy,
                                kDurationOrZero),
    Cell<&C::restart_reset_after>(K::kRestartResetAfter, "restart_reset_after", R::kPolicy,
                                  kPositiveDuration),
    Cell<&C::start_limit_burst>(K::kStartLimitBurst, "start_limit_burst", R::kPolicy,
                                Integer(1, kMaxStartLimitBurst)),
    Cell<&C::start_limit_interval>(K::kStartLimitInterval, "start_limit_interval", R::kPolicy,
                                   kDurationOrZero),
    Cell<&C::start_limit_action>(K::kStartLimitAction, "start_limit_action", R::kPolicy,
                                 Choice(kStartLimitActions)),
    Cell<&C::request_timeout>(K::kRequestTimeout, "request_timeout", R::kPolicy, kDurationOrZero),
    Cell<&C::stall_timeout>(K::kStallTimeout, "stall_timeout", R::kPolicy, kDurationOrZero),
    Cell<&C::ready, &C::ready_http_path>(K::kReady, "ready", R::kRestart, kOwn),
    // Told to the worker in its environment at spawn: the next worker gets it.
    Cell<&C::worker_connections>(K::kWorkerConnections, "worker_connections", R::kRestart,
                                 Choice(kWorkerConnectionModes)),
    // Read when the next worker is spawned; a start under way keeps the timeout it began with.
    Cell<&C::start_timeout>(K::kStartTimeout, "start_timeout", R::kPolicy, kOwn),
    // Read by the supervisor at each start it holds, and at shutdown (supervisor/start_order.h).
    Cell<&C::needs>(K::kNeeds, "needs", R::kPolicy, kOwn),
    Cell<&C::watchdog>(K::kWatchdog, "watchdog", R::kRestart, kDurationOrZero),
    Cell<&C::stop_signal>(K::kStopSignal, "stop_signal", R::kPolicy, kOwn),
    // Read by the WorkerRunner when it sends stop_signal: the next stop follows it.
    Cell<&C::kill_mode>(K::kKillMode, "kill_mode", R::kPolicy, Choice(kKillModes)),
    Cell<&C::stop_timeout>(K::kStopTimeout, "stop_timeout", R::kPolicy, kPositiveDuration),
    // Read by the WorkerRunner when a restart begins: the next restart follows it.
    Cell<&C::restart_overlap>(K::kRestartOverlap, "restart_overlap", R::kPolicy, kBoolean),
    // Bound once, when the cell is added.
    Cell<&C::socket>(K::kSocket, "socket", R::kRefused, kOwn),
    Cell<&C::listen>(K::kListen, "listen", R::kRefused, kOwn),
    Cell<&C::environment>(K::kEnvironment, "environment", R::kRestart, kOwn),
    Cell<&C::working_directory>(K::kWorkingDirectory, "working_directory", R::kRestart, kPath),
    Cell<&C::cpu_max_quota_us>(K::kCpuMax, "cpu_max", R::kCgroup, kOwn),
    Cell<&C::cpu_max_period_us>(K::kCpuMaxPeriod, "cpu_max_period", R::kCgroup, kOwn),
    Cell<&C::cpu_weight>(K::kCpuWeight, "cpu_weight", R::kCgroup, Integer(1, kMaxCpuWeight)),
    Cell<&C::memory_max>(K::kMemoryMax, "memory_max", R::kCgroup, kOwn),
    Cell<&C::memory_high>(K::kMemoryHigh, "memory_high", R::kCgroup, kOwn),
    Cell<&C::memory_swap_max>(K::kMemorySwapMax, "memory_swap_max", R::kCgroup,
                              Size(0, static_cast<int64_t>(kMaxSizeBytes))),
    Cell<&C::pids_max>(K::kPidsMax, "pids_max", R::kCgroup,
                       Integer(1, kMaxPidsMax, " (PID_MAX_LIMIT)")),
    // memory.oom.group, rewritten live with the limits.
    Cell<&C::oom_policy>(K::kOomPolicy, "oom_policy", R::kCgroup, Choice(kOomPolicies)),
    // Set in the child before exec: the next worker gets it.
    Cell<&C::oom_score_adjust>(K::kOomScoreAdjust, "oom_score_adjust", R::kRestart,
                               Integer(kMinOomScoreAdjust, kMaxOomScoreAdjust, " (oom_score_adj)")),
    // Read by WorkerOutput at each spawn (WorkerRunner::Reconfigure hands them over): the new
    // worker's pipes follow them.
    Cell<&C::output>(K::kOutput, "output", R::kRestart, Choice(kOutputModes)),
    Cell<&C::log_line_max>(K::kLogLineMax, "log_line_max", R::kRestart,
                           Size(static_cast<int64_t>(kMinLogLineMax),
                                static_cast<int64_t>(kMaxLogLineMax), " bytes (1M)")),
    Cell<&C::log_rate_limit_burst>(K::kLogRateLimitBurst, "log_rate_limit_burst", R::kRestart,
                                   Integer(0, kMaxLogRateLimitBurst)),
    Cell<&C::log_rate_limit_interval>(K::kLogRateLimitInterval, "log_rate_limit_interval",
                                      R::kRestart, kDurationOrZero),
    // Credentials are set in the child before exec (docs/config.md, "Privileges").
    Cell<&C::user, &C::user_name, &C::user_home, &C::user_shell>(K::kUser, "user", R::kRestart,
                                                                 kOwn),
    Cell<&C::group>(K::kGroup, "group", R::kRestart, kGroup),
    Cell<&C::supplementary_groups, &C::has_supplementary_groups>(
        K::kSupplementaryGroups, "supplementary_groups", R::kRestart, kOwn),
    Cell<&C::umask>(K::kUmask, "umask", R::kRestart, kMode),
    Cell<&C::no_new_privileges>(K::kNoNewPrivileges, "no_new_privileges", R::kRestart, kBoolean),
    // The socket file's mode and group are set when it is bound.
    Cell<&C::socket_mode>(K::kSocketMode, "socket_mode", R::kRefused, kMode),
    Cell<&C::socket_group>(K::kSocketGroup, "socket_group", R::kRefused, kGroup),
});

using S = SupervisorConfig;
using SK = SupervisorKeyId;
using SR = SupervisorReload;

// kOwn keys (supervisor_table.cc): runtime_dir, control_socket (the sockets' checks),
// cgroup_parent (a cgroup path), metrics_listen (an address), access_log ("stderr" or a path).
constexpr auto kSupervisorKeys = std::to_array<SupervisorKey>({
    Supervisor<&S::runtime_dir>(SK::kRuntimeDir, "runtime_dir", SR::kRefused, kOwn),
    Supervisor<&S::control_socket>(SK::kControlSocket, "control_socket", SR::kRefused, kOwn),
    // A size, as max_unsent_bytes and the memory limits take it: 4194304 or "4M".
    Supervisor<&S::max_payload_bytes>(SK::kMaxPayloadBytes, "max_payload_bytes", SR::kRefused,
                                      Size(1, kMaxPayloadBytesLimit, " (1 GiB)")),
    Supervisor<&S::log_level>(SK::kLogLevel, "log_level", SR::kLive, Choice(kLogLevels)),
    Supervisor<&S::cgroup>(SK::kCgroup, "cgroup", SR::kRefused, Choice(kCgroupModes)),
    Supervisor<&S::cgroup_parent>(SK::kCgroupParent, "cgroup_parent", SR::kRefused, kOwn),
    Supervisor<&S::metrics_listen>(SK::kMetricsListen, "metrics_listen", SR::kRefused, kOwn),
    Supervisor<&S::access_log>(SK::kAccessLog, "access_log", SR::kRefused, kOwn),
    Supervisor<&S::on_shutdown>(SK::kOnShutdown, "on_shutdown", SR::kRefused,
                                Choice(kShutdownActions)),
    Supervisor<&S::control_socket_mode>(SK::kControlSocketMode, "control_socket_mode", SR::kRefused,
                                        kMode),
    Supervisor<&S::control_socket_group>(SK::kControlSocketGroup, "control_socket_group",
                                         SR::kRefused, kGroup),
    Supervisor<&S::control_group>(SK::kControlGroup, "control_group", SR::kRefused, kGroup),
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

// A key of a kind other than kOwn has a `store` (its first field can take the value), and a kOwn
// key has none.
template <typename Table>
constexpr bool EveryValueIsStored(const Table& table) {
  for (const auto& key : table) {
    if ((key.value.kind == ValueKind::kOwn) != (key.store == nullptr)) return false;
  }
  return true;
}
static_assert(EveryValueIsStored(kCellKeys), "a cell key's first field cannot hold its value");
static_assert(EveryValueIsStored(kSupervisorKeys),
              "a [supervisor] key's first field cannot hold its value");

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

std::string_view ProtocolName(Protocol protocol) {
  return kProtocols[static_cast<size_t>(protocol)];
}

std::string_view ConcurrencyModeName(ConcurrencyMode mode) {
  return kConcurrencyModes[static_cast<size_t>(mode)];
}

}  // namespace bulkhead::config
