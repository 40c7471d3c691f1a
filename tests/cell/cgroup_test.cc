// SPDX-License-Identifier: MIT
// Host tests of cell/cgroup.h: CgroupTree / CellCgroup on a fake tree of plain files in a temporary
// directory. Never touches /sys/fs/cgroup: the real kernel behaviour is proved in the VM
// (tests/vm/cgroup_probe.cc).
#include "cell/cgroup.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace bulkhead::cell {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// --- A fake cgroup tree: plain files where the kernel would create interface files. ---

std::string ReadText(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void WriteText(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

class FakeCgroupTree : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/bulkhead-cgroup-test.XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    root_ = pattern;
    own_ = root_ / "system.slice" / "bulkhead.service";
    fs::create_directories(own_);
    WriteText(own_ / "cgroup.controllers", "cpuset cpu io memory pids\n");
    WriteText(own_ / "cgroup.subtree_control", "");
    // What the kernel creates in each new child cgroup.
    for (const char* leaf : {"supervisor", "cells"}) {
      fs::create_directories(own_ / leaf);
      WriteText(own_ / leaf / "cgroup.procs", "");
      WriteText(own_ / leaf / "cgroup.subtree_control", "");
    }
    WriteText(root_ / "self-cgroup", "0::/system.slice/bulkhead.service\n");
    options_.root_mount = root_.string();
    options_.proc_self_cgroup = (root_ / "self-cgroup").string();
    options_.check_filesystem = false;
  }

  void TearDown() override {
    for (pid_t pid : children_) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    fs::remove_all(root_);
  }

  // Creates the interface files a cell's cgroup would have.
  void PopulateCellFiles(const fs::path& cell) {
    for (const char* file : {"cpu.max", "cpu.weight", "memory.max", "memory.high",
                             "memory.swap.max", "pids.max", "memory.oom.group", "cgroup.kill"}) {
      WriteText(cell / file, "");
    }
  }

  // The fixture's tree delegated, and the cell "alpha" made in it; `controllers` (when given)
  // is what its cgroup.controllers offers its children, none of them enabled yet.
  Result<CellCgroup> CreateAlpha(const char* controllers = nullptr) {
    Result<CgroupTree> tree = CgroupTree::Delegate(options_);
    if (!tree.ok()) return tree.status();
    Result<CellCgroup> cell = CellCgroup::Create(tree.value(), "alpha");
    if (cell.ok() && controllers != nullptr) {
      WriteText(fs::path(cell->path()) / "cgroup.controllers", controllers);
      WriteText(fs::path(cell->path()) / "cgroup.subtree_control", "");
    }
    return cell;
  }

  pid_t StartSleepingChild() {
    pid_t pid = fork();
    if (pid == 0) {
      pause();
      _exit(0);
    }
    children_.push_back(pid);
    return pid;
  }

  // Reaps `pid` once it exits, waiting at most 5 s (woken by its pidfd, not by polling); returns
  // its wait status, or -1.
  int ReapWithin5s(pid_t pid) {
    const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (pidfd >= 0) {
      pollfd exited{.fd = pidfd, .events = POLLIN, .revents = 0};
      ::poll(&exited, 1, 5000);
      ::close(pidfd);
    }
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      std::erase(children_, pid);
      return status;
    }
    return -1;
  }

  fs::path root_;
  fs::path own_;
  DelegateOptions options_;
  std::vector<pid_t> children_;
};

TEST_F(FakeCgroupTree, DelegateMovesSupervisorAndEnablesControllers) {
  options_.pid = 4242;
  Result<CgroupTree> tree = CgroupTree::Delegate(options_);
  ASSERT_TRUE(tree.ok()) << tree.status().message();
  EXPECT_EQ(tree->own_path(), own_.string());
  EXPECT_EQ(tree->supervisor_path(), (own_ / "supervisor").string());
  EXPECT_EQ(tree->cells_path(), (own_ / "cells").string());
  EXPECT_EQ(ReadText(own_ / "supervisor" / "cgroup.procs"), "4242");
  EXPECT_EQ(ReadText(own_ / "cgroup.subtree_control"), "+cpu +memory +pids");
  EXPECT_EQ(ReadText(own_ / "cells" / "cgroup.subtree_control"), "+cpu +memory +pids");
}

TEST_F(FakeCgroupTree, DelegateDefaultsToTheCallingProcess) {
  ASSERT_TRUE(CgroupTree::Delegate(options_).ok());
  EXPECT_EQ(ReadText(own_ / "supervisor" / "cgroup.procs"), std::to_string(getpid()));
}

