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
//
// `--reexec N` measures re-execs instead (docs/reexec.md; issue 24 section 2): per cell, the
// baseline as above, then the same load while bulkheadd is asked to re-execute itself N times in
// a row, each as `bulkheadctl reexec` does it (the request, then status until the new image
// answers with the next re-exec count), the next once the one before is over. It prints the
// requests answered and not OK, the cell's rejected and failed counts, the worker starts during
// the re-execs (0: every worker kept its pid, each cell's pid compared before and after), whether
// the cell's counters continued (its ok + rejected + failed grew by exactly the replies the
// clients got: a counter that restarted from 0 would not), p50 and p99 of both runs and their
// ratio, and how long a re-exec took: the whole request as bulkheadctl waits for it, and its
// drain and exec from bulkheadd's own info lines (millisecond timestamps: the drain from
// "re-executing ... once no request is in flight" to "re-exec: exec", the exec from there to the
// new image's "re-executed", which it logs once it has taken every cell over), median and max.
// Exits 1 if a re-exec failed, a request was not answered OK, a worker was started, or a counter
// did not continue; it judges no latency.
#include <time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <map>
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
#include "ctl/control_client.h"
#include "ctl/reexec_command.h"
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
  int reexecs = 0;  // > 0: the re-exec mode, this many re-execs per cell
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
  // The re-exec mode reads the drain's and the exec's times off bulkheadd's info lines.
  std::string config =
      BenchSupervisorToml(root, "off", options.reexecs > 0 ? "info" : "warning");
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

// One re-exec as `bulkheadctl reexec` runs it (ctl/reexec_command.h): the request, then status
// every 2 ms until the new image answers with the next count. Returns when it was asked, on the
// wall clock (bulkheadd's log lines are stamped with it), in ms since the epoch.
Result<int64_t> ReexecOnce(BulkheaddProcess& bulkheadd) {
  const int64_t asked_ms = std::chrono::duration_cast<milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
  ctl::ControlReply reply = bulkheadd.Control(ctl::ReexecRequest());
  if (!reply.response) return Status::Error("reexec: " + reply.error);
  if (!(*reply.response).value("ok", false)) {
    return Status::Error("reexec refused: " + reply.response->dump());
  }
  const uint64_t count_before = reply.response->value("count", uint64_t{0});
  const Clock::time_point deadline = Clock::now() + kStepTimeout;
  while (Clock::now() < deadline && !g_interrupted.load()) {
    ctl::ControlReply status = bulkheadd.Control(ctl::StatusRequest());
    if (status.response) {
      const ctl::ReexecVerdict verdict = ctl::JudgeReexec(*status.response, count_before);
      if (verdict.kind == ctl::ReexecVerdict::Kind::kDone) return asked_ms;
      if (verdict.kind == ctl::ReexecVerdict::Kind::kFailed) {
        return Status::Error("reexec failed: " + verdict.text);
      }
    }
    std::this_thread::sleep_for(milliseconds(2));
  }
  return Status::Error("reexec: no new bulkheadd answered within 30 s");
}

// A log line's timestamp ("2026-12-05T04:31:52.123Z level=..."), ms since the epoch; nullopt for
// a line without one.
std::optional<int64_t> LineTimeMs(std::string_view line) {
  if (line.size() < 24 || line[19] != '.' || line[23] != 'Z') return std::nullopt;
  tm utc{};
  const std::string seconds(line.substr(0, 19));
  const char* end = strptime(seconds.c_str(), "%Y-%m-%dT%H:%M:%S", &utc);
  int ms = 0;
  const auto [ms_end, error] = std::from_chars(line.data() + 20, line.data() + 23, ms);
  if (end == nullptr || *end != '\0' || error != std::errc() || ms_end != line.data() + 23) {
    return std::nullopt;
  }
  return static_cast<int64_t>(timegm(&utc)) * 1000 + ms;
}

