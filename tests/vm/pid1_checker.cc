// SPDX-License-Identifier: MIT
// pid1_checker: the checker cell of vm.pid1 (scenarios/pid1.toml). Runs inside the VM as a cell of
// bulkheadd, which the kernel started as init, and verifies from there: bulkheadd is PID 1 and
// mounted /proc, /dev, /sys, cgroup2 and /run; every cell runs; a crashed worker is restarted;
// orphans double-forked by a cell are adopted and reaped by PID 1 (no zombie left); 30 workers
// killed at the same moment are all seen and restarted; PID 1 re-executes itself under load
// (docs/reexec.md) losing no request and keeping every worker. Then it prints the result marker
// and sends SIGTERM to PID 1, which stops every cell and powers off (run-vm.sh checks the
// power-off).
// Output goes to /dev/console, whatever bulkheadd does with a cell's stdout.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ipc/client.h"
#include "supervisor/init_mode.h"
#include "tests/helpers/test_support.h"
#include "tests/vm/vm_probe.h"

namespace bulkhead::vm {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr char kStatusCommand[] =
    "/bin/bulkheadctl --socket /run/bulkhead/control.sock status --json 2>&1";
constexpr char kReexecCommand[] =
    "/bin/bulkheadctl --socket /run/bulkhead/control.sock reexec 2>&1; echo \"exit=$?\"";
constexpr int kOrphans = 5;
constexpr int kBurstCells = 30;
constexpr int kLoadClients = 2;

int g_failures = 0;

void Check(bool ok, const std::string& what) {
  Print("pid1_checker: %s %s", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) ++g_failures;
}

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Polls `condition` every 50 ms until it holds (true) or `deadline` passes (false).
bool Poll(const std::function<bool()>& condition, milliseconds deadline) {
  return PollUntil(condition, deadline, milliseconds(50));
}

// `command` through popen: its stdout (popen reaps it in pclose).
std::string Capture(const char* command) {
  std::string out;
  // NOLINTNEXTLINE(cert-env33-c): the commands are this file's constants, run through busybox sh.
  FILE* pipe = popen(command, "re");
  if (pipe == nullptr) return out;
  char buffer[65536];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) out.append(buffer, n);
  pclose(pipe);
  return out;
}

// `bulkheadctl status --json`; discarded when it failed.
Json Status() { return Json::parse(Capture(kStatusCommand), nullptr, false); }

// `bulkheadctl status --json`: cell name -> cell object; empty when it failed.
std::map<std::string, Json> Cells() {
  std::map<std::string, Json> cells;
  Json status = Status();
  if (status.is_discarded() || !status.contains("cells")) return cells;
  for (const Json& cell : status["cells"]) cells[cell.value("name", "")] = cell;
  return cells;
}

int PidOf(const Json& cell) {
  return cell.contains("pid") && cell["pid"].is_number() ? cell["pid"].get<int>() : 0;
}
bool Running(const Json& cell) { return cell.value("state", "") == "running" && PidOf(cell) > 0; }

std::string BurstName(int i) { return Str("burst%02d", i); }

void CheckMounts() {
  Check(ReadText("/proc/1/comm") == "bulkheadd",
        "PID 1 is bulkheadd (/proc/1/comm: " + ReadText("/proc/1/comm") + ")");
  std::map<std::string, std::string> type_at;
  for (const supervisor::MountInfoEntry& entry :
       supervisor::ParseMountInfo(ReadText("/proc/self/mountinfo"))) {
    type_at[entry.mount_point] = entry.fs_type;
  }
  for (const auto& [target, type] :
       std::vector<std::pair<std::string, std::string>>{{"/proc", "proc"},
                                                        {"/dev", "devtmpfs"},
                                                        {"/sys", "sysfs"},
                                                        {"/sys/fs/cgroup", "cgroup2"},
                                                        {"/run", "tmpfs"}}) {
    Check(type_at[target] == type, target + " is " + type + " (found \"" + type_at[target] + "\")");
  }
}

