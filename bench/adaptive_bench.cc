// SPDX-License-Identifier: MIT
// bulkhead-bench-adaptive: the adaptive concurrency limit against a sweep of fixed ones, on the
// CPU-bound workload of issue 26, on this host (docs/benchmarks.md, "Adaptive concurrency";
// without cgroup v2 only the service-time signal is live, so this is the latency-only mode).
//
// In a fresh temporary directory, bulkheadd (`cgroup = "off"`: never touches /sys/fs/cgroup) runs
// one cell per setting, each bulkhead-test-worker (a thread per worker connection) answering
// `cpu US`: it spins until its thread used US µs of CPU, so the service time of a request grows
// with the requests sharing the host's CPUs (a knee at about the CPU count). `fixed-N` has
// `max_concurrent = N` for each N of `--sweep`; `adaptive` has `concurrency = "adaptive"`,
// `min_concurrent = 1`, `max_concurrent` = the sweep's largest. Every cell has the same bounded
// queue (`--max-queue`, `--queue-timeout-ms`), so a request over the limit waits a little or is
// REJECTED at once.
//
// First the unloaded p99: one caller on `fixed-1`. Then, cell after cell, `--clients` callers
// (threads with a blocking ipc::Client each: send, wait for the reply) offer load for
// `--seconds`: a caller whose request was REJECTED waits `--backoff-ms` before its next one, as a
// caller with a retry policy does (without it a rejected caller would retry in a tight loop and
// the bench would measure bulkheadd's rejection path instead of the worker). Per cell it prints
// the answers per second, the goodput (OK within `--deadline-ms`, per second), the rejections per
// second, the p50 and p99 of the OK answers and that p99 over the unloaded one, and for the
// adaptive cell its limit at the end, its bounds and its changes. It judges nothing: the figures
// are for docs/benchmarks.md. Exits 1 if bulkheadd or a cell could not run, or a cell answered
// no request OK or failed one (the worker never fails `cpu`).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "base/temp_dir.h"
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

struct Options {
  std::string bin_dir;
  int clients = 64;
  double seconds = 5;
  int work_us = 40000;
  int deadline_ms = 1000;
  int max_queue = 4;
  int queue_timeout_ms = 100;
  int backoff_ms = 100;
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
  return toml;
}

std::string Config(const Options& options, const std::string& root) {
  std::string config = "[supervisor]\nruntime_dir = " + TomlString(root + "/run") +
                       "\nlog_level = \"warning\"\ncgroup = \"off\"\n";
  for (int n : options.sweep) config += CellToml(options, "fixed-" + std::to_string(n), n, false);
  config += CellToml(options, "adaptive", options.sweep.back(), true);
  return config;
}

struct Tally {
  uint64_t ok = 0;
  uint64_t ok_in_deadline = 0;
  uint64_t rejected = 0;
  uint64_t failed = 0;
  std::vector<uint32_t> ok_ns;  // latency of each OK answer
  std::string error;
};

// `clients` callers on `socket` for `seconds`; see the file comment.
Tally Offer(const Options& options, const std::string& socket, int clients, double seconds) {
  Tally total;
  std::mutex mu;
  const std::string payload = "cpu " + std::to_string(options.work_us);
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
            mine.ok_ns.push_back(static_cast<uint32_t>(std::min<int64_t>(
                std::chrono::duration_cast<std::chrono::nanoseconds>(took).count(), UINT32_MAX)));
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
      total.ok += mine.ok;
      total.ok_in_deadline += mine.ok_in_deadline;
      total.rejected += mine.rejected;
      total.failed += mine.failed;
      total.ok_ns.insert(total.ok_ns.end(), mine.ok_ns.begin(), mine.ok_ns.end());
      if (total.error.empty()) total.error = mine.error;
    });
  }
  for (std::thread& t : callers) t.join();
  return total;
}

