// SPDX-License-Identifier: MIT
// bulkhead-bench: measures what admission through bulkheadd costs, against the same echo worker
// reached directly and through HAProxy (docs/benchmarks.md). For each connection count of
// `--connections` it starts, in a fresh temporary directory:
//   - bulkheadd with an `echo` cell (bulkhead-bench-worker, max_concurrent = connections) and, for
//     frames, a `mux` cell (the same, with worker_connections = "multiplex") and a `hang` cell (1
//     slot, no queue, a stalled gateway worker);
//   - a bulkhead-bench-worker of its own on a socket-activated listening socket (`direct`), and
//     another in its io_uring mode (`uring`);
//   - HAProxy (`--haproxy`, one thread) in front of that same worker, with `server ... maxconn`
//     equal to the cell's max_concurrent;
// then alternates rounds over the targets, rotating their order each round to spread machine noise
// evenly:
//   bulkheadd  client -> front socket -> admission -> worker link -> echo worker -> back
//   direct     client -> the echo worker's own socket -> back
//   haproxy    client -> HAProxy's socket -> the direct echo worker -> back
//   multiplex  as bulkheadd, through the `mux` cell: every request on one worker connection
//              (docs/protocol.md, "Multiplexed worker connections"; frames only)
//   reject     client -> the `hang` cell's front socket -> REJECTED full at once (frames only)
//   uring      client -> the io_uring echo worker's own socket -> back
// and prints replies/s, p50/p99/p99.9 latency and the CPU time per reply of the process that
// serves the client (bulkheadd, HAProxy, the direct and uring workers), per round and per target,
// the ratios, a summary over the connection counts, and what the client hop alone costs a
// one-thread server on epoll and on io_uring. With `--http` the same is done over HTTP/1.1 (the
// cell has protocol = "http", HAProxy runs in mode http, the worker and the load generator speak
// HTTP), and then the same connection counts are driven by wrk, an independent load generator, over
// TCP on 127.0.0.1, with nginx beside HAProxy (bench/wrk_stage.h). Exits 0 only if every reply had
// the expected status, bulkheadd's counters account for every reply, bulkheadd's workers never had
// more requests in progress than max_concurrent, and wrk saw no error.
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "base/exit_status.h"
#include "base/status.h"
#include "base/temp_dir.h"
#include "base/unique_fd.h"
#include "bench/closed_loop.h"
#include "bench/haproxy_process.h"
#include "bench/latency_summary.h"
#include "bench/process_cpu.h"
#include "bench/sockets.h"
#include "bench/stage_support.h"
#include "bench/wrk_stage.h"
#include "ipc/client.h"
#include "ipc/frame.h"
#include "proc/bulkheadd_process.h"
#include "proc/child_process.h"

namespace bulkhead::bench {
namespace {

using proc::BulkheaddProcess;
using proc::CellStatus;
using proc::ChildProcess;
using proc::TomlString;
using std::chrono::milliseconds;

// Deadline of every wait on bulkheadd and HAProxy (startup, a figure on the control socket) and of
// each blocking send/receive of a load client.
constexpr milliseconds kStepTimeout{10000};
// SIGTERM-to-SIGKILL deadline when stopping bulkheadd (it gives its workers 5 s), HAProxy and the
// worker.
constexpr milliseconds kStopTimeout{10000};
// Shortest measuring window per target and round.
constexpr milliseconds kMinWindow{20};
// Where Debian's packages put the binaries: the defaults of --haproxy, --nginx and --wrk when they
// exist.
constexpr char kDebianHaproxy[] = "/usr/sbin/haproxy";
constexpr char kDebianNginx[] = "/usr/sbin/nginx";
constexpr char kDebianWrk[] = "/usr/bin/wrk";

std::atomic<bool> g_interrupted{false};

void OnStopSignal(int) { g_interrupted.store(true); }

struct Options {
  std::string bin_dir;
  double seconds = 3.0;  // measuring time per connection count, split over rounds and targets
  std::vector<int> connections = {1, 16, 64};
  int depth = 1;
  int client_threads = 1;
  size_t payload_bytes = 64;
  int rounds = 3;
  int warmup_ms = 50;
  std::string haproxy;  // path of haproxy; empty: no HAProxy target
  bool http = false;
  // The HTTP run's wrk stages (--http only): wrk's path (empty: none), its seconds per run, and
  // nginx's path (empty: no nginx target).
  std::string wrk;
  int wrk_seconds = 3;
  std::string nginx;
  // bulkheadd's `access_log` (docs/access-log.md); empty: none.
  std::string access_log;
};

// One thing measured at one connection count; its rounds accumulate here.
struct Target {
  std::string name = {};
  std::string socket = {};
  ipc::ReplyStatus expected = ipc::ReplyStatus::kOk;
  // The process serving the client whose CPU time is charged to the target: bulkheadd, HAProxy,
  // or the echo worker itself for direct and uring (the worker behind bulkheadd and HAProxy is
  // not counted); 0: not measured.
  pid_t cpu_pid = 0;
  uint64_t replies = 0;        // expected replies inside the measuring windows
  uint64_t unexpected = 0;     // other replies inside the windows
  uint64_t total_replies = 0;  // every reply, warmup and draining included
  double seconds = 0;          // sum of the windows
  uint64_t cpu_ns = 0;         // cpu_pid's CPU time over whole rounds (warmup and draining too)
  std::vector<uint32_t> latencies_ns = {};
  LatencySummary latency = {};  // of latencies_ns, once measured

