// SPDX-License-Identifier: MIT
// bulkhead-bench-adaptive: the adaptive concurrency limit against a sweep of fixed ones, on the
// workloads of issue 26 (docs/benchmarks.md, "Adaptive concurrency"). On this host (no cgroup v2)
// only the service-time signal is live: the latency-only mode. With --cgroup (in the VM of
// `make bench-vm`, tests/vm/scenarios/bench_adaptive.sh) every cell has its own cgroup and limits,
// and the kernel's signals (PSI triggers, cpu.stat, memory.current) are live too.
//
// In a fresh temporary directory, bulkheadd (`cgroup = "off"`: never touches /sys/fs/cgroup;
// `"required"` with --cgroup) runs one cell per setting, each bulkhead-test-worker (a thread per
// worker connection) answering, with `--workload cpu`, `cpu US`: it spins until its thread used US
// µs of CPU, so the service time of a request grows with the requests sharing the CPUs (a knee at
// about the CPU count, or at the cell's cpu_max); with `--workload memory`, `hold MIB MS`: each
// request maps and touches MIB MiB and keeps them MS ms, so that past memory_max / MIB requests
// at once the cell's worker is OOM-killed and every request in it fails. `fixed-N` has
// `max_concurrent = N` for each N of `--sweep`; `adaptive` has `concurrency = "adaptive"`,
// `min_concurrent = 1`, `max_concurrent` = the sweep's largest. Every cell has the same bounded
// queue (`--max-queue`, `--queue-timeout-ms`), so a request over the limit waits a little or is
// REJECTED at once.
//
// First the unloaded p99: one caller on `fixed-1`. Then, cell after cell, `--clients` callers
// (threads with a blocking ipc::Client each: send, wait for the reply) offer load for `--seconds`:
// a caller whose request was REJECTED waits `--backoff-ms` before its next one, as a caller with a
// retry policy does (without it a rejected caller would retry in a tight loop and the bench would
// measure bulkheadd's rejection path instead of the worker). With `--warmup-seconds W` each cell is
// first offered the same load for W seconds that are not counted (nor the OOM kills in them): the
// figures are then the steady state's, where the adaptive limit has settled (at a few answers a
// second its first windows take most of a short run). With `--rounds R` the measured time is split
// into R rounds, every cell loaded in turn in each: a machine whose speed drifts (a TCG guest on a
// shared host) then moves every cell alike. Per cell it prints the answers per second,
// the goodput (OK within `--deadline-ms`, per second), the rejections per second, the failures, the
// p50 and p99 of the OK answers and that p99 over the unloaded one, the cell's OOM kills, for
// the adaptive cell its limit at the end, its bounds and its changes, and with --cgroup the CPU the
// cell's cgroup used over the measured rounds, as a share of its cpu_max quota, and the share of
// its periods throttled (bench/cgroup_cpu_use.h). With `--neighbour-clients N`,
// a cell `neighbour` (the same work, a fixed limit of N, no cpu_max: the machine's CPUs are the
// budget both share) is offered N callers beside each loaded cell, and its p99 is printed per
// loaded cell. It judges nothing: the figures are for docs/benchmarks.md. Exits 1 if bulkheadd or a
// cell could not run, or a cell answered no request OK, or failed one with `--workload cpu` (the
// worker never fails `cpu`; an OOM kill fails `hold` requests).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "base/temp_dir.h"
#include "bench/cgroup_cpu_use.h"
#include "bench/latency_summary.h"
#include "bench/stage_support.h"
#include "ipc/client.h"
#include "proc/bulkheadd_process.h"

