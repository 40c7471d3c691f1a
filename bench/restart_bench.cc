// SPDX-License-Identifier: MIT
// bulkhead-bench-restart: what planned restarts cost callers (docs/benchmarks.md, "Planned
// restarts"; issue 24 section 1). In a fresh temporary directory, bulkheadd (`cgroup = "off"`: the
// bench never touches /sys/fs/cgroup, and the overlap needs no cgroup) runs three cells of
// bulkhead-bench-worker, each with `max_concurrent` = `--clients` and `max_queue` = 0, so that a
// request finding no worker slot is REJECTED full at once rather than hidden in a queue:
//   frames  one worker connection per request in flight (frames)
//   mux     one multiplexed worker connection (frames)
//   http    protocol = "http", keep-alive POST /echo
// For each cell, `--clients` closed-loop connections first run `--seconds` with no restart (the
// baseline p99), then run again while `bulkheadctl restart CELL`, as a control request, is sent
// `--restarts` times back to back, each once the one before has finished (the worker's pid changed
// and no swap runs). It prints, per cell, the requests answered, those not OK, the cell's own
// rejected and failed counts, the p50 and p99 of both runs and their p99 ratio, and the median
// time a restart took. `--overlap false` runs the same with `restart_overlap = false` (stop, then
// start), to show what the overlap saves. A third run per cell is the control: the same load while
// the bench itself starts a bulkhead-bench-worker of the cell's protocol on a socket of its own
// (as bulkheadd starts one: cell::Spawn's setup, fd 3), waits for its exec, connects once and
// stops it with SIGTERM, `--restarts` times back to back, outside bulkheadd. Its p99 is what a
// process start and exit cost the clients on this machine, whoever does them; `p99 x ctl` is the
// restarts' p99 over it: what bulkheadd's restart machinery adds (docs/benchmarks.md). Exits 1 if
// any request was not answered OK (with the overlap on) or the cell's counters do not match the
// replies; it judges no latency.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "base/temp_dir.h"
#include "bench/closed_loop.h"
#include "bench/latency_summary.h"
#include "bench/sockets.h"
#include "bench/stage_support.h"
#include "ipc/client.h"
#include "proc/bulkheadd_process.h"
#include "proc/child_process.h"

