// SPDX-License-Identifier: MIT
#include "tests/vm/vm_probe.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>

namespace bulkhead::vm {

namespace {
std::map<pid_t, int> g_reaped;  // wait status of every process reaped so far
}  // namespace

void Print(const char* format, ...) {
  char line[2048];
  va_list args;
  va_start(args, format);
  int n = vsnprintf(line, sizeof(line) - 1, format, args);
  va_end(args);
  if (n < 0) return;
  size_t size = std::min<size_t>(static_cast<size_t>(n), sizeof(line) - 2);
  line[size] = '\n';
  ssize_t ignored = write(STDOUT_FILENO, line, size + 1);
  (void)ignored;
}

std::string Str(const char* format, ...) {
  char text[2048];
  va_list args;
  va_start(args, format);
  vsnprintf(text, sizeof(text), format, args);
  va_end(args);
  return text;
}

std::string ReadText(const std::string& path) {
  FILE* file = fopen(path.c_str(), "re");
  if (file == nullptr) return "<" + path + ": " + strerror(errno) + ">";
  std::string text;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), file)) > 0) text.append(buffer, n);
  fclose(file);
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

long long FlatKey(const std::string& path, const std::string& key) {
  std::string text = "\n" + ReadText(path) + "\n";
  size_t at = text.find("\n" + key + " ");
  return at == std::string::npos ? -1 : std::atoll(text.c_str() + at + key.size() + 2);
}

void ReapAvailable() {
  int status = 0;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) g_reaped[pid] = status;
}

std::optional<int> WaitForExit(pid_t pid, std::chrono::milliseconds deadline) {
  auto start = std::chrono::steady_clock::now();
  while (true) {
    ReapAvailable();
    if (auto it = g_reaped.find(pid); it != g_reaped.end()) return it->second;
    if (std::chrono::steady_clock::now() - start > deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::optional<int> ReapedStatus(pid_t pid) {
  auto it = g_reaped.find(pid);
  if (it == g_reaped.end()) return std::nullopt;
  return it->second;
}

std::string DescribeStatus(std::optional<int> status) {
  if (!status) return "still running";
  if (WIFSIGNALED(*status)) return Str("killed by signal %d", WTERMSIG(*status));
  return Str("exited %d", WEXITSTATUS(*status));
}

bool KilledBySigkill(std::optional<int> status) {
  return status && WIFSIGNALED(*status) && WTERMSIG(*status) == SIGKILL;
}

bool Gone(pid_t pid) { return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH; }

int ParentOf(pid_t pid) {
  std::string stat = ReadText(Str("/proc/%d/stat", pid));
  int ppid = 0;
  size_t paren = stat.rfind(')');
  if (paren != std::string::npos) sscanf(stat.c_str() + paren + 1, " %*c %d", &ppid);
  return ppid;
}

bool PollUntil(const std::function<bool()>& condition, std::chrono::milliseconds deadline,
               std::chrono::milliseconds interval) {
  auto start = std::chrono::steady_clock::now();
  while (!condition()) {
    if (std::chrono::steady_clock::now() - start > deadline) return false;
    std::this_thread::sleep_for(interval);
  }
  return true;
}

}  // namespace bulkhead::vm
