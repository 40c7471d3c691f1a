// SPDX-License-Identifier: MIT
// The Prometheus endpoint against a live bulkheadd (docs/metrics.md): scraped with curl over a
// Unix socket and over TCP loopback, checked by `promtool check metrics`, its numbers equal to
// `bulkheadctl status --json` after a known mix of ok, rejected, failed and cancelled requests,
// and equal to `bulkheadctl metrics`. The counters reconcile at every instant under load, and
// `status CELL`, `status --watch` and the HTTP errors (404, 405) behave as documented.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/exit_status.h"
#include "tests/e2e/e2e_test.h"

namespace bulkhead::e2e {
namespace {

using ipc::Reason;
using ipc::ReplyStatus;
using ::testing::HasSubstr;

// `name` searched in $PATH, as the shell would (curl and promtool: scripts/install-deps.sh).
std::string FindProgram(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  ADD_FAILURE() << name << " not found in $PATH (scripts/install-deps.sh installs it)";
  return name;
}

// Runs `argv`, argv[0] searched in $PATH.
ProcessResult Run(std::vector<std::string> argv, std::string_view input = "") {
  argv[0] = FindProgram(argv[0]);
  Result<ProcessResult> run = RunProcess(argv, input, std::chrono::seconds(60));
  if (!run.ok()) {
    ADD_FAILURE() << "cannot run " << argv[0] << ": " << run.status().message();
    return ProcessResult{};
  }
  return std::move(run).value();
}

// Sample lines of an exposition: "name{labels}" -> value.
std::map<std::string, double> Samples(const std::string& text) {
  std::map<std::string, double> samples;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line.front() == '#') continue;
    size_t space = line.rfind(' ');
    samples[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return samples;
}

// Where the scrape goes: curl arguments for the endpoint's address.
struct Endpoint {
  std::vector<std::string> curl_args;  // up to the URL's host part
  std::string base_url;                // "http://127.0.0.1:40123" or "http://localhost"
};

ProcessResult Curl(const Endpoint& endpoint, const std::string& path,
                   const std::vector<std::string>& extra = {}) {
  std::vector<std::string> argv = {"curl", "--silent", "--show-error", "--max-time", "30"};
  argv.insert(argv.end(), endpoint.curl_args.begin(), endpoint.curl_args.end());
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.push_back(endpoint.base_url + path);
  return Run(argv);
}

CellSpec MetricsCell() {
  return CellSpec{.name = "m",
                  .max_concurrent = 1,
                  .max_queue = 1,
                  .queue_timeout = "60s",
                  .restart_delay = "10ms",
                  .extra_toml = kQuickStop};
}

// Runs the known mix on cell "m" (1 slot, 1 queue place) and leaves one request running:
// 3 ok, 2 failed (worker_error), 1 failed by a crash (worker_died, or worker_error when the exit
// comes late) followed by a restart, 1 rejected full, 1 cancelled.
void RunKnownMix(Harness& h, std::optional<ipc::Client>* holder) {
  for (int i = 0; i < 3; ++i) EXPECT_OK_REPLY(h.Call("m", "echo hi"), "hi");
  for (int i = 0; i < 2; ++i) {
    Result<ipc::Client::Reply> failed = h.Call("m", "fail boom");
    EXPECT_TRUE(IsReply(failed, ReplyStatus::kFailed, Reason::kWorkerError)) << Describe(failed);
  }
  Result<ipc::Client::Reply> crashed = h.Call("m", "crash");
  EXPECT_TRUE(crashed.ok() && crashed->header.status == ReplyStatus::kFailed) << Describe(crashed);
  ASSERT_TRUE(h.WaitForCell("m", [](const nlohmann::json& c) {
    return c["state"] == "running" && c["restarts"] == 1 && c["ok"] == 3 && c["failed"] == 3;
  })) << h.Status().dump();

  Result<ipc::Client> running = h.Connect("m");
  ASSERT_TRUE(running.ok()) << running.status().message();
  ASSERT_TRUE(running->Send(1, "hang").ok());
  ASSERT_TRUE(h.WaitForCell("m", [](const nlohmann::json& c) { return c["running"] == 1; }));
  Result<ipc::Client> queued = h.Connect("m");
  ASSERT_TRUE(queued.ok()) << queued.status().message();
  ASSERT_TRUE(queued->Send(1, "echo later").ok());
  ASSERT_TRUE(h.WaitForCell("m", [](const nlohmann::json& c) { return c["queued"] == 1; }));
  Result<ipc::Client::Reply> full = h.Call("m", "echo no room");
  EXPECT_TRUE(IsReply(full, ReplyStatus::kRejected, Reason::kFull)) << Describe(full);
  queued->Close();
  ASSERT_TRUE(h.WaitForCell("m", [](const nlohmann::json& c) { return c["cancelled"] == 1; }));
  holder->emplace(std::move(running).value());
}

// The identity of docs/control.md ("Counters") on one cell of a status response.
void ExpectCountersReconcile(const nlohmann::json& c) {
  const uint64_t in = c["admitted"].get<uint64_t>() + c["rejected_at_admission"].get<uint64_t>();
  const uint64_t out = c["ok"].get<uint64_t>() + c["rejected"].get<uint64_t>() +
                       c["failed"].get<uint64_t>() + c["cancelled"].get<uint64_t>() +
                       c["dropped"].get<uint64_t>() + c["undelivered"].get<uint64_t>() +
                       c["in_flight"].get<uint64_t>();
  EXPECT_EQ(in, out) << c.dump();
}

// Scrapes `endpoint`, checks it with promtool and against status --json and bulkheadctl metrics.
void CheckEndpoint(Harness& h, const Endpoint& endpoint) {
  std::optional<ipc::Client> holder;
  RunKnownMix(h, &holder);
  if (::testing::Test::HasFatalFailure()) return;

  ProcessResult scrape = Curl(endpoint, "/metrics", {"--include"});
  ASSERT_EQ(scrape.exit_code(), 0) << scrape.Describe();
  EXPECT_THAT(scrape.out, HasSubstr("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(scrape.out, HasSubstr("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"));
  const size_t body_at = scrape.out.find("\r\n\r\n");
  ASSERT_NE(body_at, std::string::npos) << scrape.out;
  const std::string text = scrape.out.substr(body_at + 4);

  ProcessResult promtool = Run({"promtool", "check", "metrics"}, text);
  EXPECT_EQ(promtool.exit_code(), 0) << promtool.Describe() << "\n" << text;

  nlohmann::json status = h.Cell("m");
  std::map<std::string, double> m = Samples(text);
  auto metric = [&m](const std::string& series) {
    auto it = m.find(series);
    EXPECT_NE(it, m.end()) << "no series " << series;
    return it == m.end() ? -1.0 : it->second;
  };
  auto requests = [&](const std::string& outcome, const std::string& reason) {
    return metric("bulkhead_requests_total{cell=\"m\",outcome=\"" + outcome + "\",reason=\"" +
                  reason + "\"}");
  };
  // The mix, as both sides report it.
  EXPECT_EQ(status["ok"], 3);
  EXPECT_EQ(status["failed"], 3);
  EXPECT_EQ(status["rejected_by_reason"]["full"], 1);
  EXPECT_EQ(status["cancelled"], 1);
  EXPECT_EQ(status["admitted"], 8);
  EXPECT_EQ(status["rejected_at_admission"], 1);
  EXPECT_EQ(status["in_flight"], 1);
  EXPECT_EQ(status["restarts_by_reason"]["crash"], 1);
  ExpectCountersReconcile(status);

  EXPECT_EQ(requests("ok", "none"), status["ok"].get<double>());
  for (const char* reason : {"full", "queue_timeout", "unavailable"}) {
    EXPECT_EQ(requests("rejected", reason), status["rejected_by_reason"][reason].get<double>())
        << reason;
  }
  for (const char* reason : {"worker_error", "worker_died", "oom_killed", "timeout", "stalled"}) {
    EXPECT_EQ(requests("failed", reason), status["failed_by_reason"][reason].get<double>())
        << reason;
  }
  EXPECT_EQ(requests("cancelled", "client_gone"), status["cancelled"].get<double>());
  EXPECT_EQ(requests("dropped", "client_gone"), status["dropped"].get<double>());
  EXPECT_EQ(requests("undelivered", "client_gone"), status["undelivered"].get<double>());
  EXPECT_EQ(metric("bulkhead_client_unsent_bytes{cell=\"m\"}"),
            status["unsent_bytes"].get<double>());
  EXPECT_EQ(metric("bulkhead_requests_admitted_total{cell=\"m\"}"), 8);
  EXPECT_EQ(metric("bulkhead_requests_rejected_at_admission_total{cell=\"m\"}"), 1);
  EXPECT_EQ(metric("bulkhead_requests_in_flight{cell=\"m\"}"), 1);
  EXPECT_EQ(metric("bulkhead_requests_running{cell=\"m\"}"), status["running"].get<double>());
  EXPECT_EQ(metric("bulkhead_requests_queued{cell=\"m\"}"), 0);
  EXPECT_EQ(metric("bulkhead_max_concurrent{cell=\"m\"}"), 1);
  EXPECT_EQ(metric("bulkhead_max_queue{cell=\"m\"}"), 1);
  EXPECT_EQ(metric("bulkhead_queue_timeout_seconds{cell=\"m\"}"),
            status["queue_timeout_ms"].get<double>() / 1000);
  EXPECT_EQ(metric("bulkhead_connections_refused_total{cell=\"m\"}"),
            status["connections_refused"].get<double>());
  EXPECT_EQ(metric("bulkhead_connection_limit{cell=\"m\"}"),
            status["connection_limit"].get<double>());
  EXPECT_EQ(metric("bulkhead_up{cell=\"m\"}"), 1);
  EXPECT_EQ(metric("bulkhead_cell_restarts_total{cell=\"m\",reason=\"crash\"}"), 1);
  EXPECT_EQ(metric("bulkhead_cell_starts_total{cell=\"m\"}"), status["starts"].get<double>());
  // Answered after dispatch: 3 ok + 3 failed; dispatched: those and the one still running.
  EXPECT_EQ(metric("bulkhead_request_duration_seconds_count{cell=\"m\"}"), 6);
  EXPECT_EQ(status["request_duration_count"], 6);
  EXPECT_EQ(metric("bulkhead_request_duration_seconds_bucket{cell=\"m\",le=\"+Inf\"}"), 6);
  EXPECT_EQ(metric("bulkhead_queue_wait_seconds_count{cell=\"m\"}"), 7);
  EXPECT_EQ(status["recent"]["requests"], 6);
  EXPECT_TRUE(status["recent"]["latency_p50_ms"].is_number()) << status.dump();
  EXPECT_TRUE(status["recent"]["latency_p99_ms"].is_number()) << status.dump();

  // bulkheadctl metrics prints the same series (values such as uptime may have moved).
  Result<ProcessResult> ctl = h.Ctl({"metrics"});
  ASSERT_TRUE(ctl.ok()) << ctl.status().message();
  ASSERT_EQ(ctl->exit_code(), 0) << ctl->Describe();
  std::map<std::string, double> from_ctl = Samples(ctl->out);
  ASSERT_EQ(from_ctl.size(), m.size());
  for (const auto& [series, value] : m) {
    ASSERT_TRUE(from_ctl.contains(series)) << series;
    if (series.starts_with("bulkhead_requests_") || series.starts_with("bulkhead_queue_wait") ||
        series.starts_with("bulkhead_request_duration")) {
      EXPECT_EQ(from_ctl[series], value) << series;
    }
  }

  // Only GET /metrics.
  ProcessResult missing =
      Curl(endpoint, "/other", {"--output", "/dev/null", "--write-out", "%{http_code}"});
  EXPECT_EQ(missing.out, "404") << missing.Describe();
  ProcessResult post =
      Curl(endpoint, "/metrics",
           {"--output", "/dev/null", "--write-out", "%{http_code}", "--data", "x=1"});
  EXPECT_EQ(post.out, "405") << post.Describe();
}

TEST(Metrics, UnixSocketScrapeIsValidAndMatchesStatus) {
  TempDir sockets;
  const std::string path = sockets.Join("metrics.sock");
  Harness h(TestOptions({MetricsCell()}, "metrics_listen = \"" + path + "\"\n"));
  ASSERT_STARTED(h);
  EXPECT_EQ(h.Status()["supervisor"]["metrics_listen"], path);
  CheckEndpoint(h, Endpoint{{"--unix-socket", path}, "http://localhost"});
}

TEST(Metrics, TcpScrapeIsValidAndMatchesStatus) {
  // Port 0: the kernel picks a free port, and status reports the address bound.
  Harness h(TestOptions({MetricsCell()}, "metrics_listen = \"127.0.0.1:0\"\n"));
  ASSERT_STARTED(h);
  nlohmann::json bound = h.Status()["supervisor"]["metrics_listen"];
  ASSERT_TRUE(bound.is_string()) << h.Status().dump();
  ASSERT_TRUE(bound.get<std::string>().starts_with("127.0.0.1:")) << bound;
  EXPECT_NE(bound.get<std::string>(), "127.0.0.1:0");
  CheckEndpoint(h, Endpoint{{}, "http://" + bound.get<std::string>()});
}

TEST(Metrics, CountersReconcileAtEveryInstantUnderLoad) {
  Harness h(TestOptions({CellSpec{.name = "load",
                                  .max_concurrent = 2,
                                  .max_queue = 2,
                                  .queue_timeout = "50ms",
                                  .extra_toml = kQuickStop}}));
  ASSERT_STARTED(h);
  std::atomic<bool> stop = false;
  std::vector<std::thread> clients;
  for (int t = 0; t < 8; ++t) {
    clients.emplace_back([&h, &stop, t] {
      const char* commands[] = {"echo x", "sleep 20", "fail no", "sleep 80"};
      for (int i = 0; !stop; ++i) {
        Result<ipc::Client> c = h.Connect("load");
        if (!c.ok() || !c->SetTimeout(std::chrono::seconds(10)).ok()) continue;
        if (!c->Send(1, commands[(t + i) % 4]).ok()) continue;
        // Every third client hangs up without reading: cancelled or dropped.
        if (i % 3 == 0) continue;
        (void)c->Receive();
      }
    });
  }
  for (int i = 0; i < 40; ++i) {
    nlohmann::json c = h.Cell("load");
    ASSERT_TRUE(c.is_object()) << h.Status().dump();
    ExpectCountersReconcile(c);
  }
  stop = true;
  for (std::thread& t : clients) t.join();
  ASSERT_TRUE(h.WaitForCell("load", [](const nlohmann::json& c) { return c["in_flight"] == 0; }))
      << h.Status().dump();
  nlohmann::json c = h.Cell("load");
  ExpectCountersReconcile(c);
  EXPECT_GT(c["admitted"].get<uint64_t>(), 0u);
}

TEST(Metrics, InFlightLeavesOutRequestsAnsweredByTimeout) {
  // request_timeout answers the client while the worker keeps the slot: the request is failed
  // (an outcome), still running, and no longer in flight.
  Harness h(TestOptions(
      {CellSpec{.name = "t",
                .max_concurrent = 1,
                .extra_toml = std::string(kQuickStop) + "request_timeout = \"100ms\"\n"}}));
  ASSERT_STARTED(h);
  Result<ipc::Client::Reply> reply = h.Call("t", "hang");
  EXPECT_TRUE(IsReply(reply, ReplyStatus::kFailed, Reason::kTimeout)) << Describe(reply);
  nlohmann::json c = h.Cell("t");
  EXPECT_EQ(c["running"], 1) << c.dump();
  EXPECT_EQ(c["in_flight"], 0) << c.dump();
  EXPECT_EQ(c["failed_by_reason"]["timeout"], 1) << c.dump();
  ExpectCountersReconcile(c);
}

// A refused reload shows in the metrics until a reload applies, as Prometheus'
// prometheus_config_last_reload_successful: what the alert BulkheadConfigReloadFailed reads
// (packaging/prometheus/bulkhead-alerts.yml).
TEST(Metrics, ARefusedReloadShowsUntilAReloadApplies) {
  const CellSpec cell = MetricsCell();
  Harness h(TestOptions({cell}));
  ASSERT_STARTED(h);
  auto metrics = [&h] {
    Result<ProcessResult> ctl = h.Ctl({"metrics"});
    EXPECT_TRUE(ctl.ok() && ctl->exit_code() == 0) << (ctl.ok() ? ctl->Describe() : "");
    return ctl.ok() ? Samples(ctl->out) : std::map<std::string, double>{};
  };
  auto reload = [&h] {
    Result<ProcessResult> run = h.Ctl({"reload"});
    return run.ok() ? run->exit_code() : -1;
  };
  std::map<std::string, double> m = metrics();
  EXPECT_EQ(m["bulkhead_config_reloads_total{result=\"applied\"}"], 0);
  EXPECT_EQ(m["bulkhead_config_reloads_total{result=\"refused\"}"], 0);
  EXPECT_EQ(m["bulkhead_config_last_reload_successful"], 1);

  CellSpec broken = cell;
  broken.max_concurrent = 0;
  h.RewriteConfig({broken});
  EXPECT_EQ(reload(), kExitConfigInvalid);
  m = metrics();
  EXPECT_EQ(m["bulkhead_config_reloads_total{result=\"refused\"}"], 1);
  EXPECT_EQ(m["bulkhead_config_last_reload_successful"], 0);
  // SIGHUP is counted the same way.
  ASSERT_EQ(::kill(h.pid(), SIGHUP), 0);
  EXPECT_TRUE(WaitFor([&] {
    return metrics()["bulkhead_config_reloads_total{result=\"refused\"}"] == 2;
  })) << h.Log();

  h.RewriteConfig({cell});
  EXPECT_EQ(reload(), kExitOk);
  m = metrics();
  EXPECT_EQ(m["bulkhead_config_reloads_total{result=\"applied\"}"], 1);
  EXPECT_EQ(m["bulkhead_config_reloads_total{result=\"refused\"}"], 2);
  EXPECT_EQ(m["bulkhead_config_last_reload_successful"], 1);
}

TEST(Metrics, StatusLongFormAndWatch) {
  Harness h(TestOptions({MetricsCell()}));
  ASSERT_STARTED(h);
  EXPECT_OK_REPLY(h.Call("m", "echo hi"), "hi");
  Result<ProcessResult> long_form = h.Ctl({"status", "m"});
  ASSERT_TRUE(long_form.ok()) << long_form.status().message();
  EXPECT_EQ(long_form->exit_code(), 0) << long_form->Describe();
  for (const char* figure :
       {"● m - running for ", "pid:", "uptime:", "restarts:", "last exit:", "running:", "queued:",
        "admitted:", "latency:", "queue wait:", "policy:", "limits:"}) {
    EXPECT_THAT(long_form->out, HasSubstr(figure));
  }
  // The stop signal by name (it read stop_signal=15).
  EXPECT_THAT(long_form->out, HasSubstr(" stop_signal=SIGTERM"));
  Result<ProcessResult> table = h.Ctl({"status"});
  ASSERT_TRUE(table.ok());
  EXPECT_THAT(table->out, HasSubstr("WAIT P99"));

  // An interval starts with a digit; a bad one is a usage error. Any other word is the cell.
  Result<ProcessResult> bad = h.Ctl({"status", "--watch", "5soon"});
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->exit_code(), kExitUsage) << bad->Describe();
  EXPECT_THAT(bad->err, HasSubstr("--watch: invalid duration \"5soon\""));
  Result<ProcessResult> unknown = h.Ctl({"status", "--watch", "soon"});
  ASSERT_TRUE(unknown.ok());
  EXPECT_EQ(unknown->exit_code(), kExitFailure) << unknown->Describe();
  EXPECT_THAT(unknown->err, HasSubstr("bulkheadctl: no cell named soon"));
}

}  // namespace
}  // namespace bulkhead::e2e
