// SPDX-License-Identifier: MIT
// bulkhead-demo [--bin-dir BUILD_DIR]: replays both C# transcripts of the bulkhead seed with real
// processes. For each transcript it writes a config into a fresh /tmp/bh-demo-XXXXXX, starts
// bulkheadd (gateway and echo workers; proc/bulkheadd_process.h starts, waits on and stops it),
// drives blocking clients (ipc/client.h) and prints the transcript's lines on stdout, and only
// those. Running and queued figures are read from the supervisor's control socket, rejections from
// the REJECTED reply's RejectDetail. Exits 0 when every step worked, 1 otherwise, with the failed
// step and bulkheadd's log on stderr. Single-threaded; every wait polls with a deadline
// (kStepTimeout).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/exit_status.h"
#include "base/status.h"
#include "base/temp_dir.h"
#include "base/unique_fd.h"
#include "ipc/client.h"
#include "ipc/frame.h"
#include "proc/bulkheadd_process.h"

namespace bulkhead::demo {
namespace {

using proc::BulkheaddProcess;
using proc::CellStatus;
using proc::TomlString;
using std::chrono::milliseconds;

// Longest wait for one step: a reply, a figure on the control socket, bulkheadd's start. Only a
// broken build or a stalled machine gets near it; the whole demo takes well under a second.
constexpr milliseconds kStepTimeout{10000};
// Time bulkheadd gets between SIGTERM and SIGKILL (it gives its own workers 5 s).
constexpr milliseconds kStopTimeout{10000};

#define DEMO_RETURN_IF_ERROR(expr)     \
  do {                                 \
    ::bulkhead::Status status_ = expr; \
    if (!status_.ok()) return status_; \
  } while (false)

// One transcript line on stdout, flushed at once so that it never reorders with stderr.
void PrintLine(const std::string& line) {
  std::fputs(line.c_str(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

// Before a scenario: one line on stderr saying what to look for in the transcript that follows.
// On stderr, so that stdout stays the seed's transcript, byte for byte (tests/seeds/); stdout is
// flushed line by line, so on a terminal the guide comes right before its scenario.
void Guide(const std::string& what) {
  std::fprintf(stderr, "bulkhead-demo: look for: %s\n", what.c_str());
  std::fflush(stderr);
}

Status WriteFile(const std::string& path, std::string_view content) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd) return Status::FromErrno("open " + path);
  while (!content.empty()) {
    ssize_t n = ::write(fd.get(), content.data(), content.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno("write " + path);
    content.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

// Opens gate NAME of bulkhead-gateway: writes `first_line` to DIR/NAME.tmp, then renames it to
// DIR/NAME, so that the worker never reads a half-written file (examples/gateway.cc).
Status OpenGate(const std::string& gates_dir, const std::string& name,
                const std::string& first_line) {
  const std::string path = gates_dir + "/" + name;
  DEMO_RETURN_IF_ERROR(WriteFile(path + ".tmp", first_line + "\n"));
  if (::rename((path + ".tmp").c_str(), path.c_str()) != 0) {
    return Status::FromErrno("rename " + path + ".tmp");
  }
  return Status::Ok();
}

// Polls cell `name` until its figures are running=`running` queued=`queued`.
Status WaitForFigures(BulkheaddProcess& daemon, const std::string& name, uint64_t running,
                      uint64_t queued) {
  Result<CellStatus> reached = daemon.WaitForCell(
      name, [&](const CellStatus& c) { return c.running == running && c.queued == queued; },
      kStepTimeout);
  return reached.ok() ? Status::Ok() : reached.status();
}

// Starts bulkheadd on the workspace's config and waits until each of `cells` runs a worker.
Status StartDaemon(BulkheaddProcess& daemon, const std::vector<std::string>& cells) {
  Status started = daemon.Start();
  if (!started.ok()) {
    return Status::Error(started.message() + " (build it with `make demo`, or pass --bin-dir)");
  }
  return daemon.WaitUntilRunning(cells, kStepTimeout);
}

// A client connected to a cell's front socket; every blocking call gives up after kStepTimeout.
Result<ipc::Client> ConnectTo(const std::string& socket) {
  Result<ipc::Client> client = ipc::Client::Connect(socket);
  if (!client.ok()) return client;
  DEMO_RETURN_IF_ERROR(client->SetTimeout(kStepTimeout));
  return client;
}

// The next reply on `client`, which must answer request `id`.
Result<ipc::Client::Reply> ReceiveReply(ipc::Client& client, uint64_t id) {
  Result<ipc::Client::Reply> reply = client.Receive();
  if (reply.ok() && reply->header.request_id != id) {
    return Status::Error("reply to request " + std::to_string(reply->header.request_id) +
                         ", expected " + std::to_string(id));
  }
  return reply;
}

// First transcript's wording: the answer itself, or "rejected by CELL".
std::string DescribeShort(const ipc::Client::Reply& reply) {
  switch (reply.header.status) {
    case ipc::ReplyStatus::kOk:
      return reply.payload;
    case ipc::ReplyStatus::kRejected: {
      std::optional<ipc::RejectDetail> detail = ipc::DecodeRejectDetail(reply.payload);
      return "rejected by " + (detail ? detail->cell : std::string("?"));
    }
    default:
      return std::string(ipc::StatusName(reply.header.status)) + " " +
             ipc::ReasonName(reply.header.reason) + ": " + reply.payload;
  }
}

// Extended transcript's wording (the C# Describe): "ok: VALUE", "rejected: CELL full (running R,
// queued Q)", "failed: MESSAGE".
std::string DescribeLong(const ipc::Client::Reply& reply) {
  switch (reply.header.status) {
    case ipc::ReplyStatus::kOk:
      return "ok: " + reply.payload;
    case ipc::ReplyStatus::kRejected: {
      std::optional<ipc::RejectDetail> detail = ipc::DecodeRejectDetail(reply.payload);
      if (!detail) return "rejected: (no RejectDetail)";
      return "rejected: " + detail->cell + " " + ipc::ReasonName(reply.header.reason) +
             " (running " + std::to_string(detail->running) + ", queued " +
             std::to_string(detail->queued) + ")";
    }
    case ipc::ReplyStatus::kFailed:
      return "failed: " + reply.payload;
    default:
      return "bad request: " + reply.payload;
  }
}

// Where one transcript runs: DIR/NAME/{config.toml, bulkheadd.log, gates/, run/}.
struct Workspace {
  std::string root;
  std::string config;
  std::string log;
  std::string gates;
  std::string runtime_dir;
  std::string control_socket;
};

Result<Workspace> MakeWorkspace(const std::string& parent, const std::string& name) {
  Workspace ws;
  ws.root = parent + "/" + name;
  ws.config = ws.root + "/config.toml";
  ws.log = ws.root + "/bulkheadd.log";
  ws.gates = ws.root + "/gates";
  ws.runtime_dir = ws.root + "/run";
  ws.control_socket = ws.runtime_dir + "/control.sock";
  for (const std::string& dir : {ws.root, ws.gates}) {
    if (::mkdir(dir.c_str(), 0755) != 0) return Status::FromErrno("mkdir " + dir);
  }
  return ws;
}

std::string SupervisorTable(const Workspace& ws) {
  return "[supervisor]\nruntime_dir = " + TomlString(ws.runtime_dir) + "\n";
}

// [cells.NAME] with `command`, `max_concurrent` slots and `max_queue` places (queue_timeout 30s,
// longer than any step, so nothing in the transcripts expires).
std::string CellTable(const std::string& name, const std::vector<std::string>& command,
                      int max_concurrent, int max_queue) {
  std::string out = "\n[cells." + name + "]\ncommand = [";
  for (size_t i = 0; i < command.size(); ++i) {
    if (i > 0) out += ", ";
    out += TomlString(command[i]);
  }
  out += "]\nmax_concurrent = " + std::to_string(max_concurrent) +
         "\nmax_queue = " + std::to_string(max_queue) + "\nqueue_timeout = \"30s\"\n";
  return out;
}

// bulkheadd's options for a transcript's workspace.
proc::BulkheaddOptions DaemonOptions(const std::string& binary, const Workspace& ws) {
  return proc::BulkheaddOptions{.binary = binary,
                                .config_path = ws.config,
                                .control_socket = ws.control_socket,
                                .log_path = ws.log,
                                .stop_timeout = kStopTimeout,
                                .control_timeout = kStepTimeout};
}

struct Binaries {
  std::string bulkheadd;
  std::string echo;
  std::string gateway;
};

// The C# Scenario(): two payment calls stall on one gate, a third payment call and a catalog call
// follow, then the gate opens with "ok".
Status SeedScenario(BulkheaddProcess& daemon, const Workspace& ws, const std::string& title,
                    const std::string& guide, const std::string& payments,
                    const std::string& catalog, const std::string& gate) {
  Guide(guide);
  PrintLine("== " + title + " ==");
  Result<CellStatus> payments_cell = daemon.Cell(payments);
  if (!payments_cell.ok()) return payments_cell.status();
  Result<CellStatus> catalog_cell = daemon.Cell(catalog);
  if (!catalog_cell.ok()) return catalog_cell.status();

  const std::string pay = "gate " + gate;
  Result<ipc::Client> pay1 = ConnectTo(payments_cell->socket);
  if (!pay1.ok()) return pay1.status();
  Result<ipc::Client> pay2 = ConnectTo(payments_cell->socket);
  if (!pay2.ok()) return pay2.status();
  DEMO_RETURN_IF_ERROR(pay1->Send(1, pay));
  DEMO_RETURN_IF_ERROR(pay2->Send(2, pay));
  // Both stalled calls hold their slots before the third one arrives.
  DEMO_RETURN_IF_ERROR(WaitForFigures(daemon, payments, 2, 0));

  Result<ipc::Client> pay3 = ConnectTo(payments_cell->socket);
  if (!pay3.ok()) return pay3.status();
  DEMO_RETURN_IF_ERROR(pay3->Send(3, pay));
  Result<ipc::Client::Reply> reply3 = ReceiveReply(*pay3, 3);
  if (!reply3.ok()) return reply3.status();
  PrintLine("payment 3: " + DescribeShort(*reply3));

  Result<ipc::Client> cat = ConnectTo(catalog_cell->socket);
  if (!cat.ok()) return cat.status();
  DEMO_RETURN_IF_ERROR(cat->Send(4, "ok"));
  Result<ipc::Client::Reply> cat_reply = ReceiveReply(*cat, 4);
  if (!cat_reply.ok()) return cat_reply.status();
  PrintLine("catalog: " + DescribeShort(*cat_reply));

  DEMO_RETURN_IF_ERROR(OpenGate(ws.gates, gate, "ok ok"));
  Result<ipc::Client::Reply> reply1 = ReceiveReply(*pay1, 1);
  if (!reply1.ok()) return reply1.status();
  PrintLine("payment 1: " + DescribeShort(*reply1));
  Result<ipc::Client::Reply> reply2 = ReceiveReply(*pay2, 2);
  if (!reply2.ok()) return reply2.status();
  PrintLine("payment 2: " + DescribeShort(*reply2));
  return Status::Ok();
}

// Stops bulkheadd; on any failure, appends its log to the error.
Status Finish(BulkheaddProcess& daemon, Status status) {
  Status stopped =
      daemon.running() ? daemon.StopCleanly()
      : daemon.exit_description().empty()
          ? Status::Error("bulkheadd never started")
          : Status::Error("bulkheadd had already exited: " + daemon.exit_description());
  if (status.ok()) status = stopped;
  const std::string log = daemon.Log();
  if (status.ok() || log.empty()) return status;
  return Status::Error(status.message() + "\n--- bulkheadd log ---\n" + log +
                       "--- end of bulkheadd log ---");
}

// First transcript: one supervisor with a `shared` cell and separate `payments` and `catalog`
// cells, all 2 slots and no queue.
Status RunSeedTranscript(const Binaries& bin, const std::string& dir) {
  Result<Workspace> ws = MakeWorkspace(dir, "seed");
  if (!ws.ok()) return ws.status();
  const std::vector<std::string> gateway = {bin.gateway, "--gates", ws->gates};
  DEMO_RETURN_IF_ERROR(WriteFile(ws->config, SupervisorTable(*ws) +
                                                 CellTable("shared", gateway, 2, 0) +
                                                 CellTable("payments", gateway, 2, 0) +
                                                 CellTable("catalog", {bin.echo}, 2, 0)));
  BulkheaddProcess daemon(DaemonOptions(bin.bulkheadd, *ws));
  Status status = StartDaemon(daemon, {"shared", "payments", "catalog"});
  if (status.ok()) {
    status = SeedScenario(daemon, *ws, "one shared bulkhead",
                          "two stalled payments fill the one shared cell (2 slots), so payment 3 "
                          "AND the catalog call are rejected by shared",
                          "shared", "shared", "shared-gate");
  }
  if (status.ok()) {
    status = SeedScenario(daemon, *ws, "separate bulkheads",
                          "the same stalled payments fill only their own cell: payment 3 is "
                          "rejected by payments, the catalog call is served (catalog: ok)",
                          "payments", "catalog", "payments-gate");
  }
  return Finish(daemon, std::move(status));
}

// "payments running=2 queued=1", read from the supervisor.
Result<std::string> DescribeCell(BulkheaddProcess& daemon, const std::string& name) {
  Result<CellStatus> cell = daemon.Cell(name);
  if (!cell.ok()) return cell.status();
  return cell->name + " running=" + std::to_string(cell->running) +
         " queued=" + std::to_string(cell->queued);
}

// The extended C# program, against examples/shop.toml's cells: payments (gateway, 2 slots, 1 queue
// place) and catalog (echo --prefix "item ", 2 slots).
Status ExtendedScenario(BulkheaddProcess& daemon, const Workspace& ws) {
  Guide(
      "payments has 2 slots and 1 queue place: pay-4 is rejected as full with the figures, "
      "catalog-1 is served meanwhile, and the queued call runs once a slot frees");
  Result<CellStatus> payments = daemon.Cell("payments");
  if (!payments.ok()) return payments.status();
  Result<CellStatus> catalog = daemon.Cell("catalog");
  if (!catalog.ok()) return catalog.status();

  // pay-1 .. pay-4, one connection each, as four independent callers.
  std::vector<ipc::Client> pay;
  for (int i = 1; i <= 4; ++i) {
    Result<ipc::Client> client = ConnectTo(payments->socket);
    if (!client.ok()) return client.status();
    pay.push_back(std::move(client).value());
  }
  auto send = [&](int i) { return pay[i - 1].Send(i, "gate pay-" + std::to_string(i)); };
  DEMO_RETURN_IF_ERROR(send(1));
  DEMO_RETURN_IF_ERROR(send(2));
  DEMO_RETURN_IF_ERROR(WaitForFigures(daemon, "payments", 2, 0));
  DEMO_RETURN_IF_ERROR(send(3));  // no slot: waits in the queue
  DEMO_RETURN_IF_ERROR(WaitForFigures(daemon, "payments", 2, 1));
  DEMO_RETURN_IF_ERROR(send(4));  // the queue is full too: rejected at once
  Result<ipc::Client::Reply> reply4 = ReceiveReply(pay[3], 4);
  if (!reply4.ok()) return reply4.status();
  Result<std::string> after4 = DescribeCell(daemon, "payments");
  if (!after4.ok()) return after4.status();
  PrintLine("after 4 payment calls: " + *after4);
  PrintLine("pay-4: " + DescribeLong(*reply4));

  Result<ipc::Client> cat = ConnectTo(catalog->socket);
  if (!cat.ok()) return cat.status();
  Result<ipc::Client::Reply> cat_reply = cat->Call("list");
  if (!cat_reply.ok()) return cat_reply.status();
  PrintLine("catalog-1: " + DescribeLong(*cat_reply));

  // pay-2 fails; its slot goes to pay-3, which then completes; pay-1 last.
  struct Step {
    int call;
    const char* gate_line;
  };
  for (const Step& step :
       {Step{2, "error gateway reset"}, Step{3, "ok charged pay-3"}, Step{1, "ok charged pay-1"}}) {
    const std::string name = "pay-" + std::to_string(step.call);
    DEMO_RETURN_IF_ERROR(OpenGate(ws.gates, name, step.gate_line));
    Result<ipc::Client::Reply> reply = ReceiveReply(pay[step.call - 1], step.call);
    if (!reply.ok()) return reply.status();
    PrintLine(name + ": " + DescribeLong(*reply));
  }
  Result<std::string> after_all = DescribeCell(daemon, "payments");
  if (!after_all.ok()) return after_all.status();
  PrintLine("after all calls: " + *after_all);

  DEMO_RETURN_IF_ERROR(OpenGate(ws.gates, "pay-5", "ok charged pay-5"));
  Result<ipc::Client> pay5 = ConnectTo(payments->socket);
  if (!pay5.ok()) return pay5.status();
  Result<ipc::Client::Reply> reply5 = pay5->Call("gate pay-5");
  if (!reply5.ok()) return reply5.status();
  PrintLine("pay-5: " + DescribeLong(*reply5));
  return Status::Ok();
}

// Second transcript: the cells of examples/shop.toml, with the demo's own paths.
Status RunExtendedTranscript(const Binaries& bin, const std::string& dir) {
  Result<Workspace> ws = MakeWorkspace(dir, "extended");
  if (!ws.ok()) return ws.status();
  DEMO_RETURN_IF_ERROR(
      WriteFile(ws->config, SupervisorTable(*ws) +
                                CellTable("payments", {bin.gateway, "--gates", ws->gates}, 2, 1) +
                                CellTable("catalog", {bin.echo, "--prefix", "item "}, 2, 0)));
  BulkheaddProcess daemon(DaemonOptions(bin.bulkheadd, *ws));
  Status status = StartDaemon(daemon, {"payments", "catalog"});
  if (status.ok()) status = ExtendedScenario(daemon, *ws);
  return Finish(daemon, std::move(status));
}

int Main(int argc, char** argv) {
  CLI::App app{"bulkhead-demo: replays the bulkhead seed's transcripts with bulkheadd"};
  std::string bin_dir = proc::BuildDirOfThisProgram();
  app.add_option("--bin-dir", bin_dir, "build directory holding supervisor/ and examples/")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitUsage;
  }
  std::error_code error;
  std::filesystem::path abs_bin_dir = std::filesystem::absolute(bin_dir, error);
  if (error) {
    std::fprintf(stderr, "bulkhead-demo: --bin-dir %s: %s\n", bin_dir.c_str(),
                 error.message().c_str());
    return kExitUsage;
  }
  const std::string root = abs_bin_dir.lexically_normal().string();
  const Binaries bin{root + "/supervisor/bulkheadd", root + "/examples/bulkhead-echo",
                     root + "/examples/bulkhead-gateway"};

  std::fprintf(stderr, "bulkhead-demo: replaying the seed's transcripts with %s\n",
               bin.bulkheadd.c_str());
  TempDir dir;
  Status status = dir.Create("bh-demo");
  if (status.ok()) status = RunSeedTranscript(bin, dir.path());
  if (status.ok()) status = RunExtendedTranscript(bin, dir.path());
  if (!status.ok()) {
    std::fprintf(stderr, "bulkhead-demo: %s\n", status.message().c_str());
    return kExitFailure;
  }
  std::fprintf(stderr, "bulkhead-demo: done\n");
  return kExitOk;
}

}  // namespace
}  // namespace bulkhead::demo

int main(int argc, char** argv) { return bulkhead::demo::Main(argc, argv); }
