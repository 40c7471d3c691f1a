// SPDX-License-Identifier: MIT
// A cgroup v2 tree of plain files in a temporary directory, for the lifecycle's host tests (the
// host is cgroup v1 for cpu and memory, and its /sys/fs/cgroup is never written): the delegated
// layout CgroupTree::Delegate expects, and a cell's interface files as the kernel would create
// them, which a test then writes as the kernel would (memory.current, cpu.stat, ...). A pressure
// file is a plain file: a trigger registers on it (the threshold is written) but libuv cannot poll
// it, as it can a kernel's.
#pragma once

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <system_error>
#include <utility>

#include "cell/cgroup.h"
#include "tests/helpers/test_support.h"

namespace bulkhead::testing {

class FakeCgroupTree {
 public:
  FakeCgroupTree() {
    own_ = dir_.path() + "/system.slice/bulkhead.service";
    for (const char* sub : {"", "/supervisor", "/cells"}) {
      MakeDir(own_ + sub);
      Write(own_ + sub + "/cgroup.subtree_control", "");
      Write(own_ + sub + "/cgroup.procs", "");
    }
    Write(own_ + "/cgroup.controllers", "cpu memory pids\n");
    Write(dir_.path() + "/self-cgroup", "0::/system.slice/bulkhead.service\n");
    cell::DelegateOptions options;
    options.root_mount = dir_.path();
    options.proc_self_cgroup = dir_.path() + "/self-cgroup";
    options.check_filesystem = false;
    Result<cell::CgroupTree> tree = cell::CgroupTree::Delegate(options);
    if (tree.ok()) tree_.emplace(std::move(tree).value());
  }

  // Null when Delegate failed (the test then fails on it).
  const cell::CgroupTree* tree() const { return tree_ ? &*tree_ : nullptr; }

  // The directory of cell `name` with the files a new cgroup has: empty, no process, no OOM kill,
  // nothing used yet. Made before the cell's cgroup is created (Create adopts it).
  std::string MakeCell(const std::string& name) {
    const std::string dir = own_ + "/cells/" + name;
    MakeDir(dir);
    Write(dir + "/cgroup.controllers", "cpu memory pids\n");
    Write(dir + "/cgroup.subtree_control", "");
    for (const char* file :
         {"cpu.max", "cpu.weight", "memory.max", "memory.high", "memory.swap.max", "pids.max",
          "memory.oom.group", "cgroup.kill", "cgroup.procs", "cpu.pressure", "memory.pressure"}) {
      Write(dir + "/" + file, "");
    }
    Write(dir + "/cgroup.events", "populated 0\nfrozen 0\n");
    Write(dir + "/memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n");
    Write(dir + "/memory.current", "0\n");
    Write(dir + "/memory.stat", "anon 0\nfile 0\ninactive_file 0\n");
    Write(dir + "/cpu.stat", "usage_usec 0\nuser_usec 0\nsystem_usec 0\n");
    return dir;
  }

  // The leaf of worker generation `n` of cell `name` (cells/NAME/gen-N) as the kernel makes it
  // once the cell enabled memory for its children: with memory.oom.group. Made before the runner
  // creates it (CreateGeneration adopts it); a leaf the runner makes itself is a bare directory,
  // as if the cell had no memory controller for its children.
  std::string MakeGeneration(const std::string& name, int n) {
    const std::string dir = own_ + "/cells/" + name + "/gen-" + std::to_string(n);
    MakeDir(dir);
    Write(dir + "/memory.oom.group", "");
    return dir;
  }
  // Removes the files of `dir`: rmdir on cgroupfs takes a cgroup's interface files with it, a
  // plain directory must be empty first.
  static void DropFiles(const std::string& dir) {
    std::error_code ignored;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ignored)) {
      if (entry.is_regular_file()) std::filesystem::remove(entry.path(), ignored);
    }
  }

  static void Write(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::trunc);
    out << text;
  }
  static std::string Read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

 private:
  static void MakeDir(const std::string& path) {
    std::error_code ignored;
    std::filesystem::create_directories(path, ignored);
  }

  TempDir dir_;
  std::string own_;
  std::optional<cell::CgroupTree> tree_;
};

}  // namespace bulkhead::testing