TEST_F(FakeCgroupTree, DelegateWritesOnlyMissingControllers) {
  WriteText(own_ / "cgroup.subtree_control", "cpu memory\n");
  WriteText(own_ / "cells" / "cgroup.subtree_control", "cpu memory pids\n");
  ASSERT_TRUE(CgroupTree::Delegate(options_).ok());
  EXPECT_EQ(ReadText(own_ / "cgroup.subtree_control"), "+pids");
  EXPECT_EQ(ReadText(own_ / "cells" / "cgroup.subtree_control"), "cpu memory pids\n");
}

TEST_F(FakeCgroupTree, DelegateFromOwnLeafFindsTheSameLayout) {
  WriteText(root_ / "self-cgroup", "0::/system.slice/bulkhead.service/supervisor\n");
  Result<CgroupTree> tree = CgroupTree::Delegate(options_);
  ASSERT_TRUE(tree.ok()) << tree.status().message();
  EXPECT_EQ(tree->own_path(), own_.string());
}

// cgroup_parent: a subtree the runtime delegated that bulkheadd does not live in. The cells go
// there; bulkheadd stays where it is (its own cgroup is not ours to reorganise).
TEST_F(FakeCgroupTree, DelegateIntoAGivenParentLeavesTheProcessWhereItIs) {
  const fs::path parent = root_ / "pod.slice" / "bulkhead";
  fs::create_directories(parent / "cells");
  WriteText(parent / "cgroup.controllers", "cpu memory pids\n");
  WriteText(parent / "cgroup.subtree_control", "");
  WriteText(parent / "cells" / "cgroup.subtree_control", "");
  options_.parent = "/pod.slice/bulkhead/";
  options_.pid = 4242;
  Result<CgroupTree> tree = CgroupTree::Delegate(options_);
  ASSERT_TRUE(tree.ok()) << tree.status().message();
  EXPECT_EQ(tree->own_path(), parent.string());
  EXPECT_EQ(tree->cells_path(), (parent / "cells").string());
  EXPECT_FALSE(fs::exists(parent / "supervisor"));
  EXPECT_EQ(ReadText(own_ / "supervisor" / "cgroup.procs"), "");
  EXPECT_EQ(ReadText(parent / "cgroup.subtree_control"), "+cpu +memory +pids");
  EXPECT_EQ(ReadText(parent / "cells" / "cgroup.subtree_control"), "+cpu +memory +pids");
}

// A parent that contains bulkheadd's cgroup is reorganised as its own would be.
TEST_F(FakeCgroupTree, DelegateIntoAParentThatHoldsTheProcessMovesIt) {
  options_.parent = "/system.slice";
  WriteText(root_ / "system.slice" / "cgroup.controllers", "cpu memory pids\n");
  WriteText(root_ / "system.slice" / "cgroup.subtree_control", "");
  fs::create_directories(root_ / "system.slice" / "supervisor");
  fs::create_directories(root_ / "system.slice" / "cells");
  WriteText(root_ / "system.slice" / "supervisor" / "cgroup.procs", "");
  WriteText(root_ / "system.slice" / "cells" / "cgroup.subtree_control", "");
  options_.pid = 4242;
  Result<CgroupTree> tree = CgroupTree::Delegate(options_);
  ASSERT_TRUE(tree.ok()) << tree.status().message();
  EXPECT_EQ(tree->own_path(), (root_ / "system.slice").string());
  EXPECT_EQ(ReadText(root_ / "system.slice" / "supervisor" / "cgroup.procs"), "4242");
}

TEST_F(FakeCgroupTree, DelegateAtTheRootCgroup) {
  WriteText(root_ / "self-cgroup", "0::/\n");
  WriteText(root_ / "cgroup.controllers", "cpu memory pids\n");
  WriteText(root_ / "cgroup.subtree_control", "");
  for (const char* leaf : {"supervisor", "cells"}) {
    fs::create_directories(root_ / leaf);
    WriteText(root_ / leaf / "cgroup.procs", "");
    WriteText(root_ / leaf / "cgroup.subtree_control", "");
  }
  Result<CgroupTree> tree = CgroupTree::Delegate(options_);
  ASSERT_TRUE(tree.ok()) << tree.status().message();
  EXPECT_EQ(tree->own_path(), root_.string());
  EXPECT_EQ(tree->cells_path(), (root_ / "cells").string());
}

TEST_F(FakeCgroupTree, DelegateNamesMissingControllerAndFix) {
  WriteText(own_ / "cgroup.controllers", "cpu pids\n");
  Result<CgroupTree> tree = CgroupTree::Delegate(options_);
  ASSERT_FALSE(tree.ok());
  EXPECT_THAT(tree.status().message(),
              HasSubstr("controller memory not available in " +
                        (own_ / "cgroup.controllers").string() + " (available: cpu pids)"));
  EXPECT_THAT(tree.status().message(), HasSubstr("Delegate=yes"));
  // Nothing was moved.
  EXPECT_EQ(ReadText(own_ / "supervisor" / "cgroup.procs"), "");
}