  double rate() const { return seconds > 0 ? static_cast<double>(replies) / seconds : 0; }
  // CPU time per reply over the same whole rounds, microseconds; 0 when not measured.
  double cpu_us_per_reply() const {
    return cpu_pid > 0 && total_replies > 0 ? cpu_ns / 1000.0 / static_cast<double>(total_replies)
                                            : 0;
  }
};

// What one connection count gave, for the summary.
struct StageResult {
  int connections = 0;
  std::vector<Target> targets;
  uint64_t worker_peak = 0;      // bulkheadd's worker: most requests in progress at once
  uint64_t mux_worker_peak = 0;  // the same for the `mux` cell's worker (frames only)
  uint32_t max_concurrent = 0;

  const Target* Find(std::string_view name) const {
    for (const Target& t : targets) {
      if (t.name == name) return &t;
    }
    return nullptr;
  }
};

double Ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

// The number bulkhead-bench-worker wrote to its --peak-file.
Result<uint64_t> ReadPeak(const std::string& path) {
  std::ifstream file(path);
  std::string text;
  std::getline(file, text);
  uint64_t peak = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), peak);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    return Status::Error("no peak in " + path + " (\"" + text + "\")");
  }
  return peak;
}

std::string MachineDescription() {
  utsname uts{};
  std::string kernel = ::uname(&uts) == 0 ? std::string(uts.sysname) + " " + uts.release : "?";
  return "nproc " + std::to_string(::sysconf(_SC_NPROCESSORS_ONLN)) + ", " + kernel;
}

void PrintHeader(const char* first) {
  std::printf("%-7s %-10s %12s %10s %10s %10s %10s %10s\n", first, "target", "replies/s", "p50 us",
              "p99 us", "p999 us", "cpu us/req", "unexpected");
}

void PrintRow(const std::string& first, const Target& target, double rate,
              const LatencySummary& latency, double cpu_us, uint64_t unexpected) {
  char cpu[32] = "-";
  if (cpu_us > 0) std::snprintf(cpu, sizeof cpu, "%.2f", cpu_us);
  std::printf("%-7s %-10s %12.0f %10.1f %10.1f %10.1f %10s %10llu\n", first.c_str(),
              target.name.c_str(), rate, latency.p50_us, latency.p99_us, latency.p999_us, cpu,
              static_cast<unsigned long long>(unexpected));
  std::fflush(stdout);
}

// Everything one connection count starts, in the order it must be stopped.
class Stage {
 public:
  Stage(const Options& options, int connections) : options_(options), connections_(connections) {}

  // Returns the figures, or why the stage failed (after stopping what it started).
  Result<StageResult> Run() {
    Status status = Setup();
    if (status.ok()) status = Measure();
    if (status.ok()) status = CheckCounters();
    if (status.ok()) status = CheckWorkerPeak();
    Status stopped = Teardown();
    if (status.ok()) status = stopped;
    if (!status.ok()) {
      std::string log = bulkheadd_ ? bulkheadd_->Log() : std::string();
      if (!log.empty()) std::fprintf(stderr, "--- bulkheadd log ---\n%s", log.c_str());
      return status;
    }
    return StageResult{.connections = connections_,
                       .targets = std::move(targets_),
                       .worker_peak = worker_peak_,
                       .mux_worker_peak = mux_worker_peak_,
                       .max_concurrent = static_cast<uint32_t>(connections_)};
  }

 private:
  std::string WorkerCommand(const std::string& peak_file) const {
    return TomlString(options_.bin_dir + "/bench/bulkhead-bench-worker") + ", \"--protocol\", " +
           (options_.http ? "\"http\"" : "\"frames\"") + ", \"--peak-file\", " +
           TomlString(peak_file);
  }