void CheckCrashRestart() {
  const int old_pid = PidOf(Cells()["crasher"]);
  std::string out = Capture(
      "/bin/bulkheadctl --socket /run/bulkhead/control.sock call crasher --data crash 2>&1; "
      "echo \"exit=$?\"");
  Check(out.find("exit=5") != std::string::npos, "call crasher crash: FAILED (exit 5): " + out);
  Json cell;
  bool restarted = Poll(
      [&] {
        cell = Cells()["crasher"];
        return Running(cell) && cell.value("restarts", 0) == 1 && PidOf(cell) != old_pid;
      },
      milliseconds(30000));
  const bool ok = restarted && cell.value("last_exit", "") == "signal 11";
  Check(ok, "crasher restarted after its SIGSEGV" + (ok ? std::string() : ": " + cell.dump()));
}

void CheckOrphansReaped() {
  std::vector<pid_t> orphans;
  bool written = Poll(
      [&] {
        orphans.clear();
        for (int i = 1; i <= kOrphans; ++i) {
          std::string text = ReadText(Str("/run/orphan.%d", i));
          if (text.empty() || text[0] == '<') return false;
          orphans.push_back(std::stoi(text));
        }
        return true;
      },
      milliseconds(30000));
  Check(written, Str("the forker cell wrote its %d orphans' pids", kOrphans));
  if (!written) return;
  bool adopted = Poll(
      [&] {
        for (pid_t pid : orphans) {
          if (ParentOf(pid) != 1) return false;
        }
        return true;
      },
      milliseconds(10000));
  Check(adopted, "every orphan was reparented to PID 1");
  int fd = open("/run/release", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd >= 0) close(fd);
  std::vector<pid_t> left;
  bool reaped = Poll(
      [&] {
        left.clear();
        for (pid_t pid : orphans) {
          if (testing::ReadProcStat(pid)) left.push_back(pid);
        }
        return left.empty();
      },
      milliseconds(15000));
  std::string states;
  for (pid_t pid : left) {
    states += Str(" %d:%c", pid, testing::ReadProcStat(pid).value_or(testing::ProcStat{}).state);
  }
  Check(reaped, "every orphan exited and was reaped by PID 1 (left:" + states + ")");
}

void CheckBurst() {
  std::map<std::string, Json> before = Cells();
  std::vector<pid_t> pids;
  pids.reserve(kBurstCells);
  for (int i = 0; i < kBurstCells; ++i) pids.push_back(PidOf(before[BurstName(i)]));
  // All 30 die within microseconds: their SIGCHLDs coalesce into far fewer signals.
  Clock::time_point start = Clock::now();
  for (pid_t pid : pids) {
    if (pid > 0) kill(pid, SIGKILL);
  }
  std::string missing;
  bool all = Poll(
      [&] {
        std::map<std::string, Json> now = Cells();
        missing.clear();
        for (int i = 0; i < kBurstCells; ++i) {
          const Json& cell = now[BurstName(i)];
          if (!Running(cell) || cell.value("restarts", 0) != 1 || PidOf(cell) == pids[i] ||
              cell.value("last_exit", "") != "signal 9") {
            missing += " " + BurstName(i);
          }
        }
        return missing.empty();
      },
      milliseconds(60000));
  Check(all, Str("%d workers killed at once: all seen (last_exit signal 9) and restarted in "
                 "%.0f ms (not yet:%s)",
                 kBurstCells, MsSince(start), missing.c_str()));
}

// Every reply a load client got, by status; `other` counts transport errors and OK replies that
// are not the request's own answer.
struct Tally {
  std::atomic<uint64_t> ok{0};
  std::atomic<uint64_t> failed{0};
  std::atomic<uint64_t> rejected{0};
  std::atomic<uint64_t> other{0};
  std::mutex mu;
  std::string first_wrong;  // guarded by mu
};