TEST_F(FakeCgroupTree, DelegateRefusesANonCgroup2Mount) {
  options_.check_filesystem = true;  // root_ is on the host's /tmp, not cgroup2
  Result<CgroupTree> tree = CgroupTree::Delegate(options_);
  ASSERT_FALSE(tree.ok());
  EXPECT_THAT(tree.status().message(), HasSubstr("cgroup v2 not mounted at " + root_.string()));
}

TEST_F(FakeCgroupTree, DelegateReportsAnUnreadableProcFile) {
  options_.proc_self_cgroup = (root_ / "missing").string();
  Result<CgroupTree> tree = CgroupTree::Delegate(options_);
  ASSERT_FALSE(tree.ok());
  EXPECT_EQ(tree.status().error_number(), ENOENT);
  EXPECT_THAT(tree.status().message(), HasSubstr((root_ / "missing").string()));
}

TEST_F(FakeCgroupTree, CreateMakesTheCellDirectoryAndOpensIt) {
  Result<CgroupTree> tree = CgroupTree::Delegate(options_);
  ASSERT_TRUE(tree.ok());
  Result<CellCgroup> cell = CellCgroup::Create(tree.value(), "alpha");
  ASSERT_TRUE(cell.ok()) << cell.status().message();
  EXPECT_EQ(cell->path(), (own_ / "cells" / "alpha").string());
  EXPECT_TRUE(fs::is_directory(cell->path()));
  ASSERT_GE(cell->dir_fd(), 0);
  struct stat by_fd {};
  struct stat by_path {};
  ASSERT_EQ(fstat(cell->dir_fd(), &by_fd), 0);
  ASSERT_EQ(stat(cell->path().c_str(), &by_path), 0);
  EXPECT_EQ(by_fd.st_ino, by_path.st_ino);
  EXPECT_NE(fcntl(cell->dir_fd(), F_GETFD) & FD_CLOEXEC, 0);
  EXPECT_EQ(cell->events_path(), cell->path() + "/cgroup.events");
  // An existing cgroup is adopted.
  EXPECT_TRUE(CellCgroup::Create(tree.value(), "alpha").ok());
  EXPECT_FALSE(CellCgroup::Create(tree.value(), "../escape").ok());
}

TEST_F(FakeCgroupTree, WriteLimitsWritesEveryFile) {
  Result<CgroupTree> tree = CgroupTree::Delegate(options_);
  ASSERT_TRUE(tree.ok());
  Result<CellCgroup> cell = CellCgroup::Create(tree.value(), "alpha");
  ASSERT_TRUE(cell.ok());
  fs::path dir = cell->path();
  PopulateCellFiles(dir);

  CgroupLimits limits;
  limits.cpu_quota_us = 20000;
  limits.cpu_weight = 50;
  limits.memory_max = 32 << 20;
  limits.memory_swap_max = 0;
  limits.pids_max = 16;
  LimitsWritten written = cell->WriteLimits(limits);
  ASSERT_TRUE(written.ok()) << written.status().message();
  EXPECT_EQ(ReadText(dir / "cpu.max"), "20000 100000");
  EXPECT_EQ(ReadText(dir / "cpu.weight"), "50");
  EXPECT_EQ(ReadText(dir / "memory.max"), "33554432");
  EXPECT_EQ(ReadText(dir / "memory.high"), "max");
  EXPECT_EQ(ReadText(dir / "memory.swap.max"), "0");
  EXPECT_EQ(ReadText(dir / "pids.max"), "16");
  EXPECT_EQ(ReadText(dir / "memory.oom.group"), "1");

  // Unset fields go back to the kernel defaults.
  ASSERT_TRUE(cell->WriteLimits({}).ok());
  EXPECT_EQ(ReadText(dir / "cpu.max"), "max 100000");
  EXPECT_EQ(ReadText(dir / "cpu.weight"), "100");
  EXPECT_EQ(ReadText(dir / "memory.max"), "max");
  EXPECT_EQ(ReadText(dir / "pids.max"), "max");
  EXPECT_EQ(ReadText(dir / "memory.oom.group"), "1");
}

// oom_policy = "continue" (systemd's OOMPolicy=continue): memory.oom.group 0, so an OOM kill takes
// only the kernel's victim; "kill" writes 1 again (a reload switches it live).
TEST_F(FakeCgroupTree, WriteLimitsWritesTheOomGroupOfThePolicy) {
  Result<CgroupTree> tree = CgroupTree::Delegate(options_);
  ASSERT_TRUE(tree.ok());
  Result<CellCgroup> cell = CellCgroup::Create(tree.value(), "alpha");
  ASSERT_TRUE(cell.ok());
  fs::path dir = cell->path();
  PopulateCellFiles(dir);

  CgroupLimits limits;
  limits.oom_group = false;
  ASSERT_TRUE(cell->WriteLimits(limits).ok());
  EXPECT_EQ(ReadText(dir / "memory.oom.group"), "0");
  limits.oom_group = true;
  ASSERT_TRUE(cell->WriteLimits(limits).ok());
  EXPECT_EQ(ReadText(dir / "memory.oom.group"), "1");
}

