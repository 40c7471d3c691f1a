// SPDX-License-Identifier: MIT
// wrk (https://github.com/wg/wrk, Debian's package), the bench's independent HTTP load generator:
// one run of `wrk -t1 -cN -dSs --latency` against a URL, keep-alive GETs, its figures read back
// exactly. A small Lua script (wrk's `done` hook, the only one it defines, so wrk's per-request
// path stays its plain C one) prints one line with the request count, the duration and the
// percentiles in microseconds, rather than the rounded, unit-suffixed human summary.
// Threading: RunWrk blocks the calling thread for the run.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace bulkhead::bench {

// The script RunWrk passes with -s: prints the line ParseWrkSummary reads.
extern const char kWrkSummaryScript[];

struct WrkOptions {
  std::string binary = {};       // path of wrk
  std::string url = {};          // "http://127.0.0.1:PORT/"
  std::string script_path = {};  // where kWrkSummaryScript was written
  std::string output_path = {};  // wrk's stdout and stderr go here (truncated)
  int connections = 1;           // -c; one thread (-t1) drives them all
  int seconds = 3;               // -d, whole seconds (wrk takes no fractions)
  const std::atomic<bool>* interrupted = nullptr;
};

struct WrkSummary {
  uint64_t requests = 0;  // responses wrk completed in the run, any status
  double seconds = 0;     // the run's length as wrk measured it
  double p50_us = 0;      // latency percentiles, microseconds
  double p99_us = 0;
  uint64_t status_errors = 0;  // responses with a status other than 2xx or 3xx
  uint64_t socket_errors = 0;  // connect, read and write errors and timeouts together

  double rate() const { return seconds > 0 ? static_cast<double>(requests) / seconds : 0; }
};

// Reads the line kWrkSummaryScript printed out of wrk's output. Errors: no such line, or a field
// missing or not a number.
Result<WrkSummary> ParseWrkSummary(std::string_view output);

// Runs wrk once and waits for it (up to the duration and 30 s). Errors: wrk could not start,
// ended otherwise than with exit 0, or printed no summary; the message holds its output.
Result<WrkSummary> RunWrk(const WrkOptions& options);

}  // namespace bulkhead::bench
