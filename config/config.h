// SPDX-License-Identifier: MIT
// Config: bulkheadd's TOML config file, read, validated and completed with defaults. The format is
// specified in docs/config.md. toml++ and its exceptions stay inside config/. The functions are
// thread-compatible: they read the environment ($RUNTIME_DIRECTORY, $XDG_RUNTIME_DIR) and the cwd.
#pragma once

#include <signal.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/duration.h"
#include "config/config_error.h"

namespace bulkhead::config {

// A place in the config file. 1-based; 0 means unknown.
struct SourcePosition {
  int line = 0;
  int column = 0;
};

// `restart`: when a worker that ended is started again (systemd.service(5) Restart=).
enum class RestartMode {
  kAlways,     // "always": after every end
  kOnFailure,  // "on-failure": unless it exited with status 0
  kNever,      // "never": only by `bulkheadctl start` / `restart`
};

// `ready`: when a started worker may take requests.
enum class ReadyMode {
  kExec,    // "exec": as soon as exec succeeded
  kNotify,  // "notify": once it sent READY=1 to $NOTIFY_SOCKET (sd_notify(3))
};

// `cgroup`: whether the supervisor puts each cell in a cgroup v2 of its own and writes the cell's
// limits there (docs/config.md, "Limits").
enum class CgroupMode {
  kAuto,      // "auto": enforce where the host allows; else warn once at startup and run without
  kRequired,  // "required": refuse to start when the limits cannot be enforced
  kOff,       // "off": never touch cgroups
};

// One [cells.NAME] table: a worker process and the admission limits in front of it. All paths are
// absolute and lexically normalised.
struct CellConfig {
  // NAME of [cells.NAME]: 1 to 64 characters of A-Z, a-z, 0-9, '_' and '-'.
  std::string name;
  // The worker's argv, non-empty. command[0] is a path (absolute once resolved) if it contains a
  // '/', else a program name searched in $PATH at exec time.
  std::vector<std::string> command;
  // The client-facing Unix socket. Default <runtime_dir>/NAME.sock.
  std::string socket;
  // The supervisor-to-worker Unix socket. Not a key: always <runtime_dir>/NAME.worker.sock.
  std::string worker_socket;
  // Not a key: always <runtime_dir>/NAME.notify, the cell's NOTIFY_SOCKET (sd_notify(3) datagrams).
  std::string notify_socket;
  // Requests forwarded to the worker at once (its slots). 1..65535.
  uint32_t max_concurrent = 0;
  // Requests waiting, in FIFO order, for a free slot; more are refused. 0..1000000; 0 = no queue.
  uint32_t max_queue = 0;
  // Client connections open at once on the cell's front socket; a connection beyond it is accepted,
  // answered REJECTED/too_many_connections (request_id 0) and closed (docs/protocol.md). The
  // supervisor's descriptor budget (RLIMIT_NOFILE) may refuse earlier. 1..1048576.
  uint32_t max_connections = 1024;
  // Longest time a request waits in the queue before it is refused. > 0, at most 24h.
  std::chrono::milliseconds queue_timeout{1000};
  // When a worker that ended is started again.
  RestartMode restart = RestartMode::kAlways;
  // The first backoff delay before a worker that ended is started again; each further restart
  // doubles it. >= 0, at most 24h.
  std::chrono::milliseconds restart_delay{100};
  // The cap of the backoff delay. >= restart_delay, at most 24h. Default 30s, or restart_delay when
  // that is longer.
  std::chrono::milliseconds restart_max_delay{30'000};
  // A worker that stayed up this long sends the delay back to restart_delay. > 0, at most 24h.
  std::chrono::milliseconds restart_reset_after{10'000};
  // More than start_limit_burst starts within start_limit_interval put the cell in the failed
  // state (systemd.unit(5) StartLimitBurst=, StartLimitIntervalSec=). 1..1000.
  uint32_t start_limit_burst = 5;
  // >= 0, at most 24h; 0 = no start limit.
  std::chrono::milliseconds start_limit_interval{60'000};
  // A request running longer is answered FAILED timeout. >= 0, at most 24h; 0 = off.
  std::chrono::milliseconds request_timeout{0};
  // With requests in flight and no reply from the worker for this long, the worker is stalled:
  // killed and restarted. >= 0, at most 24h; 0 = off.
  std::chrono::milliseconds stall_timeout{0};
  // When a started worker may take requests.
  ReadyMode ready = ReadyMode::kExec;
  // Longest gap between two WATCHDOG=1 from the worker (sd_notify(3)), passed to it as
  // WATCHDOG_USEC; a miss is a stall. >= 0, at most 24h; 0 = off.
  std::chrono::milliseconds watchdog{0};
  // The signal that asks the worker to stop: SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 or
  // SIGKILL (systemd.kill(5) KillSignal=).
  int stop_signal = SIGTERM;
  // How long in-flight requests may take to finish on a stop, and then how long the worker may take
  // to exit after stop_signal, before it is killed. > 0, at most 24h.
  std::chrono::milliseconds stop_timeout{5000};
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
  // Of the [cells.NAME] table (its '[', or '{' for an inline table).
  SourcePosition position;
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
};

struct Config {
  // The path the config was read from, as given.
  std::string source;
  SupervisorConfig supervisor;
  // In file order, at least one.
  std::vector<CellConfig> cells;
};

struct LoadResult {
  // Set iff errors is empty.
  std::optional<Config> config;
  // Every error found, sorted by position (line, then column; unpositioned errors first).
  // A TOML syntax error stops parsing, so it is always the only error.
  std::vector<ConfigError> errors;
};

// What ParseConfig checks against the host it runs on.
struct HostFacts {
  // CPUs online, >= 1: bounds `cpu_max` at 100% × cpus.
  uint32_t cpus = 1;
};

// This host: sysconf(_SC_NPROCESSORS_ONLN), or 1 if that fails.
HostFacts CurrentHostFacts();

// Reads and validates the file at `path`. A file that cannot be read gives one error, with `path`
// as its file and the errno text in its message. Never throws.
LoadResult LoadConfigFile(const std::string& path);

// Validates `toml_text`. `source_path` names the file in errors and anchors relative paths: they
// are resolved against its directory, made absolute with the cwd if needed. Lexical only: no
// filesystem access, no symlink resolution. Never throws.
LoadResult ParseConfig(std::string_view toml_text, const std::string& source_path);
// As above, checking against `host` rather than CurrentHostFacts(): for tests.
LoadResult ParseConfig(std::string_view toml_text, const std::string& source_path,
                       const HostFacts& host);

}  // namespace bulkhead::config
