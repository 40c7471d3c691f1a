// SPDX-License-Identifier: MIT
// bulkhead-bench-idle: what an idle cell and an idle client connection cost bulkheadd in memory
// (docs/benchmarks.md, "Idle memory"; issue 25 section 8). Each run starts, in a fresh temporary
// directory, with `cgroup = "off"` (the bench never touches /sys/fs/cgroup):
//   - bulkheadd with 1 cell, then bulkheadd with 1 + `--cells` cells (100 by default), every cell
//     a trivial worker (`sleep infinity`, output = "log", everything else default) that is never
//     sent a request; once every cell is running and one status exchange has gone over the control
//     socket, it reads bulkheadd's VmRSS (/proc/PID/status) and Private_Dirty
//     (/proc/PID/smaps_rollup) and prints the difference divided by the extra cells;
//   - bulkheadd with 1 cell (idle_timeout the default 60 s), VmRSS and Private_Dirty read with no
//     client and again once `--connections` (1000 by default) client connections to its socket
//     are accepted (the status's `clients`) and sent nothing: the difference per connection.
// `--runs` runs (3 by default) back to back; the medians are printed last. Sizes are KiB as
// /proc gives them (so a per-cell figure is within 4 KiB / cells of the truth). Exits 0 when every
// run measured.
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "base/temp_dir.h"
#include "base/unique_fd.h"
#include "bench/latency_summary.h"
#include "bench/stage_support.h"
#include "ctl/control_client.h"
#include "proc/bulkheadd_process.h"

namespace bulkhead::bench {
namespace {

using proc::BulkheaddProcess;
using std::chrono::milliseconds;

constexpr milliseconds kStepTimeout{30000};

struct Memory {
  int64_t rss_kib = 0;            // VmRSS
  int64_t private_dirty_kib = 0;  // Private_Dirty of smaps_rollup
};

// The value of the line starting with `key` in a /proc file of "Key:   N kB" lines; -1 if absent.
int64_t ProcKib(const std::string& path, const std::string& key) {
  std::ifstream file(path);
  std::string line;
  while (std::getline(file, line)) {
    if (line.rfind(key, 0) == 0) return std::stoll(line.substr(key.size()));
  }
  return -1;
}

// bulkheadd returns the heap a control answer freed to the kernel 1 s after it
// (ControlServer::kReleaseHeapDelayMs, control/control_server.h, a layer the bench does not link);
// a reading waits that long after the bench's last control exchange, and 250 ms more for the loop
// to get to it, so that it shows what an idle bulkheadd keeps.
constexpr milliseconds kHeapReleaseWait{1250};

// Waits kHeapReleaseWait, then reads.
Result<Memory> ReadMemory(pid_t pid) {
  std::this_thread::sleep_for(kHeapReleaseWait);
  const std::string base = "/proc/" + std::to_string(pid);
  Memory m{ProcKib(base + "/status", "VmRSS:"), ProcKib(base + "/smaps_rollup", "Private_Dirty:")};
  if (m.rss_kib < 0 || m.private_dirty_kib < 0) {
    return Status::Error("cannot read VmRSS/Private_Dirty of pid " + std::to_string(pid));
  }
  return m;
}

std::string CellsConfig(const std::string& root, int cells) {
  std::string config = BenchSupervisorToml(root);
  for (int i = 0; i < cells; ++i) {
    config += "\n[cells.c" + std::to_string(i) +
              "]\ncommand = [\"sleep\", \"infinity\"]\nmax_concurrent = 4\n";
  }
  return config;
}

std::vector<std::string> CellNames(int cells) {
  std::vector<std::string> names;
  names.reserve(static_cast<size_t>(cells));
  for (int i = 0; i < cells; ++i) names.push_back("c" + std::to_string(i));
  return names;
}

// Starts bulkheadd with `cells` idle cells in a fresh directory, waits until they run and one
// status exchange went through, then `between(bulkheadd, root)`; the memory read before and after
// it.
struct Reading {
  Memory before;
  Memory after;
};
template <typename Between>
Result<Reading> RunBulkheadd(const std::string& bin_dir, int cells, Between between) {
  TempDir dir;
  Status status = dir.Create("bh-idle");
  if (!status.ok()) return status;
  std::optional<BulkheaddProcess> bulkheadd;
  status =
      StartBenchBulkheadd(bin_dir, dir.path(), CellsConfig(dir.path(), cells), nullptr, &bulkheadd);
  if (!status.ok()) return status;
  Reading reading;
  status = bulkheadd->WaitUntilRunning(CellNames(cells), kStepTimeout);
  if (status.ok()) {
    // Whatever the first status exchange allocates is in both readings of both sides.
    (void)bulkheadd->Cell("c0");
    Result<Memory> m = ReadMemory(bulkheadd->pid());
    status = m.status();
    if (m.ok()) reading.before = *m;
  }
  if (status.ok()) status = between(*bulkheadd, dir.path());
  if (status.ok()) {
    Result<Memory> m = ReadMemory(bulkheadd->pid());
    status = m.status();
    if (m.ok()) reading.after = *m;
  }
  Status stopped = bulkheadd->StopCleanly();
  if (!status.ok()) return Status::Error(status.message() + "\n" + bulkheadd->Log());
  if (!stopped.ok()) return stopped;
  return reading;
}

Status Nothing(BulkheaddProcess&, const std::string&) { return Status::Ok(); }

// Opens `count` connections to cell c0 and waits until bulkheadd shows them all.
Status OpenIdleClients(BulkheaddProcess& bulkheadd, int count, std::vector<UniqueFd>* fds) {
  const std::string path = bulkheadd.options().control_socket;
  const std::string socket = path.substr(0, path.rfind('/')) + "/c0.sock";
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  socket.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
  for (int i = 0; i < count; ++i) {
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return Status::FromErrno("socket");
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
      return Status::FromErrno("connect " + socket);
    }
    fds->push_back(std::move(fd));
  }
  const auto deadline = std::chrono::steady_clock::now() + kStepTimeout;
  uint64_t clients = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    ctl::ControlReply reply = bulkheadd.Control(ctl::StatusRequest("c0"));
    if (reply.response && reply.response->contains("cells")) {
      clients = (*reply.response)["cells"][0].value("clients", uint64_t{0});
      if (clients >= static_cast<uint64_t>(count)) return Status::Ok();
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  return Status::Error("bulkheadd showed " + std::to_string(clients) + " of " +
                       std::to_string(count) + " clients");
}

struct Figures {
  double rss_per_cell = 0, dirty_per_cell = 0, rss_per_conn = 0, dirty_per_conn = 0;
  int64_t rss_one_cell = 0, rss_many_cells = 0;
};

int Main(int argc, char** argv) {
  std::string bin_dir = proc::BuildDirOfThisProgram();
  int cells = 100;
  int connections = 1000;
  int runs = 3;
  CLI::App app{"bulkheadd's memory per idle cell and per idle client connection"};
  app.add_option("--bin-dir", bin_dir, "build directory (supervisor/bulkheadd)");
  app.add_option("--cells", cells, "idle cells added to the first")->check(CLI::Range(1, 5000));
  app.add_option("--connections", connections, "idle client connections")
      ->check(CLI::Range(1, 60000));
  app.add_option("--runs", runs, "runs, back to back")->check(CLI::Range(1, 100));
  CLI11_PARSE(app, argc, argv);

  // The bench holds the clients' descriptors itself.
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }

  std::vector<Figures> all;
  for (int run = 1; run <= runs; ++run) {
    Figures f;
    Result<Reading> one = RunBulkheadd(bin_dir, 1, Nothing);
    Result<Reading> many = one.ok() ? RunBulkheadd(bin_dir, 1 + cells, Nothing) : one;
    std::vector<UniqueFd> fds;
    Result<Reading> conns = many.ok() ? RunBulkheadd(bin_dir, 1,
                                                     [&](BulkheaddProcess& b, const std::string&) {
                                                       return OpenIdleClients(b, connections, &fds);
                                                     })
                                      : many;
    if (!conns.ok()) {
      std::fprintf(stderr, "bulkhead-bench-idle: %s\n", conns.status().message().c_str());
      return 1;
    }
    f.rss_one_cell = one->after.rss_kib;
    f.rss_many_cells = many->after.rss_kib;
    f.rss_per_cell = static_cast<double>(many->after.rss_kib - one->after.rss_kib) * 1024 / cells;
    f.dirty_per_cell =
        static_cast<double>(many->after.private_dirty_kib - one->after.private_dirty_kib) * 1024 /
        cells;
    f.rss_per_conn =
        static_cast<double>(conns->after.rss_kib - conns->before.rss_kib) * 1024 / connections;
    f.dirty_per_conn =
        static_cast<double>(conns->after.private_dirty_kib - conns->before.private_dirty_kib) *
        1024 / connections;
    std::printf(
        "run %d: VmRSS 1 cell %lld KiB, %d cells %lld KiB; per idle cell: VmRSS %.0f B, "
        "Private_Dirty %.0f B; per idle connection (%d): VmRSS %.0f B, Private_Dirty %.0f B\n",
        run, static_cast<long long>(f.rss_one_cell), 1 + cells,
        static_cast<long long>(f.rss_many_cells), f.rss_per_cell, f.dirty_per_cell, connections,
        f.rss_per_conn, f.dirty_per_conn);
    std::fflush(stdout);
    all.push_back(f);
  }
  auto median = [&](auto member) {
    std::vector<double> v;
    v.reserve(all.size());
    for (const Figures& f : all) v.push_back(static_cast<double>(f.*member));
    return Median(std::move(v));
  };
  std::printf(
      "median of %d: VmRSS 1 cell %.0f KiB, %d cells %.0f KiB; per idle cell: VmRSS %.1f KiB, "
      "Private_Dirty %.1f KiB; per idle connection: VmRSS %.2f KiB, Private_Dirty %.2f KiB\n",
      runs, median(&Figures::rss_one_cell), 1 + cells, median(&Figures::rss_many_cells),
      median(&Figures::rss_per_cell) / 1024, median(&Figures::dirty_per_cell) / 1024,
      median(&Figures::rss_per_conn) / 1024, median(&Figures::dirty_per_conn) / 1024);
  return 0;
}

}  // namespace
}  // namespace bulkhead::bench

int main(int argc, char** argv) { return bulkhead::bench::Main(argc, argv); }