  Status Setup() {
    Status status = dir_.Create("bh-bench");
    if (!status.ok()) return status;
    const std::string root = dir_.path();
    const uint32_t in_flight = static_cast<uint32_t>(connections_ * options_.depth);
    max_queue_ = in_flight - static_cast<uint32_t>(connections_);
    bulkheadd_peak_file_ = root + "/peak-bulkheadd";
    mux_peak_file_ = root + "/peak-mux";

    // Every client request fits in a slot or in the queue: the echo target is never rejected.
    std::string config =
        BenchSupervisorToml(root, /*cgroup=*/"") +
        (options_.access_log.empty() ? std::string()
                                     : "access_log = " + TomlString(options_.access_log) + "\n") +
        "\n[cells.echo]\n" + (options_.http ? "protocol = \"http\"\n" : "") + "command = [" +
        WorkerCommand(bulkheadd_peak_file_) +
        "]\nmax_concurrent = " + std::to_string(connections_) +
        "\nmax_queue = " + std::to_string(max_queue_) + "\nqueue_timeout = \"10s\"\n";
    if (!options_.http) {
      const std::string gates = root + "/gates";
      if (::mkdir(gates.c_str(), 0755) != 0) return Status::FromErrno("mkdir " + gates);
      gates_dir_ = gates;
      config += "\n[cells.hang]\ncommand = [" +
                TomlString(options_.bin_dir + "/examples/bulkhead-gateway") + ", \"--gates\", " +
                TomlString(gates) + "]\nmax_concurrent = 1\nmax_queue = 0\n";
      // The echo cell again, its requests multiplexed on one worker connection (HTTP/1.1 cannot).
      config += "\n[cells.mux]\ncommand = [" + WorkerCommand(mux_peak_file_) +
                "]\nmax_concurrent = " + std::to_string(connections_) +
                "\nmax_queue = " + std::to_string(max_queue_) +
                "\nqueue_timeout = \"10s\"\nworker_connections = \"multiplex\"\n";
    }
    status = StartBenchBulkheadd(options_.bin_dir, root, config, &g_interrupted, &bulkheadd_);
    if (!status.ok()) return status;
    status = AddBulkheaddTargets();
    if (!status.ok()) return status;

    const std::string direct_socket = root + "/direct.sock";
    Result<UniqueFd> listener = ListenUnix(direct_socket, 1024);
    if (!listener.ok()) return listener.status();
    direct_listener_ = std::move(listener).value();
    Result<ChildProcess> worker = ChildProcess::StartWorker(
        {options_.bin_dir + "/bench/bulkhead-bench-worker", "--protocol",
         options_.http ? "http" : "frames", "--peak-file", root + "/peak-direct"},
        direct_listener_.get());
    if (!worker.ok()) return worker.status();
    direct_worker_ = std::move(worker).value();
    targets_.push_back(
        Target{.name = "direct", .socket = direct_socket, .cpu_pid = direct_worker_.pid()});
    // The same echo worker on io_uring: what the client hop of a one-thread server costs when its
    // reads and writes take no system call each (bulkhead-bench-worker --io uring).
    const std::string uring_socket = root + "/uring.sock";
    listener = ListenUnix(uring_socket, 1024);
    if (!listener.ok()) return listener.status();
    uring_listener_ = std::move(listener).value();
    worker =
        ChildProcess::StartWorker({options_.bin_dir + "/bench/bulkhead-bench-worker", "--protocol",
                                   options_.http ? "http" : "frames", "--io", "uring"},
                                  uring_listener_.get());
    if (!worker.ok()) return worker.status();
    uring_worker_ = std::move(worker).value();
    targets_.push_back(
        Target{.name = "uring", .socket = uring_socket, .cpu_pid = uring_worker_.pid()});

    if (!options_.haproxy.empty()) {
      HaproxyOptions haproxy{.binary = options_.haproxy,
                             .dir = root,
                             .front_socket = root + "/haproxy.sock",
                             .worker_socket = direct_socket,
                             .http = options_.http,
                             .maxconn = static_cast<uint32_t>(connections_),
                             .maxqueue = max_queue_,
                             .queue_timeout = milliseconds(10000)};
      status = haproxy_.Start(haproxy, kStepTimeout);
      if (!status.ok()) return status;
      targets_.push_back(
          Target{.name = "haproxy", .socket = haproxy.front_socket, .cpu_pid = haproxy_.pid()});
    }
    if (options_.http) return Status::Ok();

    // Occupy the hang cell's only slot: every later request there is REJECTED full.
    Result<CellStatus> hang = bulkheadd_->Cell("hang");
    if (!hang.ok()) return hang.status();
    Result<ipc::Client> holder = ipc::Client::Connect(hang->socket);
    if (!holder.ok()) return holder.status();
    holder_ = std::move(holder).value();
    status = holder_->SetTimeout(kStepTimeout);
    if (status.ok()) status = holder_->Send(1, "gate hold");
    if (!status.ok()) return status;
    Result<CellStatus> held = bulkheadd_->WaitForCell(
        "hang", [](const CellStatus& s) { return s.running == 1; }, kStepTimeout);
    if (!held.ok()) return held.status();
    targets_.push_back(Target{.name = "reject",
                              .socket = hang->socket,
                              .expected = ipc::ReplyStatus::kRejected,
                              .cpu_pid = bulkheadd_->pid()});
    return Status::Ok();
  }

