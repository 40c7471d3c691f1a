// SPDX-License-Identifier: MIT
#include "bench/wrk_stage.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "bench/latency_summary.h"
#include "bench/process_cpu.h"
#include "bench/sockets.h"
#include "bench/stage_support.h"
#include "bench/wrk.h"

namespace bulkhead::bench {

namespace {

using proc::CellStatus;
using proc::TomlString;
using std::chrono::milliseconds;

// Deadline of each start-up step (bulkheadd's cell running, a peer accepting).
constexpr milliseconds kStepTimeout{10000};
// SIGTERM-to-SIGKILL deadline when stopping a target's process.
constexpr milliseconds kStopTimeout{10000};

double Ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

void PrintRowHeader(const char* first) {
  std::printf("%-7s %-10s %10s %10s %10s %10s %10s %8s\n", first, "target", "requests/s", "p50 us",
              "p99 us", "cpu us/req", "requests", "errors");
}

void PrintRow(const std::string& first, const std::string& name, double rate, double p50_us,
              double p99_us, double cpu_us, uint64_t requests, uint64_t errors) {
  std::printf("%-7s %-10s %10.0f %10.1f %10.1f %10.2f %10llu %8llu\n", first.c_str(), name.c_str(),
              rate, p50_us, p99_us, cpu_us, static_cast<unsigned long long>(requests),
              static_cast<unsigned long long>(errors));
  std::fflush(stdout);
}

}  // namespace

double WrkTarget::Median(double Round::*figure) const {
  std::vector<double> values;
  values.reserve(rounds.size());
  for (const Round& round : rounds) values.push_back(round.*figure);
  return bench::Median(std::move(values));
}

const WrkTarget* WrkStageResult::Find(std::string_view name) const {
  for (const WrkTarget& target : targets) {
    if (target.name == name) return &target;
  }
  return nullptr;
}

Result<WrkStageResult> WrkStage::Run() {
  Status status = Setup();
  if (status.ok()) status = Measure();
  if (status.ok()) status = CheckCell();
  Status stopped = Teardown();
  if (status.ok()) status = stopped;
  if (!status.ok()) {
    const std::string log = bulkheadd_ ? bulkheadd_->Log() : std::string();
    if (!log.empty()) std::fprintf(stderr, "--- bulkheadd log ---\n%s", log.c_str());
    return status;
  }
  return WrkStageResult{.connections = options_.connections, .targets = std::move(targets_)};
}

Status WrkStage::Setup() {
  Status status = dir_.Create("bh-bench-wrk");
  if (!status.ok()) return status;
  const std::string root = dir_.path();
  const std::string worker = options_.bin_dir + "/bench/bulkhead-bench-worker";
  script_path_ = root + "/summary.lua";
  status = WriteText(script_path_, kWrkSummaryScript);
  if (!status.ok()) return status;

  // The direct target: the worker on its own TCP socket.
  Result<UniqueFd> tcp = ListenLoopback(0, 1024);
  if (!tcp.ok()) return tcp.status();
  direct_listener_ = std::move(tcp).value();
  Result<uint16_t> direct_port = LocalPort(direct_listener_.get());
  if (!direct_port.ok()) return direct_port.status();
  Result<proc::ChildProcess> started =
      proc::ChildProcess::StartWorker({worker, "--protocol", "http"}, direct_listener_.get());
  if (!started.ok()) return started.status();
  direct_worker_ = std::move(started).value();
  targets_.push_back(
      WrkTarget{.name = "direct", .port = *direct_port, .cpu_pid = direct_worker_.pid()});

  // bulkheadd: an HTTP cell with a TCP `listen` address, its own worker behind it (Unix socket).
  Result<uint16_t> cell_port = FreeLoopbackPort();
  if (!cell_port.ok()) return cell_port.status();
  const std::string config =
      BenchSupervisorToml(root, /*cgroup=*/"") + "\n[cells.echo]\nprotocol = \"http\"\ncommand = [" +
      TomlString(worker) +
      ", \"--protocol\", \"http\"]\nlisten = [\"127.0.0.1:" + std::to_string(*cell_port) +
      "\"]\nmax_concurrent = " + std::to_string(options_.connections) +
      "\nmax_queue = 0\nqueue_timeout = \"10s\"\n";
  status = StartBenchBulkheadd(options_.bin_dir, root, config, options_.interrupted, &bulkheadd_);
  if (!status.ok()) return status;
  Result<CellStatus> ready = bulkheadd_->WaitForCell(
      "echo", [](const CellStatus& s) { return s.state == "running" && s.pid != 0; }, kStepTimeout);
  if (!ready.ok()) return ready.status();
  targets_.push_back(
      WrkTarget{.name = "bulkheadd", .port = *cell_port, .cpu_pid = bulkheadd_->pid()});

  if (options_.haproxy.empty() && options_.nginx.empty()) return Status::Ok();
  // HAProxy's and nginx's server: the same worker on a Unix socket, as bulkheadd's worker link.
  const std::string backend_socket = root + "/backend.sock";
  Result<UniqueFd> unix_listener = ListenUnix(backend_socket, 1024);
  if (!unix_listener.ok()) return unix_listener.status();
  backend_listener_ = std::move(unix_listener).value();
  started =
      proc::ChildProcess::StartWorker({worker, "--protocol", "http"}, backend_listener_.get());
  if (!started.ok()) return started.status();
  backend_worker_ = std::move(started).value();

  if (!options_.haproxy.empty()) {
    Result<uint16_t> port = FreeLoopbackPort();
    if (!port.ok()) return port.status();
    status = haproxy_.Start(HaproxyOptions{.binary = options_.haproxy,
                                           .dir = root,
                                           .front_port = *port,
                                           .worker_socket = backend_socket,
                                           .http = true,
                                           .maxconn = static_cast<uint32_t>(options_.connections)},
                            kStepTimeout);
    if (!status.ok()) return status;
    targets_.push_back(WrkTarget{.name = "haproxy", .port = *port, .cpu_pid = haproxy_.pid()});
  }
  if (!options_.nginx.empty()) {
    Result<uint16_t> port = FreeLoopbackPort();
    if (!port.ok()) return port.status();
    status = nginx_.Start(
        NginxOptions{.binary = options_.nginx,
                     .dir = root,
                     .port = *port,
                     .worker_socket = backend_socket,
                     .keepalive = static_cast<uint32_t>(std::max(options_.connections, 1))},
        kStepTimeout);
    if (!status.ok()) return status;
    targets_.push_back(WrkTarget{.name = "nginx", .port = *port, .cpu_pid = nginx_.pid()});
  }
  return Status::Ok();
}

Status WrkStage::Measure() {
  std::printf(
      "\nbulkhead-bench: HTTP/1.1 with wrk over TCP 127.0.0.1, %d connections (wrk -t1 -c%d -d%ds "
      "--latency, keep-alive GET /), %d rounds x %zu targets; %s\n",
      options_.connections, options_.connections, options_.seconds, options_.rounds,
      targets_.size(), options_.machine.c_str());
  PrintRowHeader("round");
  for (int round = 0; round < options_.rounds; ++round) {
    for (size_t k = 0; k < targets_.size(); ++k) {
      if (options_.interrupted != nullptr && options_.interrupted->load()) {
        return Status::Error("interrupted");
      }
      WrkTarget& target = targets_[(k + static_cast<size_t>(round)) % targets_.size()];
      WrkOptions wrk{.binary = options_.wrk,
                     .url = "http://127.0.0.1:" + std::to_string(target.port) + "/",
                     .script_path = script_path_,
                     .output_path = dir_.path() + "/wrk-" + target.name + ".out",
                     .connections = options_.connections,
                     .seconds = options_.seconds,
                     .interrupted = options_.interrupted};
      const std::optional<uint64_t> cpu_before = ProcessCpuNs(target.cpu_pid);
      Result<WrkSummary> run = RunWrk(wrk);
      const std::optional<uint64_t> cpu_after = ProcessCpuNs(target.cpu_pid);
      if (!run.ok()) return Status::Error(target.name + ": " + run.status().message());
      if (!cpu_before || !cpu_after) {
        return Status::Error(target.name + ": its process (pid " + std::to_string(target.cpu_pid) +
                             ") is gone");
      }
      WrkTarget::Round figures{.rate = run->rate(),
                               .p50_us = run->p50_us,
                               .p99_us = run->p99_us,
                               .cpu_us = run->requests > 0
                                             ? static_cast<double>(*cpu_after - *cpu_before) /
                                                   1000.0 / static_cast<double>(run->requests)
                                             : 0,
                               .requests = run->requests};
      target.rounds.push_back(figures);
      target.requests += run->requests;
      target.status_errors += run->status_errors;
      target.socket_errors += run->socket_errors;
      PrintRow(std::to_string(round + 1), target.name, figures.rate, figures.p50_us, figures.p99_us,
               figures.cpu_us, figures.requests, run->status_errors + run->socket_errors);
    }
  }
  return Status::Ok();
}

Status WrkStage::CheckCell() {
  if (!bulkheadd_) return Status::Ok();
  const WrkTarget* target = nullptr;
  for (const WrkTarget& t : targets_) {
    if (t.name == "bulkheadd") target = &t;
  }
  Result<CellStatus> cell = bulkheadd_->Cell("echo");
  if (!cell.ok()) return cell.status();
  // wrk stops counting at the end of its run while the last responses are still coming: the
  // cell's count may be higher, never lower, and nothing may have been turned away or failed.
  if (cell->rejected != 0 || cell->failed != 0 || (target && cell->ok < target->requests)) {
    return Status::Error("cell echo: bulkheadd counted ok " + std::to_string(cell->ok) +
                         ", rejected " + std::to_string(cell->rejected) + ", failed " +
                         std::to_string(cell->failed) + "; wrk completed " +
                         std::to_string(target ? target->requests : 0) + " requests");
  }
  return Status::Ok();
}

Status WrkStage::Teardown() {
  Status status = haproxy_.Stop(kStopTimeout);
  Status stopped = nginx_.Stop(kStopTimeout);
  if (status.ok()) status = stopped;
  stopped = StopBenchProcesses({&direct_worker_, &backend_worker_}, &bulkheadd_);
  if (status.ok()) status = stopped;
  return status;
}

bool ReportWrkStage(const WrkStageResult& stage) {
  PrintRowHeader("median");
  bool clean = true;
  for (const WrkTarget& t : stage.targets) {
    PrintRow("median", t.name, t.Median(&WrkTarget::Round::rate),
             t.Median(&WrkTarget::Round::p50_us), t.Median(&WrkTarget::Round::p99_us),
             t.Median(&WrkTarget::Round::cpu_us), t.requests, t.status_errors + t.socket_errors);
    if (t.status_errors != 0 || t.socket_errors != 0 || t.requests == 0) clean = false;
  }
  const WrkTarget* haproxy = stage.Find("haproxy");
  for (const char* name : {"bulkheadd", "nginx"}) {
    const WrkTarget* t = stage.Find(name);
    if (t == nullptr || haproxy == nullptr) continue;
    std::printf(
        "wrk ratio %s/haproxy (medians): requests/s %.2f, p99 %.2f, cpu per request %.2f\n", name,
        Ratio(t->Median(&WrkTarget::Round::rate), haproxy->Median(&WrkTarget::Round::rate)),
        Ratio(t->Median(&WrkTarget::Round::p99_us), haproxy->Median(&WrkTarget::Round::p99_us)),
        Ratio(t->Median(&WrkTarget::Round::cpu_us), haproxy->Median(&WrkTarget::Round::cpu_us)));
  }
  std::fflush(stdout);
  return clean;
}

void ReportWrkSummary(const WrkStageOptions& options, const std::vector<WrkStageResult>& stages) {
  std::printf(
      "\nwrk summary (HTTP/1.1 over TCP 127.0.0.1, keep-alive GET /, one wrk thread, %d s a run; "
      "medians of %d rounds): requests/s, p99 us, cpu us/req\n",
      options.seconds, options.rounds);
  std::printf("%5s %9s %9s %9s %9s %7s %8s %8s %8s %8s %7s %7s %7s %7s\n", "conns", "direct",
              "haproxy", "nginx", "bulkheadd", "bh/hap", "p99 dir", "p99 hap", "p99 ngx", "p99 bh",
              "cpu hap", "cpu ngx", "cpu bh", "bh/hap");
  for (const WrkStageResult& stage : stages) {
    const WrkTarget none;
    auto find = [&](std::string_view name) {
      const WrkTarget* t = stage.Find(name);
      return t != nullptr ? t : &none;
    };
    const WrkTarget* direct = find("direct");
    const WrkTarget* haproxy = find("haproxy");
    const WrkTarget* nginx = find("nginx");
    const WrkTarget* via = find("bulkheadd");
    using R = WrkTarget::Round;
    std::printf(
        "%5d %9.0f %9.0f %9.0f %9.0f %7.2f %8.1f %8.1f %8.1f %8.1f %7.2f %7.2f %7.2f %7.2f\n",
        stage.connections, direct->Median(&R::rate), haproxy->Median(&R::rate),
        nginx->Median(&R::rate), via->Median(&R::rate),
        Ratio(via->Median(&R::rate), haproxy->Median(&R::rate)), direct->Median(&R::p99_us),
        haproxy->Median(&R::p99_us), nginx->Median(&R::p99_us), via->Median(&R::p99_us),
        haproxy->Median(&R::cpu_us), nginx->Median(&R::cpu_us), via->Median(&R::cpu_us),
        Ratio(via->Median(&R::cpu_us), haproxy->Median(&R::cpu_us)));
  }
  std::fflush(stdout);
}

}  // namespace bulkhead::bench
