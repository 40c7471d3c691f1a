// SPDX-License-Identifier: MIT
// cgroup v2 for cells; see cgroup.h. File names, formats and rules follow the kernel's
// Documentation/admin-guide/cgroup-v2.rst (sections cited where they decide something).
// Threading: none of its own; callers serialise.
#include "cell/cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <functional>
#include <set>

#include "base/check.h"

namespace bulkhead::cell {
namespace {

constexpr uint32_t kDefaultCpuWeight = 100;
// KillBySignals: passes over cgroup.procs, and sub-cgroup depth it descends.
constexpr int kMaxKillPasses = 32;
constexpr int kMaxKillDepth = 16;

constexpr std::string_view kSupervisorLeaf = "supervisor";
// A worker generation's leaf under its cell: gen-1, gen-2, ...
constexpr std::string_view kGenerationPrefix = "gen-";
// The controllers a cell enables for its generations: memory, for memory.oom.group per
// generation. The limits stay on the cell, which charges every generation below it.
constexpr std::string_view kGenerationController = "memory";
constexpr std::string_view kCellsDir = "cells";

std::string Join(std::string_view dir, std::string_view name) {
  std::string path(dir);
  if (path.empty() || path.back() != '/') path += '/';
  path += name;
  return path;
}

// The parent directory of an absolute `path` ("/" for "/x").
std::string Dirname(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == 0 || slash == std::string::npos ? std::string("/") : path.substr(0, slash);
}

// "<prefix>: <message>" for a parse or validation failure, which carries no errno.
Status Prefixed(std::string_view prefix, const Status& status) {
  BH_CHECK(!status.ok() && status.error_number() == 0);
  return Status::Error(std::string(prefix) + ": " + status.message());
}

// --- Small file I/O. cgroupfs files are read whole and written with one write(2), which is
// how the kernel takes a value (a partial write would be a different value). ---

Result<std::string> ReadFd(int fd, const std::string& what) {
  std::string content;
  char buffer[4096];
  while (true) {
    ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("read " + what);
    }
    if (n == 0) break;
    content.append(buffer, static_cast<size_t>(n));
  }
  return content;
}

// Reads `name` relative to `dir_fd` (AT_FDCWD for an absolute `name`); `dir_path` only names the
// file in errors.
Result<std::string> ReadFileAt(int dir_fd, std::string_view dir_path, std::string_view name) {
  std::string path = dir_fd == AT_FDCWD ? std::string(name) : Join(dir_path, name);
  UniqueFd fd(openat(dir_fd, std::string(name).c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return Status::FromErrno("open " + path);
  return ReadFd(fd.get(), path);
}

Result<std::string> ReadFile(const std::string& path) { return ReadFileAt(AT_FDCWD, {}, path); }

// Writes `value` to `name` relative to `dir_fd` (AT_FDCWD for an absolute `name`) with one
// write(2). Returns 0 or the errno of the failing call; open failures give ENOENT for a missing
// interface file (kernel without that feature).
int WriteRawAt(int dir_fd, std::string_view name, std::string_view value) {
  // O_TRUNC, as a shell's ">" does: cgroupfs ignores it, a plain file (tests) needs it.
  UniqueFd fd(openat(dir_fd, std::string(name).c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC));
  if (!fd) return errno;
  while (true) {
    ssize_t n = write(fd.get(), value.data(), value.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    // cgroupfs takes a value in one write; a short one would be a different value.
    return static_cast<size_t>(n) == value.size() ? 0 : EIO;
  }
}

// "write \"<value>\" to <path>[ (<hint>)]: <strerror>" with the errno kept.
Status WriteError(std::string_view path, std::string_view value, int err,
                  std::string_view hint = {}) {
  std::string what = "write \"" + std::string(value) + "\" to " + std::string(path);
  if (!hint.empty()) what += " (" + std::string(hint) + ")";
  return Status::FromErrno(what, err);
}

Status WriteFileAt(int dir_fd, std::string_view dir_path, std::string_view name,
                   std::string_view value) {
  int err = WriteRawAt(dir_fd, name, value);
  if (err == 0) return Status::Ok();
  return WriteError(dir_fd == AT_FDCWD ? std::string(name) : Join(dir_path, name), value, err);
}

Status WriteFile(const std::string& path, std::string_view value) {
  return WriteFileAt(AT_FDCWD, {}, path, value);
}

// Reads and parses the interface files of one cgroup directory; errors name the file. A
// controller's files are absent while it is not enabled for the cell: then `*present` (when
// given) turns false and the caller leaves that controller's fields alone.
struct CellFiles {
  int dir_fd;
  const std::string& path;

  Result<std::string> Text(const char* file, bool* present = nullptr) const {
    Result<std::string> text = ReadFileAt(dir_fd, path, file);
    if (!text.ok() && present != nullptr && text.status().error_number() == ENOENT) {
      *present = false;
    }
    return text;
  }
  // A single-value file: "max" or a number (ParseMaxValue).
  Result<std::optional<uint64_t>> MaxValue(const char* file, bool* present = nullptr) const {
    return Parsed(file, ParseMaxValue, present);
  }
  template <typename T>
  Result<T> Parsed(const char* file, Result<T> (*parse)(std::string_view),
                   bool* present = nullptr) const {
    Result<std::string> text = Text(file, present);
    if (!text.ok()) return text.status();
    Result<T> value = parse(text.value());
    if (!value.ok()) return Prefixed(Join(path, file), value.status());
    return value;
  }
};

// A controller's usage and limit: "<controller>.current" (a number) and "<controller>.max" ("max"
// or a number); *present false when the controller is not enabled for the cell.
Status ReadCurrentAndMax(const CellFiles& files, const std::string& controller, bool* present,
                         uint64_t* current, std::optional<uint64_t>* max) {
  const std::string current_file = controller + ".current";
  Result<std::optional<uint64_t>> value = files.MaxValue(current_file.c_str(), present);
  if (!*present) return Status::Ok();
  if (!value.ok()) return value.status();
  if (!value.value()) return Status::Error(Join(files.path, current_file) + ": not a number");
  *current = *value.value();
  Result<std::optional<uint64_t>> limit = files.MaxValue((controller + ".max").c_str(), present);
  if (!*present) return Status::Ok();
  if (!limit.ok()) return limit.status();
  *max = limit.value();
  return Status::Ok();
}

Status MakeDirectory(const std::string& path) {
  if (mkdir(path.c_str(), 0755) == 0 || errno == EEXIST) return Status::Ok();
  if (errno == EACCES || errno == EPERM) {
    return Status::FromErrno("mkdir " + path +
                             " (the supervisor's cgroup is not delegated to this user: run under "
                             "a systemd unit with Delegate=yes, or as root)");
  }
  return Status::FromErrno("mkdir " + path);
}

bool Contains(const std::vector<std::string>& list, std::string_view item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

std::string JoinWords(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& word : words) {
    if (!out.empty()) out += ' ';
    out += word;
  }
  return out.empty() ? "none" : out;
}

// Enables `controllers` for the children of `dir` (cgroup-v2.rst, "Enabling and Disabling"), in
// one write so that all succeed or all fail. Skips the write when all are on already.
Status EnableControllers(const std::string& dir, const std::vector<std::string>& controllers) {
  std::string file = Join(dir, "cgroup.subtree_control");
  Result<std::string> current = ReadFile(file);
  if (!current.ok()) return current.status();
  std::vector<std::string> enabled = ParseControllers(current.value());
  std::string request;
  for (const std::string& controller : controllers) {
    if (Contains(enabled, controller)) continue;
    if (!request.empty()) request += ' ';
    request += '+' + controller;
  }
  if (request.empty()) return Status::Ok();
  int err = WriteRawAt(AT_FDCWD, file, request);
  if (err == 0) return Status::Ok();
  if (err == EBUSY) {
    return WriteError(file, request, err,
                      dir +
                          " holds processes of its own, which the cgroup v2 no-internal-process "
                          "rule forbids once controllers are on: move every pid in " +
                          Join(dir, "cgroup.procs") + " to a leaf cgroup first");
  }
  if (err == ENOENT) {
    return WriteError(file, request, err,
                      "a controller is not available in the parent's "
                      "cgroup.subtree_control");
  }
  return WriteError(file, request, err);
}

// Calls `visit(parent_fd, name)` for each sub-directory of `dir_fd` (sub-cgroups), in readdir
// order, until it returns false; `dir_path` only names the directory in errors.
Status EachSubdirectory(int dir_fd, const std::string& dir_path,
                        const std::function<bool(int parent_fd, std::string_view name)>& visit) {
  UniqueFd walk_fd(openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!walk_fd) return Status::FromErrno("open " + dir_path);
  DIR* dir = fdopendir(walk_fd.get());
  if (dir == nullptr) return Status::FromErrno("fdopendir " + dir_path);
  walk_fd.Release();  // now owned by `dir`
  while (dirent* entry = readdir(dir)) {
    std::string_view name = entry->d_name;
    if (entry->d_type != DT_DIR || name == "." || name == "..") continue;
    if (!visit(dirfd(dir), name)) break;
  }
  closedir(dir);
  return Status::Ok();
}

// Collects the pids of `dir_fd`'s cgroup.procs and, to `depth`, of its sub-cgroups.
Status CollectPids(int dir_fd, const std::string& dir_path, int depth, std::vector<pid_t>* pids) {
  Result<std::string> procs = ReadFileAt(dir_fd, dir_path, "cgroup.procs");
  if (!procs.ok()) {
    // A sub-cgroup removed while we walk is not an error.
    return procs.status().error_number() == ENOENT ? Status::Ok() : procs.status();
  }
  Result<std::vector<pid_t>> parsed = ParseCgroupProcs(procs.value());
  if (!parsed.ok()) {
    return Status::Error(Join(dir_path, "cgroup.procs") + ": " + parsed.status().message());
  }
  pids->insert(pids->end(), parsed->begin(), parsed->end());
  if (depth == 0) return Status::Ok();

  Status status = Status::Ok();
  Status walked = EachSubdirectory(dir_fd, dir_path, [&](int parent_fd, std::string_view name) {
    UniqueFd child(openat(parent_fd, std::string(name).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!child) return true;  // removed meanwhile
    status = CollectPids(child.get(), Join(dir_path, name), depth - 1, pids);
    return status.ok();
  });
  return walked.ok() ? status : walked;
}

}  // namespace

// --- CgroupTree. ---

Result<CgroupTree> CgroupTree::Delegate(std::string_view root_mount) {
  DelegateOptions options;
  options.root_mount = std::string(root_mount);
  return Delegate(options);
}

Result<CgroupTree> CgroupTree::Delegate(const DelegateOptions& options) {
  std::string root = options.root_mount;
  while (root.size() > 1 && root.back() == '/') root.pop_back();

  if (options.check_filesystem) {
    struct statfs fs {};
    if (statfs(root.c_str(), &fs) != 0) {
      return Status::FromErrno("cgroup v2 not mounted at " + root + ": statfs");
    }
    if (static_cast<unsigned long>(fs.f_type) != CGROUP2_SUPER_MAGIC) {
      return Status::Error(
          "cgroup v2 not mounted at " + root +
          (fs.f_type == TMPFS_MAGIC || fs.f_type == CGROUP_SUPER_MAGIC
               ? " (this is a cgroup v1 or hybrid layout)"
               : "") +
          ": boot with systemd.unified_cgroup_hierarchy=1, or mount -t cgroup2 none " + root +
          " in a VM or container of your own");
    }
  }

  Result<std::string> self = ReadFile(options.proc_self_cgroup);
  if (!self.ok()) return self.status();
  Result<std::string> own_relative = ParseProcSelfCgroup(self.value());
  if (!own_relative.ok()) return Prefixed(options.proc_self_cgroup, own_relative.status());
  std::string relative = std::move(own_relative).value();
  // Already in our own leaf (a restarted or re-executed supervisor): own is the parent.
  size_t slash = relative.rfind('/');
  if (std::string_view(relative).substr(slash + 1) == kSupervisorLeaf) {
    relative.resize(slash);
  }
  // Whether this process moves into <own>/supervisor: always for its own cgroup; for a given
  // parent only when it lives inside it (a sibling subtree is not ours to reorganise).
  bool move_self = true;
  if (!options.parent.empty()) {
    std::string parent = options.parent;
    while (parent.size() > 1 && parent.back() == '/') parent.pop_back();
    move_self = parent == "/" || relative == parent || relative.starts_with(parent + "/");
    relative = parent;
  }
  CgroupTree tree;
  tree.own_path_ = relative.empty() || relative == "/" ? root : root + relative;
  tree.supervisor_path_ = Join(tree.own_path_, kSupervisorLeaf);
  tree.cells_path_ = Join(tree.own_path_, kCellsDir);

  // cgroup.controllers lists what the parent hands down (cgroup-v2.rst, "Top-down Constraint").
  std::string controllers_file = Join(tree.own_path_, "cgroup.controllers");
  Result<std::string> available_text = ReadFile(controllers_file);
  if (!available_text.ok()) return available_text.status();
  std::vector<std::string> available = ParseControllers(available_text.value());
  tree.controllers_file_ = controllers_file;
  std::vector<std::string> enabled;
  for (const std::string& controller : options.controllers) {
    if (Contains(available, controller)) {
      enabled.push_back(controller);
    } else if (!options.require_all_controllers) {
      tree.missing_controllers_.push_back(controller);
    } else {
      return Status::Error("controller " + controller + " not available in " + controllers_file +
                           " (available: " + JoinWords(available) +
                           "): run under a systemd unit with Delegate=yes, or as PID 1 with "
                           "cgroup2 mounted");
    }
  }

  // The supervisor leaves <own> so that <own> may enable controllers for its children.
  Status status = Status::Ok();
  if (move_self) {
    status = MakeDirectory(tree.supervisor_path_);
    if (!status.ok()) return status;
    pid_t pid = options.pid != 0 ? options.pid : getpid();
    status = WriteFile(Join(tree.supervisor_path_, "cgroup.procs"), std::to_string(pid));
    if (!status.ok()) return status;
  }

  status = EnableControllers(tree.own_path_, enabled);
  if (!status.ok()) return status;
  status = MakeDirectory(tree.cells_path_);
  if (!status.ok()) return status;
  status = EnableControllers(tree.cells_path_, enabled);
  if (!status.ok()) return status;
  return tree;
}

// --- CellCgroup. ---

Result<CellCgroup> CellCgroup::Create(const CgroupTree& tree, std::string_view name) {
  Status valid = ValidateCellName(name);
  if (!valid.ok()) return valid;
  std::string path = Join(tree.cells_path(), name);
  Status made = MakeDirectory(path);
  if (!made.ok()) return made;
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return Status::FromErrno("open " + path);
  return CellCgroup(std::string(name), std::move(path), std::move(fd));
}

LimitsWritten CellCgroup::WriteLimits(const CgroupLimits& limits) {
  LimitsWritten written;
  Status refused = ValidateLimits(limits);
  if (refused.ok() && !dir_fd_) refused = Status::Error("cgroup already removed");
  if (!refused.ok()) {
    refused = Prefixed("cell " + name_, refused);
    written.limits.fill(refused);
    written.oom_group = refused;
    return written;
  }
  // Writes `value` to `file`. ENOENT means the file is absent: its controller is not enabled
  // for the cell (withdrawn from the parent's cgroup.subtree_control, or never delegated), or
  // the kernel lacks the feature (memory.swap.max without swap accounting). Nothing to undo then
  // for an unset limit; a set one is not enforced.
  auto write = [&](std::string_view file, const std::string& value, bool set,
                   std::string_view controller) -> Status {
    int err = WriteRawAt(dir_fd_.get(), file, value);
    if (err == 0 || (err == ENOENT && !set)) return Status::Ok();
    std::string path = Join(path_, file);
    if (err != ENOENT) return WriteError(path, value, err);
    if (file == "memory.swap.max") {
      return WriteError(path, value, err,
                        "this kernel has no swap accounting: memory_swap_max needs CONFIG_SWAP "
                        "and swapaccount=1");
    }
    return WriteError(path, value, err,
                      "the " + std::string(controller) + " controller is not enabled for " + path_ +
                          ": it is missing from " + Join(Dirname(path_), "cgroup.subtree_control"));
  };
  for (size_t i = 0; i < kLimitCount; ++i) {
    const auto limit = static_cast<Limit>(i);
    std::string value;
    switch (limit) {
      case Limit::kCpuMax:
        value =
            FormatCpuMax(limits.cpu_quota_us, limits.cpu_period_us.value_or(kDefaultCpuPeriodUs));
        break;
      case Limit::kCpuWeight:
        value = std::to_string(limits.cpu_weight.value_or(kDefaultCpuWeight));
        break;
      case Limit::kMemoryMax:
        value = FormatMaxValue(limits.memory_max);
        break;
      case Limit::kMemoryHigh:
        value = FormatMaxValue(limits.memory_high);
        break;
      case Limit::kMemorySwapMax:
        value = FormatMaxValue(limits.memory_swap_max);
        break;
      case Limit::kPidsMax:
        value = FormatMaxValue(limits.pids_max);
        break;
    }
    written.limits[i] =
        write(LimitFile(limit), value, LimitIsSet(limits, limit), LimitController(limit));
  }
  written.oom_group =
      write("memory.oom.group", limits.oom_group ? "1" : "0", /*set=*/false, "memory");
  return written;
}

Result<CgroupStats> CellCgroup::ReadStats() const {
  if (!dir_fd_) return Removed();
  const CellFiles files{dir_fd_.get(), path_};
  CgroupStats stats;
  Status memory = ReadCurrentAndMax(files, "memory", &stats.has_memory, &stats.memory_current,
                                    &stats.memory_max);
  if (!memory.ok()) return memory;
  if (stats.has_memory) {
    Result<MemoryEvents> events = files.Parsed("memory.events", ParseMemoryEvents);
    if (!events.ok()) return events.status();
    stats.memory_events = events.value();
  }
  // cpu.stat is a core file: present with or without the cpu controller.
  Result<CpuStat> cpu = files.Parsed("cpu.stat", ParseCpuStat);
  if (!cpu.ok()) return cpu.status();
  stats.cpu = cpu.value();
  stats.has_cpu = faccessat(dir_fd_.get(), "cpu.max", F_OK, 0) == 0;

  Status pids =
      ReadCurrentAndMax(files, "pids", &stats.has_pids, &stats.pids_current, &stats.pids_max);
  if (!pids.ok()) return pids;
  return stats;
}

Result<CgroupUsage> CellCgroup::ReadUsage() const {
  if (!dir_fd_) return Removed();
  const CellFiles files{dir_fd_.get(), path_};
  CgroupUsage usage;
  Status memory = ReadCurrentAndMax(files, "memory", &usage.has_memory, &usage.memory_current,
                                    &usage.memory_max);
  if (!memory.ok()) return memory;
  if (usage.has_memory) {
    Result<MemoryStat> stat = files.Parsed("memory.stat", ParseMemoryStat);
    if (!stat.ok()) return stat.status();
    usage.memory_stat = stat.value();
  }
  Result<CpuStat> cpu = files.Parsed("cpu.stat", ParseCpuStat);
  if (!cpu.ok()) return cpu.status();
  usage.cpu = cpu.value();
  // Only the neighbours' judge reads it: a cpu.pressure that cannot be read leaves it unjudged
  // (nullopt) and keeps the controller's own numbers.
  Result<Pressure> stall = files.Parsed("cpu.pressure", ParsePressure);
  if (stall.ok()) usage.cpu_stall_us = stall->some.total_us;
  return usage;
}

Result<Pressure> CellCgroup::ReadPressure(PressureResource resource) const {
  if (!dir_fd_) return Removed();
  const CellFiles files{dir_fd_.get(), path_};
  return files.Parsed(std::string(PressureFile(resource)).c_str(), ParsePressure);
}

Result<MemoryEvents> CellCgroup::ReadMemoryEvents() const {
  if (!dir_fd_) return Removed();
  return CellFiles{dir_fd_.get(), path_}.Parsed("memory.events", ParseMemoryEvents);
}

Result<CellCgroup> CellCgroup::CreateGeneration(uint64_t generation) {
  if (!dir_fd_) return Removed();
  // What the cell may hand down (cgroup-v2.rst, "Top-down Constraint"); absent: nothing.
  Result<std::string> offered = ReadFileAt(dir_fd_.get(), path_, "cgroup.controllers");
  if (!offered.ok() && offered.status().error_number() != ENOENT) return offered.status();
  if (offered.ok() && Contains(ParseControllers(offered.value()), kGenerationController)) {
    Status enabled = EnableControllers(path_, {std::string(kGenerationController)});
    if (!enabled.ok()) return enabled;
  }
  const std::string leaf = std::string(kGenerationPrefix) + std::to_string(generation);
  std::string path = Join(path_, leaf);
  Status made = MakeDirectory(path);
  if (!made.ok()) return made;
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return Status::FromErrno("open " + path);
  return CellCgroup(name_ + "/" + leaf, std::move(path), std::move(fd));
}

Status CellCgroup::WriteOomGroup(bool oom_group) {
  if (!dir_fd_) return Removed();
  const std::string_view value = oom_group ? "1" : "0";
  int err = WriteRawAt(dir_fd_.get(), "memory.oom.group", value);
  if (err == 0 || err == ENOENT) return Status::Ok();
  return WriteError(Join(path_, "memory.oom.group"), value, err);
}

bool CellCgroup::HasOomGroup() const {
  return dir_fd_ && faccessat(dir_fd_.get(), "memory.oom.group", F_OK, 0) == 0;
}

Status CellCgroup::RemoveGenerations() {
  if (!dir_fd_) return Status::Ok();
  Status status = Status::Ok();
  Status walked = EachSubdirectory(dir_fd_.get(), path_, [&](int parent_fd, std::string_view name) {
    if (!name.starts_with(kGenerationPrefix)) return true;
    if (unlinkat(parent_fd, std::string(name).c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT &&
        status.ok()) {
      status = Status::FromErrno("rmdir " + Join(path_, name));
    }
    return true;
  });
  return walked.ok() ? status : walked;
}

Status CellCgroup::Removed() const {
  return Status::Error("cell " + name_ + ": cgroup already removed");
}

Result<std::vector<pid_t>> CellCgroup::Procs() const {
  if (!dir_fd_) return Status::Error("cell " + name_ + ": cgroup already removed");
  std::vector<pid_t> pids;
  Status status = CollectPids(dir_fd_.get(), path_, /*depth=*/0, &pids);
  if (!status.ok()) return status;
  return pids;
}

Status CellCgroup::Kill(KillMethod method) {
  if (!dir_fd_) return Status::Error("cell " + name_ + ": cgroup already removed");
  if (method == KillMethod::kSignalEachProcess) return SignalEachProcess(SIGKILL);
  Status status = KillWithCgroupKill();
  if (method == KillMethod::kAuto && !status.ok() && status.error_number() == ENOENT) {
    return SignalEachProcess(SIGKILL);  // kernel < 5.14
  }
  return status;
}

Status CellCgroup::Signal(int signal) {
  if (!dir_fd_) return Status::Error("cell " + name_ + ": cgroup already removed");
  return SignalEachProcess(signal);
}

Status CellCgroup::KillWithCgroupKill() {
  // cgroup.kill (cgroup-v2.rst, "Core Interface Files"): writing "1" SIGKILLs every process in
  // the cgroup and its descendants, atomically with respect to fork.
  return WriteFileAt(dir_fd_.get(), path_, "cgroup.kill", "1");
}

Status CellCgroup::SignalEachProcess(int signal) {
  std::set<pid_t> signalled;
  for (int pass = 0; pass < kMaxKillPasses; ++pass) {
    std::vector<pid_t> pids;
    Status status = CollectPids(dir_fd_.get(), path_, kMaxKillDepth, &pids);
    if (!status.ok()) return status;
    bool found_new = false;
    for (pid_t pid : pids) {
      if (!signalled.insert(pid).second) continue;
      found_new = true;
      if (kill(pid, signal) != 0 && errno != ESRCH) {
        return Status::FromErrno("kill(" + std::to_string(pid) + ", " + std::to_string(signal) +
                                 ") in cell " + name_);
      }
    }
    if (!found_new) return Status::Ok();
  }
  return Status::Error("cell " + name_ + ": new processes kept appearing after " +
                       std::to_string(kMaxKillPasses) + " passes of signal " +
                       std::to_string(signal) + " over cgroup.procs");
}

Result<bool> CellCgroup::IsEmpty() const {
  if (!dir_fd_) return true;
  Result<std::string> text = ReadFileAt(dir_fd_.get(), path_, "cgroup.events");
  if (!text.ok()) {
    if (text.status().error_number() != ENOENT) return text.status();
    Result<std::vector<pid_t>> pids = Procs();  // no cgroup.events: kernel < 4.5
    if (!pids.ok()) return pids.status();
    return pids.value().empty();
  }
  Result<CgroupEvents> events = ParseCgroupEvents(text.value());
  if (!events.ok()) return Prefixed(events_path(), events.status());
  return !events.value().populated;
}

Status CellCgroup::Remove() {
  if (rmdir(path_.c_str()) != 0 && errno != ENOENT) {
    if (errno == EBUSY) {
      return Status::FromErrno("rmdir " + path_ +
                                   " (the cell still has processes: Kill() and wait until "
                                   "IsEmpty() first)",
                               EBUSY);
    }
    return Status::FromErrno("rmdir " + path_);
  }
  dir_fd_.Reset();
  return Status::Ok();
}

}  // namespace bulkhead::cell
