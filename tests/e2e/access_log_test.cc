// SPDX-License-Identifier: MIT
// The access log end to end (docs/access-log.md): bulkheadd with `access_log` set, a frames cell
// and an HTTP cell each sent requests that end ok, rejected and failed; the file holds one line per
// request, in logfmt, with the fields each outcome has, and the metrics count the lines.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/exit_status.h"
#include "tests/e2e/e2e_test.h"
#include "tests/e2e/http_conn.h"

namespace bulkhead::e2e {
namespace {

using ipc::Reason;
using ipc::ReplyStatus;

// One logfmt line as key -> value, quoted values unescaped for \" and \\ only (enough here).
std::map<std::string, std::string> ParseLine(const std::string& line) {
  std::map<std::string, std::string> fields;
  size_t i = line.find(' ');  // after the timestamp
  fields["time"] = line.substr(0, i);
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    const size_t eq = line.find('=', i);
    if (eq == std::string::npos) break;
    const std::string key = line.substr(i, eq - i);
    std::string value;
    i = eq + 1;
    if (i < line.size() && line[i] == '"') {
      for (++i; i < line.size() && line[i] != '"'; ++i) {
        if (line[i] == '\\' && i + 1 < line.size()) ++i;
        value.push_back(line[i]);
      }
      ++i;
    } else {
      const size_t end = std::min(line.find(' ', i), line.size());
      value = line.substr(i, end - i);
      i = end;
    }
    fields[key] = value;
  }
  return fields;
}

std::vector<std::map<std::string, std::string>> ReadLines(const std::string& path) {
  std::vector<std::map<std::string, std::string>> lines;
  const std::string text = testing::ReadFile(path).value_or("");
  size_t start = 0;
  for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1) {
    lines.push_back(ParseLine(text.substr(start, nl - start)));
  }
  return lines;
}

// The lines of `cell`, in the order written.
std::vector<std::map<std::string, std::string>> LinesOf(
    const std::vector<std::map<std::string, std::string>>& all, const std::string& cell) {
  std::vector<std::map<std::string, std::string>> out;
  for (const auto& line : all) {
    if (line.at("cell") == cell) out.push_back(line);
  }
  return out;
}

std::string Dump(const std::vector<std::map<std::string, std::string>>& lines) {
  std::string out;
  for (const auto& line : lines) {
    for (const auto& [key, value] : line) out += key + "=" + value + " ";
    out += "\n";
  }
  return out;
}

