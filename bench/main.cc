// SPDX-License-Identifier: MIT
// bulkhead-bench: measures what admission through bulkheadd costs. In one run it starts bulkheadd
// (an `echo` cell with max_concurrent = clients, and a `hang` cell with 1 slot, no queue and a
// stalled gateway worker) and, beside it, a bulkhead-echo worker of its own on a socket-activated
// listening socket; then it alternates rounds over three targets, rotating their order each round
// to spread machine noise evenly:
//   bulkheadd  client -> front socket -> admission -> worker link -> echo worker -> back
//   direct     client -> the echo worker's own socket -> back
//   reject     client -> the `hang` cell's front socket -> REJECTED full at once
//   multiplex  as bulkheadd, through a cell with worker_connections = "multiplex": every request
//              on one worker connection (docs/protocol.md, "Multiplexed worker connections")
// and prints replies/s and p50/p99/p99.9 latency per round and per target, the bulkheadd/direct
// ratios (the figures to compare across machines) and the rejection rate. Exits 0 only if every
// reply had the expected status and bulkheadd's counters account for every reply
// (docs/benchmarks.md).
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/exit_status.h"
#include "base/status.h"
#include "base/temp_dir.h"
#include "base/unique_fd.h"
#include "bench/closed_loop.h"
#include "bench/latency_summary.h"
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

// Deadline of every wait on bulkheadd (startup, a figure on the control socket) and of each
// blocking send/receive of a load client.
constexpr milliseconds kStepTimeout{10000};
// SIGTERM-to-SIGKILL deadline when stopping bulkheadd (it gives its workers 5 s) and the worker.
constexpr milliseconds kStopTimeout{10000};
// Shortest measuring window per target and round.
constexpr milliseconds kMinWindow{20};

std::atomic<bool> g_interrupted{false};

void OnStopSignal(int) { g_interrupted.store(true); }

struct Options {
  std::string bin_dir;
  double seconds = 3.0;  // measuring time of the whole run, split over rounds and targets
  int clients = 2;
  int depth = 1;
  size_t payload_bytes = 64;
  int rounds = 3;
  int warmup_ms = 50;
};

// One thing measured; its rounds accumulate here.
struct Target {
  std::string name = {};
  std::string socket = {};
  ipc::ReplyStatus expected = ipc::ReplyStatus::kOk;
  uint64_t replies = 0;        // expected replies inside the measuring windows
  uint64_t unexpected = 0;     // other replies inside the windows
  uint64_t total_replies = 0;  // every reply, warmup and draining included
  double seconds = 0;          // sum of the windows
  std::vector<uint32_t> latencies_ns = {};
  uint64_t daemon_cpu_ns = 0;  // bulkheadd's CPU time during this target's windows (warmup too)

  // bulkheadd's CPU per reply, microseconds (its task clock / every reply it sent this target).
  double cpu_us_per_reply() const {
    return total_replies > 0
               ? static_cast<double>(daemon_cpu_ns) / 1000.0 / static_cast<double>(total_replies)
               : 0;
  }

  double rate() const { return seconds > 0 ? static_cast<double>(replies) / seconds : 0; }
};

Status WriteFile(const std::string& path, const std::string& content) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << content;
  file.close();
  if (!file) return Status::Error("cannot write " + path);
  return Status::Ok();
}

// A SOCK_STREAM | SOCK_CLOEXEC Unix socket bound to `path` and listening.
Result<UniqueFd> ListenUnix(const std::string& path, int backlog) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return Status::Error("socket path too long: " + path);
  path.copy(addr.sun_path, path.size());
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return Status::FromErrno("socket");
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    return Status::FromErrno("bind " + path);
  }
  if (::listen(fd.get(), backlog) != 0) return Status::FromErrno("listen " + path);
  return fd;
}

// CPU time of the process' main thread so far, ns (/proc/PID/schedstat, first field: bulkheadd
// runs one thread); 0 if unreadable.
uint64_t CpuNs(pid_t pid) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/schedstat");
  uint64_t ns = 0;
  file >> ns;
  return file ? ns : 0;
}

std::string MachineDescription() {
  utsname uts{};
  std::string kernel = ::uname(&uts) == 0 ? std::string(uts.sysname) + " " + uts.release : "?";
  return "nproc " + std::to_string(::sysconf(_SC_NPROCESSORS_ONLN)) + ", " + kernel;
}

