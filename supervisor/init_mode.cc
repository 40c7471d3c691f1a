// SPDX-License-Identifier: MIT
// Init mode: mounts, console, ctrl-alt-del, subreaper and the final poweroff/reboot (init_mode.h).
#include "supervisor/init_mode.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "base/clock.h"
#include "base/unique_fd.h"

namespace bulkhead::supervisor {
namespace {

constexpr char kMountInfo[] = "/proc/self/mountinfo";
constexpr int kReapPollMs = 10;
// After SIGKILL nothing can ignore its end; this bounds only a process stuck in the kernel (D
// state).
constexpr int kStrayKillWaitMs = 5000;

// Splits on single spaces (mountinfo fields never contain a raw space: they are escaped).
std::vector<std::string_view> Fields(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t begin = 0;
  while (begin <= line.size()) {
    size_t end = line.find(' ', begin);
    if (end == std::string_view::npos) end = line.size();
    if (end > begin) fields.push_back(line.substr(begin, end - begin));
    begin = end + 1;
  }
  return fields;
}

// Decodes the kernel's octal escapes (\040 space, \011 tab, \012 newline, \134 backslash).
std::string Unescape(std::string_view field) {
  std::string out;
  out.reserve(field.size());
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size()) {
      std::string_view digits = field.substr(i + 1, 3);
      if (digits.size() == 3 && digits[0] >= '0' && digits[0] <= '3' && digits[1] >= '0' &&
          digits[1] <= '7' && digits[2] >= '0' && digits[2] <= '7') {
        out +=
            static_cast<char>((digits[0] - '0') * 64 + (digits[1] - '0') * 8 + (digits[2] - '0'));
        i += 3;
        continue;
      }
    }
    out += field[i];
  }
  return out;
}

std::optional<std::string> ReadSmallFile(const char* path) {
  UniqueFd fd(::open(path, O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return std::nullopt;
  std::string text;
  char buffer[4096];
  while (true) {
    ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) return text;
    text.append(buffer, static_cast<size_t>(n));
  }
}

std::string ErrnoText(int err) { return std::strerror(err); }

// mkdir -p of an absolute path, mode 0755; errors other than EEXIST are returned.
int MakePath(std::string_view path) {
  for (size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    std::string prefix(path.substr(0, slash));
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) return errno;
    if (slash == std::string_view::npos) return 0;
  }
}

// Mounts `m`; 0 or the errno of the failure.
int Mount(const EssentialMount& m) {
  std::string target(m.target), type(m.fs_type), source(m.source), data(m.data);
  if (int err = MakePath(target); err != 0) return err;
  if (::mount(source.c_str(), target.c_str(), type.c_str(), m.flags,
              data.empty() ? nullptr : data.c_str()) == 0) {
    return 0;
  }
  int err = errno;
  // nsdelegate is refused outside the initial cgroup namespace (a container's PID 1).
  if (err == EINVAL && !data.empty() &&
      ::mount(source.c_str(), target.c_str(), type.c_str(), m.flags, nullptr) == 0) {
    return 0;
  }
  return err;
}

std::string Describe(const EssentialMount& m) {
  std::string text(m.fs_type);
  text += " on ";
  text += m.target;
  return text;
}

// Points closed descriptors among 0-2 at /dev/console. Returns how many it opened, or -errno.
int AttachConsole() {
  std::vector<int> closed;
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) < 0 && errno == EBADF) closed.push_back(fd);
  }
  if (closed.empty()) return 0;
  // Not O_CLOEXEC: 0-2 are inherited by the workers (cell/process.h); O_NOCTTY: PID 1 must not
  // take a controlling terminal, or the kernel would send it SIGHUP on hangup.
  int console = ::open("/dev/console", O_RDWR | O_NOCTTY);
  if (console < 0) return -errno;
  for (int fd : closed) {
    if (fd != console) ::dup2(console, fd);
  }
  if (console > 2) ::close(console);
  return static_cast<int>(closed.size());
}

// Reaps every child until none is left (ECHILD) or `timeout_ms` passes; true when none is left.
bool ReapUntilNoChildren(int timeout_ms) {
  // After the loop ended: the clock read on every call.
  const MonotonicClock clock;
  const uint64_t deadline = clock.NowMs() + static_cast<uint64_t>(timeout_ms);
  while (true) {
    pid_t pid = ::waitpid(-1, nullptr, WNOHANG);
    if (pid > 0 || (pid < 0 && errno == EINTR)) continue;
    if (pid < 0) return true;  // ECHILD: none left
    if (clock.NowMs() >= deadline) return false;
    timespec pause{0, kReapPollMs * 1000000L};
    ::nanosleep(&pause, nullptr);
  }
}

}  // namespace

std::vector<MountInfoEntry> ParseMountInfo(std::string_view text) {
  std::vector<MountInfoEntry> entries;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    std::vector<std::string_view> fields = Fields(text.substr(begin, end - begin));
    begin = end + 1;
    // id parent major:minor root mount_point options [optional...] - type source super_options
    if (fields.size() < 9) continue;
    size_t separator = 6;
    while (separator < fields.size() && fields[separator] != "-") ++separator;
    if (separator + 2 >= fields.size()) continue;
    if (fields[4].empty() || fields[4][0] != '/') continue;
    entries.push_back(
        {Unescape(fields[4]), std::string(fields[separator + 1]), Unescape(fields[separator + 2])});
  }
  return entries;
}