// How long each re-exec's steps took, ms, read off bulkheadd's info lines (`log`, from where the
// run began) and the times the re-execs were asked (`asked_ms`): the check (asked to the drain's
// start: the new binary asked which state versions it reads), the drain (to "re-exec: exec") and
// the exec (to the new image's "re-executed"). Lines are matched in order, one set per re-exec.
struct ReexecSteps {
  std::vector<double> check_ms;
  std::vector<double> drain_ms;
  std::vector<double> exec_ms;
};
ReexecSteps StepsFromLog(std::string_view log, const std::vector<int64_t>& asked_ms) {
  std::vector<int64_t> drains;
  std::vector<int64_t> execs;
  std::vector<int64_t> adopted;
  while (!log.empty()) {
    const size_t end = log.find('\n');
    const std::string_view line = log.substr(0, end);
    log = end == std::string_view::npos ? std::string_view() : log.substr(end + 1);
    const std::optional<int64_t> at = LineTimeMs(line);
    if (!at) continue;
    if (line.find(": re-executing ") != std::string_view::npos &&
        line.find("once no request is in flight") != std::string_view::npos) {
      drains.push_back(*at);
    } else if (line.find("msg=\"re-exec: exec ") != std::string_view::npos) {
      execs.push_back(*at);
    } else if (line.find("msg=\"re-executed (re-exec ") != std::string_view::npos) {
      adopted.push_back(*at);
    }
  }
  ReexecSteps steps;
  for (size_t i = 0; i < drains.size() && i < asked_ms.size(); ++i) {
    steps.check_ms.push_back(static_cast<double>(drains[i] - asked_ms[i]));
  }
  for (size_t i = 0; i < drains.size() && i < execs.size(); ++i) {
    steps.drain_ms.push_back(static_cast<double>(execs[i] - drains[i]));
  }
  for (size_t i = 0; i < execs.size() && i < adopted.size(); ++i) {
    steps.exec_ms.push_back(static_cast<double>(adopted[i] - execs[i]));
  }
  return steps;
}