void PrintRow(const std::string& first, const Target& target, double rate,
              const LatencySummary& latency, uint64_t unexpected) {
  std::printf("%-7s %-10s %12.0f %10.1f %10.1f %10.1f %10llu\n", first.c_str(), target.name.c_str(),
              rate, latency.p50_us, latency.p99_us, latency.p999_us,
              static_cast<unsigned long long>(unexpected));
  std::fflush(stdout);
}

// Everything a run starts, in the order it must be stopped.
class Bench {
 public:
  explicit Bench(Options options) : options_(std::move(options)) {}

  // Returns an exit code.
  int Run() {
    Status status = Setup();
    if (status.ok()) status = Measure();
    Status stopped = Teardown();
    if (status.ok()) status = stopped;
    if (!status.ok()) {
      std::fprintf(stderr, "bulkhead-bench: %s\n", status.message().c_str());
      std::string log = bulkheadd_ ? bulkheadd_->Log() : std::string();
      if (!log.empty()) std::fprintf(stderr, "--- bulkheadd log ---\n%s", log.c_str());
      return kExitFailure;
    }
    return Report() ? kExitOk : kExitFailure;
  }

 private:
  Status Setup() {
    Status status = dir_.Create("bh-bench");
    if (!status.ok()) return status;
    const std::string root = dir_.path();
    const std::string gates = root + "/gates";
    if (::mkdir(gates.c_str(), 0755) != 0) return Status::FromErrno("mkdir " + gates);
    gates_dir_ = gates;
    const std::string echo = options_.bin_dir + "/examples/bulkhead-echo";
    const std::string gateway = options_.bin_dir + "/examples/bulkhead-gateway";
    const uint32_t in_flight = static_cast<uint32_t>(options_.clients * options_.depth);
    // Every client request fits in a slot or in the queue: the echo target is never rejected.
    const std::string config =
        "[supervisor]\nruntime_dir = " + TomlString(root + "/run") +
        "\nlog_level = \"warning\"\n\n[cells.echo]\ncommand = [" + TomlString(echo) +
        "]\nmax_concurrent = " + std::to_string(options_.clients) +
        "\nmax_queue = " + std::to_string(in_flight - static_cast<uint32_t>(options_.clients)) +
        "\nqueue_timeout = \"10s\"\n\n[cells.hang]\ncommand = [" + TomlString(gateway) + ", " +
        "\"--gates\", " + TomlString(gates) + "]\nmax_concurrent = 1\nmax_queue = 0\n" +
        "\n[cells.mux]\ncommand = [" + TomlString(echo) +
        "]\nmax_concurrent = " + std::to_string(options_.clients) +
        "\nmax_queue = " + std::to_string(in_flight - static_cast<uint32_t>(options_.clients)) +
        "\nqueue_timeout = \"10s\"\nworker_connections = \"multiplex\"\n";
    const std::string config_path = root + "/bench.toml";
    status = WriteFile(config_path, config);
    if (!status.ok()) return status;

    bulkheadd_.emplace(proc::BulkheaddOptions{.binary = options_.bin_dir + "/supervisor/bulkheadd",
                                              .config_path = config_path,
                                              .control_socket = root + "/run/control.sock",
                                              .log_path = root + "/bulkheadd.log",
                                              .stop_timeout = kStopTimeout,
                                              .control_timeout = kStepTimeout,
                                              .interrupted = &g_interrupted});
    status = bulkheadd_->Start();
    if (!status.ok()) return Status::Error(status.message() + " (build it, or pass --bin-dir)");
    for (const char* cell : {"echo", "hang"}) {
      Result<CellStatus> ready = bulkheadd_->WaitForCell(
          cell, [](const CellStatus& s) { return s.state == "running" && s.pid != 0; },
          kStepTimeout);
      if (!ready.ok()) return ready.status();
      targets_.push_back(Target{.name = cell == std::string("echo") ? "bulkheadd" : "reject",
                                .socket = ready->socket,
                                .expected = cell == std::string("echo")
                                                ? ipc::ReplyStatus::kOk
                                                : ipc::ReplyStatus::kRejected});
    }

    const std::string direct_socket = root + "/direct.sock";
    Result<UniqueFd> listener = ListenUnix(direct_socket, 128);
    if (!listener.ok()) return listener.status();
    direct_listener_ = std::move(listener).value();
    Result<ChildProcess> worker = ChildProcess::StartWorker({echo}, direct_listener_.get());
    if (!worker.ok()) return worker.status();
    direct_worker_ = std::move(worker).value();
    targets_.insert(targets_.begin() + 1, Target{.name = "direct", .socket = direct_socket});

    // Occupy the hang cell's only slot: every later request there is REJECTED full.
    Result<ipc::Client> holder = ipc::Client::Connect(targets_[2].socket);
    if (!holder.ok()) return holder.status();
    holder_ = std::move(holder).value();
    status = holder_->SetTimeout(kStepTimeout);
    if (status.ok()) status = holder_->Send(1, "gate hold");
    if (!status.ok()) return status;
    Result<CellStatus> held = bulkheadd_->WaitForCell(
        "hang", [](const CellStatus& s) { return s.running == 1; }, kStepTimeout);
    if (!held.ok()) return held.status();
    Result<CellStatus> mux = bulkheadd_->WaitForCell(
        "mux", [](const CellStatus& s) { return s.state == "running" && s.pid != 0; },
        kStepTimeout);
    if (!mux.ok()) return mux.status();
    targets_.push_back(Target{.name = "multiplex", .socket = mux->socket});
    return Status::Ok();
  }