TEST(AccessLogE2e, EveryFrameAndHttpRequestGetsOneLineWithItsOutcome) {
  HarnessOptions options =
      TestOptions({CellSpec{.name = "frames",
                            .max_concurrent = 1,
                            .max_queue = 0,
                            .extra_toml = std::string(kQuickStop)},
                   CellSpec{.name = "web",
                            .command = {"/usr/bin/python3", BULKHEAD_HTTP_WORKER},
                            .max_concurrent = 1,
                            .max_queue = 0,
                            .extra_toml = "protocol = \"http\"\n" + std::string(kQuickStop)}});
  TempDir logs;
  const std::string path = logs.path() + "/access.log";
  options.supervisor_toml = "access_log = \"" + path + "\"\n";
  Harness h(std::move(options));
  ASSERT_STARTED(h);
  const int frames_pid = h.Cell("frames")["pid"].get<int>();
  const int web_pid = h.Cell("web")["pid"].get<int>();

  // Frames: ok, rejected full (the only slot taken), failed worker_died.
  EXPECT_OK_REPLY(h.Call("frames", "echo hello"), "hello");
  {
    Result<ipc::Client> busy = h.Connect("frames");
    ASSERT_TRUE(busy.ok());
    // It runs until the test creates `go`: the slot stays taken however slow the machine is.
    const std::string go = h.dir() + "/go.flag";
    ASSERT_TRUE(busy->Send(7, "wait-file " + go).ok());
    ASSERT_TRUE(h.WaitForCell("frames", [](const nlohmann::json& c) { return c["running"] == 1; }));
    Result<ipc::Client::Reply> full = h.Call("frames", "echo late");
    EXPECT_TRUE(IsReply(full, ReplyStatus::kRejected, Reason::kFull)) << Describe(full);
    testing::CreateFlag(go);
    Result<ipc::Client::Reply> slept = busy->Receive();
    EXPECT_TRUE(IsReply(slept, ReplyStatus::kOk, Reason::kNone)) << Describe(slept);
  }
  Result<ipc::Client::Reply> died = h.Call("frames", "exit 3");
  EXPECT_TRUE(IsReply(died, ReplyStatus::kFailed, Reason::kWorkerDied)) << Describe(died);

  // HTTP: 200, the worker's own 500 (ok: the worker answered), 503 full, 502 worker_died.
  {
    std::optional<HttpConn> conn = HttpConn::Open(h.CellSocket("web"));
    ASSERT_TRUE(conn.has_value());
    ASSERT_TRUE(conn->Send("GET /hello HTTP/1.1\r\nHost: web\r\nX-Request-Id: trace-1\r\n\r\n"));
    std::optional<Response> hello = conn->Read();
    ASSERT_TRUE(hello && hello->status == 200) << Describe(hello);
    ASSERT_TRUE(conn->Send("GET /status/500 HTTP/1.1\r\nHost: web\r\n\r\n"));
    std::optional<Response> error = conn->Read();
    ASSERT_TRUE(error && error->status == 500) << Describe(error);
  }
  {
    std::optional<HttpConn> busy = HttpConn::Open(h.CellSocket("web"));
    ASSERT_TRUE(busy && busy->Send("GET /sleep/400 HTTP/1.1\r\nHost: web\r\n\r\n"));
    ASSERT_TRUE(h.WaitForCell("web", [](const nlohmann::json& c) { return c["running"] == 1; }));
    std::optional<HttpConn> next = HttpConn::Open(h.CellSocket("web"));
    ASSERT_TRUE(next && next->Send("GET /hello HTTP/1.1\r\nHost: web\r\n\r\n"));
    std::optional<Response> full = next->Read();
    EXPECT_TRUE(full && full->status == 503) << Describe(full);
    std::optional<Response> slept = busy->Read();
    EXPECT_TRUE(slept && slept->status == 200) << Describe(slept);
  }
  {
    std::optional<HttpConn> conn = HttpConn::Open(h.CellSocket("web"));
    ASSERT_TRUE(conn && conn->Send("GET /exit HTTP/1.1\r\nHost: web\r\n\r\n"));
    std::optional<Response> exited = conn->Read();
    EXPECT_TRUE(exited && exited->status == 502) << Describe(exited);
  }

  // 4 frame requests and 5 HTTP requests: 9 lines, written by the log's thread soon after.
  std::vector<std::map<std::string, std::string>> all;
  WaitFor([&] { return (all = ReadLines(path)).size() >= 9; }, std::chrono::seconds(10));
  ASSERT_EQ(all.size(), 9u) << Dump(all) << h.Log();

  const auto frames = LinesOf(all, "frames");
  ASSERT_EQ(frames.size(), 4u) << Dump(all);
  EXPECT_EQ(frames[0].at("outcome"), "ok");
  EXPECT_EQ(frames[0].at("reason"), "");
  EXPECT_EQ(frames[0].at("bytes_in"), std::to_string(std::string("echo hello").size()));
  EXPECT_EQ(frames[0].at("bytes_out"), "5");
  EXPECT_EQ(frames[0].at("worker_pid"), std::to_string(frames_pid));
  EXPECT_EQ(frames[0].count("method"), 0u);
  EXPECT_EQ(frames[0].count("status"), 0u);
  // A Unix socket's client by its credentials: this test process.
  EXPECT_EQ(frames[0].at("client"),
            "pid:" + std::to_string(::getpid()) + ",uid:" + std::to_string(::getuid()));
  // The rejection is answered before the running request's reply.
  EXPECT_EQ(frames[1].at("outcome"), "rejected");
  EXPECT_EQ(frames[1].at("reason"), "full");
  EXPECT_EQ(frames[1].at("worker_pid"), "0");
  EXPECT_EQ(frames[1].at("worker_ms"), "0.000");
  EXPECT_EQ(frames[1].at("bytes_in"), "0") << "a rejected request sent nothing to the worker";
  EXPECT_EQ(frames[2].at("outcome"), "ok");
  EXPECT_EQ(frames[2].at("id"), "7");
  // Its time at the worker is measured (it waited there for the test's file), not left 0.
  EXPECT_GT(std::stod(frames[2].at("worker_ms")), 0.0);
  EXPECT_EQ(frames[3].at("outcome"), "failed");
  EXPECT_EQ(frames[3].at("reason"), "worker_died");
  EXPECT_EQ(frames[3].at("worker_pid"), std::to_string(frames_pid));

  const auto web = LinesOf(all, "web");
  ASSERT_EQ(web.size(), 5u) << Dump(all);
  EXPECT_EQ(web[0].at("method"), "GET");
  EXPECT_EQ(web[0].at("target"), "/hello");
  EXPECT_EQ(web[0].at("id"), "trace-1");  // the client's X-Request-Id
  EXPECT_EQ(web[0].at("outcome"), "ok");
  EXPECT_EQ(web[0].at("status"), "200");
  EXPECT_EQ(web[0].at("worker_pid"), std::to_string(web_pid));
  EXPECT_GT(std::stoull(web[0].at("bytes_in")), 0u);
  EXPECT_GT(std::stoull(web[0].at("bytes_out")), 0u);
  EXPECT_EQ(web[1].at("target"), "/status/500");
  EXPECT_EQ(web[1].at("outcome"), "ok");
  EXPECT_EQ(web[1].at("status"), "500");
  EXPECT_FALSE(web[1].at("id").empty());  // bulkheadd's own X-Request-Id
  EXPECT_NE(web[1].at("id"), "trace-1");
  EXPECT_EQ(web[2].at("outcome"), "rejected");
  EXPECT_EQ(web[2].at("reason"), "full");
  EXPECT_EQ(web[2].at("status"), "503");
  EXPECT_EQ(web[2].at("bytes_out"), "0");
  EXPECT_EQ(web[2].at("bytes_in"), "0") << "a rejected request sent nothing to the worker";
  EXPECT_EQ(web[3].at("target"), "/sleep/400");
  EXPECT_EQ(web[3].at("status"), "200");
  EXPECT_EQ(web[4].at("target"), "/exit");
  EXPECT_EQ(web[4].at("outcome"), "failed");
  EXPECT_EQ(web[4].at("reason"), "worker_died");
  EXPECT_EQ(web[4].at("status"), "502");
  for (const auto& line : all) EXPECT_EQ(line.count("limit"), 0u);  // fixed cells

  Result<ProcessResult> metrics = h.Ctl({"metrics"});
  ASSERT_TRUE(metrics.ok());
  EXPECT_NE(metrics->out.find("bulkhead_access_log_lines_total 9"), std::string::npos)
      << metrics->out;
  EXPECT_NE(metrics->out.find("bulkhead_access_log_dropped_total 0"), std::string::npos);

  // Requests whose clients left while the worker ran them: `dropped`, and the answer the worker
  // gave reached no one, so no status and no bytes out (both used to show the worker's).
  {
    // Both workers died above (exit 3, /exit): with no queue, a request sent before the restarted
    // worker is ready is refused at once and never runs (a busy host's slow python start made
    // the web wait below time out in a fresh-clone run).
    for (const char* cell : {"frames", "web"}) {
      ASSERT_TRUE(h.WaitForCell(cell, [](const nlohmann::json& c) {
        return c["restarts"] == 1 && c["state"] == "running";
      })) << cell;
    }
    const std::string go = h.dir() + "/go2.flag";
    {
      Result<ipc::Client> leaving = h.Connect("frames");
      ASSERT_TRUE(leaving.ok());
      ASSERT_TRUE(leaving->Send(8, "wait-file " + go).ok());
      ASSERT_TRUE(
          h.WaitForCell("frames", [](const nlohmann::json& c) { return c["running"] == 1; }));
    }  // the client leaves
    testing::CreateFlag(go);
    // Held by a flag, not a sleep: a timed request could end before a poll of a busy host saw
    // it running.
    const std::string go_web = h.dir() + "/go3.flag";
    std::optional<HttpConn> gone = HttpConn::Open(h.CellSocket("web"));
    ASSERT_TRUE(gone &&
                gone->Send("GET /wait?file=" + go_web + " HTTP/1.1\r\nHost: web\r\n\r\n"));
    ASSERT_TRUE(h.WaitForCell("web", [](const nlohmann::json& c) { return c["running"] == 1; }));
    gone.reset();
    testing::CreateFlag(go_web);
  }
  WaitFor([&] { return (all = ReadLines(path)).size() >= 11; }, std::chrono::seconds(10));
  ASSERT_EQ(all.size(), 11u) << Dump(all) << h.Log();
  for (size_t i = 9; i < 11; ++i) {
    EXPECT_EQ(all[i].at("outcome"), "dropped") << Dump(all);
    EXPECT_EQ(all[i].at("reason"), "client_gone") << "as the metrics say";
    EXPECT_EQ(all[i].count("status"), 0u) << Dump(all);
    EXPECT_EQ(all[i].at("bytes_out"), "0") << Dump(all);
    EXPECT_NE(all[i].at("bytes_in"), "0") << "dispatched: its request went to the worker";
  }
}