// One request per connection until `stop`, on `socket` (the crasher cell, a bulkhead-test-worker):
// every 4th a "sleep 50", so that requests are in flight when the re-exec begins to drain, the
// others "echo", whose answer must be their own text.
void Load(const std::string& socket, const std::atomic<bool>& stop, int client, Tally& tally) {
  for (uint64_t i = 0; !stop.load(); ++i) {
    const bool sleeper = i % 4 == 0;
    const std::string text = Str("c%d-%llu", client, static_cast<unsigned long long>(i));
    Result<ipc::Client> connection = ipc::Client::Connect(socket);
    Result<ipc::Client::Reply> reply = connection.ok()
                                           ? connection->Call(sleeper ? "sleep 50" : "echo " + text)
                                           : Result<ipc::Client::Reply>(connection.status());
    std::string wrong;
    if (!reply.ok()) {
      ++tally.other;
      wrong = "error: " + reply.status().message();
    } else if (reply->header.status == ipc::ReplyStatus::kFailed) {
      ++tally.failed;
      wrong = "FAILED/" + std::string(ipc::ReasonName(reply->header.reason)) + " " + reply->payload;
    } else if (reply->header.status == ipc::ReplyStatus::kRejected) {
      ++tally.rejected;
      wrong = "REJECTED/" + std::string(ipc::ReasonName(reply->header.reason));
    } else if (reply->header.status == ipc::ReplyStatus::kOk &&
               reply->payload == (sleeper ? "slept 50" : text)) {
      ++tally.ok;
      continue;
    } else {
      ++tally.other;
      wrong = std::string(ipc::StatusName(reply->header.status)) + " \"" + reply->payload + "\"";
    }
    std::lock_guard lock(tally.mu);
    if (tally.first_wrong.empty()) tally.first_wrong = wrong;
  }
}

uint64_t Counter(const Json& cell, const char* name) {
  return cell.contains(name) && cell[name].is_number() ? cell[name].get<uint64_t>() : UINT64_MAX;
}

// PID 1 re-executes itself (`bulkheadctl reexec`, docs/reexec.md) while clients load the crasher
// cell: no reply failed or rejected, every cell keeps its worker pid, PID 1 is still bulkheadd and
// counts re-exec 1, and the cell's counters continue across the images (ok after = ok before +
// the clients' ok replies; failed and rejected unchanged).
void CheckReexecUnderLoad() {
  std::map<std::string, Json> before = Cells();
  const Json crasher = before["crasher"];
  const std::string socket = crasher.value("socket", "");
  Tally tally;
  std::atomic<bool> stop{false};
  std::vector<std::thread> clients;
  clients.reserve(kLoadClients);
  for (int i = 0; i < kLoadClients; ++i) {
    clients.emplace_back([&, i] { Load(socket, stop, i, tally); });
  }
  const bool loaded = Poll([&] { return tally.ok.load() >= 20; }, milliseconds(30000));
  Check(loaded, Str("load on crasher (%s) answers: %llu ok before the re-exec", socket.c_str(),
                    static_cast<unsigned long long>(tally.ok.load())));
  // A cell whose restarted worker's old generation is still being torn down (the burst above)
  // refuses for a moment: asked again until accepted.
  std::string out;
  int refusals = 0;
  Poll(
      [&] {
        out = Capture(kReexecCommand);
        const bool transient = out.find("torn down") != std::string::npos ||
                               out.find("handling an event") != std::string::npos;
        if (transient) ++refusals;
        return !transient;
      },
      milliseconds(30000));
  Check(out.find("exit=0") != std::string::npos && out.find("re-exec 1") != std::string::npos,
        Str("bulkheadctl reexec under load (%d transient refusals first): ", refusals) + out);
  const uint64_t ok_at_reexec = tally.ok.load();
  const bool went_on =
      Poll([&] { return tally.ok.load() >= ok_at_reexec + 20; }, milliseconds(30000));
  Check(went_on, Str("the load goes on after the re-exec: %llu ok by then, %llu now",
                     static_cast<unsigned long long>(ok_at_reexec),
                     static_cast<unsigned long long>(tally.ok.load())));
  stop = true;
  for (std::thread& client : clients) client.join();
  {
    std::lock_guard lock(tally.mu);
    Check(tally.failed == 0 && tally.rejected == 0 && tally.other == 0 && tally.ok > 0,
          Str("load replies: %llu ok, %llu failed, %llu rejected, %llu other (first: %s)",
              static_cast<unsigned long long>(tally.ok.load()),
              static_cast<unsigned long long>(tally.failed.load()),
              static_cast<unsigned long long>(tally.rejected.load()),
              static_cast<unsigned long long>(tally.other.load()), tally.first_wrong.c_str()));
  }
  const Json status = Status();
  const Json supervisor = status.is_discarded() ? Json() : status.value("supervisor", Json());
  const Json reexec = supervisor.is_object() ? supervisor.value("reexec", Json()) : Json();
  Check(ReadText("/proc/1/comm") == "bulkheadd" && supervisor.is_object() &&
            supervisor.value("pid", 0) == 1 && reexec.is_object() && reexec.value("count", 0) == 1,
        "PID 1 is bulkheadd after the re-exec, re-exec count 1 (/proc/1/comm: " +
            ReadText("/proc/1/comm") + ", supervisor.reexec: " + reexec.dump() + ")");
  std::map<std::string, Json> after = Cells();
  std::string moved;
  for (const auto& [name, cell] : before) {
    if (PidOf(after[name]) != PidOf(cell) || !Running(after[name])) {
      moved += Str(" %s:%d->%d", name.c_str(), PidOf(cell), PidOf(after[name]));
    }
  }
  Check(moved.empty() && after.size() == before.size(),
        Str("all %zu cells keep their worker pid across the re-exec (changed:%s)", before.size(),
            moved.c_str()));
  const Json& now = after["crasher"];
  Check(Counter(now, "ok") == Counter(crasher, "ok") + tally.ok.load() &&
            Counter(now, "failed") == Counter(crasher, "failed") &&
            Counter(now, "rejected") == Counter(crasher, "rejected"),
        Str("crasher's counters continue: ok %llu -> %llu (+%llu replies), failed %llu -> %llu, "
            "rejected %llu -> %llu",
            static_cast<unsigned long long>(Counter(crasher, "ok")),
            static_cast<unsigned long long>(Counter(now, "ok")),
            static_cast<unsigned long long>(tally.ok.load()),
            static_cast<unsigned long long>(Counter(crasher, "failed")),
            static_cast<unsigned long long>(Counter(now, "failed")),
            static_cast<unsigned long long>(Counter(crasher, "rejected")),
            static_cast<unsigned long long>(Counter(now, "rejected"))));
}

