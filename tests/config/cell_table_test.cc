// SPDX-License-Identifier: MIT
// A [cells.NAME] table (config/cell_table.h): names, required keys, admission, lifecycle, command,
// environment and output keys, their defaults and every error with its file:line:col.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "tests/config/config_test_util.h"

namespace bulkhead::config {
namespace {

using std::chrono::milliseconds;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ParseConfig, NestedTableInEnvironment) {
  EXPECT_THAT(Errors(R"([supervisor]
runtime_dir = "/run/bh"
[cells.a]
command = ["x", ["y"]]
max_concurrent = 1
[cells.a.environment.NESTED]
X = "1"
)"),
              ElementsAre(At(4, 17, "cells.a.command[1]", "expected string, got array"),
                          At(6, 1, "cells.a.environment.NESTED", "expected string, got table")));
}

TEST(ParseConfig, OutOfRangeNumbers) {
  EXPECT_THAT(
      Errors(R"([supervisor]
runtime_dir = "/run/bh"
max_payload_bytes = 0
[cells.a]
command = ["x"]
max_concurrent = 0
max_queue = -1
[cells.b]
command = ["x"]
max_concurrent = 65536
max_queue = 1000001
)"),
      ElementsAre(At(3, 21, "supervisor.max_payload_bytes",
                     "must be between 1 and 1073741824 (1 GiB), got 0"),
                  At(6, 18, "cells.a.max_concurrent", "must be between 1 and 65535, got 0"),
                  At(7, 13, "cells.a.max_queue", "must be between 0 and 1000000, got -1"),
                  At(10, 18, "cells.b.max_concurrent", "must be between 1 and 65535, got 65536"),
                  At(11, 13, "cells.b.max_queue", "must be between 0 and 1000000, got 1000001")));
  EXPECT_THAT(Errors(R"([supervisor]
max_payload_bytes = 1073741825
[cells.a]
command = ["x"]
max_concurrent = 1
)"),
              ElementsAre(At(2, 21, "supervisor.max_payload_bytes",
                             "must be between 1 and 1073741824 (1 GiB), got 1073741825")));
}

TEST(ParseConfig, MalformedDurations) {
  EXPECT_THAT(
      Errors(R"([supervisor]
runtime_dir = "/run/bh"
[cells.a]
command = ["x"]
max_concurrent = 1
queue_timeout = "1.5s"
restart_delay = "-1s"
[cells.b]
command = ["x"]
max_concurrent = 1
queue_timeout = "0s"
restart_delay = "0s"
)"),
      ElementsAre(At(6, 17, "cells.a.queue_timeout", ParseDuration("1.5s").status().message()),
                  At(7, 17, "cells.a.restart_delay", ParseDuration("-1s").status().message()),
                  At(11, 17, "cells.b.queue_timeout", "must be greater than 0")));
}

TEST(ParseConfig, MissingRequiredKeysPointAtTheCellTable) {
  EXPECT_THAT(Errors(R"([supervisor]
runtime_dir = "/run/bh"
[cells.a]
max_queue = 1
[cells.b]
command = ["x"]
)"),
              ElementsAre(At(3, 1, "cells.a.command", "missing required key"),
                          At(3, 1, "cells.a.max_concurrent", "missing required key"),
                          At(5, 1, "cells.b.max_concurrent", "missing required key")));
}

TEST(ParseConfig, InvalidCellNames) {
  const std::string too_long(65, 'a');
  const std::string message =
      "cell name must be 1 to 64 characters of A-Z, a-z, 0-9, '_' and '-', not starting with '-'";
  EXPECT_THAT(
      Errors(R"([supervisor]
runtime_dir = "/run/bh"
[cells."bad name"]
command = ["x"]
max_concurrent = 1
[cells.)" + too_long +
             R"(]
command = ["x"]
max_concurrent = 1
[cells.""]
command = ["x"]
max_concurrent = 1
[cells."a.b"]
command = ["x"]
max_concurrent = 1
[cells.ok_Name-2]
command = ["x"]
max_concurrent = 1
)"),
      ElementsAre(At(3, 8, "cells.\"bad name\"", message), At(6, 8, "cells." + too_long, message),
                  At(9, 8, "cells.\"\"", message), At(12, 8, "cells.\"a.b\"", message)));
}

// Issue 13: "--help" would become --help.sock and read as an option of bulkheadctl.
TEST(ParseConfig, CellNamesStartingWithADashAreRefused) {
  const std::string message =
      "cell name must be 1 to 64 characters of A-Z, a-z, 0-9, '_' and '-', not starting with '-'";
  EXPECT_THAT(Errors(R"([supervisor]
runtime_dir = "/run/bh"
[cells.--help]
command = ["x"]
max_concurrent = 1
[cells.-x]
command = ["x"]
max_concurrent = 1
[cells.a-]
command = ["x"]
max_concurrent = 1
)"),
              ElementsAre(At(3, 8, "cells.--help", message), At(6, 8, "cells.-x", message)));
}

TEST(ParseConfig, BadCommands) {
  EXPECT_THAT(Errors(R"([supervisor]
runtime_dir = "/run/bh"
[cells.a]
command = []
max_concurrent = 1
[cells.b]
command = ["", "arg"]
max_concurrent = 1
[cells.c]
command = ["x\u0000y"]
max_concurrent = 1
)"),
              ElementsAre(At(4, 11, "cells.a.command",
                             "must not be empty; give the program and its arguments"),
                          At(7, 12, "cells.b.command[0]", "the program must not be empty"),
                          At(10, 12, "cells.c.command[0]", "must not contain a NUL character")));
}

TEST(ParseConfig, BadEnvironmentNames) {
  const std::string message =
      "an environment variable name must be non-empty and contain no '=' or NUL";
  EXPECT_THAT(Errors(R"([supervisor]
runtime_dir = "/run/bh"
[cells.a]
command = ["x"]
max_concurrent = 1
environment = { "A=B" = "1", "" = "2", GOOD = "3" }
)"),
              ElementsAre(At(6, 17, "cells.a.environment.\"A=B\"", message),
                          At(6, 30, "cells.a.environment.\"\"", message)));
}

TEST(ParseConfig, LifecycleDefaults) {
  const Config config = MustParse(R"([cells.a]
command = ["x"]
max_concurrent = 1
)");
  ASSERT_EQ(config.cells.size(), 1u);
  const CellConfig& cell = config.cells[0];
  EXPECT_EQ(cell.restart, RestartMode::kAlways);
  EXPECT_EQ(cell.restart_delay, milliseconds(100));
  EXPECT_EQ(cell.restart_max_delay, milliseconds(300'000));  // Kubernetes' CrashLoopBackOff cap
  EXPECT_EQ(cell.restart_reset_after, milliseconds(10'000));
  EXPECT_EQ(cell.start_limit_burst, 5u);
  EXPECT_EQ(cell.start_limit_interval, milliseconds(60'000));
  EXPECT_EQ(cell.start_limit_action, StartLimitAction::kBackoff);  // keep starting: issue 25
  EXPECT_EQ(cell.request_timeout, milliseconds(0));
  EXPECT_EQ(cell.stall_timeout, milliseconds(0));
  EXPECT_EQ(cell.ready, ReadyMode::kExec);
  EXPECT_EQ(cell.worker_connections, WorkerConnections::kOnePerRequest);
  EXPECT_EQ(cell.watchdog, milliseconds(0));
  EXPECT_EQ(cell.stop_signal, SIGTERM);
  EXPECT_EQ(cell.stop_timeout, milliseconds(5000));
}

TEST(ParseConfig, LifecycleKeysAllSet) {
  const Config config = MustParse(R"([cells.a]
command = ["x"]
max_concurrent = 1
restart = "on-failure"
restart_delay = "250ms"
restart_max_delay = "1m"
restart_reset_after = "2m"
start_limit_burst = 1000
start_limit_interval = "1h"
request_timeout = "3s"
stall_timeout = "10s"
ready = "notify"
watchdog = "5s"
stop_signal = "HUP"
stop_timeout = "1s500ms"
[cells.b]
command = ["x"]
max_concurrent = 1
restart = "never"
start_limit_burst = 1
)");
  ASSERT_EQ(config.cells.size(), 2u);
  const CellConfig& a = config.cells[0];
  EXPECT_EQ(a.restart, RestartMode::kOnFailure);
  EXPECT_EQ(a.restart_delay, milliseconds(250));
  EXPECT_EQ(a.restart_max_delay, milliseconds(60'000));
  EXPECT_EQ(a.restart_reset_after, milliseconds(120'000));
  EXPECT_EQ(a.start_limit_burst, 1000u);
  EXPECT_EQ(a.start_limit_interval, milliseconds(3'600'000));
  EXPECT_EQ(a.request_timeout, milliseconds(3000));
  EXPECT_EQ(a.stall_timeout, milliseconds(10'000));
  EXPECT_EQ(a.ready, ReadyMode::kNotify);
  EXPECT_EQ(a.watchdog, milliseconds(5000));
  EXPECT_EQ(a.stop_signal, SIGHUP);
  EXPECT_EQ(a.stop_timeout, milliseconds(1500));
  EXPECT_EQ(config.cells[1].restart, RestartMode::kNever);
  EXPECT_EQ(config.cells[1].start_limit_burst, 1u);
}

TEST(ParseConfig, ZeroTurnsOffTimeoutsWatchdogAndStartLimit) {
  const Config config = MustParse(R"([cells.a]
command = ["x"]
max_concurrent = 1
restart_delay = "0s"
restart_max_delay = "0s"
start_limit_interval = "0s"
request_timeout = "0s"
stall_timeout = "0s"
watchdog = "0s"
)");
  ASSERT_EQ(config.cells.size(), 1u);
  const CellConfig& cell = config.cells[0];
  EXPECT_EQ(cell.restart_delay, milliseconds(0));
  EXPECT_EQ(cell.restart_max_delay, milliseconds(0));
  EXPECT_EQ(cell.start_limit_interval, milliseconds(0));
  EXPECT_EQ(cell.request_timeout, milliseconds(0));
  EXPECT_EQ(cell.stall_timeout, milliseconds(0));
  EXPECT_EQ(cell.watchdog, milliseconds(0));
}

TEST(ParseConfig, StopSignalNamesWithOrWithoutSigPrefix) {
  const std::vector<std::pair<std::string, int>> names = {
      {"TERM", SIGTERM}, {"INT", SIGINT},   {"HUP", SIGHUP},  {"QUIT", SIGQUIT},
      {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"KILL", SIGKILL}};
  for (const auto& [name, number] : names) {
    for (const std::string& written : {name, "SIG" + name}) {
      const Config config = MustParse(
          "[cells.a]\ncommand = [\"x\"]\nmax_concurrent = 1\n"
          "stop_signal = \"" +
          written + "\"\n");
      ASSERT_EQ(config.cells.size(), 1u) << written;
      EXPECT_EQ(config.cells[0].stop_signal, number) << written;
    }
  }
}

TEST(ParseConfig, BadLifecycleValues) {
  const std::string signals =
      "must be one of SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGKILL (the SIG prefix "
      "may be left out); got ";
  EXPECT_THAT(
      Errors(R"([supervisor]
runtime_dir = "/run/bh"
[cells.a]
command = ["x"]
max_concurrent = 1
restart = "sometimes"
ready = "notfy"
stop_signal = "SIGFOO"
start_limit_burst = 0
restart_reset_after = "0s"
stop_timeout = "0s"
watchdog = "1.5s"
[cells.b]
command = ["x"]
max_concurrent = 1
restart = "alwyas"
stop_signal = "sigterm"
start_limit_burst = 1001
[cells.c]
command = ["x"]
max_concurrent = 1
stop_signal = 15
restart = true
ready = "Notify"
stall_timeout = 5
stop_timout = "1s"
[cells.d]
command = ["x"]
max_concurrent = 1
stop_signal = "TREM"
)"),
      ElementsAre(
          At(6, 11, "cells.a.restart",
             "must be one of always, on-failure, never; got \"sometimes\""),
          At(7, 9, "cells.a.ready",
             "must be one of exec, notify, http:/PATH; got \"notfy\"; did you mean \"notify\"?"),
          At(8, 15, "cells.a.stop_signal", signals + "\"SIGFOO\""),
          At(9, 21, "cells.a.start_limit_burst", "must be between 1 and 1000, got 0"),
          At(10, 23, "cells.a.restart_reset_after", "must be greater than 0"),
          At(11, 16, "cells.a.stop_timeout", "must be greater than 0"),
          At(12, 12, "cells.a.watchdog", ParseDuration("1.5s").status().message()),
          At(16, 11, "cells.b.restart",
             "must be one of always, on-failure, never; got \"alwyas\"; did you mean "
             "\"always\"?"),
          At(17, 15, "cells.b.stop_signal", signals + "\"sigterm\"; did you mean \"SIGTERM\"?"),
          At(18, 21, "cells.b.start_limit_burst", "must be between 1 and 1000, got 1001"),
          At(22, 15, "cells.c.stop_signal",
             "expected string, got integer (write the signal's name, such as \"SIGTERM\")"),
          At(23, 11, "cells.c.restart", "expected string, got boolean"),
          At(24, 9, "cells.c.ready",
             "must be one of exec, notify, http:/PATH; got \"Notify\"; did you mean \"notify\"?"),
          At(25, 17, "cells.c.stall_timeout",
             "expected string, got integer (a duration is a string such as \"500ms\" or "
             "\"2s\")"),
          At(26, 1, "cells.c.stop_timout", "unknown key; did you mean \"stop_timeout\"?"),
          At(30, 15, "cells.d.stop_signal", signals + "\"TREM\"; did you mean \"SIGTERM\"?")));
}

// A duration's groups read as a clock's: "1m90s" and "500ms1s" are refused alike, at the value's
// position, with the spelling to write.
TEST(ParseConfig, ADurationWithAGroupToCarryIsRefusedWithItsSpelling) {
  EXPECT_THAT(
      Errors(R"([cells.a]
command = ["x"]
max_concurrent = 1
request_timeout = "1m90s"
stop_timeout = "500ms1s"
)"),
      ElementsAre(At(4, 19, "cells.a.request_timeout",
                     "invalid duration \"1m90s\": \"90s\" is 1m or more, after a group "
                     "in m (a group must be less than one of the unit before it); write "
                     "\"2m30s\"; expected one or more <integer><unit> groups, largest "
                     "unit first, such as \"500ms\", \"2s\" or \"1m30s\" (units: h, m, "
                     "s, ms)"),
                  At(5, 16, "cells.a.stop_timeout", ParseDuration("500ms1s").status().message())));
  EXPECT_THAT(ParseDuration("500ms1s").status().message(), HasSubstr("write \"1500ms\""));
}

// worker_connections: "one-per-request" (the default) or "multiplex"; anything else names the
// key and its position.
TEST(ParseConfig, WorkerConnectionsIsOnePerRequestOrMultiplex) {
  const Config config = MustParse(R"([cells.a]
command = ["x"]
max_concurrent = 1
worker_connections = "multiplex"
[cells.b]
command = ["x"]
max_concurrent = 1
worker_connections = "one-per-request"
)");
  ASSERT_EQ(config.cells.size(), 2u);
  EXPECT_EQ(config.cells[0].worker_connections, WorkerConnections::kMultiplex);
  EXPECT_EQ(config.cells[1].worker_connections, WorkerConnections::kOnePerRequest);

  EXPECT_THAT(Errors(R"([cells.a]
command = ["x"]
max_concurrent = 1
worker_connections = "multiplexed"
[cells.b]
command = ["x"]
max_concurrent = 1
worker_connections = 4
)"),
              ElementsAre(At(4, 22, "cells.a.worker_connections",
                             "must be one of one-per-request, multiplex; got \"multiplexed\"; did "
                             "you mean \"multiplex\"?"),
                          At(8, 22, "cells.b.worker_connections", "expected string, got integer")));
}

// HTTP/1.1 answers in order on a connection and has no request id: an HTTP cell cannot
// multiplex; the error points at worker_connections, whichever key came first.
TEST(ParseConfig, HttpCellRefusesMultiplexedWorkerConnections) {
  EXPECT_THAT(Errors(R"([supervisor]
runtime_dir = "/run/bh"
[cells.a]
command = ["x"]
max_concurrent = 1
protocol = "http"
worker_connections = "multiplex"
[cells.b]
command = ["x"]
max_concurrent = 1
worker_connections = "multiplex"
protocol = "http"
)"),
              ElementsAre(At(7, 22, "cells.a.worker_connections",
                             "\"multiplex\" needs protocol = \"frames\": HTTP/1.1 cannot "
                             "multiplex requests on one connection; leave out worker_connections "
                             "(\"one-per-request\") for an HTTP cell"),
                          At(11, 22, "cells.b.worker_connections",
                             "\"multiplex\" needs protocol = \"frames\": HTTP/1.1 cannot "
                             "multiplex requests on one connection; leave out worker_connections "
                             "(\"one-per-request\") for an HTTP cell")));
  const Config config = MustParse(R"([cells.a]
command = ["x"]
max_concurrent = 1
protocol = "http"
worker_connections = "one-per-request"
[cells.b]
command = ["x"]
max_concurrent = 1
protocol = "frames"
worker_connections = "multiplex"
)");
  EXPECT_EQ(config.cells[0].worker_connections, WorkerConnections::kOnePerRequest);
  EXPECT_EQ(config.cells[1].worker_connections, WorkerConnections::kMultiplex);
}

TEST(ParseConfig, ReadyHttpTakesAnOriginFormPath) {
  const Config config = MustParse(R"([cells.a]
command = ["x"]
max_concurrent = 1
protocol = "http"
ready = "http:/healthz?deep=1"
[cells.b]
command = ["x"]
max_concurrent = 1
ready = "notify"
)");
  EXPECT_EQ(config.cells[0].ready, ReadyMode::kHttp);
  EXPECT_EQ(config.cells[0].ready_http_path, "/healthz?deep=1");
  EXPECT_EQ(ReadyText(config.cells[0]), "http:/healthz?deep=1");
  EXPECT_EQ(config.cells[1].ready_http_path, "");
  EXPECT_EQ(ReadyText(config.cells[1]), "notify");

  EXPECT_THAT(Errors(R"([supervisor]
runtime_dir = "/run/bh"
[cells.a]
command = ["x"]
max_concurrent = 1
ready = "http:healthz"
[cells.b]
command = ["x"]
max_concurrent = 1
ready = "http:/health z"
[cells.c]
command = ["x"]
max_concurrent = 1
ready = "http:"
)"),
              ElementsAre(At(6, 9, "cells.a.ready",
                             "the path after \"http:\" must start with '/', as in "
                             "\"http:/healthz\"; got \"http:healthz\""),
                          At(10, 9, "cells.b.ready",
                             "the path after \"http:\" must be visible ASCII, without spaces "
                             "(percent-encode the rest), as in \"http:/healthz\"; got "
                             "\"http:/health z\""),
                          At(14, 9, "cells.c.ready",
                             "the path after \"http:\" must start with '/', as in "
                             "\"http:/healthz\"; got \"http:\"")));
  // A frames cell's worker socket speaks frames: an HTTP probe could never pass.
  EXPECT_THAT(Errors(R"([cells.a]
command = ["x"]
max_concurrent = 1
ready = "http:/healthz"
)"),
              ElementsAre(At(4, 9, "cells.a.ready",
                             "\"http:/healthz\" probes the worker over HTTP, which needs "
                             "protocol = \"http\" (the worker of a frames cell speaks frames, "
                             "docs/protocol.md); use \"exec\" or \"notify\"")));
}

TEST(ParseConfig, ProtocolAndHeaderTimeout) {
  const Config config = MustParse(R"([cells.a]
command = ["x"]
max_concurrent = 1
[cells.b]
command = ["x"]
max_concurrent = 1
protocol = "http"
header_timeout = "2s"
[cells.c]
command = ["x"]
max_concurrent = 1
header_timeout = "0s"
protocol = "http"
[cells.d]
command = ["x"]
max_concurrent = 1
protocol = "frames"
)");
  ASSERT_EQ(config.cells.size(), 4u);
  EXPECT_EQ(config.cells[0].protocol, Protocol::kFrames);
  EXPECT_EQ(config.cells[0].header_timeout, milliseconds(10'000));
  EXPECT_EQ(config.cells[1].protocol, Protocol::kHttp);
  EXPECT_EQ(config.cells[1].header_timeout, milliseconds(2'000));
  EXPECT_EQ(config.cells[2].protocol, Protocol::kHttp);
  EXPECT_EQ(config.cells[2].header_timeout, milliseconds(0));
  EXPECT_EQ(config.cells[3].protocol, Protocol::kFrames);
}

// idle_timeout (issue 25 section 2): 60 s unless written, 0 turns it off, on either protocol; it
// is a duration like the other timeouts, refused at its place when it is not one.
TEST(ParseConfig, IdleTimeoutDefaultsToAMinuteAndZeroTurnsItOff) {
  const Config config = MustParse(R"([cells.a]
command = ["x"]
max_concurrent = 1
[cells.b]
command = ["x"]
max_concurrent = 1
idle_timeout = "5s"
[cells.c]
command = ["x"]
max_concurrent = 1
protocol = "http"
idle_timeout = "0s"
)");
  ASSERT_EQ(config.cells.size(), 3u);
  EXPECT_EQ(config.cells[0].idle_timeout, milliseconds(60'000));
  EXPECT_EQ(config.cells[1].idle_timeout, milliseconds(5'000));
  EXPECT_EQ(config.cells[2].idle_timeout, milliseconds(0));
  EXPECT_THAT(Errors(R"([cells.a]
command = ["x"]
max_concurrent = 1
idle_timeout = "soon"
)"),
              ElementsAre(At(4, 16, "cells.a.idle_timeout",
                             "invalid duration \"soon\": missing number before unit \"soon\"; "
                             "expected one or more <integer><unit> groups, largest unit first, "
                             "such as \"500ms\", \"2s\" or \"1m30s\" (units: h, m, s, ms)")));
}

// header_timeout bounds reading an HTTP request head: on a frames cell (the default protocol or
// written) it would do nothing, and is refused where it was written, as ready = "http:/PATH" is.
TEST(ParseConfig, HeaderTimeoutOnAFramesCellIsRefusedWithItsPlace) {
  const std::string message =
      "bounds the time to read an HTTP request head, which needs protocol = \"http\" (a frames "
      "cell reads frames, docs/protocol.md); remove it";
  EXPECT_THAT(Errors(R"([cells.a]
command = ["x"]
max_concurrent = 1
header_timeout = "2s"
[cells.b]
command = ["x"]
header_timeout = "0s"
protocol = "frames"
max_concurrent = 1
)"),
              ElementsAre(At(4, 18, "cells.a.header_timeout", message),
                          At(7, 18, "cells.b.header_timeout", message)));
}

TEST(ParseConfig, BadProtocolNamesItsPlace) {
  EXPECT_THAT(Errors(R"([supervisor]
runtime_dir = "/run/bh"
[cells.a]
command = ["x"]
max_concurrent = 1
protocol = "htp"
[cells.b]
command = ["x"]
max_concurrent = 1
protocol = 1
header_timeout = "soon"
)"),
              ElementsAre(At(6, 12, "cells.a.protocol",
                             "must be one of frames, http; got \"htp\"; did you mean \"http\"?"),
                          At(10, 12, "cells.b.protocol", "expected string, got integer"),
                          At(11, 18, "cells.b.header_timeout",
                             "invalid duration \"soon\": missing number before unit \"soon\"; "
                             "expected one or more <integer><unit> groups, largest unit first, "
                             "such as \"500ms\", \"2s\" or \"1m30s\" (units: h, m, s, ms)")));
}

TEST(ParseConfig, StartLimitActionIsBackoffOrFail) {
  const Config config = MustParse(R"([cells.a]
command = ["x"]
max_concurrent = 1
start_limit_action = "fail"
)");
  ASSERT_EQ(config.cells.size(), 1u);
  EXPECT_EQ(config.cells[0].start_limit_action, StartLimitAction::kFail);
  EXPECT_THAT(Errors(R"([cells.a]
command = ["x"]
max_concurrent = 1
start_limit_action = "give-up"
)"),
              ElementsAre(At(4, 22, "cells.a.start_limit_action",
                             "must be one of backoff, fail; got \"give-up\"")));
}

TEST(ParseConfig, ConcurrencyIsFixedUnlessAdaptiveWithAFloorAndATolerance) {
  const Config fixed = MustParse(R"([cells.a]
command = ["x"]
max_concurrent = 8
)");
  ASSERT_EQ(fixed.cells.size(), 1u);
  EXPECT_EQ(fixed.cells[0].concurrency, ConcurrencyMode::kFixed);
  EXPECT_EQ(fixed.cells[0].min_concurrent, 1u);
  EXPECT_EQ(fixed.cells[0].latency_tolerance, 50u);
  const Config adaptive = MustParse(R"([cells.a]
command = ["x"]
max_concurrent = 64
concurrency = "adaptive"
min_concurrent = 4
latency_tolerance = "25%"
)");
  ASSERT_EQ(adaptive.cells.size(), 1u);
  EXPECT_EQ(adaptive.cells[0].concurrency, ConcurrencyMode::kAdaptive);
  EXPECT_EQ(adaptive.cells[0].max_concurrent, 64u);
  EXPECT_EQ(adaptive.cells[0].min_concurrent, 4u);
  EXPECT_EQ(adaptive.cells[0].latency_tolerance, 25u);
  EXPECT_EQ(ConcurrencyModeName(ConcurrencyMode::kAdaptive), "adaptive");
}

TEST(ParseConfig, AdaptiveKeysAreRefusedWhereTheyMeanNothingOrBoundNothing) {
  EXPECT_THAT(Errors(R"([cells.a]
command = ["x"]
max_concurrent = 4
concurrency = "elastic"
)"),
              ElementsAre(At(4, 15, "cells.a.concurrency",
                             "must be one of fixed, adaptive; got \"elastic\"")));
  EXPECT_THAT(
      Errors(R"([cells.a]
command = ["x"]
max_concurrent = 4
min_concurrent = 2
latency_tolerance = "20%"
)"),
      ElementsAre(At(4, 18, "cells.a.min_concurrent",
                     "min_concurrent bounds the adaptive limit, which needs concurrency = "
                     "\"adaptive\" (a fixed cell runs max_concurrent at once); remove it or "
                     "set concurrency"),
                  At(5, 21, "cells.a.latency_tolerance",
                     "latency_tolerance bounds the adaptive limit, which needs concurrency = "
                     "\"adaptive\" (a fixed cell runs max_concurrent at once); remove it or "
                     "set concurrency")));
  EXPECT_THAT(Errors(R"([cells.a]
command = ["x"]
concurrency = "adaptive"
min_concurrent = 9
max_concurrent = 8
)"),
              ElementsAre(At(4, 18, "cells.a.min_concurrent",
                             "must be at most max_concurrent (8, the adaptive limit's ceiling), "
                             "got 9")));
  EXPECT_THAT(
      Errors(R"([cells.a]
command = ["x"]
concurrency = "adaptive"
max_concurrent = 8
min_concurrent = 0
)"),
      ElementsAre(At(5, 18, "cells.a.min_concurrent", "must be between 1 and 65535, got 0")));
  for (const char* bad : {"0%", "401%", "50", "12.5%", "-5%", "%"}) {
    SCOPED_TRACE(bad);
    EXPECT_THAT(Errors(std::string(R"([cells.a]
command = ["x"]
concurrency = "adaptive"
max_concurrent = 8
latency_tolerance = ")") +
                       bad + "\"\n"),
                ElementsAre(At(5, 21, "cells.a.latency_tolerance",
                               std::string("must be a whole percentage from \"1%\" to \"400%\" "
                                           "(how far the mean service time may rise above its "
                                           "base), got \"") +
                                   bad + "\"")));
  }
}

TEST(ParseConfig, RestartMaxDelayMayNotBeBelowRestartDelay) {
  EXPECT_THAT(Errors(R"([supervisor]
runtime_dir = "/run/bh"
[cells.a]
command = ["x"]
max_concurrent = 1
restart_max_delay = "1m"
restart_delay = "1m30s"
[cells.b]
command = ["x"]
max_concurrent = 1
restart_max_delay = "50ms"
)"),
              ElementsAre(At(6, 21, "cells.a.restart_max_delay",
                             "must be at least restart_delay (\"1m30s\"), got \"1m\""),
                          At(11, 21, "cells.b.restart_max_delay",
                             "must be at least restart_delay (\"100ms\", the default), got "
                             "\"50ms\"")));
  // Equal is fine; left out, the cap follows a restart_delay above its 5m default.
  const Config config = MustParse(R"([cells.a]
command = ["x"]
max_concurrent = 1
restart_delay = "2s"
restart_max_delay = "2s"
[cells.b]
command = ["x"]
max_concurrent = 1
restart_delay = "6m"
)");
  ASSERT_EQ(config.cells.size(), 2u);
  EXPECT_EQ(config.cells[0].restart_max_delay, milliseconds(2000));
  EXPECT_EQ(config.cells[1].restart_max_delay, milliseconds(360'000));
}

TEST(ParseConfig, EmptyPaths) {
  EXPECT_THAT(Errors(R"([supervisor]
runtime_dir = ""
[cells.a]
command = ["x"]
max_concurrent = 1
socket = ""
working_directory = ""
)"),
              ElementsAre(At(2, 15, "supervisor.runtime_dir", "must not be empty"),
                          At(6, 10, "cells.a.socket", "must not be empty"),
                          At(7, 21, "cells.a.working_directory", "must not be empty")));
}

TEST(ParseConfig, WorkerOutputKeys) {
  const CellConfig defaults = MustParse(CellWith("")).cells[0];
  EXPECT_EQ(defaults.output, OutputMode::kLog);
  EXPECT_EQ(defaults.log_line_max, 4096u);
  EXPECT_EQ(defaults.log_rate_limit_burst, 1000u);
  EXPECT_EQ(defaults.log_rate_limit_interval, std::chrono::seconds(10));

  const CellConfig set = MustParse(CellWith("output = \"null\"\nlog_line_max = \"64K\"\n"
                                            "log_rate_limit_burst = 0\n"
                                            "log_rate_limit_interval = \"1m\""))
                             .cells[0];
  EXPECT_EQ(set.output, OutputMode::kNull);
  EXPECT_EQ(set.log_line_max, 65536u);
  EXPECT_EQ(set.log_rate_limit_burst, 0u);
  EXPECT_EQ(set.log_rate_limit_interval, std::chrono::minutes(1));
  EXPECT_EQ(MustParse(CellWith("output = \"inherit\"\nlog_line_max = 64")).cells[0].output,
            OutputMode::kInherit);

  EXPECT_THAT(Errors(CellWith("log_line_max = 63")),
              ElementsAre(At(4, 16, "cells.a.log_line_max",
                             "must be between 64 and 1048576 bytes (1M), got 63")));
  EXPECT_THAT(Errors(CellWith("log_line_max = \"2M\"")),
              ElementsAre(At(4, 16, "cells.a.log_line_max",
                             "must be between 64 and 1048576 bytes (1M), got \"2M\"")));
  EXPECT_THAT(Errors(CellWith("log_rate_limit_burst = 1000001")),
              ElementsAre(At(4, 24, "cells.a.log_rate_limit_burst",
                             "must be between 0 and 1000000, got 1000001")));
  std::vector<std::string> bad_output = Errors(CellWith("output = \"journal\""));
  ASSERT_EQ(bad_output.size(), 1u);
  EXPECT_THAT(bad_output[0], ::testing::HasSubstr("cells.a.output"));
  EXPECT_THAT(bad_output[0], ::testing::HasSubstr("must be one of log, inherit, null"));
}

// cells.NAME.max_unsent_bytes and client_write_timeout: defaults (following max_payload_bytes),
// values, and positioned errors.
TEST(ParseConfig, MaxUnsentBytesAndClientWriteTimeout) {
  const CellConfig defaults = MustParse(CellWith("")).cells[0];
  EXPECT_EQ(defaults.max_unsent_bytes, uint64_t{64} << 20);
  EXPECT_EQ(defaults.client_write_timeout, std::chrono::seconds(30));
  // With 64 MiB payloads the default holds two full-size replies and 64 KiB.
  EXPECT_EQ(MustParse("[supervisor]\nmax_payload_bytes = 67108864\n" + CellWith(""))
                .cells[0]
                .max_unsent_bytes,
            2 * ((uint64_t{64} << 20) + 16) + 65536);

  const CellConfig set =
      MustParse(CellWith("max_unsent_bytes = \"8M\"\nclient_write_timeout = \"0s\"")).cells[0];
  EXPECT_EQ(set.max_unsent_bytes, uint64_t{8} << 20);
  EXPECT_EQ(set.client_write_timeout, std::chrono::milliseconds(0));

  EXPECT_THAT(Errors(CellWith("max_unsent_bytes = \"4M\"")),
              ElementsAre(At(4, 20, "cells.a.max_unsent_bytes",
                             "must hold one full-size reply: at least max_payload_bytes + 16 "
                             "(4194320 bytes), got \"4M\"")));
  EXPECT_THAT(
      Errors("[supervisor]\nmax_payload_bytes = 1024\n" + CellWith("max_unsent_bytes = 1000")),
      ElementsAre(At(6, 20, "cells.a.max_unsent_bytes",
                     "must hold one full-size reply: at least max_payload_bytes + 16 "
                     "(1040 bytes), got 1000")));
  std::vector<std::string> bad_timeout = Errors(CellWith("client_write_timeout = 30"));
  ASSERT_EQ(bad_timeout.size(), 1u);
  EXPECT_THAT(bad_timeout[0], ::testing::HasSubstr(":4:24: cells.a.client_write_timeout"));
}

// cells.NAME.max_connections: its default, its range, and positioned errors.
TEST(ParseConfig, MaxConnectionsDefaultAndRange) {
  EXPECT_EQ(MustParse(R"([supervisor]
runtime_dir = "/run/bh"
[cells.a]
command = ["x"]
max_concurrent = 1
)")
                .cells[0]
                .max_connections,
            1024u);
  const Config config = MustParse(R"([supervisor]
runtime_dir = "/run/bh"
[cells.a]
command = ["x"]
max_concurrent = 1
max_connections = 1
[cells.b]
command = ["x"]
max_concurrent = 1
max_connections = 1048576
)");
  EXPECT_EQ(config.cells[0].max_connections, 1u);
  EXPECT_EQ(config.cells[1].max_connections, 1048576u);
  EXPECT_THAT(
      Errors(R"([supervisor]
runtime_dir = "/run/bh"
[cells.a]
command = ["x"]
max_concurrent = 1
max_connections = 0
[cells.b]
command = ["x"]
max_concurrent = 1
max_connections = 1048577
[cells.c]
command = ["x"]
max_concurrent = 1
max_connections = "many"
)"),
      ElementsAre(
          At(6, 19, "cells.a.max_connections", "must be between 1 and 1048576, got 0"),
          At(10, 19, "cells.b.max_connections", "must be between 1 and 1048576, got 1048577"),
          At(14, 19, "cells.c.max_connections", "expected integer, got string")));
}

}  // namespace
}  // namespace bulkhead::config