int Main(int argc, char** argv) {
  Options options;
  options.bin_dir = proc::BuildDirOfThisProgram();
  CLI::App app{"bulkhead-bench-adaptive: the adaptive limit against fixed ones, CPU-bound work"};
  app.add_option("--bin-dir", options.bin_dir,
                 "build directory holding supervisor/ and tests/helpers/")
      ->capture_default_str();
  app.add_option("--clients", options.clients, "callers")
      ->capture_default_str()
      ->check(CLI::Range(1, 512));
  app.add_option("--seconds", options.seconds, "load per cell")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 600.0));
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

  TempDir dir;
  Status status = dir.Create("bh-bench-adaptive");
  std::optional<BulkheaddProcess> bulkheadd;
  if (status.ok()) {
    status = StartBenchBulkheadd(options.bin_dir, dir.path(), Config(options, dir.path()),
                                 &g_interrupted, &bulkheadd);
  }
  if (status.ok()) status = bulkheadd->WaitUntilRunning(cells, kStepTimeout);

  double unloaded_p99_us = 0;
  if (status.ok()) {
    Result<proc::CellStatus> first = bulkheadd->Cell(cells.front());
    status = first.status();
    if (status.ok()) {
      Tally alone = Offer(options, first->socket, 1, std::min(options.seconds, 2.0));
      if (!alone.error.empty()) status = Status::Error("unloaded: " + alone.error);
      unloaded_p99_us = Summarize(alone.ok_ns).p99_us;
    }
  }
  if (status.ok()) {
    std::printf(
        "bulkhead-bench-adaptive: %d callers, cpu %d us per request, deadline %d ms, max_queue %d, "
        "queue_timeout %d ms, backoff %d ms, %.1f s per cell; unloaded p99 %.0f us\n",
        options.clients, options.work_us, options.deadline_ms, options.max_queue,
        options.queue_timeout_ms, options.backoff_ms, options.seconds, unloaded_p99_us);
    std::printf("%-10s %9s %11s %11s %8s %9s %9s %7s  %s\n", "cell", "ok/s", "goodput/s",
                "rejected/s", "failed", "p50 us", "p99 us", "p99 x", "limit");
  }
  for (const std::string& cell : cells) {
    if (!status.ok() || g_interrupted.load()) break;
    Result<proc::CellStatus> shown = bulkheadd->Cell(cell);
    if (!shown.ok()) {
      status = shown.status();
      break;
    }
    Tally tally = Offer(options, shown->socket, options.clients, options.seconds);
    if (!tally.error.empty()) {
      status = Status::Error(cell + ": " + tally.error);
      break;
    }
    const LatencySummary latency = Summarize(tally.ok_ns);
    std::string limit = "fixed";
    if (cell == "adaptive") {
      const nlohmann::json shown_json = CellStatusJson(*bulkheadd, cell);
      const nlohmann::json c =
          shown_json.is_object() ? shown_json.value("concurrency", nlohmann::json()) : nullptr;
      limit = c.is_object() ? std::to_string(c.value("limit", 0)) + " of " +
                                  std::to_string(c.value("floor", 0)) + ".." +
                                  std::to_string(c.value("ceiling", 0)) +
                                  ", changes " + c.value("changes_by_cause", nlohmann::json()).dump()
                            : "?";
    }
    std::printf("%-10s %9.0f %11.0f %11.0f %8llu %9.0f %9.0f %7.2f  %s\n", cell.c_str(),
                static_cast<double>(tally.ok) / options.seconds,
                static_cast<double>(tally.ok_in_deadline) / options.seconds,
                static_cast<double>(tally.rejected) / options.seconds,
                static_cast<unsigned long long>(tally.failed), latency.p50_us, latency.p99_us,
                unloaded_p99_us > 0 ? latency.p99_us / unloaded_p99_us : 0, limit.c_str());
    std::fflush(stdout);
    if (tally.ok == 0 || tally.failed != 0) {
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