namespace bulkhead::bench {
namespace {

using proc::BulkheaddProcess;
using proc::TomlString;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr milliseconds kStepTimeout{30000};
std::atomic<bool>& g_interrupted = StopRequested();

struct Options {
  std::string bin_dir;
  int restarts = 50;
  int clients = 16;
  double seconds = 3;
  bool overlap = true;
};

struct CellSpec {
  const char* name;
  LoadProtocol protocol;
  const char* extra_toml;
};

constexpr CellSpec kCells[] = {
    {"frames", LoadProtocol::kFrames, ""},
    {"mux", LoadProtocol::kFrames, "worker_connections = \"multiplex\"\n"},
    {"http", LoadProtocol::kHttp, "protocol = \"http\"\n"},
};

std::string Config(const Options& options, const std::string& root) {
  std::string config = BenchSupervisorToml(root);
  for (const CellSpec& cell : kCells) {
    const bool http = cell.protocol == LoadProtocol::kHttp;
    config += std::string("\n[cells.") + cell.name + "]\ncommand = [" +
              TomlString(options.bin_dir + "/bench/bulkhead-bench-worker") + ", \"--protocol\", " +
              (http ? "\"http\"" : "\"frames\"") + "]\n" + cell.extra_toml +
              "max_concurrent = " + std::to_string(options.clients) +
              "\nmax_queue = 0\nrestart_overlap = " + (options.overlap ? "true" : "false") + "\n";
  }
  return config;
}

// Sends restart for `cell` and waits until it is over: a worker with another pid than `before`
// runs and no swap is under way. Returns the new pid.
Result<pid_t> RestartOnce(BulkheaddProcess& bulkheadd, const std::string& cell, pid_t before) {
  ctl::ControlReply reply = bulkheadd.Control({{"command", "restart"}, {"cell", cell}});
  if (!reply.response) return Status::Error("restart " + cell + ": " + reply.error);
  if (!(*reply.response).value("ok", false)) {
    return Status::Error("restart " + cell + ": " + reply.response->dump());
  }
  const Clock::time_point deadline = Clock::now() + kStepTimeout;
  while (Clock::now() < deadline && !g_interrupted.load()) {
    nlohmann::json c = CellStatusJson(bulkheadd, cell);
    if (c.is_object() && c["pid"].is_number() && c["state"] == "running" &&
        (!c.contains("swap") || c["swap"].is_null())) {
      const pid_t now = c["pid"].get<pid_t>();
      if (now != before) return now;
    }
    std::this_thread::sleep_for(milliseconds(2));
  }
  return Status::Error("restart " + cell +
                       ": not over within 30 s: " + CellStatusJson(bulkheadd, cell).dump());
}

// The control's step: a bench worker of `cell`'s protocol started beside bulkheadd on a socket of
// its own at `socket_path`, connected to once, then stopped (SIGTERM) and reaped.
Status SpawnAndStopWorker(const Options& options, const CellSpec& cell,
                          const std::string& socket_path) {
  ::unlink(socket_path.c_str());
  Result<UniqueFd> listener = ListenUnix(socket_path, 64);
  if (!listener.ok()) return listener.status();
  Result<proc::ChildProcess> worker = proc::ChildProcess::StartWorker(
      {options.bin_dir + "/bench/bulkhead-bench-worker", "--protocol",
       cell.protocol == LoadProtocol::kHttp ? "http" : "frames"},
      listener->get());
  if (!worker.ok()) return worker.status();
  // A connection the worker accepts, as the next worker of a restart accepts its first links.
  Result<UniqueFd> link = ipc::ConnectUnix(socket_path);
  if (!link.ok()) return link.status();
  Result<int> stopped = worker->Stop(kStepTimeout);
  ::unlink(socket_path.c_str());
  return stopped.ok() ? Status::Ok() : stopped.status();
}

struct Run {
  LoadResult load;
  LatencySummary latency;
  std::vector<double> restart_ms;
};

LoadOptions LoadFor(const Options& options, const CellSpec& cell, const std::string& socket) {
  LoadOptions load;
  load.socket = socket;
  load.protocol = cell.protocol;
  load.clients = options.clients;
  load.payload = std::string(64, 'x');
  load.warmup = milliseconds(50);
  load.reply_timeout = kStepTimeout;
  load.interrupted = &g_interrupted;
  return load;
}

// What runs beside the load: nothing (the baseline), planned restarts through bulkheadd, or the
// control's worker starts outside it.
enum class Beside { kNothing, kRestarts, kSpawns };

Result<Run> Measure(BulkheaddProcess& bulkheadd, const Options& options, const CellSpec& cell,
                    const std::string& socket, Beside beside, const std::string& spawn_socket) {
  LoadOptions load = LoadFor(options, cell, socket);
  Run run;
  if (beside == Beside::kNothing) {
    load.duration = milliseconds(static_cast<int64_t>(options.seconds * 1000));
    run.load = RunClosedLoop(load);
  } else {
    // The load runs until the restarts (or the control's starts) are over: `interrupted` ends it.
    std::atomic<bool> done{false};
    load.duration = milliseconds(600'000);
    load.interrupted = &done;
    std::thread loader([&] { run.load = RunClosedLoop(load); });
    std::this_thread::sleep_for(milliseconds(200));  // load flowing before the first restart
    nlohmann::json c = CellStatusJson(bulkheadd, cell.name);
    pid_t pid = c.is_object() && c["pid"].is_number() ? c["pid"].get<pid_t>() : 0;
    Status status = Status::Ok();
    for (int i = 0; i < options.restarts && !g_interrupted.load(); ++i) {
      const Clock::time_point start = Clock::now();
      if (beside == Beside::kSpawns) {
        status = SpawnAndStopWorker(options, cell, spawn_socket);
        if (!status.ok()) break;
      } else {
        Result<pid_t> next = RestartOnce(bulkheadd, cell.name, pid);
        if (!next.ok()) {
          status = next.status();
          break;
        }
        pid = *next;
      }
      run.restart_ms.push_back(
          std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    }
    std::this_thread::sleep_for(milliseconds(200));  // and after the last one
    done = true;
    loader.join();
    if (!status.ok()) return status;
  }
  if (!run.load.error.empty()) return Status::Error(std::string(cell.name) + ": " + run.load.error);
  run.latency = Summarize(run.load.latencies_ns);
  return run;
}

int Main(int argc, char** argv) {
  Options options;
  options.bin_dir = proc::BuildDirOfThisProgram();
  CLI::App app{"bulkhead-bench-restart: requests answered and p99 during planned restarts"};
  app.add_option("--bin-dir", options.bin_dir, "build directory holding supervisor/ and bench/")
      ->capture_default_str();
  app.add_option("--restarts", options.restarts, "restarts per cell, back to back")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--clients", options.clients, "closed-loop connections per cell")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  app.add_option("--seconds", options.seconds, "length of the run without restarts")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 600.0));
  app.add_option("--overlap", options.overlap, "restart_overlap of the cells")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  CatchStopSignals();

  TempDir dir;
  Status status = dir.Create("bh-bench-restart");
  std::optional<BulkheaddProcess> bulkheadd;
  if (status.ok()) {
    status = StartBenchBulkheadd(options.bin_dir, dir.path(), Config(options, dir.path()),
                                 &g_interrupted, &bulkheadd);
  }
  if (status.ok()) status = bulkheadd->WaitUntilRunning({"frames", "mux", "http"}, kStepTimeout);
  bool clean = status.ok();
  if (clean) {
    std::printf(
        "bulkhead-bench-restart: %d clients per cell, %d restarts, restart_overlap = %s, "
        "max_queue = 0\n",
        options.clients, options.restarts, options.overlap ? "true" : "false");
    std::printf("%-7s %9s %6s %8s %6s %9s %9s %9s %9s %7s %9s %9s %10s\n", "cell", "answered",
                "notok", "rejected", "failed", "p50 base", "p99 base", "p50 rst", "p99 rst",
                "p99 x", "p99 ctl", "p99 x ctl", "restart ms");
  }
  for (const CellSpec& cell : kCells) {
    if (!clean) break;
    Result<proc::CellStatus> shown = bulkheadd->Cell(cell.name);
    if (!shown.ok()) {
      status = shown.status();
      clean = false;
      break;
    }
    const std::string spawn_socket = dir.Join("control-worker.sock");
    Result<Run> base =
        Measure(*bulkheadd, options, cell, shown->socket, Beside::kNothing, spawn_socket);
    Result<Run> restarts =
        base.ok() ? Measure(*bulkheadd, options, cell, shown->socket, Beside::kRestarts,
                            spawn_socket)
                  : Result<Run>(base.status());
    Result<Run> spawns = restarts.ok() ? Measure(*bulkheadd, options, cell, shown->socket,
                                                 Beside::kSpawns, spawn_socket)
                                       : Result<Run>(restarts.status());
    if (!spawns.ok()) {
      status = spawns.status();
      clean = false;
      break;
    }
    Result<proc::CellStatus> after = bulkheadd->Cell(cell.name);
    if (!after.ok()) {
      status = after.status();
      clean = false;
      break;
    }
    const uint64_t answered =
        base->load.total_replies + restarts->load.total_replies + spawns->load.total_replies;
    const uint64_t not_ok =
        base->load.unexpected + restarts->load.unexpected + spawns->load.unexpected;
    auto ratio = [](double over, double under) { return under > 0 ? over / under : 0; };
    std::printf("%-7s %9llu %6llu %8llu %6llu %9.0f %9.0f %9.0f %9.0f %7.2f %9.0f %9.2f %10.1f\n",
                cell.name, static_cast<unsigned long long>(answered),
                static_cast<unsigned long long>(not_ok),
                static_cast<unsigned long long>(after->rejected),
                static_cast<unsigned long long>(after->failed), base->latency.p50_us,
                base->latency.p99_us, restarts->latency.p50_us, restarts->latency.p99_us,
                ratio(restarts->latency.p99_us, base->latency.p99_us), spawns->latency.p99_us,
                ratio(restarts->latency.p99_us, spawns->latency.p99_us),
                Median(restarts->restart_ms));
    std::fflush(stdout);
    // Every reply the clients got is one the cell counted, and (overlapping) every one was OK.
    if (after->ok + after->rejected + after->failed < answered) {
      std::fprintf(stderr, "%s: the cell counted fewer answers than the clients received\n",
                   cell.name);
      clean = false;
    }
    if (options.overlap && (not_ok != 0 || after->rejected != 0 || after->failed != 0)) {
      std::fprintf(stderr, "%s: requests were not answered OK during overlapping restarts\n",
                   cell.name);
      clean = false;
    }
  }
  Status stopped = StopBenchProcesses({}, &bulkheadd);
  if (status.ok()) status = stopped;
  if (!status.ok()) {
    std::fprintf(stderr, "bulkhead-bench-restart: %s\n", status.message().c_str());
    return 1;
  }
  return clean ? 0 : 1;
}

}  // namespace
}  // namespace bulkhead::bench

int main(int argc, char** argv) { return bulkhead::bench::Main(argc, argv); }