TEST_F(FakeCgroupTree, WriteLimitsWithoutSwapAccounting) {
  Result<CgroupTree> tree = CgroupTree::Delegate(options_);
  ASSERT_TRUE(tree.ok());
  Result<CellCgroup> cell = CellCgroup::Create(tree.value(), "alpha");
  ASSERT_TRUE(cell.ok());
  PopulateCellFiles(cell->path());
  fs::remove(fs::path(cell->path()) / "memory.swap.max");
  EXPECT_TRUE(cell->WriteLimits({}).ok());
  CgroupLimits limits;
  limits.memory_swap_max = 0;
  LimitsWritten written = cell->WriteLimits(limits);
  ASSERT_FALSE(written.ok());
  const Status& status = written.of(Limit::kMemorySwapMax);
  EXPECT_EQ(status.error_number(), ENOENT);
  EXPECT_THAT(status.message(), HasSubstr("memory.swap.max"));
  EXPECT_THAT(status.message(), HasSubstr("swap accounting"));
  EXPECT_TRUE(written.of(Limit::kMemoryMax).ok());
}

TEST_F(FakeCgroupTree, WriteLimitsNamesEveryFailingFile) {
  Result<CgroupTree> tree = CgroupTree::Delegate(options_);
  ASSERT_TRUE(tree.ok());
  Result<CellCgroup> cell = CellCgroup::Create(tree.value(), "alpha");
  ASSERT_TRUE(cell.ok());
  // No interface files at all (no controller enabled): unset limits have nothing to undo.
  EXPECT_TRUE(cell->WriteLimits({}).ok());
  CgroupLimits limits;
  limits.cpu_quota_us = 20000;
  limits.memory_max = 1 << 20;
  limits.pids_max = 16;
  LimitsWritten written = cell->WriteLimits(limits);
  ASSERT_FALSE(written.ok());
  EXPECT_THAT(written.of(Limit::kCpuMax).message(),
              HasSubstr("write \"20000 100000\" to " + cell->path() + "/cpu.max"));
  EXPECT_THAT(written.of(Limit::kMemoryMax).message(),
              HasSubstr("the memory controller is not enabled for " + cell->path()));
  EXPECT_THAT(written.of(Limit::kPidsMax).message(), HasSubstr("/pids.max"));
  EXPECT_TRUE(written.of(Limit::kCpuWeight).ok());
  // One message names each failed limit.
  std::string all = written.status().message();
  EXPECT_THAT(all, HasSubstr("cpu_max: write"));
  EXPECT_THAT(all, HasSubstr("; memory_max: write"));
  EXPECT_THAT(all, HasSubstr("; pids_max: write"));
  CgroupLimits bad;
  bad.cpu_quota_us = 10;
  written = cell->WriteLimits(bad);
  EXPECT_THAT(written.of(Limit::kPidsMax).message(), HasSubstr("cell alpha: cpu_quota_us 10"));
  EXPECT_FALSE(written.oom_group.ok());
}

// A controller withdrawn from cells/cgroup.subtree_control takes its files away: the writes after
// the first failure still happen, so pids.max holds although memory.max cannot.
TEST_F(FakeCgroupTree, WriteLimitsGoesOnPastAFailedFile) {
  Result<CgroupTree> tree = CgroupTree::Delegate(options_);
  ASSERT_TRUE(tree.ok());
  Result<CellCgroup> cell = CellCgroup::Create(tree.value(), "alpha");
  ASSERT_TRUE(cell.ok());
  fs::path dir = cell->path();
  PopulateCellFiles(dir);
  for (const char* file : {"memory.max", "memory.high", "memory.swap.max", "memory.oom.group"}) {
    fs::remove(dir / file);
  }
  CgroupLimits limits;
  limits.memory_max = 64 << 20;
  limits.pids_max = 16;
  limits.cpu_weight = 50;
  LimitsWritten written = cell->WriteLimits(limits);
  EXPECT_FALSE(written.ok());
  EXPECT_EQ(written.of(Limit::kMemoryMax).error_number(), ENOENT);
  EXPECT_TRUE(written.of(Limit::kMemoryHigh).ok());  // unset, and nothing limits it
  EXPECT_TRUE(written.of(Limit::kPidsMax).ok());
  EXPECT_TRUE(written.oom_group.ok());
  EXPECT_EQ(ReadText(dir / "pids.max"), "16");
  EXPECT_EQ(ReadText(dir / "cpu.weight"), "50");
  EXPECT_EQ(ReadText(dir / "cpu.max"), "max 100000");
  EXPECT_THAT(
      written.status().message(),
      HasSubstr("memory_max: write \"67108864\" to " + (dir / "memory.max").string() +
                " (the memory controller is not enabled for " + cell->path() +
                ": it is missing from " + (own_ / "cells" / "cgroup.subtree_control").string()));
}

