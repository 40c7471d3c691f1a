// SPDX-License-Identifier: MIT
// bulkhead-test-worker: the helper worker for integration tests, built on the worker SDK. Each
// request payload is a command, answered on that connection's thread (commands run concurrently).
//
// Commands (payload):
//   echo TEXT        OK TEXT
//   sleep MS         sleeps MS milliseconds, then OK "slept MS"
//   fail TEXT        FAILED/worker_error TEXT
//   exit CODE        _exit(CODE) mid-request, no reply
//   crash            raise(SIGSEGV) (RLIMIT_CORE set to 0 first, so no core file is written)
//   hang             never answers (the connection's thread blocks forever)
//   wait-file PATH   waits until PATH exists (woken by inotify), then OK "found PATH": a request
//                    that ends when the test says so
//   peak             OK with the peak number of requests running at once so far (this one counts)
//   pid              OK getpid()
//   fds              OK the open descriptors, ascending, space-separated ("0 1 2 3 4")
//   env NAME         OK the value of NAME, or "<unset>"
//   spawn-grandchild double-forks a grandchild that calls setsid() (its own session and process
//                    group, reparented away from the worker), closes every descriptor above 2
//                    and sleeps forever; OK with the grandchild's pid
//   spawn-term-logger PATH  as spawn-grandchild, but on SIGTERM the grandchild appends
//                    "SIGTERM <pid>\n" to PATH (opened O_APPEND before the reply) and exits 0:
//                    shows whether a stop signalled a helper outside the worker's session
//   alloc MIB        allocates and touches MIB MiB, kept until exit; OK "allocated MIB MiB"
//   alloc-child MIB ADJ  forks a helper that sets its oom_score_adj to ADJ (-1000..1000), then
//                    touches MIB MiB and exits 0; waits for it and answers OK "helper PID exit N"
//                    or "helper PID signal N" (an OOM-killed helper: "signal 9")
//   hold MIB MS      maps and touches MIB MiB, keeps them MS ms (sleeping), unmaps them, then OK
//                    "held MIB MiB": a request whose memory lives as long as it runs (the adaptive
//                    bench's memory-bound workload); FAILED if the mapping fails
//   burn MS          spins on the CPU for MS ms of wall-clock time (one thread), then OK
//                    "burned MS ms, cpu N us" (N: this thread's CPU time, CLOCK_THREAD_CPUTIME_ID)
//   cpu US           spins until this thread has used US µs of CPU time (CLOCK_THREAD_CPUTIME_ID),
//                    then OK "cpu US us": work whose service time grows with the requests
//                    sharing the CPUs (the adaptive bench's CPU-bound workload), unlike burn's
//   forkbomb MAX     forks up to MAX children that pause forever, stopping at the first fork that
//                    fails; OK "forked N" or "forked N, then fork: <strerror>". The children stay
//                    in the worker's process group (and cgroup) until the worker is torn down.
//   notify TEXT      sends TEXT as one datagram to $NOTIFY_SOCKET (sd_notify(3)), e.g.
//                    "STATUS=warming up"; OK "notified", or FAILED with the errno text
//   stop-watchdog    stops the --watchdog pings (the next WATCHDOG=1 never comes); OK
//   print-stdout TEXT  writes TEXT and a newline to stdout with one write(2); OK "printed"
//   print-stderr TEXT  the same on stderr
//   flood N          writes N lines "flood line I" (I = 1..N) to stdout, blocking while the pipe is
//                    full; OK "flooded N"
//   long-line BYTES  writes one line of BYTES 'x' and a newline to stdout; OK "wrote BYTES"
//   last-words TEXT  writes TEXT to stderr without a newline, then crashes as `crash` does
//   self             OK with what the worker was started with, captured first thing in main(),
//                    before it changed anything: one "Key:\tvalue" line each of /proc/self/status
//                    Uid, Gid, Groups, Umask, NoNewPrivs, SigBlk, SigIgn (values as the kernel
//                    writes them), then "OomScoreAdj:\tN" (/proc/self/oom_score_adj), then
//                    "Fds:\t0 1 2 3" (open descriptors, ascending), then one
//                    "Env:\tNAME=VALUE" line per environment entry, in environ order
//   blob N           OK with N bytes of BlobPattern (tests/helpers/blob_pattern.h): large replies
//   exit-mid-reply N (N >= 1) writes the header of an OK reply of N bytes of BlobPattern and its
//                    first N / 2 bytes on the request's connection, then _exit(3)s: the supervisor
//                    always sees a reply cut short by the worker's death, whatever N
// Anything else is FAILED/worker_error "unknown command: ...".
//
// Switches: --peak-file PATH (each time the peak of requests running at once rises, the new peak
// is appended to PATH as a line, O_APPEND, so every generation of the worker adds to one file);
// --ignore-sigterm; --ready-file PATH (the pid is written to PATH, atomically, once the
// socket is taken and just before serving); --exit-after-ms N (_exit(0) N ms after start);
// --notify-ready-after-ms N (READY=1 to $NOTIFY_SOCKET N ms after start); --notify-ready-when-file
// PATH (READY=1 once PATH exists, looked at every 5 ms: readiness when the test says); --watchdog
// (WATCHDOG=1 to $NOTIFY_SOCKET every WATCHDOG_USEC / 2 until `stop-watchdog`; nothing without
// WATCHDOG_USEC). Exit codes: 1 without a listening socket (LISTEN_FDS), 2 for bad switches.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/exit_status.h"
#include "cell/worker.h"
#include "ipc/frame.h"
#include "tests/helpers/blob_pattern.h"
#include "tests/helpers/file_wait.h"

