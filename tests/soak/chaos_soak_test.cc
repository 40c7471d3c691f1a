// SPDX-License-Identifier: MIT
// The chaos soak (ctest soak.chaos): three cells under concurrent load from several client
// threads while a chaos thread SIGKILLs workers, SIGSTOPs and resumes them, makes them exit in the
// middle of a reply, and clients disconnect at random with requests pending. Invariants, checked
// throughout and at the end:
//   - every request sent gets exactly one reply (matching id, sane payload), unless its client
//     disconnected first (then it is "abandoned");
//   - per cell, bulkheadd's counters reconcile with the clients' own tallies, once idle:
//       sent = ok + rejected + failed + cancelled + dropped + abandoned-and-never-read
//       client ok/rejected/failed <= bulkheadd's, and the difference plus cancelled + dropped is
//       at most what the clients abandoned (a request still unread when its client disconnected
//       is in no counter);
//   - running <= max_concurrent and queued <= max_queue at every status poll; both return to 0;
//   - the worker never sees more requests at once than max_concurrent (each worker generation
//     appends its peaks to a --peak-file);
//   - no zombie children of bulkheadd once the chaos stops;
//   - bulkheadd's open descriptors, less its worker connections, return to the baseline taken after
//     a warm-up (within kFdTolerance), and its RSS to at
//     most kRssToleranceFactor x the baseline + kRssToleranceBytes (the allocator keeps freed
//     memory; a leak of a buffer per request or connection would exceed it many times over).
// Runs 45 s by default; --duration=SECONDS or $BULKHEAD_SOAK_SECONDS to run longer;
// --worker-connections=MODE sets every cell's worker_connections (ctest soak.chaos.multiplex runs
// it with "multiplex"). Prints a summary of what was exercised.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/e2e/e2e_test.h"
#include "tests/helpers/blob_pattern.h"