TEST_F(FakeCgroupTree, DelegateAutoEnablesTheControllersOnOffer) {
  WriteText(own_ / "cgroup.controllers", "cpu pids\n");
  options_.require_all_controllers = false;
  Result<CgroupTree> tree = CgroupTree::Delegate(options_);
  ASSERT_TRUE(tree.ok()) << tree.status().message();
  EXPECT_THAT(tree->missing_controllers(), ::testing::ElementsAre("memory"));
  EXPECT_EQ(tree->controllers_file(), (own_ / "cgroup.controllers").string());
  EXPECT_EQ(ReadText(own_ / "cgroup.subtree_control"), "+cpu +pids");
  EXPECT_EQ(ReadText(own_ / "cells" / "cgroup.subtree_control"), "+cpu +pids");
  // With everything on offer nothing is missing.
  WriteText(own_ / "cgroup.controllers", "cpu memory pids\n");
  tree = CgroupTree::Delegate(options_);
  ASSERT_TRUE(tree.ok());
  EXPECT_TRUE(tree->missing_controllers().empty());
}

TEST_F(FakeCgroupTree, ReadStatsParsesEveryFile) {
  Result<CgroupTree> tree = CgroupTree::Delegate(options_);
  ASSERT_TRUE(tree.ok());
  Result<CellCgroup> cell = CellCgroup::Create(tree.value(), "alpha");
  ASSERT_TRUE(cell.ok());
  fs::path dir = cell->path();
  WriteText(dir / "memory.current", "1048576\n");
  WriteText(dir / "memory.max", "33554432\n");
  WriteText(dir / "cpu.stat",
            "usage_usec 600\nuser_usec 500\nsystem_usec 100\nnr_periods 30\nnr_throttled 28\n"
            "throttled_usec 2400000\n");
  WriteText(dir / "pids.current", "3\n");
  WriteText(dir / "pids.max", "max\n");
  WriteText(dir / "memory.events", "low 0\nhigh 0\nmax 9\noom 1\noom_kill 1\noom_group_kill 1\n");
  Result<CgroupStats> stats = cell->ReadStats();
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  EXPECT_EQ(stats->memory_current, 1048576u);
  EXPECT_EQ(stats->memory_max, std::optional<uint64_t>(33554432));
  EXPECT_EQ(stats->cpu.usage_usec, 600u);
  EXPECT_EQ(stats->cpu.nr_throttled, 28u);
  EXPECT_EQ(stats->cpu.throttled_usec, 2400000u);
  EXPECT_EQ(stats->pids_current, 3u);
  EXPECT_FALSE(stats->pids_max.has_value());
  EXPECT_EQ(stats->memory_events.oom_kill, 1u);
  EXPECT_EQ(stats->memory_events.oom_group_kill, 1u);

  WriteText(dir / "cpu.stat", "nr_periods 30\n");
  stats = cell->ReadStats();
  ASSERT_FALSE(stats.ok());
  EXPECT_THAT(stats.status().message(), HasSubstr(cell->path() + "/cpu.stat"));
}

TEST_F(FakeCgroupTree, ReadStatsWithoutTheMemoryController) {
  Result<CgroupTree> tree = CgroupTree::Delegate(options_);
  ASSERT_TRUE(tree.ok());
  Result<CellCgroup> cell = CellCgroup::Create(tree.value(), "alpha");
  ASSERT_TRUE(cell.ok());
  fs::path dir = cell->path();
  WriteText(dir / "cpu.stat", "usage_usec 600\nuser_usec 500\nsystem_usec 100\n");
  WriteText(dir / "pids.current", "3\n");
  WriteText(dir / "pids.max", "16\n");
  Result<CgroupStats> stats = cell->ReadStats();
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  EXPECT_FALSE(stats->has_memory);
  EXPECT_FALSE(stats->has_cpu);  // no cpu.max
  EXPECT_TRUE(stats->has_pids);
  EXPECT_EQ(stats->pids_max, std::optional<uint64_t>(16));
  EXPECT_EQ(stats->pids_current, 3u);
  EXPECT_EQ(stats->cpu.usage_usec, 600u);
}