  Status Measure() {
    const int slots = options_.rounds * static_cast<int>(targets_.size());
    const milliseconds window =
        std::max(kMinWindow, milliseconds(static_cast<int64_t>(options_.seconds * 1000.0 / slots)));
    std::printf(
        "bulkhead-bench: %d clients x depth %d, %zu-byte payload, %d rounds x %zu targets "
        "x %lld ms (+%d ms warmup); %s\n",
        options_.clients, options_.depth, options_.payload_bytes, options_.rounds, targets_.size(),
        static_cast<long long>(window.count()), options_.warmup_ms, MachineDescription().c_str());
    std::printf("%-7s %-10s %12s %10s %10s %10s %10s\n", "round", "target", "replies/s", "p50 us",
                "p99 us", "p999 us", "unexpected");
    const std::string payload(options_.payload_bytes, 'x');
    for (int round = 0; round < options_.rounds && !g_interrupted.load(); ++round) {
      for (size_t k = 0; k < targets_.size() && !g_interrupted.load(); ++k) {
        Target& target = targets_[(k + static_cast<size_t>(round)) % targets_.size()];
        LoadOptions load;
        load.socket = target.socket;
        load.clients = options_.clients;
        load.depth = options_.depth;
        load.payload = payload;
        load.warmup = milliseconds(options_.warmup_ms);
        load.duration = window;
        load.expected = target.expected;
        load.reply_timeout = kStepTimeout;
        load.interrupted = &g_interrupted;
        const uint64_t cpu_before = CpuNs(bulkheadd_->pid());
        LoadResult result = RunClosedLoop(load);
        target.daemon_cpu_ns += CpuNs(bulkheadd_->pid()) - cpu_before;
        if (!result.error.empty()) return Status::Error(target.name + ": " + result.error);
        const double rate =
            result.seconds > 0 ? static_cast<double>(result.replies) / result.seconds : 0;
        target.replies += result.replies;
        target.unexpected += result.unexpected;
        target.total_replies += result.total_replies;
        target.seconds += result.seconds;
        LatencySummary latency = Summarize(result.latencies_ns);
        target.latencies_ns.insert(target.latencies_ns.end(), result.latencies_ns.begin(),
                                   result.latencies_ns.end());
        PrintRow(std::to_string(round + 1), target, rate, latency, result.unexpected);
      }
    }
    if (g_interrupted.load()) return Status::Error("interrupted");
    return CheckCounters();
  }

  // bulkheadd must have answered each request exactly once: its counters for a cell equal the
  // replies the clients received from it.
  Status CheckCounters() {
    struct Expectation {
      const char* cell;
      const Target& target;
    };
    for (const Expectation& e : {Expectation{"echo", targets_[0]}, Expectation{"hang", targets_[2]},
                                 Expectation{"mux", targets_[3]}}) {
      Result<CellStatus> status = bulkheadd_->Cell(e.cell);
      if (!status.ok()) return status.status();
      const uint64_t answered = status->ok + status->rejected + status->failed;
      if (answered != e.target.total_replies) {
        return Status::Error(
            std::string("cell ") + e.cell + ": bulkheadd counted " + std::to_string(answered) +
            " replies (ok " + std::to_string(status->ok) + ", rejected " +
            std::to_string(status->rejected) + ", failed " + std::to_string(status->failed) +
            "), the clients received " + std::to_string(e.target.total_replies));
      }
    }
    return Status::Ok();
  }