// What the re-exec mode compares before and after: every cell's worker pid and starts, and the
// measured cell's outcome counters.
struct Snapshot {
  std::map<std::string, pid_t> pids;
  std::map<std::string, uint64_t> starts;
  uint64_t answered = 0;  // the measured cell's ok + rejected + failed
};
Result<Snapshot> TakeSnapshot(BulkheaddProcess& bulkheadd, const std::string& measured) {
  ctl::ControlReply reply = bulkheadd.Control(ctl::StatusRequest());
  if (!reply.response || !(*reply.response)["cells"].is_array()) {
    return Status::Error("status: " + reply.error);
  }
  Snapshot snapshot;
  for (const nlohmann::json& cell : (*reply.response)["cells"]) {
    const std::string name = cell.value("name", std::string());
    snapshot.pids[name] = cell.value("pid", pid_t{0});
    snapshot.starts[name] = cell.value("starts", uint64_t{0});
    if (name == measured) {
      snapshot.answered = cell.value("ok", uint64_t{0}) + cell.value("rejected", uint64_t{0}) +
                          cell.value("failed", uint64_t{0});
    }
  }
  return snapshot;
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
  std::vector<double> restart_ms;  // each restart's or re-exec's request until it was over
  std::vector<int64_t> asked_ms;   // re-execs: when each was asked (wall clock, ms)
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

// What runs beside the load: nothing (the baseline), planned restarts through bulkheadd, the
// control's worker starts outside it, or re-execs of bulkheadd.
enum class Beside { kNothing, kRestarts, kSpawns, kReexecs };

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
    const int steps = beside == Beside::kReexecs ? options.reexecs : options.restarts;
    for (int i = 0; i < steps && !g_interrupted.load(); ++i) {
      const Clock::time_point start = Clock::now();
      if (beside == Beside::kReexecs) {
        Result<int64_t> asked = ReexecOnce(bulkheadd);
        if (!asked.ok()) {
          status = asked.status();
          break;
        }
        run.asked_ms.push_back(*asked);
      } else if (beside == Beside::kSpawns) {
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

double Max(const std::vector<double>& values) {
  return values.empty() ? 0 : *std::max_element(values.begin(), values.end());
}

// The re-exec mode (`--reexec N`): per cell, the baseline, then N re-execs under the same load;
// prints one line per cell. Returns false when a re-exec failed, a request was not answered OK, a
// worker was started or a counter did not continue (what went wrong on stderr); `*status` takes
// an error that stopped the run.
bool RunReexecs(BulkheaddProcess& bulkheadd, const Options& options, Status* status) {
  std::printf("bulkhead-bench-restart: %d clients per cell, %d re-execs in a row per cell, "
              "max_queue = 0\n",
              options.clients, options.reexecs);
  std::printf("%-7s %9s %6s %8s %6s %6s %9s %9s %9s %9s %9s %7s %7s %8s %8s %9s %7s %8s\n",
              "cell", "answered", "notok", "rejected", "failed", "starts", "counters", "p50 base",
              "p99 base", "p50 rx", "p99 rx", "p99 x", "rx ms", "check ms", "drain ms",
              "drain max", "exec ms", "exec max");
  bool clean = true;
  for (const CellSpec& cell : kCells) {
    Result<proc::CellStatus> shown = bulkheadd.Cell(cell.name);
    if (!shown.ok()) {
      *status = shown.status();
      return false;
    }
    Result<Run> base = Measure(bulkheadd, options, cell, shown->socket, Beside::kNothing, "");
    Result<Snapshot> before =
        base.ok() ? TakeSnapshot(bulkheadd, cell.name) : Result<Snapshot>(base.status());
    const size_t log_from = bulkheadd.Log().size();
    Result<Run> reexecs =
        before.ok() ? Measure(bulkheadd, options, cell, shown->socket, Beside::kReexecs, "")
                    : Result<Run>(before.status());
    Result<Snapshot> after =
        reexecs.ok() ? TakeSnapshot(bulkheadd, cell.name) : Result<Snapshot>(reexecs.status());
    if (!after.ok()) {
      *status = Status::Error(std::string(cell.name) + ": " + after.status().message());
      return false;
    }
    const std::string log = bulkheadd.Log();
    const ReexecSteps steps = StepsFromLog(
        std::string_view(log).substr(std::min(log_from, log.size())), reexecs->asked_ms);
    uint64_t starts = 0;
    bool pids_kept = true;
    for (const auto& [name, pid] : before->pids) {
      starts += after->starts[name] - before->starts[name];
      pids_kept = pids_kept && after->pids[name] == pid && pid != 0;
    }
    // What the cell counted during the re-execs is exactly what its clients got.
    const bool counters_continue =
        after->answered == before->answered + reexecs->load.total_replies;
    Result<proc::CellStatus> totals = bulkheadd.Cell(cell.name);
    const uint64_t answered = base->load.total_replies + reexecs->load.total_replies;
    const uint64_t not_ok = base->load.unexpected + reexecs->load.unexpected;
    const uint64_t rejected = totals.ok() ? totals->rejected : 0;
    const uint64_t failed = totals.ok() ? totals->failed : 0;
    std::printf(
        "%-7s %9llu %6llu %8llu %6llu %6llu %9s %9.0f %9.0f %9.0f %9.0f %7.2f %7.1f %8.1f %8.1f "
        "%9.1f %7.1f %8.1f\n",
        cell.name, static_cast<unsigned long long>(answered),
        static_cast<unsigned long long>(not_ok), static_cast<unsigned long long>(rejected),
        static_cast<unsigned long long>(failed), static_cast<unsigned long long>(starts),
        counters_continue ? "continue" : "BROKEN", base->latency.p50_us, base->latency.p99_us,
        reexecs->latency.p50_us, reexecs->latency.p99_us,
        base->latency.p99_us > 0 ? reexecs->latency.p99_us / base->latency.p99_us : 0,
        Median(reexecs->restart_ms), Median(steps.check_ms), Median(steps.drain_ms),
        Max(steps.drain_ms), Median(steps.exec_ms), Max(steps.exec_ms));
    std::fflush(stdout);
    if (not_ok != 0 || rejected != 0 || failed != 0) {
      std::fprintf(stderr, "%s: requests were not answered OK during re-execs\n", cell.name);
      clean = false;
    }
    if (starts != 0 || !pids_kept) {
      std::fprintf(stderr, "%s: a worker was started or replaced during re-execs\n", cell.name);
      clean = false;
    }
    if (!counters_continue) {
      std::fprintf(stderr,
                   "%s: the cell counted %llu answers during the re-execs, its clients got %llu\n",
                   cell.name, static_cast<unsigned long long>(after->answered - before->answered),
                   static_cast<unsigned long long>(reexecs->load.total_replies));
      clean = false;
    }
    if (steps.exec_ms.size() != static_cast<size_t>(options.reexecs)) {
      std::fprintf(stderr, "%s: %zu of %d re-execs found in bulkheadd's log\n", cell.name,
                   steps.exec_ms.size(), options.reexecs);
      clean = false;
    }
  }
  return clean;
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
  app.add_option("--reexec", options.reexecs,
                 "re-execs of bulkheadd in a row per cell, measured instead of restarts")
      ->check(CLI::Range(1, 1000));
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
  if (clean && options.reexecs > 0) {
    clean = RunReexecs(*bulkheadd, options, &status);
  } else if (clean) {
    std::printf(
        "bulkhead-bench-restart: %d clients per cell, %d restarts, restart_overlap = %s, "
        "max_queue = 0\n",
        options.clients, options.restarts, options.overlap ? "true" : "false");
    std::printf("%-7s %9s %6s %8s %6s %9s %9s %9s %9s %7s %9s %9s %10s\n", "cell", "answered",
                "notok", "rejected", "failed", "p50 base", "p99 base", "p50 rst", "p99 rst",
                "p99 x", "p99 ctl", "p99 x ctl", "restart ms");
  }
  for (const CellSpec& cell : kCells) {
    if (!clean || options.reexecs > 0) break;
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