TEST_F(FakeCgroupTree, ReadUsageReadsWhatTheAdaptiveModePolls) {
  Result<CgroupTree> tree = CgroupTree::Delegate(options_);
  ASSERT_TRUE(tree.ok());
  Result<CellCgroup> cell = CellCgroup::Create(tree.value(), "alpha");
  ASSERT_TRUE(cell.ok());
  fs::path dir = cell->path();
  WriteText(dir / "memory.current", "16777216\n");
  WriteText(dir / "memory.max", "268435456\n");
  WriteText(dir / "memory.stat", "anon 6291456\nfile 10485760\ninactive_file 8388608\n");
  WriteText(dir / "cpu.stat",
            "usage_usec 600\nuser_usec 500\nsystem_usec 100\nnr_periods 30\nnr_throttled 28\n"
            "throttled_usec 2400000\n");
  WriteText(dir / "cpu.pressure",
            "some avg10=1.00 avg60=0.50 avg300=0.10 total=7654321\n"
            "full avg10=0.00 avg60=0.00 avg300=0.00 total=12\n");
  Result<CgroupUsage> usage = cell->ReadUsage();
  ASSERT_TRUE(usage.ok()) << usage.status().message();
  EXPECT_EQ(usage->cpu_stall_us, std::optional<uint64_t>(7654321));
  EXPECT_TRUE(usage->has_memory);
  EXPECT_EQ(usage->memory_current, 16777216u);
  EXPECT_EQ(usage->memory_max, std::optional<uint64_t>(268435456));
  EXPECT_EQ(usage->working_set(), 8388608u);
  EXPECT_EQ(usage->cpu.nr_periods, 30u);
  EXPECT_EQ(usage->cpu.nr_throttled, 28u);

  WriteText(dir / "memory.stat", "anon 1\n");
  usage = cell->ReadUsage();
  ASSERT_FALSE(usage.ok());
  EXPECT_THAT(usage.status().message(), HasSubstr(cell->path() + "/memory.stat"));
}

TEST_F(FakeCgroupTree, ReadUsageWithoutTheMemoryController) {
  Result<CgroupTree> tree = CgroupTree::Delegate(options_);
  ASSERT_TRUE(tree.ok());
  Result<CellCgroup> cell = CellCgroup::Create(tree.value(), "alpha");
  ASSERT_TRUE(cell.ok());
  WriteText(fs::path(cell->path()) / "cpu.stat",
            "usage_usec 600\nuser_usec 500\nsystem_usec 100\n");
  std::error_code ignored;
  fs::remove(fs::path(cell->path()) / "cpu.pressure", ignored);
  Result<CgroupUsage> usage = cell->ReadUsage();
  ASSERT_TRUE(usage.ok()) << usage.status().message();
  EXPECT_EQ(usage->cpu_stall_us, std::nullopt) << "no PSI: no cpu.pressure";
  EXPECT_FALSE(usage->has_memory);
  EXPECT_FALSE(usage->memory_max.has_value());
  EXPECT_EQ(usage->cpu.usage_usec, 600u);
}

TEST_F(FakeCgroupTree, ReadPressureParsesTheCellsPressureFile) {
  Result<CgroupTree> tree = CgroupTree::Delegate(options_);
  ASSERT_TRUE(tree.ok());
  Result<CellCgroup> cell = CellCgroup::Create(tree.value(), "alpha");
  ASSERT_TRUE(cell.ok());
  WriteText(fs::path(cell->path()) / "memory.pressure",
            "some avg10=3.00 avg60=1.00 avg300=0.10 total=99\n"
            "full avg10=1.00 avg60=0.50 avg300=0.05 total=40\n");
  Result<Pressure> pressure = cell->ReadPressure(PressureResource::kMemory);
  ASSERT_TRUE(pressure.ok()) << pressure.status().message();
  EXPECT_DOUBLE_EQ(pressure->some.avg10, 3.0);
  EXPECT_EQ(pressure->full->total_us, 40u);
  Result<Pressure> cpu = cell->ReadPressure(PressureResource::kCpu);
  ASSERT_FALSE(cpu.ok());
  EXPECT_EQ(cpu.status().error_number(), ENOENT);
  EXPECT_THAT(cpu.status().message(), HasSubstr(cell->path() + "/cpu.pressure"));
}

TEST_F(FakeCgroupTree, IsEmptyReadsCgroupEventsElseProcs) {
  Result<CgroupTree> tree = CgroupTree::Delegate(options_);
  ASSERT_TRUE(tree.ok());
  Result<CellCgroup> cell = CellCgroup::Create(tree.value(), "alpha");
  ASSERT_TRUE(cell.ok());
  fs::path dir = cell->path();
  WriteText(dir / "cgroup.events", "populated 1\nfrozen 0\n");
  ASSERT_TRUE(cell->IsEmpty().ok());
  EXPECT_FALSE(cell->IsEmpty().value());
  WriteText(dir / "cgroup.events", "populated 0\nfrozen 0\n");
  EXPECT_TRUE(cell->IsEmpty().value());

  fs::remove(dir / "cgroup.events");
  WriteText(dir / "cgroup.procs", "17\n");
  EXPECT_FALSE(cell->IsEmpty().value());
  WriteText(dir / "cgroup.procs", "");
  EXPECT_TRUE(cell->IsEmpty().value());
}