void CheckNoZombies() {
  std::vector<pid_t> zombies;
  bool none = Poll(
      [&] {
        zombies = testing::ZombieChildrenOf(1);
        return zombies.empty();
      },
      milliseconds(10000));
  std::string list;
  for (pid_t pid : zombies) list += Str(" %d", pid);
  Check(none, "no zombie child of PID 1 (found:" + list + ")");
}

int Main() {
  // Markers must start console lines, whatever bulkheadd does with a cell's stdout and stderr.
  int console = open("/dev/console", O_WRONLY | O_NOCTTY | O_CLOEXEC);
  if (console >= 0) {
    dup2(console, STDOUT_FILENO);
    dup2(console, STDERR_FILENO);
  }
  std::string uptime = ReadText("/proc/uptime");
  // The newline ends whatever the kernel left on the console line, so the marker starts a line.
  Print("\nBULKHEAD-VM-BOOTED uptime_s=%s kernel=%s init=bulkheadd",
        uptime.substr(0, uptime.find(' ')).c_str(), ReadText("/proc/sys/kernel/osrelease").c_str());
  CheckMounts();

  std::map<std::string, Json> cells;
  bool all_running = Poll(
      [&] {
        cells = Cells();
        if (cells.size() != static_cast<size_t>(kBurstCells) + 3) return false;
        for (const auto& [name, cell] : cells) {
          if (name != "checker" && !Running(cell)) return false;
        }
        return true;
      },
      milliseconds(60000));
  Check(all_running, Str("all %zu cells run, each in its cgroup", cells.size()));
  if (all_running) {
    CheckCrashRestart();
    CheckOrphansReaped();
    CheckBurst();
    CheckReexecUnderLoad();
    CheckNoZombies();
  }

  uptime = ReadText("/proc/uptime");
  if (g_failures == 0) {
    Print("BULKHEAD-VM-RESULT: PASS uptime_s=%s", uptime.substr(0, uptime.find(' ')).c_str());
  } else {
    Print("BULKHEAD-VM-RESULT: FAIL %d check(s) failed", g_failures);
  }
  // The orderly shutdown: bulkheadd stops every cell (this one too, with SIGTERM) and powers off.
  Print("pid1_checker: kill(1, SIGTERM)");
  kill(1, SIGTERM);
  while (true) pause();
}

}  // namespace
}  // namespace bulkhead::vm

int main() { return bulkhead::vm::Main(); }