// A reload opens the access log's file again (logrotate's postrotate). When that fails, the
// reload says so and fails (exit 3 here: the file's own check refuses a directory that is gone,
// at its key), and the lines keep going to the file already open: nothing is lost.
TEST(AccessLogE2e, AReloadThatCannotReopenTheFileFailsAndKeepsWritingTheOldOne) {
  HarnessOptions options = TestOptions(
      {CellSpec{.name = "frames", .max_concurrent = 1, .extra_toml = std::string(kQuickStop)}});
  TempDir logs;
  const std::string dir = logs.path() + "/current";
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  const std::string path = dir + "/access.log";
  options.supervisor_toml = "access_log = \"" + path + "\"\n";
  Harness h(std::move(options));
  ASSERT_STARTED(h);
  EXPECT_OK_REPLY(h.Call("frames", "echo one"), "one");

  // The directory rotated away, as `mv current old` would: the path cannot be created again.
  const std::string moved = logs.path() + "/old";
  ASSERT_EQ(::rename(dir.c_str(), moved.c_str()), 0);
  Result<ProcessResult> reload = h.Ctl({"reload"});
  ASSERT_TRUE(reload.ok()) << reload.status().message();
  EXPECT_EQ(reload->exit_code(), kExitConfigInvalid) << reload->Describe();
  EXPECT_NE(reload->err.find("supervisor.access_log: cannot create " + path + ": directory " + dir +
                             " does not exist"),
            std::string::npos)
      << reload->Describe();
  EXPECT_NE(reload->err.find("supervisor.access_log: not reopened, still writing the old file"),
            std::string::npos)
      << reload->Describe();

  EXPECT_OK_REPLY(h.Call("frames", "echo two"), "two");
  std::vector<std::map<std::string, std::string>> all;
  WaitFor([&] { return (all = ReadLines(moved + "/access.log")).size() >= 2; },
          std::chrono::seconds(10));
  ASSERT_EQ(all.size(), 2u) << Dump(all) << h.Log();
  EXPECT_EQ(all[1].at("bytes_in"), std::to_string(std::string("echo two").size()));
}