TEST_F(FakeCgroupTree, KillWritesCgroupKill) {
  Result<CgroupTree> tree = CgroupTree::Delegate(options_);
  ASSERT_TRUE(tree.ok());
  Result<CellCgroup> cell = CellCgroup::Create(tree.value(), "alpha");
  ASSERT_TRUE(cell.ok());
  PopulateCellFiles(cell->path());
  ASSERT_TRUE(cell->Kill().ok());
  EXPECT_EQ(ReadText(fs::path(cell->path()) / "cgroup.kill"), "1");
}

TEST_F(FakeCgroupTree, KillWithoutCgroupKillSignalsEveryListedPid) {
  Result<CgroupTree> tree = CgroupTree::Delegate(options_);
  ASSERT_TRUE(tree.ok());
  Result<CellCgroup> cell = CellCgroup::Create(tree.value(), "alpha");
  ASSERT_TRUE(cell.ok());
  fs::path dir = cell->path();
  pid_t in_cell = StartSleepingChild();
  pid_t in_sub_cgroup = StartSleepingChild();
  pid_t elsewhere = StartSleepingChild();
  WriteText(dir / "cgroup.procs", std::to_string(in_cell) + "\n");
  fs::create_directories(dir / "sub");
  WriteText(dir / "sub" / "cgroup.procs", std::to_string(in_sub_cgroup) + "\n");

  EXPECT_FALSE(cell->Kill(KillMethod::kCgroupKill).ok());  // no cgroup.kill file
  ASSERT_TRUE(cell->Kill().ok());                          // kAuto falls back to signals

  int status = ReapWithin5s(in_cell);
  ASSERT_NE(status, -1) << "pid " << in_cell << " listed in cgroup.procs was not killed";
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  status = ReapWithin5s(in_sub_cgroup);
  ASSERT_NE(status, -1) << "pid " << in_sub_cgroup << " in a sub-cgroup was not killed";
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_EQ(kill(elsewhere, 0), 0) << "a pid not listed was killed";
}

TEST_F(FakeCgroupTree, SignalReachesEveryListedPid) {
  Result<CgroupTree> tree = CgroupTree::Delegate(options_);
  ASSERT_TRUE(tree.ok());
  Result<CellCgroup> cell = CellCgroup::Create(tree.value(), "alpha");
  ASSERT_TRUE(cell.ok());
  fs::path dir = cell->path();
  pid_t in_cell = StartSleepingChild();
  pid_t in_sub_cgroup = StartSleepingChild();
  pid_t elsewhere = StartSleepingChild();
  WriteText(dir / "cgroup.procs", std::to_string(in_cell) + "\n");
  fs::create_directories(dir / "sub");
  WriteText(dir / "sub" / "cgroup.procs", std::to_string(in_sub_cgroup) + "\n");

  ASSERT_TRUE(cell->Signal(SIGTERM).ok());
  for (pid_t pid : {in_cell, in_sub_cgroup}) {
    int status = ReapWithin5s(pid);
    ASSERT_NE(status, -1) << "pid " << pid << " listed in the cell was not signalled";
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status;
  }
  EXPECT_EQ(kill(elsewhere, 0), 0) << "a pid not listed was signalled";
}

TEST_F(FakeCgroupTree, ProcsListsPids) {
  Result<CgroupTree> tree = CgroupTree::Delegate(options_);
  ASSERT_TRUE(tree.ok());
  Result<CellCgroup> cell = CellCgroup::Create(tree.value(), "alpha");
  ASSERT_TRUE(cell.ok());
  WriteText(fs::path(cell->path()) / "cgroup.procs", "12\n34\n");
  Result<std::vector<pid_t>> pids = cell->Procs();
  ASSERT_TRUE(pids.ok());
  EXPECT_THAT(pids.value(), ::testing::ElementsAre(12, 34));
  WriteText(fs::path(cell->path()) / "cgroup.procs", "12\nbad\n");
  EXPECT_FALSE(cell->Procs().ok());
}

TEST_F(FakeCgroupTree, RemoveDeletesTheDirectoryAndIsIdempotent) {
  Result<CgroupTree> tree = CgroupTree::Delegate(options_);
  ASSERT_TRUE(tree.ok());
  Result<CellCgroup> cell = CellCgroup::Create(tree.value(), "alpha");
  ASSERT_TRUE(cell.ok());
  WriteText(fs::path(cell->path()) / "cgroup.procs", "");
  EXPECT_FALSE(cell->Remove().ok());  // not empty (on cgroupfs: EBUSY while populated)
  EXPECT_GE(cell->dir_fd(), 0);
  fs::remove(fs::path(cell->path()) / "cgroup.procs");
  ASSERT_TRUE(cell->Remove().ok());
  EXPECT_FALSE(fs::exists(cell->path()));
  EXPECT_EQ(cell->dir_fd(), -1);
  EXPECT_TRUE(cell->Remove().ok());
  EXPECT_FALSE(cell->ReadStats().ok());
}