const std::vector<EssentialMount>& EssentialMounts() {
  static const std::vector<EssentialMount> mounts = {
      {"/proc", "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, ""},
      {"/dev", "devtmpfs", "devtmpfs", MS_NOSUID, "mode=0755"},
      {"/sys", "sysfs", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, ""},
      {"/sys/fs/cgroup", "cgroup2", "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, "nsdelegate"},
      {"/run", "tmpfs", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755"},
  };
  return mounts;
}

std::vector<MountStep> PlanMounts(const std::vector<MountInfoEntry>& mounted, bool in_container) {
  std::vector<MountStep> steps;
  for (const EssentialMount& m : EssentialMounts()) {
    MountStep step;
    step.mount = &m;
    for (const MountInfoEntry& entry : mounted) {
      if (entry.mount_point == m.target) step.present_type = entry.fs_type;  // topmost wins
    }
    if (step.present_type.empty()) {
      step.decision = in_container ? MountDecision::kLeftToRuntime : MountDecision::kMount;
    } else {
      step.decision =
          step.present_type == m.fs_type ? MountDecision::kPresent : MountDecision::kPresentAsOther;
    }
    steps.push_back(std::move(step));
  }
  return steps;
}

std::vector<InitLogLine> SetUpInit(std::string_view container) {
  std::vector<InitLogLine> lines;
  const bool in_container = !container.empty();
  lines.push_back({LogLevel::kInfo,
                   in_container ? "bulkheadd is PID 1 of a " + std::string(container) +
                                      " container: init mode (docs/pid1.md, docs/containers.md)"
                                : std::string("bulkheadd is PID 1: init mode (docs/pid1.md)")});
  std::optional<std::string> mountinfo = ReadSmallFile(kMountInfo);
  if (!mountinfo && !in_container) {
    const EssentialMount& proc = EssentialMounts().front();
    if (int err = Mount(proc); err != 0) {
      lines.push_back({LogLevel::kError, "mount " + Describe(proc) + ": " + ErrnoText(err)});
    } else {
      lines.push_back({LogLevel::kInfo, "mounted " + Describe(proc)});
    }
    mountinfo = ReadSmallFile(kMountInfo);
  }
  if (!mountinfo) {
    lines.push_back({LogLevel::kError, std::string("cannot read ") + kMountInfo + ": " +
                                           ErrnoText(errno) + "; nothing else is mounted"});
  } else {
    for (const MountStep& step : PlanMounts(ParseMountInfo(*mountinfo), in_container)) {
      const EssentialMount& m = *step.mount;
      switch (step.decision) {
        case MountDecision::kPresent:
          break;
        case MountDecision::kLeftToRuntime:
          lines.push_back(
              {LogLevel::kDebug,
               std::string(m.target) + ": nothing mounted; left to the container runtime"});
          break;
        case MountDecision::kPresentAsOther:
          lines.push_back({in_container ? LogLevel::kInfo : LogLevel::kWarning,
                           std::string(m.target) + " holds " + step.present_type + ", not " +
                               std::string(m.fs_type) + ": left as it is"});
          break;
        case MountDecision::kMount:
          if (int err = Mount(m); err != 0) {
            lines.push_back({LogLevel::kError, "mount " + Describe(m) + ": " + ErrnoText(err)});
          } else {
            lines.push_back({LogLevel::kInfo, "mounted " + Describe(m)});
          }
          break;
      }
    }
  }
  int attached = AttachConsole();
  if (attached < 0) {
    lines.push_back({LogLevel::kError, "open /dev/console for stdio: " + ErrnoText(-attached)});
  } else if (attached > 0) {
    lines.push_back({LogLevel::kInfo, "stdio attached to /dev/console"});
  }
  if (!in_container && ::reboot(RB_DISABLE_CAD) != 0) {
    lines.push_back(
        {LogLevel::kWarning, "reboot(RB_DISABLE_CAD): " + ErrnoText(errno) +
                                 "; ctrl-alt-del keeps the kernel's default (immediate reboot)"});
  }
  return lines;
}

Status BecomeChildSubreaper() {
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    return Status::FromErrno("prctl(PR_SET_CHILD_SUBREAPER)");
  }
  return Status::Ok();
}

config::ShutdownAction TakeoverFailedAction(config::ShutdownAction on_shutdown, bool pid1,
                                            bool in_container) {
  if (pid1 && !in_container && on_shutdown == config::ShutdownAction::kExit) {
    return config::ShutdownAction::kReboot;
  }
  return on_shutdown;
}

int EndProcess(config::ShutdownAction action, int exit_code, bool pid1) {
  if (action == config::ShutdownAction::kExit) return exit_code;
  const char* what = action == config::ShutdownAction::kPoweroff ? "poweroff" : "reboot";
  if (!pid1) {
    LogWarning(std::string("on_shutdown = \"") + what +
               "\" acts only when bulkheadd is PID 1; exiting instead");
    return exit_code;
  }
  LogInfo(std::string("init: stopping every remaining process before ") + what);
  ::kill(-1, SIGTERM);
  if (!ReapUntilNoChildren(kStrayTermGraceMs)) {
    LogWarning("init: processes left after SIGTERM: SIGKILL");
    ::kill(-1, SIGKILL);
    if (!ReapUntilNoChildren(kStrayKillWaitMs)) LogWarning("init: a process survived SIGKILL");
  }
  ::sync();
  LogInfo(std::string("init: ") + what);
  ::reboot(action == config::ShutdownAction::kPoweroff ? RB_POWER_OFF : RB_AUTOBOOT);
  LogError(std::string("init: reboot(") + what + "): " + ErrnoText(errno) + "; exiting instead");
  return exit_code;
}

}  // namespace bulkhead::supervisor