// The access log on a named pipe whose reader stopped reading (a log shipper that hangs): the
// writer thread stalls on it. A reload then froze bulkheadd (the reopen waited for that thread),
// and SIGTERM never ended it. Now requests are served meanwhile, the reload answers, and
// bulkheadd exits by itself once it gave the reader its grace.
TEST(AccessLogE2e, AStalledNamedPipeReaderNeitherFreezesAReloadNorHoldsTheShutdown) {
  HarnessOptions options = TestOptions(
      {CellSpec{.name = "frames", .max_concurrent = 1, .extra_toml = std::string(kQuickStop)}});
  TempDir logs;
  const std::string fifo = logs.path() + "/access.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const UniqueFd reader(::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));  // never reads
  ASSERT_TRUE(reader.valid());
  options.supervisor_toml = "access_log = \"" + fifo + "\"\n";
  Harness h(std::move(options));
  ASSERT_STARTED(h);
  // Until the named pipe is full (its own writer is told no room), and more lines after.
  const UniqueFd probe(::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC));
  ASSERT_TRUE(probe.valid());
  auto full = [&] {
    pollfd fd{probe.get(), POLLOUT, 0};
    return ::poll(&fd, 1, 0) == 0;
  };
  int sent = 0;
  for (; sent < 5000 && !full(); ++sent) {
    Result<ipc::Client::Reply> reply = h.Call("frames", "echo fill");
    ASSERT_TRUE(IsReply(reply, ReplyStatus::kOk, Reason::kNone)) << Describe(reply);
  }
  ASSERT_TRUE(full()) << "the named pipe never filled after " << sent << " requests";
  for (int i = 0; i < 400; ++i) EXPECT_OK_REPLY(h.Call("frames", "echo more"), "more");

  Result<ProcessResult> reload = h.Ctl({"reload"});
  ASSERT_TRUE(reload.ok()) << reload.status().message();
  EXPECT_EQ(reload->exit_code(), kExitOk) << reload->Describe();
  EXPECT_OK_REPLY(h.Call("frames", "echo after"), "after");

  Result<int> stopped = h.Stop();
  ASSERT_TRUE(stopped.ok()) << stopped.status().message();
  EXPECT_TRUE(WIFEXITED(*stopped) && WEXITSTATUS(*stopped) == 0) << *stopped;
  // The lines the close's grace cost are told before bulkheadd says it exits (they were told
  // after it).
  const std::string log = h.Log();
  const size_t dropped = log.rfind("access log: ");
  const size_t exiting = log.find("every cell stopped; exiting");
  ASSERT_NE(dropped, std::string::npos) << log;
  ASSERT_NE(exiting, std::string::npos) << log;
  EXPECT_LT(dropped, exiting) << log;
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// A named-pipe access_log is warned of at startup (it needs its reader); a reload that keeps the
// path does not warn again (every reload repeated it), one that changes it does.
TEST(AccessLogE2e, TheNamedPipeWarningRepeatsAtAReloadOnlyWhenThePathChanged) {
  const CellSpec cell{.name = "frames", .extra_toml = std::string(kQuickStop)};
  HarnessOptions options = TestOptions({cell});
  TempDir logs;
  const std::string fifo = logs.path() + "/access.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const UniqueFd reader(::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  ASSERT_TRUE(reader.valid());
  options.supervisor_toml = "access_log = \"" + fifo + "\"\n";
  Harness h(std::move(options));
  ASSERT_STARTED(h);
  const std::string warning = fifo + " is a named pipe";
  EXPECT_EQ(Count(h.Log(), warning), 1u) << h.Log();

  Result<ProcessResult> same = h.Ctl({"reload"});
  ASSERT_TRUE(same.ok()) << same.status().message();
  EXPECT_EQ(same->exit_code(), kExitOk) << same->Describe();
  EXPECT_EQ(same->err.find(warning), std::string::npos) << same->Describe();
  EXPECT_EQ(Count(h.Log(), warning), 1u) << h.Log();

  // Another named pipe: news (the reload is refused, access_log needs a restart).
  const std::string other = logs.path() + "/other.fifo";
  ASSERT_EQ(::mkfifo(other.c_str(), 0600), 0);
  h.RewriteConfig({cell}, "access_log = \"" + other + "\"\n");
  Result<ProcessResult> changed = h.Ctl({"reload"});
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  EXPECT_NE(changed->err.find(other + " is a named pipe"), std::string::npos)
      << changed->Describe();
}

}  // namespace
}  // namespace bulkhead::e2e