// A worker generation is a leaf of its cell (docs/config.md, "Where the processes live"): the
// cell hands memory down (so each generation has its own memory.oom.group), the limits stay on
// the cell.
TEST_F(FakeCgroupTree, CreateGenerationEnablesMemoryForTheCellsChildrenAndMakesALeaf) {
  Result<CellCgroup> cell = CreateAlpha("cpu memory pids\n");
  ASSERT_TRUE(cell.ok()) << cell.status().message();
  const fs::path dir = cell->path();
  Result<CellCgroup> gen = cell->CreateGeneration(3);
  ASSERT_TRUE(gen.ok()) << gen.status().message();
  EXPECT_EQ(ReadText(dir / "cgroup.subtree_control"), "+memory");
  EXPECT_EQ(gen->path(), (dir / "gen-3").string());
  EXPECT_EQ(gen->name(), "alpha/gen-3");
  EXPECT_TRUE(fs::is_directory(gen->path()));
  ASSERT_GE(gen->dir_fd(), 0);
  EXPECT_NE(fcntl(gen->dir_fd(), F_GETFD) & FD_CLOEXEC, 0);
  // Once on, it is not written again; an existing leaf is adopted.
  WriteText(dir / "cgroup.subtree_control", "memory\n");
  EXPECT_TRUE(cell->CreateGeneration(3).ok());
  EXPECT_EQ(ReadText(dir / "cgroup.subtree_control"), "memory\n");
}

TEST_F(FakeCgroupTree, CreateGenerationWithoutMemoryOnOfferEnablesNothing) {
  Result<CellCgroup> cell = CreateAlpha("cpu pids\n");
  ASSERT_TRUE(cell.ok()) << cell.status().message();
  Result<CellCgroup> gen = cell->CreateGeneration(1);
  ASSERT_TRUE(gen.ok()) << gen.status().message();
  EXPECT_EQ(ReadText(fs::path(cell->path()) / "cgroup.subtree_control"), "");
  // No memory.oom.group in the leaf: nothing to write, and it says so.
  EXPECT_FALSE(gen->HasOomGroup());
  EXPECT_TRUE(gen->WriteOomGroup(true).ok());
  EXPECT_FALSE(fs::exists(fs::path(gen->path()) / "memory.oom.group"));
}

TEST_F(FakeCgroupTree, WriteOomGroupWritesTheGenerationsFile) {
  Result<CellCgroup> cell = CreateAlpha();
  ASSERT_TRUE(cell.ok()) << cell.status().message();
  fs::create_directories(fs::path(cell->path()) / "gen-1");
  WriteText(fs::path(cell->path()) / "gen-1" / "memory.oom.group", "");
  Result<CellCgroup> gen = cell->CreateGeneration(1);
  ASSERT_TRUE(gen.ok()) << gen.status().message();
  EXPECT_TRUE(gen->HasOomGroup());
  ASSERT_TRUE(gen->WriteOomGroup(true).ok());
  EXPECT_EQ(ReadText(fs::path(gen->path()) / "memory.oom.group"), "1");
  ASSERT_TRUE(gen->WriteOomGroup(false).ok());
  EXPECT_EQ(ReadText(fs::path(gen->path()) / "memory.oom.group"), "0");
}

TEST_F(FakeCgroupTree, RemoveGenerationsRemovesEveryGenLeafAndNothingElse) {
  Result<CellCgroup> cell = CreateAlpha();
  ASSERT_TRUE(cell.ok()) << cell.status().message();
  const fs::path dir = cell->path();
  ASSERT_TRUE(cell->CreateGeneration(1).ok());
  ASSERT_TRUE(cell->CreateGeneration(2).ok());
  fs::create_directories(dir / "helper");
  WriteText(dir / "gen-2" / "cgroup.procs", "");  // on cgroupfs: EBUSY while populated
  EXPECT_FALSE(cell->RemoveGenerations().ok());
  EXPECT_FALSE(fs::exists(dir / "gen-1")) << "the others are still removed";
  EXPECT_TRUE(fs::exists(dir / "gen-2"));
  fs::remove(dir / "gen-2" / "cgroup.procs");
  EXPECT_TRUE(cell->RemoveGenerations().ok());
  EXPECT_FALSE(fs::exists(dir / "gen-2"));
  EXPECT_TRUE(fs::is_directory(dir / "helper"));
  EXPECT_TRUE(cell->RemoveGenerations().ok()) << "none left";
}

}  // namespace
}  // namespace bulkhead::cell
