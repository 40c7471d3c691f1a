// SPDX-License-Identifier: MIT
#include "bench/wrk.h"

#include <fcntl.h>

#include <charconv>

#include "base/unique_fd.h"
#include "bench/stage_support.h"
#include "proc/child_process.h"

namespace bulkhead::bench {

namespace {

constexpr std::string_view kSummaryPrefix = "bulkhead-bench-wrk:";

// The value of ` KEY=VALUE` in `line`, as a number.
Result<double> Field(std::string_view line, std::string_view key) {
  const std::string needle = " " + std::string(key) + "=";
  const size_t at = line.find(needle);
  if (at == std::string_view::npos) return Status::Error("wrk summary: no " + std::string(key));
  std::string_view rest = line.substr(at + needle.size());
  rest = rest.substr(0, rest.find(' '));
  double value = 0;
  const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), value);
  if (ec != std::errc() || end != rest.data() + rest.size()) {
    return Status::Error("wrk summary: " + std::string(key) + " is not a number: \"" +
                         std::string(rest) + "\"");
  }
  return value;
}

}  // namespace

const char kWrkSummaryScript[] =
    R"(-- bulkhead-bench: wrk's figures, exactly, on one line (docs/benchmarks.md)
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "bulkhead-bench-wrk: requests=%d duration_us=%d p50_us=%d p99_us=%d status=%d connect=%d read=%d write=%d timeout=%d\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.status, e.connect, e.read, e.write, e.timeout))
end
)";

Result<WrkSummary> ParseWrkSummary(std::string_view output) {
  const size_t at = output.find(kSummaryPrefix);
  if (at == std::string_view::npos) return Status::Error("wrk printed no summary line");
  std::string_view line = output.substr(at + kSummaryPrefix.size());
  line = line.substr(0, line.find('\n'));
  WrkSummary summary;
  double socket_errors = 0;
  for (std::string_view key : {"requests", "duration_us", "p50_us", "p99_us", "status", "connect",
                               "read", "write", "timeout"}) {
    Result<double> value = Field(line, key);
    if (!value.ok()) return value.status();
    if (key == "requests") summary.requests = static_cast<uint64_t>(*value);
    if (key == "duration_us") summary.seconds = *value / 1e6;
    if (key == "p50_us") summary.p50_us = *value;
    if (key == "p99_us") summary.p99_us = *value;
    if (key == "status") summary.status_errors = static_cast<uint64_t>(*value);
    if (key == "connect" || key == "read" || key == "write" || key == "timeout") {
      socket_errors += *value;
    }
  }
  summary.socket_errors = static_cast<uint64_t>(socket_errors);
  return summary;
}

Result<WrkSummary> RunWrk(const WrkOptions& options) {
  UniqueFd out(::open(options.output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!out) return Status::FromErrno("open " + options.output_path);
  const std::string connections = std::to_string(options.connections);
  proc::ChildOptions child{.argv = {options.binary, "-t1", "-c" + connections,
                                    "-d" + std::to_string(options.seconds) + "s", "--timeout",
                                    "10s", "--latency", "-s", options.script_path, options.url},
                           .stdout_fd = out.get(),
                           .stderr_fd = out.get()};
  Result<proc::ChildProcess> started = proc::ChildProcess::Start("wrk", child);
  if (!started.ok()) return started.status();
  proc::ChildProcess wrk = std::move(started).value();
  const auto deadline = std::chrono::seconds(options.seconds + 30);
  proc::WaitOutcome outcome = wrk.WaitUntil([] { return false; }, deadline, options.interrupted);
  if (outcome == proc::WaitOutcome::kInterrupted) {
    wrk.Kill();
    return Status::Error("interrupted");
  }
  if (outcome == proc::WaitOutcome::kTimedOut) {
    wrk.Kill();
    return Status::Error("wrk did not finish within " + std::to_string(deadline.count()) + " s");
  }
  const std::string output = ReadText(options.output_path);
  if (wrk.exit_description() != "exit 0") {
    return Status::Error("wrk ended with " + wrk.exit_description() + ":\n" + output);
  }
  Result<WrkSummary> summary = ParseWrkSummary(output);
  if (!summary.ok()) return Status::Error(summary.status().message() + ":\n" + output);
  return summary;
}

}  // namespace bulkhead::bench
