// SPDX-License-Identifier: MIT
// OomKillTracker and ProcessIsDying; see oom_kill_tracker.h.
#include "cell/oom_kill_tracker.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <string>

#include "base/unique_fd.h"

namespace bulkhead::cell {
namespace {

// PF_EXITING in the flags field of /proc/<pid>/stat (include/linux/sched.h): set by do_exit()
// once the process has started to exit, until it is a zombie.
constexpr uint64_t kPfExiting = 0x4;

uint64_t Rise(uint64_t before, uint64_t after) { return after > before ? after - before : 0; }

// The value of "Key:" in /proc/<pid>/status, or empty when there is no such line.
std::string_view StatusField(std::string_view status, std::string_view key) {
  size_t at = 0;
  while (at < status.size()) {
    size_t end = status.find('\n', at);
    if (end == std::string_view::npos) end = status.size();
    std::string_view line = status.substr(at, end - at);
    if (line.size() > key.size() && line.starts_with(key) && line[key.size()] == ':') {
      std::string_view value = line.substr(key.size() + 1);
      size_t begin = value.find_first_not_of(" \t");
      return begin == std::string_view::npos ? std::string_view() : value.substr(begin);
    }
    at = end + 1;
  }
  return {};
}

// A signal mask as /proc writes it (16 hex digits, signal N is bit N-1).
Result<bool> MaskHas(std::string_view mask, int signal, std::string_view key) {
  uint64_t bits = 0;
  auto [end, ec] = std::from_chars(mask.data(), mask.data() + mask.size(), bits, 16);
  if (mask.empty() || ec != std::errc() || end != mask.data() + mask.size()) {
    return Status::Error("/proc status: malformed " + std::string(key) + " \"" + std::string(mask) +
                         "\"");
  }
  return ((bits >> (signal - 1)) & 1U) != 0;
}

// Reads a /proc file whole. ENOENT and ESRCH (the process is gone) keep their errno.
Result<std::string> ReadProcFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return Status::FromErrno("open " + path);
  std::string text;
  char buffer[4096];
  while (true) {
    ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno("read " + path);
    if (n == 0) return text;
    text.append(buffer, static_cast<size_t>(n));
  }
}

}  // namespace

uint64_t CountOomKills(const MemoryEvents& before, const MemoryEvents& after, bool group_kill) {
  const uint64_t kills = Rise(before.oom_kill, after.oom_kill);
  if (!group_kill) return kills;
  if (after.has_oom_group_kill) return Rise(before.oom_group_kill, after.oom_group_kill);
  return kills > 0 ? 1 : 0;
}

OomKillTracker::Look OomKillTracker::Observe(const MemoryEvents& now, bool group_kill,
                                             bool worker_running) {
  Look look;
  look.before = last_;
  look.now = now;
  look.rose =
      Rise(last_.oom_kill, now.oom_kill) > 0 || Rise(last_.oom_group_kill, now.oom_group_kill) > 0;
  look.kills = CountOomKills(last_, now, group_kill);
  kills_ += look.kills;
  last_ = now;
  if (look.rose && worker_running) pending_ = true;
  return look;
}

bool OomKillTracker::WorkerDied(int wait_status, const Look& final_look) {
  const bool unexplained = final_look.rose || pending_;
  pending_ = false;
  return WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGKILL && unexplained;
}

Result<bool> ParseProcessDying(std::string_view proc_stat, std::string_view proc_status) {
  // "pid (comm) state ppid pgrp session tty_nr tpgid flags ...": comm may hold spaces and
  // parentheses, so the fields are counted from the last ')'.
  size_t paren = proc_stat.rfind(')');
  if (paren == std::string_view::npos || paren + 2 >= proc_stat.size()) {
    return Status::Error("/proc stat: no fields after the command name");
  }
  std::string_view fields = proc_stat.substr(paren + 2);
  const char state = fields.front();
  if (state == 'Z' || state == 'X' || state == 'x') return true;
  // The 7th field after the name is flags.
  size_t at = 0;
  for (int skip = 0; skip < 6; ++skip) {
    at = fields.find(' ', at);
    if (at == std::string_view::npos) return Status::Error("/proc stat: too few fields");
    ++at;
  }
  size_t end = fields.find(' ', at);
  std::string_view flags_text = fields.substr(at, end == std::string_view::npos ? end : end - at);
  uint64_t flags = 0;
  auto [parsed, ec] =
      std::from_chars(flags_text.data(), flags_text.data() + flags_text.size(), flags);
  if (ec != std::errc() || parsed != flags_text.data() + flags_text.size()) {
    return Status::Error("/proc stat: malformed flags \"" + std::string(flags_text) + "\"");
  }
  if ((flags & kPfExiting) != 0) return true;
  // SIGKILL queued and not yet acted on: per thread (SigPnd) or for the whole process (ShdPnd).
  for (std::string_view key : {"SigPnd", "ShdPnd"}) {
    Result<bool> has_kill = MaskHas(StatusField(proc_status, key), SIGKILL, key);
    if (!has_kill.ok()) return has_kill.status();
    if (*has_kill) return true;
  }
  return false;
}

Result<bool> ProcessIsDying(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid);
  Result<std::string> stat = ReadProcFile(dir + "/stat");
  Result<std::string> status = stat.ok() ? ReadProcFile(dir + "/status") : stat.status();
  for (const Status& failed : {stat.status(), status.status()}) {
    if (failed.ok()) continue;
    if (failed.error_number() == ENOENT || failed.error_number() == ESRCH) return true;
    return failed;
  }
  return ParseProcessDying(*stat, *status);
}

}  // namespace bulkhead::cell
