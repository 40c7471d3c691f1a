// SPDX-License-Identifier: MIT
// WrkStage: the bench's HTTP run with an independent load generator (docs/benchmarks.md, "HTTP
// with wrk"), at one connection count. The same tiny keep-alive HTTP server
// (bulkhead-bench-worker --protocol http) sits behind every target, each listening on 127.0.0.1
// only (wrk speaks TCP):
//   direct     wrk -> the worker's own TCP socket
//   bulkheadd  wrk -> an HTTP cell's `listen` address -> worker link (Unix) -> the cell's worker
//   haproxy    wrk -> HAProxy 2.6, mode http, nbthread 1, keep-alive to the server -> a worker's
//              Unix socket
//   nginx      wrk -> nginx 1.22, one process, upstream keepalive -> the same worker's Unix socket
// Each round runs `wrk -t1 -cN -dSs --latency` (keep-alive GET /) once against every target, in an
// order rotated each round; the CPU time of the process that serves wrk (bulkheadd, HAProxy,
// nginx, or the direct worker itself) is read around the run and divided by wrk's request count.
// The figures of a target are the medians of its rounds. Threading: Run blocks its thread.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/temp_dir.h"
#include "base/unique_fd.h"
#include "bench/haproxy_process.h"
#include "bench/nginx_process.h"
#include "proc/bulkheadd_process.h"
#include "proc/child_process.h"

namespace bulkhead::bench {

struct WrkStageOptions {
  std::string bin_dir = {};  // build directory: supervisor/bulkheadd, bench/bulkhead-bench-worker
  std::string wrk = {};      // path of wrk
  std::string haproxy = {};  // path of haproxy; empty: no haproxy target
  std::string nginx = {};    // path of nginx; empty: no nginx target
  int connections = 1;       // wrk -c; also the cell's max_concurrent and HAProxy's server maxconn
  int seconds = 3;           // wrk -d per run
  int rounds = 3;
  std::string machine = {};  // printed in the stage's header line ("nproc 2, Linux 6.1")
  const std::atomic<bool>* interrupted = nullptr;
};

// One target's runs at one connection count.
struct WrkTarget {
  struct Round {
    double rate = 0;  // requests/s
    double p50_us = 0;
    double p99_us = 0;
    double cpu_us = 0;  // CPU time of cpu_pid per request, microseconds
    uint64_t requests = 0;
  };

  std::string name = {};
  uint16_t port = 0;
  pid_t cpu_pid = 0;  // the process serving wrk
  std::vector<Round> rounds = {};
  uint64_t requests = 0;       // over every round
  uint64_t status_errors = 0;  // non-2xx/3xx responses, over every round
  uint64_t socket_errors = 0;  // wrk's connect, read, write errors and timeouts

  // The median of a figure over the rounds (the mean of the middle two for an even count).
  double Median(double Round::*figure) const;
};

struct WrkStageResult {
  int connections = 0;
  std::vector<WrkTarget> targets;

  const WrkTarget* Find(std::string_view name) const;
};

class WrkStage {
 public:
  explicit WrkStage(const WrkStageOptions& options) : options_(options) {}

  // Starts every target, runs the rounds (printing a row per run), checks the cell's counters
  // (no rejection, no failure, at least wrk's responses counted ok) and stops everything. Errors
  // name the step that failed, after stopping what was started.
  Result<WrkStageResult> Run();

 private:
  Status Setup();
  Status Measure();
  Status CheckCell();
  Status Teardown();

  const WrkStageOptions& options_;
  TempDir dir_;
  std::optional<proc::BulkheaddProcess> bulkheadd_;
  UniqueFd direct_listener_;   // TCP, the direct target's
  UniqueFd backend_listener_;  // Unix, the worker behind HAProxy and nginx
  proc::ChildProcess direct_worker_;
  proc::ChildProcess backend_worker_;
  HaproxyProcess haproxy_;
  NginxProcess nginx_;
  std::string script_path_;
  std::vector<WrkTarget> targets_;
};

// The rows and ratios of one connection count (medians over the rounds); false if wrk saw an
// error status or a socket error for a target, or a target served nothing.
bool ReportWrkStage(const WrkStageResult& stage);

// One line per connection count: each target's median requests/s, p99 and CPU per request, and
// bulkheadd's ratios to HAProxy.
void ReportWrkSummary(const WrkStageOptions& options, const std::vector<WrkStageResult>& stages);

}  // namespace bulkhead::bench