  // Waits for bulkheadd's cells. With --http, a bulkheadd that refuses `protocol` (built before
  // HTTP cells) leaves the run without its bulkheadd target instead of failing it.
  Status AddBulkheaddTargets() {
    std::vector<std::string> cells = {"echo"};
    if (!options_.http) {
      cells.push_back("hang");
      cells.push_back("mux");
    }
    for (const std::string& cell : cells) {
      Result<CellStatus> ready = bulkheadd_->WaitForCell(
          cell, [](const CellStatus& s) { return s.state == "running" && s.pid != 0; },
          kStepTimeout);
      if (!ready.ok() && options_.http && !bulkheadd_->Alive() &&
          bulkheadd_->Log().find("cells.echo.protocol: unknown key") != std::string::npos) {
        std::printf(
            "bulkheadd: skipped, it does not take protocol = \"http\" (cells.echo.protocol: "
            "unknown key)\n");
        bulkheadd_.reset();
        return Status::Ok();
      }
      if (!ready.ok()) return ready.status();
      if (cell == "echo" || cell == "mux") {
        targets_.push_back(Target{.name = cell == "echo" ? "bulkheadd" : "multiplex",
                                  .socket = ready->socket,
                                  .cpu_pid = bulkheadd_->pid()});
      }
    }
    return Status::Ok();
  }

  Status Measure() {
    const int slots = options_.rounds * static_cast<int>(targets_.size());
    const milliseconds window =
        std::max(kMinWindow, milliseconds(static_cast<int64_t>(options_.seconds * 1000.0 / slots)));
    std::printf(
        "\nbulkhead-bench: %s, %d connections x depth %d (load threads: %d), %zu-byte payload, %d "
        "rounds x %zu targets x %lld ms (+%d ms warmup); %s\n",
        options_.http ? "HTTP/1.1" : "frames", connections_, options_.depth,
        std::min(options_.client_threads, connections_), options_.payload_bytes, options_.rounds,
        targets_.size(), static_cast<long long>(window.count()), options_.warmup_ms,
        MachineDescription().c_str());
    PrintHeader("round");
    const std::string payload(options_.payload_bytes, 'x');
    for (int round = 0; round < options_.rounds && !g_interrupted.load(); ++round) {
      for (size_t k = 0; k < targets_.size() && !g_interrupted.load(); ++k) {
        Target& target = targets_[(k + static_cast<size_t>(round)) % targets_.size()];
        LoadOptions load;
        load.socket = target.socket;
        load.protocol = options_.http ? LoadProtocol::kHttp : LoadProtocol::kFrames;
        load.clients = connections_;
        load.threads = options_.client_threads;
        load.depth = options_.depth;
        load.payload = payload;
        load.warmup = milliseconds(options_.warmup_ms);
        load.duration = window;
        load.expected = target.expected;
        load.reply_timeout = kStepTimeout;
        load.interrupted = &g_interrupted;
        const std::optional<uint64_t> cpu_before = ProcessCpuNs(target.cpu_pid);
        LoadResult result = RunClosedLoop(load);
        const std::optional<uint64_t> cpu_after = ProcessCpuNs(target.cpu_pid);
        if (!result.error.empty()) return Status::Error(target.name + ": " + result.error);
        const uint64_t cpu_ns = cpu_before && cpu_after ? *cpu_after - *cpu_before : 0;
        const double rate =
            result.seconds > 0 ? static_cast<double>(result.replies) / result.seconds : 0;
        target.replies += result.replies;
        target.unexpected += result.unexpected;
        target.total_replies += result.total_replies;
        target.seconds += result.seconds;
        target.cpu_ns += cpu_ns;
        LatencySummary latency = Summarize(result.latencies_ns);
        target.latencies_ns.insert(target.latencies_ns.end(), result.latencies_ns.begin(),
                                   result.latencies_ns.end());
        const double cpu_us = result.total_replies > 0 && target.cpu_pid > 0
                                  ? cpu_ns / 1000.0 / static_cast<double>(result.total_replies)
                                  : 0;
        PrintRow(std::to_string(round + 1), target, rate, latency, cpu_us, result.unexpected);
      }
    }
    if (g_interrupted.load()) return Status::Error("interrupted");
    for (Target& target : targets_) {
      target.latency = Summarize(target.latencies_ns);
      target.latencies_ns.clear();
      target.latencies_ns.shrink_to_fit();
    }
    return Status::Ok();
  }