namespace bulkhead {
namespace {

using cell::HandlerResult;

std::atomic<int> g_running{0};
std::atomic<int> g_peak{0};
// --peak-file, opened O_APPEND before any thread starts; -1 without it.
int g_peak_fd = -1;

void RecordPeak(int peak) {
  if (g_peak_fd < 0) return;
  std::string line = std::to_string(peak) + "\n";
  ssize_t written = ::write(g_peak_fd, line.data(), line.size());
  (void)written;
}

// Counts a request as running for its lifetime, keeping g_peak up to date.
class RunningScope {
 public:
  RunningScope() {
    int now = g_running.fetch_add(1) + 1;
    int peak = g_peak.load();
    while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
    }
    if (now > peak) RecordPeak(now);
  }
  ~RunningScope() { g_running.fetch_sub(1); }
};

bool ParseInt(std::string_view text, long* value) {
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *value);
  return ec == std::errc() && ptr == text.data() + text.size();
}

std::string OpenFds() {
  std::vector<int> fds;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return "<opendir failed>";
  int own = ::dirfd(dir);
  while (dirent* entry = ::readdir(dir)) {
    long fd = 0;
    if (!ParseInt(entry->d_name, &fd) || fd == own) continue;
    fds.push_back(static_cast<int>(fd));
  }
  ::closedir(dir);
  std::sort(fds.begin(), fds.end());
  std::string text;
  for (int fd : fds) {
    if (!text.empty()) text += ' ';
    text += std::to_string(fd);
  }
  return text;
}

// After fork in a threaded process the children make only async-signal-safe calls.
// spawn-term-logger: the grandchild's log descriptor and line, for its SIGTERM handler.
int g_term_log_fd = -1;
char g_term_line[32];
size_t g_term_line_size = 0;

void OnTermLogged(int) {
  ssize_t ignored = ::write(g_term_log_fd, g_term_line, g_term_line_size);
  (void)ignored;
  ::_exit(0);
}