namespace bulkhead::e2e {
namespace {

using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

int g_duration_s = 45;
// Every cell's worker_connections; empty: the default.
std::string g_worker_connections;

// Runs of 10-15 s have ended 3 or 4 descriptors above the baseline now and then (see the report
// of this branch: not yet explained); a leak per request, connection or restart is hundreds.
constexpr size_t kFdTolerance = 8;
constexpr double kRssToleranceFactor = 1.5;
// Under AddressSanitizer freed memory sits in its quarantine (up to 256 MiB), so bulkheadd's RSS
// says nothing about leaks there; LeakSanitizer checks them at its exit instead.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kRssMeaningful = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kRssMeaningful = false;
#else
constexpr bool kRssMeaningful = true;
#endif
#else
constexpr bool kRssMeaningful = true;
#endif
constexpr uint64_t kRssToleranceBytes = 16 << 20;
constexpr int kClientThreads = 4;
constexpr size_t kBlobBytes = 100'000;

struct CellPlan {
  std::string name;
  uint32_t max_concurrent;
  uint32_t max_queue;
};

const std::vector<CellPlan> kCells = {{"alpha", 4, 8}, {"beta", 2, 4}, {"gamma", 1, 0}};

// What one client thread saw, per cell.
struct Tally {
  uint64_t sent = 0;
  uint64_t ok = 0;
  uint64_t rejected = 0;
  uint64_t failed = 0;
  uint64_t abandoned = 0;  // sent, then the client disconnected before reading the reply
  uint64_t exit_mid_reply = 0;
  void Add(const Tally& o) {
    sent += o.sent;
    ok += o.ok;
    rejected += o.rejected;
    failed += o.failed;
    abandoned += o.abandoned;
    exit_mid_reply += o.exit_mid_reply;
  }
};

// Violations found on any thread; reported by the test thread.
class Violations {
 public:
  void Add(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    if (list_.size() < 50) list_.push_back(what);
    ++count_;
  }
  std::vector<std::string> list() const {
    std::lock_guard<std::mutex> lock(mu_);
    return list_;
  }
  size_t count() const {
    std::lock_guard<std::mutex> lock(mu_);
    return count_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> list_;
  size_t count_ = 0;
};

std::optional<uint64_t> ProcField(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) {
      std::istringstream value(line.substr(field.size() + 1));
      uint64_t number = 0;
      value >> number;
      return number;
    }
  }
  return std::nullopt;
}

uint64_t RssBytes(pid_t pid) { return ProcField(pid, "VmRSS").value_or(0) * 1024; }

size_t FdCount(pid_t pid) {
  size_t count = 0;
  std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
  if (!d) return 0;
  while (dirent* entry = ::readdir(d.get())) {
    if (entry->d_name[0] != '.') ++count;
  }
  return count;
}

// "fd -> target" lines of /proc/PID/fd, for failure messages.
std::string FdTargets(pid_t pid) {
  std::string out;
  std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
  if (!d) return out;
  while (dirent* entry = ::readdir(d.get())) {
    if (entry->d_name[0] == '.') continue;
    char target[512] = {};
    ssize_t n = ::readlink((dir + "/" + entry->d_name).c_str(), target, sizeof target - 1);
    out += std::string(entry->d_name) + " -> " + (n > 0 ? std::string(target, n) : "?") + "\n";
  }
  return out;
}

// Children of `parent` in state Z.
std::vector<pid_t> Zombies(pid_t parent) {
  std::vector<pid_t> zombies;
  std::unique_ptr<DIR, int (*)(DIR*)> proc(::opendir("/proc"), ::closedir);
  if (!proc) return zombies;
  while (dirent* entry = ::readdir(proc.get())) {
    char* end = nullptr;
    long pid = std::strtol(entry->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    std::ifstream in("/proc/" + std::string(entry->d_name) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    char state = 0;
    long ppid = 0;
    rest >> state >> ppid;
    if (ppid == parent && state == 'Z') zombies.push_back(static_cast<pid_t>(pid));
  }
  return zombies;
}

// The parent pid in /proc/PID/stat, or -1.
pid_t ParentOf(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(stat.substr(close + 2));
  char state = 0;
  long ppid = -1;
  rest >> state >> ppid;
  return static_cast<pid_t>(ppid);
}

// Sends `signal` to `pid` only if it is a child of `parent`: the pid is pinned with a pidfd first,
// so a worker that died and whose pid was reused by another process is never signalled.
bool SignalChildOf(pid_t pid, pid_t parent, int signal) {
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) return false;
  bool sent =
      ParentOf(pid) == parent && ::syscall(SYS_pidfd_send_signal, pidfd, signal, nullptr, 0) == 0;
  ::close(pidfd);
  return sent;
}

uint64_t U(const nlohmann::json& cell, const char* name) { return cell.value(name, uint64_t{0}); }

class Soak {
 public:
  explicit Soak(Harness* h) : h_(h) {}

  // One client thread: until `stop`, picks a cell and a command, sends one or two pipelined
  // requests, and reads every reply, or disconnects without reading (abandoning them).
  void Client(int index, const std::atomic<bool>& stop, std::map<std::string, Tally>* tallies) {
    std::mt19937 rng(static_cast<unsigned>(index * 7919 + 17));
    std::map<std::string, std::optional<ipc::Client>> connections;
    uint64_t next_id = 1;
    while (!stop.load()) {
      const CellPlan& plan = kCells[rng() % kCells.size()];
      Tally& tally = (*tallies)[plan.name];
      std::optional<ipc::Client>& conn = connections[plan.name];
      if (!conn) {
        Result<ipc::Client> made = ipc::Client::Connect(h_->CellSocket(plan.name));
        if (!made.ok()) {
          violations_.Add("connect " + plan.name + ": " + made.status().message());
          std::this_thread::sleep_for(milliseconds(50));
          continue;
        }
        if (!made->SetTimeout(std::chrono::seconds(30)).ok()) continue;
        conn.emplace(std::move(made).value());
      }
      // Commands: mostly quick echoes and short sleeps; some large replies; rarely an exit in the
      // middle of a 2 MB reply.
      int pick = static_cast<int>(rng() % 100);
      int pipelined = 1 + static_cast<int>(rng() % 2);
      struct Pending {
        uint64_t id;
        std::string command;
      };
      std::vector<Pending> pending;
      for (int i = 0; i < pipelined; ++i) {
        std::string command;
        if (pick < 45) {
          command = "echo " + std::to_string(next_id) + "-" + plan.name;
        } else if (pick < 80) {
          command = "sleep " + std::to_string(rng() % 40);
        } else if (pick < 92) {
          command = "blob " + std::to_string(kBlobBytes);
        } else if (pick < 97) {
          command = "fail on purpose";
        } else {
          command = "exit-mid-reply 2000000";
          ++tally.exit_mid_reply;
        }
        uint64_t id = next_id++;
        Status sent = conn->Send(id, command);
        if (!sent.ok()) {
          violations_.Add("send to " + plan.name + ": " + sent.message());
          break;
        }
        ++tally.sent;
        pending.push_back({id, std::move(command)});
      }
      // Random disconnects: 5% of the time, with the requests pending.
      if (rng() % 100 < 5) {
        tally.abandoned += pending.size();
        conn.reset();
        continue;
      }
      for (size_t i = 0; i < pending.size(); ++i) {
        Result<ipc::Client::Reply> reply = conn->Receive();
        if (!reply.ok()) {
          violations_.Add("no reply from " + plan.name + ": " + reply.status().message());
          tally.abandoned += pending.size() - i;  // nothing more will come on this connection
          conn.reset();
          break;
        }
        auto it = std::find_if(pending.begin(), pending.end(),
                               [&](const Pending& p) { return p.id == reply->header.request_id; });
        if (it == pending.end()) {
          violations_.Add("reply from " + plan.name + " with unexpected id " +
                          std::to_string(reply->header.request_id));
          continue;
        }
        CheckReply(plan.name, it->command, *reply, &tally);
        it->id = 0;  // answered: a second reply with this id is a violation
      }
      if (rng() % 100 < 10) conn.reset();  // reconnect now and then
    }
  }

  void CheckReply(const std::string& cell, const std::string& command,
                  const ipc::Client::Reply& reply, Tally* tally) {
    switch (reply.header.status) {
      case ipc::ReplyStatus::kOk: {
        ++tally->ok;
        bool good = true;
        if (command.rfind("echo ", 0) == 0) good = reply.payload == command.substr(5);
        if (command.rfind("blob ", 0) == 0) good = reply.payload == blob_;
        // The worker dies with half its reply written (bulkhead-test-worker): never OK.
        if (command.rfind("exit-mid-reply ", 0) == 0) good = false;
        if (command.rfind("sleep ", 0) == 0) good = reply.payload == "slept " + command.substr(6);
        if (command == "fail on purpose") good = false;
        if (!good) {
          violations_.Add(cell + ": OK reply to \"" + command.substr(0, 40) + "\" has the wrong " +
                          std::to_string(reply.payload.size()) + "-byte payload");
        }
        break;
      }
      case ipc::ReplyStatus::kRejected:
        ++tally->rejected;
        break;
      case ipc::ReplyStatus::kFailed:
        ++tally->failed;
        break;
      default:
        violations_.Add(cell + ": unexpected " + ipc::StatusName(reply.header.status) + " to \"" +
                        command.substr(0, 40) + "\": " + reply.payload);
    }
  }

  // The chaos thread: every 100-300 ms one of SIGKILL, SIGSTOP + SIGCONT, exit mid-reply.
  void Chaos(const std::atomic<bool>& stop) {
    std::mt19937 rng(4242);
    while (!stop.load()) {
      std::this_thread::sleep_for(milliseconds(100 + rng() % 200));
      const CellPlan& plan = kCells[rng() % kCells.size()];
      nlohmann::json cell = h_->Cell(plan.name);
      if (cell.is_null() || !cell["pid"].is_number_integer()) continue;
      pid_t pid = cell["pid"].get<pid_t>();
      int action = static_cast<int>(rng() % 3);
      const pid_t daemon = h_->pid();
      if (action == 0) {
        if (SignalChildOf(pid, daemon, SIGKILL)) ++kills_;
      } else if (action == 1) {
        if (SignalChildOf(pid, daemon, SIGSTOP)) {
          ++stops_;
          std::this_thread::sleep_for(milliseconds(50 + rng() % 250));
          SignalChildOf(pid, daemon, SIGCONT);  // always resumed, unless it died meanwhile
        }
      } else {
        // A request of its own that makes the worker exit while its reply is being written.
        const std::string command = "exit-mid-reply 3000000";
        Result<ipc::Client::Reply> reply = h_->Call(plan.name, command, std::chrono::seconds(30));
        ++chaos_exits_;
        if (!reply.ok()) violations_.Add("chaos exit-mid-reply: " + reply.status().message());
        if (reply.ok()) chaos_tally_[plan.name].sent += 1;
        if (reply.ok()) CheckReply(plan.name, command, *reply, &chaos_tally_[plan.name]);
      }
    }
  }

  // The monitor thread: polls status; running and queued within their limits, always.
  void Monitor(const std::atomic<bool>& stop) {
    while (!stop.load()) {
      nlohmann::json status = h_->Status();
      if (status.value("ok", false)) {
        for (const nlohmann::json& cell : status["cells"]) {
          ++polls_;
          if (U(cell, "running") > U(cell, "max_concurrent")) {
            violations_.Add(cell["name"].get<std::string>() + ": running " +
                            cell["running"].dump() + " > max_concurrent");
          }
          if (U(cell, "queued") > U(cell, "max_queue")) {
            violations_.Add(cell["name"].get<std::string>() + ": queued " + cell["queued"].dump() +
                            " > max_queue");
          }
        }
      }
      std::this_thread::sleep_for(milliseconds(100));
    }
  }

  Violations violations_;
  std::atomic<uint64_t> kills_{0};
  std::atomic<uint64_t> stops_{0};
  std::atomic<uint64_t> chaos_exits_{0};
  std::atomic<uint64_t> polls_{0};
  std::map<std::string, Tally> chaos_tally_;  // chaos thread only, read after it ends

 private:
  Harness* h_;
  const std::string blob_ = testing::BlobPattern(kBlobBytes);
};

TEST(ChaosSoak, InvariantsHoldUnderKillsStopsExitsAndDisconnects) {
  TempDir peaks;
  std::vector<CellSpec> specs;
  for (const CellPlan& plan : kCells) {
    specs.push_back(CellSpec{
        .name = plan.name,
        .command = {TestWorkerPath(), "--peak-file", peaks.Join(plan.name + ".peak")},
        .max_concurrent = plan.max_concurrent,
        .max_queue = plan.max_queue,
        .queue_timeout = "2s",
        .restart_delay = "20ms",
        .worker_connections = g_worker_connections,
        // Restarts are the point here: no start limit, and a short backoff cap.
        .extra_toml = "restart_max_delay = \"200ms\"\nstart_limit_interval = \"0s\"\n"
                      "stop_timeout = \"500ms\"\n",
    });
  }
  Harness h(TestOptions(specs));
  ASSERT_STARTED(h);
  const pid_t daemon = h.pid();

  // Warm-up: every cell's worker is replaced once (what a restart opens once for good, such as
  // lazily created descriptors, belongs to the baseline) and answers large and small requests;
  // then the baseline is taken. A leak per restart or per request still shows: the soak restarts
  // each worker dozens of times.
  for (const CellPlan& plan : kCells) {
    const pid_t first = h.Cell(plan.name)["pid"].get<pid_t>();
    ASSERT_TRUE(SignalChildOf(first, daemon, SIGKILL));
    ASSERT_TRUE(h.WaitForCell(plan.name, [&](const nlohmann::json& c) {
      return c["state"] == "running" && c["pid"].is_number() && c["pid"] != first;
    }));
  }
  for (const CellPlan& plan : kCells) {
    for (int i = 0; i < 4; ++i) {
      Result<ipc::Client::Reply> blob = h.Call(plan.name, "blob " + std::to_string(kBlobBytes));
      EXPECT_TRUE(blob.ok() && blob->payload.size() == kBlobBytes) << Describe(blob);
      EXPECT_OK_REPLY(h.Call(plan.name, "echo warm"), "warm");
    }
  }
  auto worker_connections = [&] {
    uint64_t total = 0;
    // Named: a range-for over a member of a temporary reads freed memory (before C++23).
    const nlohmann::json status = h.Status();
    for (const nlohmann::json& cell : status["cells"]) total += U(cell, "worker_connections");
    return total;
  };
  auto settled_fds = [&] { return FdCount(daemon) - worker_connections(); };
  std::map<std::string, nlohmann::json> before;
  for (const CellPlan& plan : kCells) before[plan.name] = h.Cell(plan.name);
  const size_t fd_baseline = settled_fds();
  const uint64_t rss_baseline = RssBytes(daemon);

  Soak soak(&h);
  std::atomic<bool> stop_clients{false};
  std::atomic<bool> stop_chaos{false};
  std::vector<std::map<std::string, Tally>> tallies(kClientThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClientThreads; ++i) {
    threads.emplace_back([&, i] { soak.Client(i, stop_clients, &tallies[i]); });
  }
  std::thread chaos([&] { soak.Chaos(stop_chaos); });
  std::thread monitor([&] { soak.Monitor(stop_chaos); });

  const auto end = SteadyClock::now() + std::chrono::seconds(g_duration_s);
  while (SteadyClock::now() < end && soak.violations_.count() == 0 && h.running()) {
    std::this_thread::sleep_for(milliseconds(200));
  }
  stop_chaos = true;
  chaos.join();
  monitor.join();
  stop_clients = true;
  for (std::thread& t : threads) t.join();

  for (const std::string& v : soak.violations_.list()) ADD_FAILURE() << v;
  ASSERT_EQ(soak.violations_.count(), 0u) << h.Log().substr(0, 20000);

  // Quiet again: every cell running, idle, without clients.
  for (const CellPlan& plan : kCells) {
    ASSERT_TRUE(h.WaitForCell(
        plan.name,
        [](const nlohmann::json& c) {
          return c["state"] == "running" && c["running"] == 0 && c["queued"] == 0 &&
                 c["clients"] == 0;
        },
        milliseconds(30000)))
        << h.Cell(plan.name).dump();
  }
  EXPECT_TRUE(WaitFor([&] { return Zombies(daemon).empty(); }))
      << Zombies(daemon).size() << " zombie children of bulkheadd";
  EXPECT_EQ(h.Status()["supervisor"]["live_requests"], 0);

  std::printf(
      "chaos soak: %d s, %d client threads; %llu SIGKILLs, %llu SIGSTOP/SIGCONT, %llu "
      "chaos exits mid-reply, %llu status polls\n",
      g_duration_s, kClientThreads, static_cast<unsigned long long>(soak.kills_.load()),
      static_cast<unsigned long long>(soak.stops_.load()),
      static_cast<unsigned long long>(soak.chaos_exits_.load()),
      static_cast<unsigned long long>(soak.polls_.load()));
  for (const CellPlan& plan : kCells) {
    Tally total = soak.chaos_tally_[plan.name];
    for (auto& per_thread : tallies) total.Add(per_thread[plan.name]);
    nlohmann::json c = h.Cell(plan.name);
    const nlohmann::json& b = before[plan.name];
    auto delta = [&](const char* name) { return U(c, name) - U(b, name); };
    const uint64_t ok = delta("ok"), rejected = delta("rejected"), failed = delta("failed"),
                   cancelled = delta("cancelled"), dropped = delta("dropped");
    std::printf(
        "  %-5s sent %llu: ok %llu, rejected %llu, failed %llu, cancelled %llu, dropped "
        "%llu; client abandoned %llu; exit-mid-reply %llu; restarts %llu\n",
        plan.name.c_str(), static_cast<unsigned long long>(total.sent),
        static_cast<unsigned long long>(ok), static_cast<unsigned long long>(rejected),
        static_cast<unsigned long long>(failed), static_cast<unsigned long long>(cancelled),
        static_cast<unsigned long long>(dropped), static_cast<unsigned long long>(total.abandoned),
        static_cast<unsigned long long>(total.exit_mid_reply),
        static_cast<unsigned long long>(delta("restarts")));
    EXPECT_GT(total.sent, 0u) << plan.name;
    // Requests a client sent and then abandoned by disconnecting are counted by bulkheadd if it
    // read them (ok, rejected, failed, cancelled or dropped); those still unread in the socket when
    // the connection was closed are in no counter. Every request not abandoned is counted exactly.
    EXPECT_GE(ok, total.ok) << plan.name;
    EXPECT_GE(rejected, total.rejected) << plan.name;
    EXPECT_GE(failed, total.failed) << plan.name;
    const uint64_t counted_abandoned = (ok - total.ok) + (rejected - total.rejected) +
                                       (failed - total.failed) + cancelled + dropped;
    EXPECT_LE(counted_abandoned, total.abandoned) << plan.name << c.dump();
    EXPECT_EQ(ok + rejected + failed + cancelled + dropped + (total.abandoned - counted_abandoned),
              total.sent)
        << plan.name << c.dump();
    EXPECT_EQ(U(c, "bad_request"), 0u) << plan.name;

    // The worker's own view: never more requests at once than max_concurrent.
    std::optional<std::string> peaks_text = testing::ReadFile(peaks.Join(plan.name + ".peak"));
    ASSERT_TRUE(peaks_text.has_value()) << plan.name;
    uint64_t peak = 0;
    std::istringstream lines(*peaks_text);
    for (uint64_t value = 0; lines >> value;) peak = std::max(peak, value);
    std::printf("        worker peak %llu of max_concurrent %u\n",
                static_cast<unsigned long long>(peak), plan.max_concurrent);
    EXPECT_GE(peak, 1u) << plan.name;
    EXPECT_LE(peak, plan.max_concurrent) << plan.name;
  }

  // Resources back to the baseline.
  size_t fds = 0;
  bool fds_back = WaitFor([&] {
    fds = settled_fds();
    return fds <= fd_baseline + kFdTolerance;
  });
  const uint64_t rss = RssBytes(daemon);
  std::printf(
      "  bulkheadd: descriptors (less worker connections) %zu -> %zu, RSS %llu -> %llu "
      "KiB\n",
      fd_baseline, fds, static_cast<unsigned long long>(rss_baseline / 1024),
      static_cast<unsigned long long>(rss / 1024));
  EXPECT_TRUE(fds_back) << "descriptors " << fd_baseline << " -> " << fds << ":\n"
                        << FdTargets(daemon) << "status: " << h.Status().dump();
  if (kRssMeaningful) {
    EXPECT_LE(rss, static_cast<uint64_t>(rss_baseline * kRssToleranceFactor) + kRssToleranceBytes);
  } else {
    std::printf("  (RSS not checked: AddressSanitizer's quarantine holds freed memory)\n");
  }
}

}  // namespace
}  // namespace bulkhead::e2e

int main(int argc, char** argv) {
  if (const char* env = std::getenv("BULKHEAD_SOAK_SECONDS")) {
    bulkhead::e2e::g_duration_s = std::max(1, std::atoi(env));
  }
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg.rfind("--duration=", 0) == 0) {
      bulkhead::e2e::g_duration_s = std::max(1, std::atoi(argv[i] + 11));
    } else if (arg.rfind("--worker-connections=", 0) == 0) {
      bulkhead::e2e::g_worker_connections = std::string(arg.substr(21));
    } else {
      std::fprintf(stderr,
                   "chaos_soak_test: unknown argument %s (use --duration=SECONDS, "
                   "--worker-connections=MODE)\n",
                   argv[i]);
      return 2;
    }
  }
  return RUN_ALL_TESTS();
}