  // bulkheadd must have answered each request exactly once: its counters for a cell equal the
  // replies the clients received from it.
  Status CheckCounters() {
    if (!bulkheadd_) return Status::Ok();
    for (const Target& target : targets_) {
      const char* cell = target.name == "bulkheadd"   ? "echo"
                         : target.name == "multiplex" ? "mux"
                         : target.name == "reject"    ? "hang"
                                                      : nullptr;
      if (cell == nullptr) continue;
      Result<CellStatus> status = bulkheadd_->Cell(cell);
      if (!status.ok()) return status.status();
      const uint64_t answered = status->ok + status->rejected + status->failed;
      if (answered != target.total_replies) {
        return Status::Error(
            std::string("cell ") + cell + ": bulkheadd counted " + std::to_string(answered) +
            " replies (ok " + std::to_string(status->ok) + ", rejected " +
            std::to_string(status->rejected) + ", failed " + std::to_string(status->failed) +
            "), the clients received " + std::to_string(target.total_replies));
      }
    }
    return Status::Ok();
  }

  // bulkheadd's workers never had more requests in progress than the cell's max_concurrent: the
  // echo cell's (one request per connection) and, for frames, the mux cell's (all on one).
  Status CheckWorkerPeak() {
    if (!bulkheadd_) return Status::Ok();
    Status status = CheckPeak(bulkheadd_peak_file_, "bulkheadd's worker", &worker_peak_);
    if (status.ok() && !options_.http) {
      status = CheckPeak(mux_peak_file_, "bulkheadd's multiplexed worker", &mux_worker_peak_);
    }
    return status;
  }

  Status CheckPeak(const std::string& file, const std::string& who, uint64_t* peak_out) const {
    Result<uint64_t> peak = ReadPeak(file);
    if (!peak.ok()) return peak.status();
    *peak_out = *peak;
    if (*peak > static_cast<uint64_t>(connections_)) {
      return Status::Error(who + " had " + std::to_string(*peak) +
                           " requests in progress at once, more than max_concurrent = " +
                           std::to_string(connections_));
    }
    return Status::Ok();
  }

  Status Teardown() {
    Status status = Status::Ok();
    if (holder_) {
      // Release the hang cell's worker, so bulkheadd stops a worker that is not mid-request.
      std::string gate = gates_dir_ + "/hold";
      Status opened = WriteText(gate + ".tmp", "ok released\n");
      if (opened.ok() && ::rename((gate + ".tmp").c_str(), gate.c_str()) != 0) {
        opened = Status::FromErrno("rename " + gate);
      }
      if (opened.ok() && bulkheadd_->Alive()) {
        Result<ipc::Client::Reply> reply = holder_->Receive();
        if (!reply.ok()) {
          opened = reply.status();
        } else if (reply->header.status != ipc::ReplyStatus::kOk) {
          opened = Status::Error(std::string("hang cell: holder got ") +
                                 ipc::StatusName(reply->header.status));
        }
      }
      holder_.reset();
      if (!opened.ok()) status = opened;
    }
    Status stopped = haproxy_.Stop(kStopTimeout);
    if (status.ok()) status = stopped;
    stopped = StopBenchProcesses({&direct_worker_, &uring_worker_}, &bulkheadd_);
    if (status.ok()) status = stopped;
    return status;
  }

  const Options& options_;
  const int connections_;
  uint32_t max_queue_ = 0;
  TempDir dir_;
  std::string gates_dir_;
  std::string bulkheadd_peak_file_;
  std::string mux_peak_file_;
  uint64_t worker_peak_ = 0;
  uint64_t mux_worker_peak_ = 0;
  std::optional<BulkheaddProcess> bulkheadd_;
  UniqueFd direct_listener_;
  ChildProcess direct_worker_;
  UniqueFd uring_listener_;
  ChildProcess uring_worker_;  // the echo worker on io_uring
  HaproxyProcess haproxy_;
  std::optional<ipc::Client> holder_;
  // bulkheadd (unless skipped), multiplex and reject (frames), direct, uring, haproxy (if any)
  std::vector<Target> targets_;
};