namespace bulkhead::bench {
namespace {

using proc::BulkheaddProcess;
using proc::TomlString;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr milliseconds kStepTimeout{30000};
std::atomic<bool>& g_interrupted = StopRequested();

enum class Workload : uint8_t { kCpu, kMemory };

struct Options {
  std::string bin_dir;
  Workload workload = Workload::kCpu;
  bool cgroup = false;
  std::string cpu_max;     // every loaded cell's cpu_max with --cgroup ("" = none)
  std::string memory_max;  // every loaded cell's memory_max with --cgroup ("" = none)
  int hold_mib = 24;
  int hold_ms = 100;
  int neighbour_clients = 0;
  int clients = 64;
  double seconds = 5;
  double warmup_seconds = 0;
  int rounds = 1;
  int work_us = 40000;
  int deadline_ms = 1000;
  int max_queue = 4;
  int queue_timeout_ms = 100;
  int backoff_ms = 100;
  int latency_tolerance = 0;  // percent; 0: the adaptive cell's default
  std::vector<int> sweep = {1, 2, 4, 8, 16, 32, 64};
};

std::string CellToml(const Options& options, const std::string& name, int max_concurrent,
                     bool adaptive) {
  std::string toml = "\n[cells." + name + "]\ncommand = [" +
                     TomlString(options.bin_dir + "/tests/helpers/bulkhead-test-worker") +
                     "]\nmax_concurrent = " + std::to_string(max_concurrent) +
                     "\nmax_queue = " + std::to_string(options.max_queue) +
                     "\nqueue_timeout = \"" + std::to_string(options.queue_timeout_ms) + "ms\"\n";
  if (adaptive) toml += "concurrency = \"adaptive\"\nmin_concurrent = 1\n";
  if (adaptive && options.latency_tolerance > 0) {
    toml += "latency_tolerance = \"" + std::to_string(options.latency_tolerance) + "%\"\n";
  }
  if (options.cgroup && name != "neighbour") {
    if (!options.cpu_max.empty()) toml += "cpu_max = " + TomlString(options.cpu_max) + "\n";
    if (!options.memory_max.empty()) {
      toml += "memory_max = " + TomlString(options.memory_max) + "\n";
    }
  }
  return toml;
}

std::string Payload(const Options& options) {
  return options.workload == Workload::kCpu
             ? "cpu " + std::to_string(options.work_us)
             : "hold " + std::to_string(options.hold_mib) + " " + std::to_string(options.hold_ms);
}

std::string Config(const Options& options, const std::string& root) {
  std::string config = BenchSupervisorToml(root, options.cgroup ? "required" : "off");
  for (int n : options.sweep) config += CellToml(options, "fixed-" + std::to_string(n), n, false);
  config += CellToml(options, "adaptive", options.sweep.back(), true);
  if (options.neighbour_clients > 0) {
    config += CellToml(options, "neighbour", options.neighbour_clients, false);
  }
  return config;
}

struct Tally {
  uint64_t ok = 0;
  uint64_t ok_in_deadline = 0;
  uint64_t rejected = 0;
  uint64_t failed = 0;
  // Latency of each OK answer in µs (not ns: in the VM an overloaded cell's answers take longer
  // than the 4.29 s a uint32_t of ns holds).
  std::vector<uint32_t> ok_us;
  std::string error;
};

// Adds `from`'s counts and samples to `into`'s; the first error stays.
void Add(Tally* into, Tally&& from) {
  into->ok += from.ok;
  into->ok_in_deadline += from.ok_in_deadline;
  into->rejected += from.rejected;
  into->failed += from.failed;
  into->ok_us.insert(into->ok_us.end(), from.ok_us.begin(), from.ok_us.end());
  if (into->error.empty()) into->error = std::move(from.error);
}

// `clients` callers on `socket` for `seconds`; see the file comment.
Tally Offer(const Options& options, const std::string& socket, int clients, double seconds) {
  Tally total;
  std::mutex mu;
  const std::string payload = Payload(options);
  const Clock::time_point end =
      Clock::now() + milliseconds(static_cast<int64_t>(seconds * 1000));
  const auto deadline = milliseconds(options.deadline_ms);
  std::vector<std::thread> callers;
  callers.reserve(static_cast<size_t>(clients));
  for (int c = 0; c < clients; ++c) {
    callers.emplace_back([&] {
      Tally mine;
      Result<ipc::Client> client = ipc::Client::Connect(socket);
      if (!client.ok()) {
        mine.error = client.status().message();
      }
      uint64_t id = 0;
      while (mine.error.empty() && Clock::now() < end && !g_interrupted.load()) {
        const Clock::time_point sent = Clock::now();
        Status status = client->Send(++id, payload);
        Result<ipc::Client::Reply> reply =
            status.ok() ? client->Receive() : Result<ipc::Client::Reply>(status);
        if (!reply.ok()) {
          mine.error = reply.status().message();
          break;
        }
        const auto took = Clock::now() - sent;
        switch (reply->header.status) {
          case ipc::ReplyStatus::kOk:
            ++mine.ok;
            if (took <= deadline) ++mine.ok_in_deadline;
            mine.ok_us.push_back(static_cast<uint32_t>(std::min<int64_t>(
                std::chrono::duration_cast<std::chrono::microseconds>(took).count(), UINT32_MAX)));
            break;
          case ipc::ReplyStatus::kRejected:
            ++mine.rejected;
            std::this_thread::sleep_for(milliseconds(options.backoff_ms));
            break;
          default:
            ++mine.failed;
            break;
        }
      }
      std::lock_guard<std::mutex> lock(mu);
      Add(&total, std::move(mine));
    });
  }
  for (std::thread& t : callers) t.join();
  return total;
}

int Main(int argc, char** argv) {
  Options options;
  options.bin_dir = proc::BuildDirOfThisProgram();
  CLI::App app{"bulkhead-bench-adaptive: the adaptive limit against fixed ones"};
  app.add_option("--bin-dir", options.bin_dir,
                 "build directory holding supervisor/ and tests/helpers/")
      ->capture_default_str();
  app.add_option("--workload", options.workload, "cpu: `cpu US` per request; memory: `hold MIB MS`")
      ->transform(CLI::CheckedTransformer(
          std::map<std::string, Workload>{{"cpu", Workload::kCpu}, {"memory", Workload::kMemory}}))
      ->capture_default_str();
  app.add_flag("--cgroup", options.cgroup,
               "cgroup = \"required\": each cell in its own cgroup v2 (only in a VM of your own)");
  app.add_option("--cpu-max", options.cpu_max, "with --cgroup: each loaded cell's cpu_max (\"20%\")");
  app.add_option("--memory-max", options.memory_max,
                 "with --cgroup: each loaded cell's memory_max (\"256M\")");
  app.add_option("--hold-mib", options.hold_mib, "memory workload: MiB a request holds")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
  app.add_option("--hold-ms", options.hold_ms, "memory workload: how long it holds them, ms")
      ->capture_default_str()
      ->check(CLI::Range(0, 600'000));
  app.add_option("--latency-tolerance", options.latency_tolerance,
                 "the adaptive cell's latency_tolerance, percent (0: its default, 50%)")
      ->capture_default_str()
      ->check(CLI::Range(0, 400));
  app.add_option("--neighbour-clients", options.neighbour_clients,
                 "callers of a neighbour cell run beside each loaded cell (0: none)")
      ->capture_default_str()
      ->check(CLI::Range(0, 512));
  app.add_option("--clients", options.clients, "callers")
      ->capture_default_str()
      ->check(CLI::Range(1, 512));
  app.add_option("--seconds", options.seconds, "load per cell")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 600.0));
  app.add_option("--warmup-seconds", options.warmup_seconds,
                 "load offered to each cell before its measured --seconds, not counted (the "
                 "steady state: the adaptive limit has settled, every worker has warmed)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 600.0));
  app.add_option("--rounds", options.rounds,
                 "--seconds is split into this many rounds, each offering every cell its share in "
                 "turn")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  app.add_option("--work-us", options.work_us, "CPU time per request at the worker, µs")
      ->capture_default_str()
      ->check(CLI::Range(1, 1'000'000));
  app.add_option("--deadline-ms", options.deadline_ms, "an OK answer later than this is no goodput")
      ->capture_default_str()
      ->check(CLI::Range(1, 600'000));
  app.add_option("--max-queue", options.max_queue, "max_queue of every cell")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  app.add_option("--queue-timeout-ms", options.queue_timeout_ms, "queue_timeout of every cell")
      ->capture_default_str()
      ->check(CLI::Range(1, 600'000));
  app.add_option("--backoff-ms", options.backoff_ms, "a rejected caller's pause")
      ->capture_default_str()
      ->check(CLI::Range(0, 60'000));
  app.add_option("--sweep", options.sweep, "the fixed max_concurrent settings, ascending")
      ->capture_default_str()
      ->check(CLI::Range(1, 65535));
  CLI11_PARSE(app, argc, argv);
  std::sort(options.sweep.begin(), options.sweep.end());
  CatchStopSignals();

  std::vector<std::string> cells;
  for (int n : options.sweep) cells.push_back("fixed-" + std::to_string(n));
  cells.push_back("adaptive");
  std::vector<std::string> all_cells = cells;
  if (options.neighbour_clients > 0) all_cells.push_back("neighbour");

  TempDir dir;
  Status status = dir.Create("bh-bench-adaptive");
  std::optional<BulkheaddProcess> bulkheadd;
  if (status.ok()) {
    status = StartBenchBulkheadd(options.bin_dir, dir.path(), Config(options, dir.path()),
                                 &g_interrupted, &bulkheadd);
  }
  if (status.ok()) status = bulkheadd->WaitUntilRunning(all_cells, kStepTimeout);

  double unloaded_p99_us = 0;
  if (status.ok()) {
    Result<proc::CellStatus> first = bulkheadd->Cell(cells.front());
    status = first.status();
    if (status.ok()) {
      // Long enough for a p99 of a few hundred answers where each takes a while (the VM).
      Tally alone = Offer(options, first->socket, 1, std::min(options.seconds, 5.0));
      if (!alone.error.empty()) status = Status::Error("unloaded: " + alone.error);
      unloaded_p99_us = Summarize(alone.ok_us, SampleUnit::kUs).p99_us;
    }
  }
  if (status.ok()) {
    std::printf(
        "bulkhead-bench-adaptive: %d callers, %s per request, deadline %d ms, max_queue %d, "
        "queue_timeout %d ms, backoff %d ms, %.1f s per cell in %d rounds after %.1f s of "
        "warm-up, cgroup %s (cpu_max %s, memory_max %s), neighbour callers %d, adaptive "
        "latency_tolerance %s; unloaded p99 %.0f us\n",
        options.clients, Payload(options).c_str(), options.deadline_ms, options.max_queue,
        options.queue_timeout_ms, options.backoff_ms, options.seconds, options.rounds,
        options.warmup_seconds,
        options.cgroup ? "required" : "off",
        options.cpu_max.empty() ? "none" : options.cpu_max.c_str(),
        options.memory_max.empty() ? "none" : options.memory_max.c_str(),
        options.neighbour_clients,
        options.latency_tolerance > 0 ? (std::to_string(options.latency_tolerance) + "%").c_str()
                                      : "50% (default)",
        unloaded_p99_us);
    std::printf("%-10s %9s %11s %11s %8s %9s %9s %7s %5s %11s  %s\n", "cell", "ok/s", "goodput/s",
                "rejected/s", "failed", "p50 us", "p99 us", "p99 x", "ooms", "nbr p99 us",
                "limit");
  }
  // What each cell got over the rounds; the warm-up's OOM kills are not its.
  struct CellRun {
    std::string socket;
    uint64_t ooms_before = 0;
    Tally tally;
    Tally neighbour;   // the neighbour's answers while this cell was loaded
    CgroupCpuUse cpu;  // its cgroup's cpu.stat over the measured rounds (with --cgroup)
  };
  std::vector<CellRun> runs(cells.size());
  std::string neighbour_socket;
  for (size_t i = 0; i < cells.size() && status.ok(); ++i) {
    Result<proc::CellStatus> shown = bulkheadd->Cell(cells[i]);
    status = shown.status();
    if (shown.ok()) runs[i].socket = shown->socket;
  }
  if (status.ok() && options.neighbour_clients > 0) {
    Result<proc::CellStatus> other = bulkheadd->Cell("neighbour");
    status = other.status();
    if (other.ok()) neighbour_socket = other->socket;
  }
  // The warm-up: the same load, its answers not counted, nor the OOM kills it caused.
  for (size_t i = 0; i < cells.size() && status.ok() && options.warmup_seconds > 0; ++i) {
    if (g_interrupted.load()) break;
    Tally warmup = Offer(options, runs[i].socket, options.clients, options.warmup_seconds);
    if (!warmup.error.empty()) {
      status = Status::Error(cells[i] + " (warm-up): " + warmup.error);
      break;
    }
    const nlohmann::json warmed = CellStatusJson(*bulkheadd, cells[i]);
    if (warmed.is_object()) runs[i].ooms_before = warmed.value("oom_kills", uint64_t{0});
  }
  // Round after round, each cell in turn for its share of --seconds: a machine whose speed drifts
  // (a TCG guest on a shared host) moves every cell's figures alike.
  const double share = options.seconds / options.rounds;
  for (int round = 0; round < options.rounds && status.ok(); ++round) {
    for (size_t i = 0; i < cells.size() && status.ok(); ++i) {
      if (g_interrupted.load()) {
        status = Status::Error("interrupted");
        break;
      }
      // The neighbour's callers run beside the loaded cell's, for the same time.
      Tally neighbour;
      std::optional<std::thread> beside;
      if (!neighbour_socket.empty()) {
        beside.emplace([&options, &neighbour, &neighbour_socket, share] {
          neighbour = Offer(options, neighbour_socket, options.neighbour_clients, share);
        });
      }
      const CgroupCpuUse cpu_before = CgroupCpuUse::Of(CellStatusJson(*bulkheadd, cells[i]));
      const auto offered_at = std::chrono::steady_clock::now();
      Tally tally = Offer(options, runs[i].socket, options.clients, share);
      const double offered_s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - offered_at).count();
      runs[i].cpu.Add(cpu_before, CgroupCpuUse::Of(CellStatusJson(*bulkheadd, cells[i])),
                      offered_s);
      if (beside) beside->join();
      if (!neighbour.error.empty()) {
        status = Status::Error("neighbour beside " + cells[i] + ": " + neighbour.error);
      } else if (!tally.error.empty()) {
        status = Status::Error(cells[i] + ": " + tally.error);
      }
      Add(&runs[i].tally, std::move(tally));
      Add(&runs[i].neighbour, std::move(neighbour));
    }
  }
  for (size_t i = 0; i < cells.size() && status.ok(); ++i) {
    const std::string& cell = cells[i];
    Tally& tally = runs[i].tally;
    const LatencySummary latency = Summarize(tally.ok_us, SampleUnit::kUs);
    const nlohmann::json shown_json = CellStatusJson(*bulkheadd, cell);
    const uint64_t ooms_total =
        shown_json.is_object() ? shown_json.value("oom_kills", uint64_t{0}) : uint64_t{0};
    const uint64_t ooms = ooms_total - std::min(ooms_total, runs[i].ooms_before);
    std::string limit = "fixed";
    const std::string quota = runs[i].cpu.Describe();
    if (cell == "adaptive") {
      const nlohmann::json c =
          shown_json.is_object() ? shown_json.value("concurrency", nlohmann::json()) : nullptr;
      limit = c.is_object() ? std::to_string(c.value("limit", 0)) + " of " +
                                  std::to_string(c.value("floor", 0)) + ".." +
                                  std::to_string(c.value("ceiling", 0)) +
                                  ", changes " +
                                  c.value("changes_by_cause", nlohmann::json()).dump() +
                                  ", cpu_pressure_spared " +
                                  std::to_string(c.value("cpu_pressure_spared", uint64_t{0}))
                            : "?";
    }
    if (!quota.empty()) limit += "; " + quota;
    // The adaptive cell's last changes (newest first, "8>6 memory_usage -12.3s") and its memory
    // figures, as status shows them: how it moved, for docs/benchmarks.md.
    std::string history;
    if (cell == "adaptive" && shown_json.is_object()) {
      const nlohmann::json c = shown_json.value("concurrency", nlohmann::json());
      if (c.is_object()) {
        history = "adaptive changes: memory_share " +
                  std::to_string(c.value("memory_share", 0.0)).substr(0, 5) + ", memory_fit " +
                  c.value("memory_fit", nlohmann::json()).dump() + ", memory_ceiling " +
                  c.value("memory_ceiling", nlohmann::json()).dump() + ", hold " +
                  c.value("hold", std::string("?")) + "; newest first:";
        for (const nlohmann::json& change : c.value("changes", nlohmann::json::array())) {
          char one[96];
          std::snprintf(one, sizeof one, " %u>%u %s -%.1fs", change.value("from", 0u),
                        change.value("to", 0u), change.value("cause", std::string()).c_str(),
                        static_cast<double>(change.value("ago_ms", uint64_t{0})) / 1000.0);
          history += one;
        }
      }
    }
    std::printf("%-10s %9.1f %11.1f %11.0f %8llu %9.0f %9.0f %7.2f %5llu %11.0f  %s\n",
                cell.c_str(), static_cast<double>(tally.ok) / options.seconds,
                static_cast<double>(tally.ok_in_deadline) / options.seconds,
                static_cast<double>(tally.rejected) / options.seconds,
                static_cast<unsigned long long>(tally.failed), latency.p50_us, latency.p99_us,
                unloaded_p99_us > 0 ? latency.p99_us / unloaded_p99_us : 0,
                static_cast<unsigned long long>(ooms),
                options.neighbour_clients > 0
                    ? Summarize(runs[i].neighbour.ok_us, SampleUnit::kUs).p99_us
                    : 0.0,
                limit.c_str());
    if (!history.empty()) std::printf("%s\n", history.c_str());
    std::fflush(stdout);
    if (tally.ok == 0 || (tally.failed != 0 && options.workload == Workload::kCpu)) {
      status = Status::Error(cell + ": " + std::to_string(tally.ok) + " OK, " +
                             std::to_string(tally.failed) + " failed");
    }
  }
  Status stopped = StopBenchProcesses({}, &bulkheadd);
  if (status.ok()) status = stopped;
  if (!status.ok()) {
    std::fprintf(stderr, "bulkhead-bench-adaptive: %s\n", status.message().c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace bulkhead::bench

int main(int argc, char** argv) { return bulkhead::bench::Main(argc, argv); }