  Status Teardown() {
    Status status = Status::Ok();
    if (holder_) {
      // Release the hang cell's worker, so bulkheadd stops a worker that is not mid-request.
      std::string gate = gates_dir_ + "/hold";
      Status opened = WriteFile(gate + ".tmp", "ok released\n");
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
    if (direct_worker_.pid() > 0) {
      Status stopped = direct_worker_.StopExpecting(kStopTimeout, {"signal 15", "exit 0"});
      if (status.ok()) status = stopped;
    }
    if (bulkheadd_ && bulkheadd_->running()) {
      Status stopped = bulkheadd_->StopCleanly();
      if (status.ok()) status = stopped;
    }
    return status;
  }

  // Prints the totals and the ratios; false if any reply had an unexpected status.
  bool Report() {
    std::printf("%-7s %-10s %12s %10s %10s %10s %10s\n", "total", "target", "replies/s", "p50 us",
                "p99 us", "p999 us", "unexpected");
    std::vector<LatencySummary> summaries;
    bool clean = true;
    for (Target& target : targets_) {
      summaries.push_back(Summarize(target.latencies_ns));
      PrintRow("all", target, target.rate(), summaries.back(), target.unexpected);
      if (target.unexpected != 0 || target.replies == 0) clean = false;
    }
    auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
    const Target& via = targets_[0];
    const Target& direct = targets_[1];
    const Target& reject = targets_[2];
    std::printf("ratio bulkheadd/direct: throughput %.2f, p50 %.2f, p99 %.2f, p999 %.2f\n",
                ratio(via.rate(), direct.rate()), ratio(summaries[0].p50_us, summaries[1].p50_us),
                ratio(summaries[0].p99_us, summaries[1].p99_us),
                ratio(summaries[0].p999_us, summaries[1].p999_us));
    std::printf("ratio multiplex/direct: throughput %.2f, p50 %.2f, p99 %.2f, p999 %.2f\n",
                ratio(targets_[3].rate(), direct.rate()),
                ratio(summaries[3].p50_us, summaries[1].p50_us),
                ratio(summaries[3].p99_us, summaries[1].p99_us),
                ratio(summaries[3].p999_us, summaries[1].p999_us));
    std::printf("bulkheadd CPU per reply: bulkheadd %.2f us, multiplex %.2f us, reject %.2f us\n",
                via.cpu_us_per_reply(), targets_[3].cpu_us_per_reply(), reject.cpu_us_per_reply());
    std::printf("reject: %.0f rejections/s, %.2fx the bulkheadd echo rate, p50 %.1f us\n",
                reject.rate(), ratio(reject.rate(), via.rate()), summaries[2].p50_us);
    std::fflush(stdout);
    if (!clean) std::fprintf(stderr, "bulkhead-bench: some replies had an unexpected status\n");
    return clean;
  }

  Options options_;
  TempDir dir_;
  std::string gates_dir_;
  std::optional<BulkheaddProcess> bulkheadd_;
  UniqueFd direct_listener_;
  ChildProcess direct_worker_;
  std::optional<ipc::Client> holder_;
  std::vector<Target> targets_;  // bulkheadd, direct, reject, multiplex
};

int Main(int argc, char** argv) {
  CLI::App app{"bulkhead-bench: bulkheadd vs a direct worker, and the rejection path"};
  Options options;
  options.bin_dir = proc::BuildDirOfThisProgram();
  app.add_option("--bin-dir", options.bin_dir, "build directory holding supervisor/ and examples/")
      ->capture_default_str();
  app.add_option("--seconds", options.seconds, "measuring time of the whole run")
      ->check(CLI::Range(0.01, 600.0))
      ->capture_default_str();
  app.add_option("--clients", options.clients, "client threads, one connection each")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  app.add_option("--depth", options.depth, "requests in flight per connection (pipelining)")
      ->check(CLI::Range(1, 1024))
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
  // Stop early and clean up on Ctrl-C (clients use MSG_NOSIGNAL, so SIGPIPE needs no handling).
  struct sigaction action {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
  return Bench(std::move(options)).Run();
}

}  // namespace
}  // namespace bulkhead::bench

int main(int argc, char** argv) { return bulkhead::bench::Main(argc, argv); }
