// SPDX-License-Identifier: MIT
// Shared pieces of the lifecycle integration tests (issue 4): a tally of the outcomes a test saw,
// checked against the cell's counters; waits on a cell's figures and on a replaced worker; control
// commands; bulkheadd log lines with their times; and a worker command whose crash loop the test
// ends by creating a file. Tally is thread-safe; the
// rest runs on the test's threads like Harness.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "tests/e2e/e2e_test.h"

namespace bulkhead::lifecycle_test {

using e2e::CellSpec;
using e2e::Describe;
using e2e::Harness;
using e2e::IsReply;
using e2e::TestOptions;
using ipc::Reason;
using ipc::ReplyStatus;

// What the test itself saw of one cell's requests. Every request sent is counted once, by its
// reply (or as abandoned when the test closed the connection before the reply).
class Tally {
 public:
  // One request sent; `reply` is what came back. A transport error counts as lost, which
  // ExpectCountersMatch reports: every request must get its one reply.
  void Count(const Result<ipc::Client::Reply>& reply);
  // One request sent whose connection the test closed before any reply: the cell counts it as
  // cancelled (it was queued) or dropped (it was running).
  void CountAbandoned();

  struct Counts {
    uint64_t sent = 0;
    uint64_t ok = 0;
    uint64_t rejected = 0;
    uint64_t failed = 0;
    uint64_t abandoned = 0;
    uint64_t lost = 0;
  };
  Counts counts() const;

 private:
  mutable std::mutex mu_;
  Counts counts_;
};

// Checks the cell's status counters against `tally`: ok, rejected and failed equal what the test
// saw, cancelled + dropped equal the abandoned requests, and ok + rejected + failed + cancelled +
// dropped = requests sent. REQUIRES: no request of the cell is still unanswered.
void ExpectCountersMatch(Harness& h, const std::string& cell, const Tally& tally);

// One request with `payload` on a new connection to `cell`, counted in `tally`: success when the
// reply is OK with `expected_payload`; the failure message shows the reply.
::testing::AssertionResult Served(Harness& h, const std::string& cell, std::string_view payload,
                                  const std::string& expected_payload, Tally& tally);

// The pid of the cell's worker now. Throws (a test failure) when no worker runs.
int WorkerPid(Harness& h, const std::string& cell);

// Waits (10 s at most) until the cell's status shows `value` at `key` ("running" 1, "state"
// "stopped"). The failure message shows the whole status and bulkheadd's log.
::testing::AssertionResult CellShows(Harness& h, const std::string& cell, const char* key,
                                     const nlohmann::json& value);

// Waits (10 s at most) until the cell is "running" with a worker other than `old_pid`: a restart
// is done. The failure message shows the whole status and bulkheadd's log.
::testing::AssertionResult NewWorkerRuns(Harness& h, const std::string& cell, int old_pid);

// A new connection to `cell` on which request `id` with `payload` was sent, its reads bounded by
// 10 s; the reply is for the test to Receive. Errors: connect, send.
Result<ipc::Client> SendOn(Harness& h, const std::string& cell, uint64_t id,
                           std::string_view payload);

// SendOn, then waits (10 s at most) until the cell's status shows `value` at `key`: the request
// has taken a slot ("running") or a queue place ("queued"). Errors: SendOn's, or the figure not
// reached (with CellShows' message).
Result<ipc::Client> SendThenWaitFor(Harness& h, const std::string& cell, uint64_t id,
                                    std::string_view payload, const char* key,
                                    const nlohmann::json& value);

// Sends {"command":COMMAND,"cell":CELL} on the control socket; the response object, or
// {"ok":false,"error":"..."} when none came within 5 s.
nlohmann::json Control(Harness& h, const std::string& command, const std::string& cell);

// One bulkheadd log line of a cell: when it was written (ms since the epoch, from its timestamp)
// and its msg text.
struct LogEvent {
  int64_t at_ms = 0;
  std::string message;
};
// The lines of `log` for `cell` whose message contains `needle`, in order.
std::vector<LogEvent> CellLogEvents(const std::string& log, std::string_view cell,
                                    std::string_view needle);

// A worker command: /bin/sh runs bulkhead-test-worker `worker_args` (exec, so the pid and fd 3
// are the worker's) when `flag` exists, and otherwise exits 1 at once. The test ends the crash
// loop by creating `flag`.
std::vector<std::string> WorkerWhenFlagExists(const std::string& flag,
                                              const std::vector<std::string>& worker_args = {});
// A worker command that exits 1 at its first `failures` starts and then runs bulkhead-test-worker
// (exec): a worker that crash-loops and recovers by itself. `count_file` holds the starts so far.
std::vector<std::string> WorkerAfterStarts(const std::string& count_file, int failures);
// True once `cell` runs a worker that has exec'd bulkhead-test-worker: a WorkerWhenFlagExists
// worker that saw its flag and stays. A worker merely `running` with a pid may be the /bin/sh that
// looked before the flag existed and is about to exit 1. Waits up to `timeout`.
bool WaitForWorkerThatSawTheFlag(Harness& h, const std::string& cell,
                                 std::chrono::milliseconds timeout = std::chrono::seconds(10));
// Creates (empty) or removes `path`; fails the test when it cannot.
void CreateFlag(const std::string& path);
void RemoveFlag(const std::string& path);

}  // namespace bulkhead::lifecycle_test