// `term_log`: empty for spawn-grandchild, the log path for spawn-term-logger.
HandlerResult SpawnGrandchild(std::string_view term_log = {}) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return HandlerResult::Error(std::strerror(errno));
  pid_t middle = ::fork();
  if (middle < 0) return HandlerResult::Error(std::string("fork: ") + std::strerror(errno));
  if (middle == 0) {
    if (::fork() == 0) {
      // Its own session and process group: kill(-worker_pid) misses it, only the cgroup holds it.
      // The pid is reported after setsid(), so the reply describes the settled grandchild.
      ::setsid();
      pid_t self = ::getpid();
      // The handler is in place before the pid is reported: a stop right after the reply finds it.
      if (!term_log.empty()) {
        g_term_log_fd =
            ::open(std::string(term_log).c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        int n = std::snprintf(g_term_line, sizeof g_term_line, "SIGTERM %d\n", self);
        g_term_line_size = n > 0 ? static_cast<size_t>(n) : 0;
        struct sigaction action {};
        action.sa_handler = &OnTermLogged;
        ::sigaction(SIGTERM, &action, nullptr);
        sigset_t term;
        sigemptyset(&term);
        sigaddset(&term, SIGTERM);
        ::pthread_sigmask(SIG_UNBLOCK, &term, nullptr);
      }
      ssize_t ignored = ::write(pipe_fds[1], &self, sizeof self);
      (void)ignored;
      if (g_term_log_fd >= 3) {
        // Every descriptor above 2 but the log.
        if (g_term_log_fd > 3) ::syscall(SYS_close_range, 3u, g_term_log_fd - 1u, 0u);
        ::syscall(SYS_close_range, g_term_log_fd + 1u, ~0u, 0u);
      } else {
        ::syscall(SYS_close_range, 3u, ~0u, 0u);
      }
      while (true) ::pause();
    }
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  pid_t grandchild = -1;
  ssize_t n;
  do {
    n = ::read(pipe_fds[0], &grandchild, sizeof grandchild);
  } while (n < 0 && errno == EINTR);
  ::close(pipe_fds[0]);
  int wait_status = 0;
  while (::waitpid(middle, &wait_status, 0) < 0 && errno == EINTR) {
  }
  if (n != sizeof grandchild || grandchild <= 0)
    return HandlerResult::Error("grandchild fork failed");
  return HandlerResult::Ok(std::to_string(grandchild));
}

HandlerResult Allocate(long mib) {
  constexpr size_t kMiB = 1024 * 1024;
  for (long i = 0; i < mib; ++i) {
    // Leaked on purpose: held until exit, like a memory-hungry worker.
    char* block = static_cast<char*>(std::malloc(kMiB));
    if (block == nullptr)
      return HandlerResult::Error("malloc failed after " + std::to_string(i) + " MiB");
    std::memset(block, 0x5a, kMiB);
  }
  return HandlerResult::Ok("allocated " + std::to_string(mib) + " MiB");
}

// A helper process in the worker's cell that the OOM killer may pick: after fork in a threaded
// process it makes only async-signal-safe calls (open, write, mmap, memset).
HandlerResult AllocateInChild(long mib, long adj) {
  const std::string adj_text = std::to_string(adj);
  pid_t helper = ::fork();
  if (helper < 0) return HandlerResult::Error(std::string("fork: ") + std::strerror(errno));
  if (helper == 0) {
    int fd = ::open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (fd < 0 || ::write(fd, adj_text.data(), adj_text.size()) < 0) ::_exit(2);
    ::close(fd);
    const size_t bytes = static_cast<size_t>(mib) * 1024 * 1024;
    void* block =
        ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (block == MAP_FAILED) ::_exit(3);
    std::memset(block, 0x5a, bytes);
    ::_exit(0);
  }
  int wait_status = 0;
  while (::waitpid(helper, &wait_status, 0) < 0 && errno == EINTR) {
  }
  std::string end = WIFSIGNALED(wait_status) ? "signal " + std::to_string(WTERMSIG(wait_status))
                                             : "exit " + std::to_string(WEXITSTATUS(wait_status));
  return HandlerResult::Ok("helper " + std::to_string(helper) + " " + end);
}

uint64_t ThreadCpuNs() {
  timespec cpu{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
  return static_cast<uint64_t>(cpu.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(cpu.tv_nsec);
}

HandlerResult SpinCpu(long us) {
  const uint64_t end = ThreadCpuNs() + static_cast<uint64_t>(us) * 1000u;
  volatile uint64_t spins = 0;
  while (ThreadCpuNs() < end) {
    for (int i = 0; i < 1000; ++i) spins = spins + 1;
  }
  return HandlerResult::Ok("cpu " + std::to_string(us) + " us");
}

HandlerResult Hold(long mib, long ms) {
  const size_t bytes = static_cast<size_t>(mib) * 1024 * 1024;
  void* block = bytes == 0 ? nullptr
                           : ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (block == MAP_FAILED) return HandlerResult::Error(std::string("mmap: ") + std::strerror(errno));
  // Huge pages where the kernel has them: one fault per 2 MiB, not per 4 KiB (in a TCG guest a
  // fault costs as much as touching the page). Charged to the cgroup all the same.
  if (block != nullptr) (void)::madvise(block, bytes, MADV_HUGEPAGE);
  if (block != nullptr) std::memset(block, 0x5a, bytes);
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  if (block != nullptr) ::munmap(block, bytes);
  return HandlerResult::Ok("held " + std::to_string(mib) + " MiB");
}

HandlerResult Burn(long ms) {
  using std::chrono::steady_clock;
  const steady_clock::time_point end = steady_clock::now() + std::chrono::milliseconds(ms);
  volatile uint64_t spins = 0;
  while (steady_clock::now() < end) {
    for (int i = 0; i < 1000; ++i) spins = spins + 1;
  }
  timespec cpu{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
  long long cpu_us = static_cast<long long>(cpu.tv_sec) * 1000000 + cpu.tv_nsec / 1000;
  return HandlerResult::Ok("burned " + std::to_string(ms) + " ms, cpu " + std::to_string(cpu_us) +
                           " us");
}

// After fork in a threaded process the children make only async-signal-safe calls (pause).
HandlerResult ForkBomb(long max) {
  long forked = 0;
  while (forked < max) {
    pid_t child = ::fork();
    if (child < 0) {
      return HandlerResult::Ok("forked " + std::to_string(forked) +
                               ", then fork: " + std::strerror(errno));
    }
    if (child == 0) {
      while (true) ::pause();
    }
    ++forked;
  }
  return HandlerResult::Ok("forked " + std::to_string(forked));
}

// The answer to `self`, captured at the start of Main.
std::string g_started_with;

std::string CaptureStartedWith() {
  std::string text;
  if (std::FILE* status = std::fopen("/proc/self/status", "re")) {
    char line[4096];
    while (std::fgets(line, sizeof line, status) != nullptr) {
      std::string_view entry = line;
      for (std::string_view key :
           {"Uid:", "Gid:", "Groups:", "Umask:", "NoNewPrivs:", "SigBlk:", "SigIgn:"}) {
        if (entry.starts_with(key)) text += entry;
      }
    }
    std::fclose(status);
  }
  if (std::FILE* adj = std::fopen("/proc/self/oom_score_adj", "re")) {
    char value[32] = {};
    if (std::fgets(value, sizeof value, adj) != nullptr)
      text += std::string("OomScoreAdj:\t") + value;
    std::fclose(adj);
  }
  text += "Fds:\t" + OpenFds() + "\n";
  for (char** entry = environ; *entry != nullptr; ++entry) {
    text += "Env:\t";
    text += *entry;
    text += '\n';
  }
  return text;
}

// Cleared by `stop-watchdog`: the --watchdog thread sends no further WATCHDOG=1.
std::atomic<bool> g_watchdog_pings{true};
// $NOTIFY_SOCKET, read in Main before any thread starts; empty when unset.
std::string g_notify_socket;

// Returns once `path` exists: how the test tells the worker to go on (the `wait-file` command,
// --notify-ready-when-file). Woken by inotify(7), not by polling (tests/helpers/file_wait.h).
void WaitForFile(const std::string& path) {
  testing::WaitForFile(
      path, [&path] { return ::access(path.c_str(), F_OK) == 0; }, std::nullopt);
}

// Sends `text` as one datagram to g_notify_socket, as sd_notify(3) does (a leading '@' names an
// abstract socket). The kernel attaches this process's credentials. Returns "" or the error.
std::string SendNotify(std::string_view text) {
  if (g_notify_socket.empty()) return "NOTIFY_SOCKET is not set";
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (g_notify_socket.size() >= sizeof address.sun_path) return "NOTIFY_SOCKET is too long";
  std::memcpy(address.sun_path, g_notify_socket.data(), g_notify_socket.size());
  socklen_t length =
      static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + g_notify_socket.size());
  if (address.sun_path[0] == '@') {
    address.sun_path[0] = '\0';
  } else {
    length += 1;  // the terminating NUL of a path
  }
  int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::string("socket: ") + std::strerror(errno);
  ssize_t sent = ::sendto(fd, text.data(), text.size(), MSG_NOSIGNAL,
                          reinterpret_cast<const sockaddr*>(&address), length);
  std::string error = sent < 0
                          ? std::string("sendto ") + g_notify_socket + ": " + std::strerror(errno)
                          : std::string();
  ::close(fd);
  return error;
}

// raise(SIGSEGV), RLIMIT_CORE set to 0 first so that no core file is written.
HandlerResult Crash() {
  rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  ::raise(SIGSEGV);
  return HandlerResult::Error("SIGSEGV did not kill the worker");
}

// Writes all of `text` to `fd`, going on after short writes.
bool WriteAll(int fd, std::string_view text) {
  while (!text.empty()) {
    ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    text.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

HandlerResult Print(int fd, std::string_view text) {
  if (!WriteAll(fd, std::string(text) + "\n")) return HandlerResult::Error(std::strerror(errno));
  return HandlerResult::Ok("printed");
}

HandlerResult Flood(long lines) {
  std::string chunk;
  for (long i = 1; i <= lines; ++i) {
    chunk += "flood line " + std::to_string(i) + "\n";
    if (chunk.size() >= 16384 || i == lines) {
      if (!WriteAll(STDOUT_FILENO, chunk)) return HandlerResult::Error(std::strerror(errno));
      chunk.clear();
    }
  }
  return HandlerResult::Ok("flooded " + std::to_string(lines));
}

// Writes the header of an OK reply of `size` bytes and the first size / 2 bytes of its payload to
// the request's connection, then _exit(3)s: a reply cut short at a known point, not a race.
HandlerResult ExitMidReply(size_t size) {
  std::optional<cell::RequestContext> request = cell::CurrentRequest();
  if (!request) return HandlerResult::Error("exit-mid-reply: no request context");
  ipc::FrameHeader header;
  header.type = ipc::FrameType::kReply;
  header.status = ipc::ReplyStatus::kOk;
  header.reason = ipc::Reason::kNone;
  header.request_id = request->request_id;
  std::string frame;
  ipc::AppendFrame(&frame, header, testing::BlobPattern(size));
  frame.resize(ipc::kHeaderSize + size / 2);
  // Not interleaved with a reply another thread writes on a multiplexed connection.
  cell::WriteToCurrentConnection(frame);
  ::_exit(3);
}

HandlerResult Handle(std::string_view payload) {
  RunningScope running;
  size_t space = payload.find(' ');
  std::string_view command = payload.substr(0, space);
  std::string_view argument = space == std::string_view::npos ? "" : payload.substr(space + 1);
  long number = 0;

  if (command == "echo") return HandlerResult::Ok(std::string(argument));
  if (command == "fail") return HandlerResult::Error(std::string(argument));
  if (command == "sleep" && ParseInt(argument, &number) && number >= 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(number));
    return HandlerResult::Ok("slept " + std::string(argument));
  }
  if (command == "exit" && ParseInt(argument, &number)) ::_exit(static_cast<int>(number));
  if (command == "crash") return Crash();
  if (command == "hang") {
    while (true) ::pause();
  }
  if (command == "wait-file" && !argument.empty()) {
    const std::string path(argument);
    WaitForFile(path);
    return HandlerResult::Ok("found " + path);
  }
  if (command == "peak") return HandlerResult::Ok(std::to_string(g_peak.load()));
  if (command == "pid") return HandlerResult::Ok(std::to_string(::getpid()));
  if (command == "fds") return HandlerResult::Ok(OpenFds());
  if (command == "env") {
    const char* value = std::getenv(std::string(argument).c_str());
    return HandlerResult::Ok(value != nullptr ? value : "<unset>");
  }
  if (command == "spawn-grandchild") return SpawnGrandchild();
  if (command == "spawn-term-logger" && !argument.empty()) return SpawnGrandchild(argument);
  if (command == "alloc" && ParseInt(argument, &number) && number >= 0) return Allocate(number);
  if (command == "alloc-child") {
    size_t split = argument.find(' ');
    long adj = 0;
    if (split != std::string_view::npos && ParseInt(argument.substr(0, split), &number) &&
        number >= 0 && ParseInt(argument.substr(split + 1), &adj)) {
      return AllocateInChild(number, adj);
    }
  }
  if (command == "hold") {
    const size_t split = argument.find(' ');
    long ms = 0;
    if (split != std::string_view::npos && ParseInt(argument.substr(0, split), &number) &&
        number >= 0 && ParseInt(argument.substr(split + 1), &ms) && ms >= 0) {
      return Hold(number, ms);
    }
  }
  if (command == "burn" && ParseInt(argument, &number) && number >= 0) return Burn(number);
  if (command == "cpu" && ParseInt(argument, &number) && number >= 0) return SpinCpu(number);
  if (command == "forkbomb" && ParseInt(argument, &number) && number >= 0) return ForkBomb(number);
  if (command == "notify") {
    std::string error = SendNotify(argument);
    return error.empty() ? HandlerResult::Ok("notified") : HandlerResult::Error(error);
  }
  if (command == "print-stdout") return Print(STDOUT_FILENO, argument);
  if (command == "print-stderr") return Print(STDERR_FILENO, argument);
  if (command == "flood" && ParseInt(argument, &number) && number >= 0) return Flood(number);
  if (command == "long-line" && ParseInt(argument, &number) && number >= 0) {
    if (!WriteAll(STDOUT_FILENO, std::string(static_cast<size_t>(number), 'x') + "\n")) {
      return HandlerResult::Error(std::strerror(errno));
    }
    return HandlerResult::Ok("wrote " + std::string(argument));
  }
  if (command == "last-words") {
    WriteAll(STDERR_FILENO, argument);
    return Crash();
  }
  if (command == "self") return HandlerResult::Ok(g_started_with);
  if (command == "blob" && ParseInt(argument, &number) && number >= 0) {
    return HandlerResult::Ok(testing::BlobPattern(static_cast<size_t>(number)));
  }
  if (command == "exit-mid-reply" && ParseInt(argument, &number) && number >= 1) {
    return ExitMidReply(static_cast<size_t>(number));
  }
  if (command == "stop-watchdog") {
    g_watchdog_pings.store(false);
    return HandlerResult::Ok("watchdog stopped");
  }
  return HandlerResult::Error("unknown command: " + std::string(payload));
}

bool WriteReadyFile(const std::string& path) {
  std::string temporary = path + ".tmp";
  FILE* file = std::fopen(temporary.c_str(), "we");
  if (file == nullptr) return false;
  std::fprintf(file, "%d\n", static_cast<int>(::getpid()));
  bool written = std::fclose(file) == 0;
  return written && std::rename(temporary.c_str(), path.c_str()) == 0;
}

int Usage(const char* message) {
  std::fprintf(
      stderr,
      "bulkhead-test-worker: %s\n"
      "usage: bulkhead-test-worker [--peak-file PATH] [--ignore-sigterm] [--ready-file PATH] "
      "[--exit-after-ms N] [--notify-ready-after-ms N] [--notify-ready-when-file PATH] "
      "[--watchdog]\n",
      message);
  return kExitUsage;
}

int Main(int argc, char** argv) {
  g_started_with = CaptureStartedWith();
  bool ignore_sigterm = false;
  std::string ready_file;
  long exit_after_ms = -1;
  long notify_ready_after_ms = -1;
  std::string notify_ready_file;
  bool watchdog = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--ignore-sigterm") {
      ignore_sigterm = true;
    } else if (arg == "--peak-file" && i + 1 < argc) {
      g_peak_fd = ::open(argv[++i], O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (g_peak_fd < 0) return Usage("--peak-file: cannot open the file");
    } else if (arg == "--ready-file" && i + 1 < argc) {
      ready_file = argv[++i];
    } else if (arg == "--exit-after-ms" && i + 1 < argc) {
      if (!ParseInt(argv[++i], &exit_after_ms) || exit_after_ms < 0) {
        return Usage("--exit-after-ms needs a number of milliseconds");
      }
    } else if (arg == "--notify-ready-after-ms" && i + 1 < argc) {
      if (!ParseInt(argv[++i], &notify_ready_after_ms) || notify_ready_after_ms < 0) {
        return Usage("--notify-ready-after-ms needs a number of milliseconds");
      }
    } else if (arg == "--notify-ready-when-file" && i + 1 < argc) {
      notify_ready_file = argv[++i];
    } else if (arg == "--watchdog") {
      watchdog = true;
    } else {
      return Usage(("unknown argument: " + std::string(arg)).c_str());
    }
  }

  if (ignore_sigterm) ::signal(SIGTERM, SIG_IGN);
  // Before any thread: ListenFdFromEnv calls unsetenv.
  Result<int> listen_fd = cell::ListenFdFromEnv();
  if (!listen_fd.ok()) {
    std::fprintf(stderr, "bulkhead-test-worker: %s\n", listen_fd.status().message().c_str());
    return kExitFailure;
  }
  if (exit_after_ms >= 0) {
    std::thread([exit_after_ms] {
      std::this_thread::sleep_for(std::chrono::milliseconds(exit_after_ms));
      ::_exit(kExitOk);
    }).detach();
  }
  if (const char* notify_socket = std::getenv("NOTIFY_SOCKET")) g_notify_socket = notify_socket;
  if (notify_ready_after_ms >= 0) {
    std::thread([notify_ready_after_ms] {
      std::this_thread::sleep_for(std::chrono::milliseconds(notify_ready_after_ms));
      std::string error = SendNotify("READY=1");
      if (!error.empty())
        std::fprintf(stderr, "bulkhead-test-worker: READY=1: %s\n", error.c_str());
    }).detach();
  }
  if (!notify_ready_file.empty()) {
    std::thread([notify_ready_file] {
      WaitForFile(notify_ready_file);
      std::string error = SendNotify("READY=1");
      if (!error.empty())
        std::fprintf(stderr, "bulkhead-test-worker: READY=1: %s\n", error.c_str());
    }).detach();
  }
  long watchdog_usec = 0;
  const char* watchdog_env = std::getenv("WATCHDOG_USEC");
  if (watchdog && watchdog_env != nullptr && ParseInt(watchdog_env, &watchdog_usec) &&
      watchdog_usec > 0) {
    std::thread([watchdog_usec] {
      while (g_watchdog_pings.load()) {
        std::string error = SendNotify("WATCHDOG=1");
        if (!error.empty()) {
          std::fprintf(stderr, "bulkhead-test-worker: WATCHDOG=1: %s\n", error.c_str());
        }
        std::this_thread::sleep_for(std::chrono::microseconds(watchdog_usec / 2));
      }
    }).detach();
  }
  if (!ready_file.empty() && !WriteReadyFile(ready_file)) {
    std::fprintf(stderr, "bulkhead-test-worker: cannot write %s: %s\n", ready_file.c_str(),
                 std::strerror(errno));
    return kExitFailure;
  }
  return cell::Serve(*listen_fd, Handle);
}

}  // namespace
}  // namespace bulkhead

int main(int argc, char** argv) { return bulkhead::Main(argc, argv); }