// "ratio NAME/direct: ..." for a bulkheadd target against the direct worker.
void PrintRatioToDirect(const char* name, const Target& t, const Target& direct) {
  std::printf("ratio %s/direct: throughput %.2f, p50 %.2f, p99 %.2f, p999 %.2f\n", name,
              Ratio(t.rate(), direct.rate()), Ratio(t.latency.p50_us, direct.latency.p50_us),
              Ratio(t.latency.p99_us, direct.latency.p99_us),
              Ratio(t.latency.p999_us, direct.latency.p999_us));
}

// "ratio NAME/haproxy: ..." for a bulkheadd target against HAProxy, CPU per request included.
void PrintRatioToHaproxy(const char* name, const Target& t, const Target& haproxy) {
  std::printf("ratio %s/haproxy: throughput %.2f, p50 %.2f, p99 %.2f, cpu per request %.2f\n", name,
              Ratio(t.rate(), haproxy.rate()), Ratio(t.latency.p50_us, haproxy.latency.p50_us),
              Ratio(t.latency.p99_us, haproxy.latency.p99_us),
              Ratio(t.cpu_us_per_reply(), haproxy.cpu_us_per_reply()));
}

// The totals and ratios of one connection count; false if any reply had an unexpected status.
bool ReportStage(const StageResult& stage) {
  PrintHeader("total");
  bool clean = true;
  for (const Target& target : stage.targets) {
    PrintRow("all", target, target.rate(), target.latency, target.cpu_us_per_reply(),
             target.unexpected);
    if (target.unexpected != 0 || target.replies == 0) clean = false;
  }
  const Target* via = stage.Find("bulkheadd");
  const Target* direct = stage.Find("direct");
  const Target* haproxy = stage.Find("haproxy");
  const Target* reject = stage.Find("reject");
  const Target* mux = stage.Find("multiplex");
  if (via && direct) PrintRatioToDirect("bulkheadd", *via, *direct);
  if (via && haproxy) PrintRatioToHaproxy("bulkheadd", *via, *haproxy);
  if (mux && direct) PrintRatioToDirect("multiplex", *mux, *direct);
  if (mux && haproxy) PrintRatioToHaproxy("multiplex", *mux, *haproxy);
  if (via && reject) {
    // A rejection is to cost less than one round trip to the worker without bulkheadd.
    std::printf(
        "reject: %.0f rejections/s, %.2fx the bulkheadd echo rate, %.2fx the direct echo rate, "
        "p50 %.1f us (direct %.1f us)\n",
        reject->rate(), Ratio(reject->rate(), via->rate()),
        Ratio(reject->rate(), direct ? direct->rate() : 0), reject->latency.p50_us,
        direct ? direct->latency.p50_us : 0.0);
  }
  if (via) {
    std::printf("bulkheadd's worker: at most %llu requests in progress (max_concurrent %u)\n",
                static_cast<unsigned long long>(stage.worker_peak), stage.max_concurrent);
  }
  if (mux) {
    std::printf(
        "bulkheadd's multiplexed worker: at most %llu requests in progress "
        "(max_concurrent %u)\n",
        static_cast<unsigned long long>(stage.mux_worker_peak), stage.max_concurrent);
  }
  std::fflush(stdout);
  return clean;
}

// One line per connection count: the figures to compare across runs.
// The kernel's own price of one hop, measured on this machine in this run: CPU time (this thread's
// clock, CLOCK_THREAD_CPUTIME_ID) of one write(2) of `bytes` to a Unix stream socket pair and the
// read(2) that takes them at the other end, averaged over `pairs`. A proxy that reads a request
// from its client and writes the reply back spends at least this per request on the client hop
// alone, and as much again on the worker hop unless it is multiplexed; no wakeup or epoll is
// counted, so the true floor is higher. 0 when the socket pair cannot be made.
double SocketHopFloorUs(size_t bytes, int pairs) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return 0;
  UniqueFd a(fds[0]);
  UniqueFd b(fds[1]);
  std::string buffer(std::max<size_t>(bytes, 1), 'x');
  timespec start{};
  timespec end{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start);
  for (int i = 0; i < pairs; ++i) {
    if (::write(a.get(), buffer.data(), buffer.size()) != static_cast<ssize_t>(buffer.size()) ||
        ::read(b.get(), buffer.data(), buffer.size()) != static_cast<ssize_t>(buffer.size())) {
      return 0;
    }
  }
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &end);
  const double ns = static_cast<double>(end.tv_sec - start.tv_sec) * 1e9 +
                    static_cast<double>(end.tv_nsec - start.tv_nsec);
  return ns / 1000.0 / pairs;
}

