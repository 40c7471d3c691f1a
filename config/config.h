// SPDX-License-Identifier: MIT
// Config: bulkheadd's TOML config file, read, validated and completed with defaults. The format is
// specified in docs/config.md. toml++ and its exceptions stay inside config/. The functions are
// thread-compatible: they read the environment ($RUNTIME_DIRECTORY, $XDG_RUNTIME_DIR) and the cwd.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/duration.h"
#include "config/config_error.h"
#include "config/listen_address.h"

namespace bulkhead::config {

// A place in the config file. 1-based; 0 means unknown.
struct SourcePosition {
  int line = 0;
  int column = 0;
  bool operator==(const SourcePosition&) const = default;
};

// `restart`: when a worker that ended is started again (systemd.service(5) Restart=).
enum class RestartMode {
  kAlways,     // "always": after every end
  kOnFailure,  // "on-failure": unless it exited with status 0
  kNever,      // "never": only by `bulkheadctl start` / `restart`
};

// `start_limit_action`: what hitting the start limit leads to (docs/config.md, "Restarts").
enum class StartLimitAction {
  kBackoff,  // "backoff": crash-looping, keep starting on a slower capped backoff (Kubernetes)
  kFail,     // "fail": give up, the cell is failed until bulkheadctl start or restart (systemd)
};

// `concurrency`: how the cell's limit of requests at the worker is set (docs/config.md, the
// concurrency row; docs/adaptive-concurrency.md).
enum class ConcurrencyMode {
  kFixed,     // "fixed": max_concurrent requests at once
  kAdaptive,  // "adaptive": a limit between min_concurrent and max_concurrent follows the cell's
              // service time and its own kernel pressure (admission::AdaptiveLimit)
};

// `protocol`: what the cell speaks on both hops (docs/http.md).
enum class Protocol {
  kFrames,  // "frames": bulkhead's frame protocol (docs/protocol.md)
  kHttp,    // "http": HTTP/1.1 from clients and to the worker (docs/http.md)
};

// `ready`: when a started worker may take requests.
enum class ReadyMode {
  kExec,    // "exec": as soon as exec succeeded
  kNotify,  // "notify": once it sent READY=1 to $NOTIFY_SOCKET (sd_notify(3))
  kHttp,    // "http:/PATH": once GET PATH on a connection to the worker socket answers 2xx
};

// `worker_connections`: how the supervisor carries requests to the worker (docs/protocol.md,
// "Supervisor -> worker").
enum class WorkerConnections {
  kOnePerRequest,  // "one-per-request": at most one request in flight per connection
  kMultiplex,      // "multiplex": up to max_concurrent in flight on one connection, any reply order
};

// `cgroup`: whether the supervisor puts each cell in a cgroup v2 of its own and writes the cell's
// limits there (docs/config.md, "Limits").
enum class CgroupMode {
  kAuto,      // "auto": enforce where the host allows; else warn once at startup and run without
  kRequired,  // "required": refuse to start when the limits cannot be enforced
  kOff,       // "off": never touch cgroups
};

// `oom_policy`: what an OOM kill in a cell's cgroup takes (systemd.service(5) OOMPolicy=), written
// as the cell's memory.oom.group (the kernel's Documentation/admin-guide/cgroup-v2.rst).
enum class OomPolicy {
  kKill,      // "kill": memory.oom.group 1, every process of the cell but those at -1000
  kContinue,  // "continue": memory.oom.group 0, only the process the kernel chose
};

// The bounds of `oom_score_adjust` (proc(5) /proc/pid/oom_score_adj).
inline constexpr int kMinOomScoreAdjust = -1000;
inline constexpr int kMaxOomScoreAdjust = 1000;

// `kill_mode`: which processes of a cell get stop_signal on a stop (systemd.kill(5) KillMode=).
// Without a cgroup both mean the worker's process group.
enum class KillMode {
  kControlGroup,  // "control-group": every process of the cell's cgroup
  kMixed,         // "mixed": the worker alone; the rest get SIGKILL (cgroup.kill) at the end
};

// `on_shutdown`: what bulkheadd does once every cell has stopped after SIGTERM/SIGINT
// (docs/pid1.md). "poweroff" and "reboot" act only when bulkheadd is PID 1: sync(2), then
// reboot(2) with RB_POWER_OFF or RB_AUTOBOOT; elsewhere they are logged and bulkheadd exits.
enum class ShutdownAction {
  kExit,      // "exit": exit with the supervisor's exit code (a container's PID 1, a service)
  kPoweroff,  // "poweroff": as PID 1, power the machine off (a VM's init)
  kReboot,    // "reboot": as PID 1, reboot the machine
};

// `output`: where the worker's stdout and stderr go (docs/logging.md).
enum class OutputMode {
  kLog,      // "log": a pipe per stream, read by the supervisor and logged line by line
  kInherit,  // "inherit": the supervisor's own stdout and stderr
  kNull,     // "null": /dev/null
};

// The worker's PATH when its `environment` sets none (bulkheadd's own PATH is not passed on): the
// directories a bare command[0] such as "python3" is searched in. systemd's default for services.
inline constexpr char kDefaultWorkerPath[] =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// The default of `max_unsent_bytes`, bytes.
inline constexpr uint64_t kDefaultMaxUnsentBytes = uint64_t{64} << 20;

// The bounds of `log_line_max`, bytes.
inline constexpr uint64_t kMinLogLineMax = 64;
inline constexpr uint64_t kMaxLogLineMax = 1 << 20;

// One [cells.NAME] table: a worker process and the admission limits in front of it. All paths are
// absolute and lexically normalised.
struct CellConfig {
  // NAME of [cells.NAME]: 1 to 64 characters of A-Z, a-z, 0-9, '_' and '-', not starting with '-'.
  std::string name;
  // The worker's argv, non-empty. command[0] is a path (absolute once resolved) if it contains a
  // '/', else a program name searched in $PATH at exec time.
  std::vector<std::string> command;
  // What the cell speaks to its clients and its worker. Set when the front socket is bound: a
  // reload that changes it is refused.
  Protocol protocol = Protocol::kFrames;
  // The client-facing Unix socket. Default <runtime_dir>/NAME.sock.
  std::string socket;
  // `listen`: client-facing TCP addresses, in file order, each bound beside `socket` (IPv6 ones
  // IPV6_V6ONLY); no two overlap (ListenAddress::Overlaps) within the file, metrics_listen
  // included. Port 0 lets the kernel pick a free port, which status reports. Default: none.
  std::vector<ListenAddress> listen;
  // The supervisor-to-worker Unix socket. Not a key: always <runtime_dir>/NAME.worker.sock.
  std::string worker_socket;
  // Not a key: always <runtime_dir>/NAME.notify, the cell's NOTIFY_SOCKET (sd_notify(3) datagrams).
  std::string notify_socket;
  // Requests forwarded to the worker at once (its slots). 1..65535. In the adaptive mode the
  // ceiling of the limit, and the worker connections kept.
  uint32_t max_concurrent = 0;
  // Fixed or adaptive; "fixed" by default.
  ConcurrencyMode concurrency = ConcurrencyMode::kFixed;
  // The adaptive limit's floor, 1..max_concurrent; only with concurrency = "adaptive".
  uint32_t min_concurrent = 1;
  // The adaptive limit's latency tolerance: how far the mean service time may rise above its base
  // before the limit falls, in percent ("50%" is 50); 1 to 400; only with concurrency =
  // "adaptive".
  uint32_t latency_tolerance = 50;
  // Requests waiting, in FIFO order, for a free slot; more are refused. 0..1000000; 0 = no queue.
  uint32_t max_queue = 0;
  // Client connections open at once on the cell's front socket; a connection beyond it is accepted,
  // answered REJECTED/too_many_connections (request_id 0) and closed (docs/protocol.md). The
  // supervisor's descriptor budget (RLIMIT_NOFILE) may refuse earlier. 1..1048576.
  uint32_t max_connections = 1024;
  // Reply bytes the supervisor holds for the cell's clients, not yet written to their sockets
  // (clients that read slowly or not at all); over it, the clients that have accepted nothing for
  // the longest are closed (docs/config.md). Bytes, at least max_payload_bytes + 16 (one full-size
  // reply frame), at most kMaxSizeBytes. Default: kDefaultMaxUnsentBytes, or room for two
  // full-size replies and 64 KiB when max_payload_bytes makes that larger.
  uint64_t max_unsent_bytes = kDefaultMaxUnsentBytes;
  // A client with replies waiting that accepts no byte of them for this long is closed (HAProxy's
  // `timeout client`, nginx's send_timeout). >= 0, at most 24h; 0 = off.
  std::chrono::milliseconds client_write_timeout{30'000};
  // protocol = "http": a client connection must complete a request's head within this long from
  // its start or the end of the previous answer (slowloris; an idle keep-alive connection is closed
  // after it too), as HAProxy's `timeout http-request`. >= 0, at most 24h; 0 = off.
  std::chrono::milliseconds header_timeout{10'000};
  // How long a client connection may stay open with no request of it in flight (none queued,
  // running or with its answer unwritten): it is closed then, without a word (Envoy's idle_timeout,
  // nginx's keepalive_timeout). Counted from the connection's start or its last answer written.
  // On an HTTP cell header_timeout bounds that time too (the lower one applies). >= 0, at most 24h;
  // 0 = off.
  std::chrono::milliseconds idle_timeout{60'000};
  // Longest time a request waits in the queue before it is refused. > 0, at most 24h.
  std::chrono::milliseconds queue_timeout{1000};
  // When a worker that ended is started again.
  RestartMode restart = RestartMode::kAlways;
  // The first backoff delay before a worker that ended is started again; each further restart
  // doubles it. >= 0, at most 24h.
  std::chrono::milliseconds restart_delay{100};
  // The cap of the backoff delay. >= restart_delay, at most 24h. Default 5min (Kubernetes'
  // CrashLoopBackOff cap), or restart_delay when that is longer.
  std::chrono::milliseconds restart_max_delay{300'000};
  // A worker that stayed up this long sends the delay back to restart_delay. > 0, at most 24h.
  std::chrono::milliseconds restart_reset_after{10'000};
  // More than start_limit_burst starts within start_limit_interval hit the start limit
  // (systemd.unit(5) StartLimitBurst=, StartLimitIntervalSec=): the cell is crash-looping, and
  // start_limit_action says what follows. 1..1000.
  uint32_t start_limit_burst = 5;
  // >= 0, at most 24h; 0 = no start limit.
  std::chrono::milliseconds start_limit_interval{60'000};
  // What the start limit leads to: keep starting, at most one start per start_limit_interval /
  // start_limit_burst (or per restart_max_delay, if shorter: it caps every wait) and the backoff
  // doubling on up to restart_max_delay; or give up.
  StartLimitAction start_limit_action = StartLimitAction::kBackoff;
  // A request running longer is answered FAILED timeout. >= 0, at most 24h; 0 = off.
  std::chrono::milliseconds request_timeout{0};
  // With requests in flight and no reply from the worker for this long, the worker is stalled:
  // killed and restarted. >= 0, at most 24h; 0 = off.
  std::chrono::milliseconds stall_timeout{0};
  // When a started worker may take requests.
  ReadyMode ready = ReadyMode::kExec;
  // `needs`: the names of the cells this one needs, in file order: each another cell of the file,
  // none twice, no cycle across the file (config/cell_needs.h). A start of this cell (boot,
  // `bulkheadctl start`, a reload that adds it) waits until each of them is running (ready, as
  // its `ready` says); at shutdown this cell stops before them. Once started it keeps running
  // whatever they do (docs/config.md, "Dependencies").
  std::vector<std::string> needs;
  // How requests reach the worker; the worker learns it from $BULKHEAD_WORKER_CONNECTIONS.
  // kMultiplex only with Protocol::kFrames (HTTP/1.1 cannot multiplex; refused by the parser).
  WorkerConnections worker_connections = WorkerConnections::kOnePerRequest;
  // With ready = "http:/PATH": PATH, the request target of the worker's HTTP probe (readiness, and
  // liveness with stall_timeout; lifecycle/http_probe.h). Starts with '/', then visible ASCII
  // only (RFC 9112 origin-form). Empty for the other modes.
  std::string ready_http_path;
  // With ready = "notify" (or "http:/PATH"): a worker that has not sent READY=1 (or answered the
  // probe 2xx) this long after its spawn is stopped and its start counts as failed
  // (systemd.service(5) TimeoutStartSec=). >= 0, at most 24h; 0
  // (written "0s" or "infinity") = wait forever.
  std::chrono::milliseconds start_timeout{90'000};
  // Longest gap between two WATCHDOG=1 from the worker (sd_notify(3)), passed to it as
  // WATCHDOG_USEC; a miss is a stall. >= 0, at most 24h; 0 = off.
  std::chrono::milliseconds watchdog{0};
  // The signal that asks the worker to stop: SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 or
  // SIGKILL (systemd.kill(5) KillSignal=).
  int stop_signal = SIGTERM;
  // Who gets stop_signal (systemd.kill(5) KillMode=).
  KillMode kill_mode = KillMode::kControlGroup;
  // Bound of a whole stop (systemd's TimeoutStopSec=): in-flight requests may finish, then the
  // worker gets stop_signal and may exit, all within this time from the stop; SIGKILL at its end.
  // > 0, at most 24h.
  std::chrono::milliseconds stop_timeout{5000};
  // `bulkheadctl restart` of a running worker starts the next one beside it and hands it new
  // requests once it is ready, the previous one finishing what it has (docs/config.md,
  // "Restarts"); false: the worker is stopped first, then the next one started. Default true.
  bool restart_overlap = true;
  // Variables added to the worker's environment, in file order. Names are non-empty and contain
  // no '=' or NUL; values contain no NUL.
  std::vector<std::pair<std::string, std::string>> environment;
  // The worker's cwd. Default "/", as systemd.exec(5) WorkingDirectory=.
  std::string working_directory = "/";
  // cgroup v2 limits, written to the cell's cgroup (the kernel's
  // Documentation/admin-guide/cgroup-v2.rst). Each is optional: unset means no limit, the kernel
  // default ("max", or 100 for cpu.weight).
  //
  // cpu.max quota: μs of CPU time, summed over all CPUs, the cell may use per cpu_max_period_us of
  // wall time. From `cpu_max` = "P%": P × cpu_max_period_us / 100, rounded to the nearest μs;
  // >= 1000, and P at most 100% × the CPUs online on the host (sysconf(_SC_NPROCESSORS_ONLN)).
  std::optional<uint64_t> cpu_max_quota_us;
  // cpu.max period, μs. From the duration `cpu_max_period`; 1000..1000000 (1ms..1s).
  uint64_t cpu_max_period_us = 100000;
  // cpu.weight: the cell's share of CPU under contention, against its siblings. 1..10000.
  std::optional<uint32_t> cpu_weight;
  // What an OOM kill in the cell takes: memory.oom.group 1 (kill) or 0 (continue).
  OomPolicy oom_policy = OomPolicy::kKill;
  // The worker's oom_score_adj, set in the child before exec (systemd.exec(5) OOMScoreAdjust=);
  // what it forks inherits it. kMinOomScoreAdjust..kMaxOomScoreAdjust; default 0, so a worker
  // never inherits bulkheadd's own value. A value below the lowest one a privileged process set
  // for bulkheadd needs CAP_SYS_RESOURCE (the spawn fails with EACCES without it).
  int oom_score_adjust = 0;
  // memory.max, bytes: above it the kernel OOM-kills in the cell. 1..kMaxSizeBytes (config/size.h);
  // the kernel rounds it down to whole pages.
  std::optional<uint64_t> memory_max;
  // memory.high, bytes: above it the cell is throttled and reclaimed hard. 1..kMaxSizeBytes, and at
  // most memory_max when both are set.
  std::optional<uint64_t> memory_high;
  // memory.swap.max, bytes. 0..kMaxSizeBytes; 0 = no swap.
  std::optional<uint64_t> memory_swap_max;
  // pids.max: processes and threads in the cell; fork() and clone() fail with EAGAIN at the limit.
  // 1..4194304 (PID_MAX_LIMIT).
  std::optional<uint64_t> pids_max;
  // Where the worker's stdout and stderr go.
  OutputMode output = OutputMode::kLog;
  // A longer line of worker output is logged truncated to its first log_line_max bytes (marked
  // truncated=true) and the rest of it dropped. Bytes, kMinLogLineMax..kMaxLogLineMax.
  uint32_t log_line_max = 4096;
  // At most log_rate_limit_burst lines of worker output (stdout and stderr together) are logged per
  // log_rate_limit_interval; more are dropped and counted, and "suppressed K lines" is logged when
  // the interval ends (journald.conf(5) RateLimitBurst=, RateLimitIntervalSec=). Burst
  // 0..1000000, interval >= 0, at most 24h; either 0 = no limit.
  uint32_t log_rate_limit_burst = 1000;
  std::chrono::milliseconds log_rate_limit_interval{10'000};
  // Privileges of the worker (docs/config.md, "Privileges"; systemd.exec(5) User=, Group=,
  // SupplementaryGroups=, UMask=, NoNewPrivileges=). Names are resolved when the config is loaded
  // (config/identity.h).
  //
  // `user`: the worker's uid; unset = the supervisor's own credentials, unchanged. With a user
  // database entry, user_name, user_home and user_shell give USER, LOGNAME, HOME and SHELL.
  std::optional<uid_t> user;
  std::string user_name;
  std::string user_home;
  std::string user_shell;
  // `group`: the worker's gid. Unset with `user` set: the user's primary group.
  std::optional<gid_t> group;
  // `supplementary_groups`: the complete list. With user or group set and this key absent, the
  // list is cleared (empty).
  std::vector<gid_t> supplementary_groups;
  bool has_supplementary_groups = false;
  // `umask`, 0..0777. Default 0022.
  uint32_t umask = 0022;
  // `no_new_privileges`: prctl(PR_SET_NO_NEW_PRIVS) in the worker. Default true.
  bool no_new_privileges = true;
  // `socket_mode`: permission bits of the client socket file, 0..0777 (connect(2) needs write
  // permission). Default 0660 (docs/config.md explains why not systemd.socket(5)'s 0666).
  uint32_t socket_mode = 0660;
  // `socket_group`: the client socket file's group; unset = the supervisor's.
  std::optional<gid_t> socket_group;
  // Of the [cells.NAME] table (its '[', or '{' for an inline table).
  SourcePosition position;

  // Every field, so that a field added later counts in reload's comparison (a changed field
  // restarts the cell unless control/reload_plan.h classifies it otherwise).
  bool operator==(const CellConfig&) const = default;
};

// The [supervisor] table. All paths are absolute and lexically normalised.
struct SupervisorConfig {
  // Default: DefaultRuntimeDirFromEnvironment() (config/runtime_dir.h): $RUNTIME_DIRECTORY, else
  // /run/bulkhead for uid 0, else $XDG_RUNTIME_DIR/bulkhead, else /tmp/bulkhead-<uid>.
  std::string runtime_dir;
  // Where bulkheadctl connects. Default <runtime_dir>/control.sock.
  std::string control_socket;
  // Largest request or reply payload accepted on any socket, in bytes. 1..1 GiB.
  uint32_t max_payload_bytes = 4 * 1024 * 1024;
  // debug | info | warning | error.
  std::string log_level = "info";
  // Whether cells get a cgroup v2 each and their limits are enforced.
  CgroupMode cgroup = CgroupMode::kAuto;
  // `cgroup_parent`: the delegated cgroup to build <parent>/cells/NAME in, as a path under the
  // cgroup2 mount ("/pod.slice/bulkhead"); "" = bulkheadd's own cgroup (cell/cgroup.h Delegate).
  std::string cgroup_parent;
  // Where the Prometheus endpoint (GET /metrics, docs/metrics.md) listens; nullopt: no endpoint.
  std::optional<ListenAddress> metrics_listen;

  // `access_log`: where each answered request's line goes (docs/access-log.md): "" = no access
  // log (the default), "stderr", or a file path (relative: to the config file's directory).
  std::string access_log;

  // What happens after the orderly shutdown.
  ShutdownAction on_shutdown = ShutdownAction::kExit;
  // `control_socket_mode`: permission bits of the control socket file, 0..0777. Whoever may
  // connect may read `status`. Default 0660.
  uint32_t control_socket_mode = 0660;
  // `control_socket_group`: the control socket file's group; unset = the supervisor's.
  std::optional<gid_t> control_socket_group;
  // `control_group`: besides uid 0 and the supervisor's own uid, members of this group (primary or
  // supplementary, as SO_PEERCRED / SO_PEERGROUPS report them) may run mutating commands. Unset =
  // nobody else.
  std::optional<gid_t> control_group;

  // Every field: a reload refuses a change of any key but log_level (control/reload_plan.h).
  bool operator==(const SupervisorConfig&) const = default;
};

// `ready` as written: "exec", "notify" or "http:/PATH".
std::string ReadyText(const CellConfig& cell);
// `protocol` as written: "frames" or "http".
std::string_view ProtocolName(Protocol protocol);
// `concurrency` as written: "fixed" or "adaptive".
std::string_view ConcurrencyModeName(ConcurrencyMode mode);

struct Config {
  // The path the config was read from, as given.
  std::string source;
  SupervisorConfig supervisor;
  // In file order, at least one.
  std::vector<CellConfig> cells;
  // Where each key's value was written, by its dotted path as ConfigError names it
  // ("supervisor.cgroup", "cells.node.listen"), and where each table starts ("supervisor",
  // "cells.node"): for messages about the loaded file, such as a reload's refusals.
  std::map<std::string, SourcePosition, std::less<>> positions;

  // The position of `key` (a dotted path, as in `positions`); line 0 when it was not written.
  SourcePosition PositionOf(std::string_view key) const;
};

struct LoadResult {
  // Set iff errors is empty.
  std::optional<Config> config;
  // Every error found, sorted by position (line, then column; unpositioned errors first).
  // A TOML syntax error stops parsing, so it is always the only error.
  std::vector<ConfigError> errors;
  // What is valid but likely wrong, sorted likewise; never refuses the file (docs/config.md,
  // "Warnings"): request_timeout without stall_timeout, stall_timeout below request_timeout, a
  // command[0] that does not resolve to an executable file on this host now, a relative script
  // argument that names no file in working_directory.
  std::vector<ConfigError> warnings;
};

// What ParseConfig checks against the host it runs on.
struct HostFacts {
  // CPUs online, >= 1: bounds `cpu_max` at 100% × cpus.
  uint32_t cpus = 1;
};

// This host: sysconf(_SC_NPROCESSORS_ONLN), or 1 if that fails.
HostFacts CurrentHostFacts();

// Reads and validates the file at `path`. A file that cannot be read gives one error, with `path`
// as its file and the errno text in its message. Beyond ParseConfig, it looks at the filesystem
// for what bulkheadd would otherwise fail on only once started: an access_log file it could not
// open for appending (AccessLogFileProblem) is an error at that key. Never throws.
LoadResult LoadConfigFile(const std::string& path);

// Why bulkheadd could not open `file` (absolute) as its access log, O_WRONLY | O_APPEND |
// O_CREAT (proxy::AccessLog::Open): "/x is a directory", "cannot create /v/a.log: directory /v
// does not exist", "cannot open /a.log for writing: Permission denied" (stat(2), access(2) W_OK,
// or W_OK | X_OK on its directory when it does not exist yet, as the caller); nullopt when it could.
std::optional<std::string> AccessLogFileProblem(const std::string& file);

// Validates `toml_text`. `source_path` names the file in errors and anchors relative paths: they
// are resolved against its directory, made absolute with the cwd if needed. Errors are lexical
// only (no symlink resolution); only the warnings about `command` look at the filesystem (stat(2),
// access(2) X_OK as the caller). Never throws.
LoadResult ParseConfig(std::string_view toml_text, const std::string& source_path);
// As above, checking against `host` rather than CurrentHostFacts(): for tests.
LoadResult ParseConfig(std::string_view toml_text, const std::string& source_path,
                       const HostFacts& host);

}  // namespace bulkhead::config
