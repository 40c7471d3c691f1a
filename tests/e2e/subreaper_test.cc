// SPDX-License-Identifier: MIT
// bulkheadd as child subreaper (supervisor/init_mode.h): a process a cell's worker double-forks is
// reparented to bulkheadd, not to the test process (itself a subreaper, see harness.h), and reaped
// by it when it exits; and a worker's exit status still reaches its cell when orphans exit at the
// same moment (supervisor/reaper.h).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <set>
#include <string>

#include "tests/e2e/e2e_test.h"

namespace bulkhead::e2e {
namespace {

using testing::ReadFile;
using testing::ReadProcStat;
using testing::ZombieChildrenOf;

// The cell's shell script: starts `orphans` double-forked processes that each write their pid to
// $DIR/orphan.N and then block reading $DIR/gate until every writer of that FIFO is gone; then
// the worker itself blocks the same way (after writing $DIR/worker) and exits 7. On its next start
// ($DIR/ran exists) it execs the test worker instead.
constexpr char kScript[] = R"(
if [ -e "$DIR/ran" ]; then exec "$WORKER"; fi
: > "$DIR/ran"
i=0
while [ "$i" -lt "$ORPHANS" ]; do
  i=$((i + 1))
  ( sh -c 'exec 3< "$DIR/gate"; echo $$ > "$DIR/orphan.$1.tmp"; mv "$DIR/orphan.$1.tmp" "$DIR/orphan.$1"; read x <&3; exit 0' orphan "$i" & )
done
exec 3< "$DIR/gate"
echo $$ > "$DIR/worker.tmp"; mv "$DIR/worker.tmp" "$DIR/worker"
read x <&3
exit 7
)";

class SubreaperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::mkfifo(Path("gate").c_str(), 0600), 0);
    // Held open read-write (which never blocks on Linux, fifo(7)) until the test releases everyone:
    // readers open at once, and all see EOF together when this, the only writer, closes.
    gate_ = UniqueFd(::open(Path("gate").c_str(), O_RDWR | O_CLOEXEC));
    ASSERT_TRUE(gate_.valid());
    ASSERT_TRUE(testing::WriteFileAtomically(Path("cell.sh"), kScript).ok());
  }

  std::string Path(const std::string& name) const { return dir_.Join(name); }

  CellSpec Cell(int orphans) const {
    return CellSpec{.name = "crowd",
                    .command = {"/bin/sh", Path("cell.sh")},
                    .restart_delay = "50ms",
                    .environment = {{"DIR", dir_.path()},
                                    {"WORKER", TestWorkerPath()},
                                    {"ORPHANS", std::to_string(orphans)}}};
  }

  // The pids the script wrote, once all `orphans` files and the worker's exist.
  std::set<pid_t> WaitForOrphanPids(int orphans) {
    std::set<pid_t> pids;
    bool all = WaitFor([&] {
      pids.clear();
      for (int i = 1; i <= orphans; ++i) {
        std::optional<std::string> pid = ReadFile(Path("orphan." + std::to_string(i)));
        if (!pid) return false;
        pids.insert(std::stoi(*pid));
      }
      return ReadFile(Path("worker")).has_value();
    });
    EXPECT_TRUE(all) << "the cell's script did not start its " << orphans << " orphans";
    return pids;
  }

  // True once every pid in `pids` has bulkheadd as its parent.
  static bool AllAdoptedBy(const std::set<pid_t>& pids, pid_t parent) {
    for (pid_t pid : pids) {
      std::optional<testing::ProcStat> stat = ReadProcStat(pid);
      if (!stat || stat->ppid != parent) return false;
    }
    return true;
  }

  // True once no pid in `pids` exists any more, not even as a zombie.
  static bool AllReaped(const std::set<pid_t>& pids) {
    for (pid_t pid : pids) {
      if (ReadProcStat(pid).has_value()) return false;
    }
    return true;
  }

  TempDir dir_;
  UniqueFd gate_;
};

TEST_F(SubreaperTest, DoubleForkedOrphanIsAdoptedAndReapedByBulkheadd) {
  Harness h(TestOptions({Cell(1)}));
  ASSERT_STARTED(h);
  std::set<pid_t> orphans = WaitForOrphanPids(1);
  ASSERT_EQ(orphans.size(), 1u);
  // Its parent (the subshell) exited: the nearest subreaper is bulkheadd, not the test process.
  ASSERT_TRUE(WaitFor([&] { return AllAdoptedBy(orphans, h.pid()); }))
      << "orphan " << *orphans.begin() << " has parent "
      << ReadProcStat(*orphans.begin()).value_or(testing::ProcStat{}).ppid << ", bulkheadd is "
      << h.pid();

  gate_.Reset();  // the orphan and the worker end now
  EXPECT_TRUE(WaitFor([&] { return AllReaped(orphans); })) << "the orphan stayed a zombie";
  EXPECT_TRUE(h.WaitForCell("crowd", [](const nlohmann::json& c) {
    return c["state"] == "running" && c["restarts"] == 1;
  })) << h.Status().dump();
  EXPECT_TRUE(ZombieChildrenOf(h.pid()).empty());
}

TEST_F(SubreaperTest, WorkerExitStatusReachesItsCellWhileOrphansExitTogether) {
  constexpr int kOrphans = 20;
  Harness h(TestOptions({Cell(kOrphans)}));
  ASSERT_STARTED(h);
  const int first_pid = h.Cell("crowd")["pid"].get<int>();
  std::set<pid_t> orphans = WaitForOrphanPids(kOrphans);
  ASSERT_TRUE(WaitFor([&] { return AllAdoptedBy(orphans, h.pid()); }));

  gate_.Reset();  // the 20 orphans and the worker (exit 7) end at the same moment
  ASSERT_TRUE(h.WaitForCell("crowd",
                            [&](const nlohmann::json& c) {
                              return c["state"] == "running" && c["restarts"] == 1 &&
                                     c["pid"].is_number_integer() && c["pid"] != first_pid;
                            }))
      << h.Status().dump() << "\n"
      << h.Log();
  EXPECT_EQ(h.Cell("crowd")["last_exit"], "exit 7");
  EXPECT_TRUE(WaitFor([&] { return AllReaped(orphans); })) << "an orphan stayed a zombie";
  EXPECT_TRUE(ZombieChildrenOf(h.pid()).empty());
  // The restarted worker (the test worker) serves.
  EXPECT_OK_REPLY(h.Call("crowd", "echo after"), "after");
}

}  // namespace
}  // namespace bulkhead::e2e