void ReportSummary(const Options& options, const std::vector<StageResult>& stages) {
  std::printf("\nsummary (%s, depth %d, %zu-byte payload): replies/s, p99 us, cpu us/req\n",
              options.http ? "HTTP/1.1" : "frames", options.depth, options.payload_bytes);
  std::printf("%5s %10s %10s %10s %8s %8s %8s %8s %8s %9s %9s %10s %9s %8s\n", "conns", "direct",
              "haproxy", "bulkheadd", "bh/hap", "p99 dir", "p99 hap", "p99 bh", "cpu hap", "cpu bh",
              "cpu bh/hap", "multiplex", "cpu mux", "mux/hap");
  for (const StageResult& stage : stages) {
    const Target none;
    const Target* direct = stage.Find("direct");
    const Target* haproxy = stage.Find("haproxy");
    const Target* via = stage.Find("bulkheadd");
    const Target* mux = stage.Find("multiplex");  // frames only
    if (!direct) direct = &none;
    if (!haproxy) haproxy = &none;
    if (!via) via = &none;
    if (!mux) mux = &none;
    std::printf(
        "%5d %10.0f %10.0f %10.0f %8.2f %8.1f %8.1f %8.1f %8.2f %9.2f %9.2f %10.0f %9.2f %8.2f\n",
        stage.connections, direct->rate(), haproxy->rate(), via->rate(),
        Ratio(via->rate(), haproxy->rate()), direct->latency.p99_us, haproxy->latency.p99_us,
        via->latency.p99_us, haproxy->cpu_us_per_reply(), via->cpu_us_per_reply(),
        Ratio(via->cpu_us_per_reply(), haproxy->cpu_us_per_reply()), mux->rate(),
        mux->cpu_us_per_reply(), Ratio(mux->rate(), haproxy->rate()));
  }
  // What the client hop alone costs a one-thread server here: the echo worker on epoll (direct),
  // the same on io_uring (uring), and bulkheadd answering REJECTED from admission (reject).
  std::printf(
      "\nclient hop (%s): cpu us/req of a one-thread echo server on epoll and on io_uring, and of "
      "bulkheadd rejecting\n%5s %9s %9s %9s %11s\n",
      options.http ? "HTTP/1.1" : "frames", "conns", "epoll", "io_uring", "reject", "uring/epoll");
  for (const StageResult& stage : stages) {
    const Target none;
    const Target* direct = stage.Find("direct");
    const Target* uring = stage.Find("uring");
    const Target* reject = stage.Find("reject");
    if (!direct) direct = &none;
    if (!uring) uring = &none;
    if (!reject) reject = &none;
    std::printf("%5d %9.2f %9.2f %9.2f %11.2f\n", stage.connections, direct->cpu_us_per_reply(),
                uring->cpu_us_per_reply(), reject->cpu_us_per_reply(),
                Ratio(uring->cpu_us_per_reply(), direct->cpu_us_per_reply()));
  }
  const double hop_us = SocketHopFloorUs(options.payload_bytes, 200'000);
  std::printf(
      "kernel floor: one %zu-byte write(2) + read(2) on a Unix socket pair costs %.2f us of CPU "
      "here; a forwarded request pays at least 2 of them (client hop, worker hop), a multiplexed "
      "one at least 1 and a share\n",
      options.payload_bytes, hop_us);
  std::fflush(stdout);
}

// The HTTP run's second half: every connection count again, driven by wrk over TCP, with nginx
// beside HAProxy (bench/wrk_stage.h). False if a stage failed or wrk saw errors.
bool RunWrkStages(const Options& options) {
  if (options.wrk.empty()) {
    std::printf("\nwrk: not run (no %s; scripts/install-bench-deps.sh installs it)\n", kDebianWrk);
    return true;
  }
  if (options.nginx.empty()) {
    std::printf("\nnginx: not measured (no %s; scripts/install-bench-deps.sh installs it)\n",
                kDebianNginx);
  }
  WrkStageOptions wrk{.bin_dir = options.bin_dir,
                      .wrk = options.wrk,
                      .haproxy = options.haproxy,
                      .nginx = options.nginx,
                      .seconds = options.wrk_seconds,
                      .rounds = options.rounds,
                      .machine = MachineDescription(),
                      .interrupted = &g_interrupted};
  std::vector<WrkStageResult> stages;
  bool clean = true;
  for (int connections : options.connections) {
    wrk.connections = connections;
    Result<WrkStageResult> stage = WrkStage(wrk).Run();
    if (!stage.ok()) {
      std::fprintf(stderr, "bulkhead-bench: wrk, %d connections: %s\n", connections,
                   stage.status().message().c_str());
      return false;
    }
    if (!ReportWrkStage(*stage)) clean = false;
    stages.push_back(std::move(stage).value());
  }
  ReportWrkSummary(wrk, stages);
  if (!clean) std::fprintf(stderr, "bulkhead-bench: wrk saw errors or a target served nothing\n");
  return clean;
}

int Main(int argc, char** argv) {
  CLI::App app{"bulkhead-bench: bulkheadd vs a direct worker and HAProxy, and the rejection path"};
  Options options;
  options.bin_dir = proc::BuildDirOfThisProgram();
  if (::access(kDebianHaproxy, X_OK) == 0) options.haproxy = kDebianHaproxy;
  if (::access(kDebianNginx, X_OK) == 0) options.nginx = kDebianNginx;
  if (::access(kDebianWrk, X_OK) == 0) options.wrk = kDebianWrk;
  app.add_option("--bin-dir", options.bin_dir,
                 "build directory holding supervisor/, examples/ and bench/")
      ->capture_default_str();
  app.add_option("--seconds", options.seconds,
                 "measuring time per connection count, split over rounds and targets")
      ->check(CLI::Range(0.01, 600.0))
      ->capture_default_str();
  app.add_option("--connections", options.connections, "connection counts, each a separate stage")
      ->delimiter(',')
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  app.add_option("--depth", options.depth, "requests in flight per connection (pipelining)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--client-threads", options.client_threads,
                 "load generator threads (epoll), sharing the connections")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--payload", options.payload_bytes, "request payload, bytes")
      ->check(CLI::Range(size_t{0}, size_t{1} << 20))
      ->capture_default_str();
  app.add_option("--rounds", options.rounds, "rounds per target, interleaved")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  app.add_option("--warmup-ms", options.warmup_ms, "unmeasured start of each round")
      ->check(CLI::Range(0, 10000))
      ->capture_default_str();
  app.add_option("--haproxy", options.haproxy,
                 "haproxy binary measured as a peer; empty: no HAProxy target")
      ->capture_default_str();
  app.add_flag("--http", options.http,
               "HTTP/1.1 instead of frames: a protocol = \"http\" cell, HAProxy in mode http, "
               "then the same driven by wrk over TCP 127.0.0.1, nginx beside HAProxy");
  app.add_option("--access-log", options.access_log,
                 "bulkheadd's access_log (a file path, or stderr); empty: no access log")
      ->capture_default_str();
  app.add_option("--wrk", options.wrk, "wrk binary for the HTTP run's wrk stages; empty: none")
      ->capture_default_str();
  app.add_option("--wrk-seconds", options.wrk_seconds, "length of one wrk run (whole seconds)")
      ->check(CLI::Range(1, 600))
      ->capture_default_str();
  app.add_option("--nginx", options.nginx,
                 "nginx binary measured as a peer in the wrk stages; empty: no nginx target")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitUsage;
  }
  std::error_code error;
  options.bin_dir = std::filesystem::absolute(options.bin_dir, error).lexically_normal().string();
  if (error) {
    std::fprintf(stderr, "bulkhead-bench: --bin-dir: %s\n", error.message().c_str());
    return kExitUsage;
  }
  if (options.haproxy.empty()) {
    std::printf("haproxy: not measured (no %s; scripts/install-bench-deps.sh installs it)\n",
                kDebianHaproxy);
  }
  // Stop early and clean up on Ctrl-C (clients use MSG_NOSIGNAL, so SIGPIPE needs no handling).
  struct sigaction action {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);

  std::vector<StageResult> stages;
  bool clean = true;
  for (int connections : options.connections) {
    Result<StageResult> stage = Stage(options, connections).Run();
    if (!stage.ok()) {
      std::fprintf(stderr, "bulkhead-bench: %d connections: %s\n", connections,
                   stage.status().message().c_str());
      return kExitFailure;
    }
    if (!ReportStage(*stage)) clean = false;
    stages.push_back(std::move(stage).value());
  }
  ReportSummary(options, stages);
  if (options.http) {
    if (!RunWrkStages(options)) clean = false;
  }
  if (!clean) std::fprintf(stderr, "bulkhead-bench: some replies had an unexpected status\n");
  return clean ? kExitOk : kExitFailure;
}

}  // namespace
}  // namespace bulkhead::bench

int main(int argc, char** argv) { return bulkhead::bench::Main(argc, argv); }
