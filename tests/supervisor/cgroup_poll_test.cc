// SPDX-License-Identifier: MIT
// CgroupPoll, the supervisor's one timer over the cells' cgroups, in simulated time on cgroups of
// plain files (tests/lifecycle/fake_cgroup_tree.h): each cell's cgroup read once per tick while an
// adaptive cell runs with cgroups, and a cpu.pressure event of one cell judged by the stall its
// neighbour's cpu.pressure file shows, down to the controller's cut or spared event.
#include "supervisor/cgroup_poll.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "admission/adaptive_limit.h"
#include "cell/cgroup.h"
#include "tests/helpers/simulated_time_source.h"
#include "tests/lifecycle/fake_cgroup_tree.h"

namespace bulkhead::supervisor {
namespace {

using admission::CpuNeighbours;
using admission::LimitCause;
using admission::Signal;
using bulkhead::testing::FakeCgroupTree;
using bulkhead::testing::SimulatedTimeSource;

// A cell whose cgroup is a directory of plain files: its poll reads cpu.pressure there, as
// WorkerRunner::PollCgroup does while a worker runs (worker_runner_test.cc tests that read).
class FileCell final : public CgroupPoll::Polled {
 public:
  FileCell(FakeCgroupTree* tree, const std::string& name, bool adaptive)
      : dir_(tree->MakeCell(name)), adaptive_(adaptive) {
    Result<cell::CellCgroup> made = cell::CellCgroup::Create(*tree->tree(), name);
    if (made.ok()) cgroup_.emplace(std::move(made).value());
    SetStall(0);
  }

  std::optional<uint64_t> PollCgroup() override {
    ++reads;
    if (!runs || !cgroup_) return std::nullopt;
    Result<cell::Pressure> pressure = cgroup_->ReadPressure(cell::PressureResource::kCpu);
    if (!pressure.ok()) return std::nullopt;
    return pressure->some.total_us;
  }
  bool RunsInCgroup() const override { return runs; }
  bool adaptive() const override { return adaptive_; }

  // cpu.pressure as the kernel shows it, "some" stalled `total_us` since the cgroup was made.
  void SetStall(uint64_t total_us) {
    stall_us_ = total_us;
    FakeCgroupTree::Write(
        dir_ + "/cpu.pressure",
        "some avg10=0.00 avg60=0.00 avg300=0.00 total=" + std::to_string(total_us) +
            "\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n");
  }
  void AddStall(uint64_t us) { SetStall(stall_us_ + us); }

  bool runs = true;
  int reads = 0;

 private:
  std::string dir_;
  bool adaptive_;
  std::optional<cell::CellCgroup> cgroup_;
  uint64_t stall_us_ = 0;
};

class CgroupPollTest : public ::testing::Test {
 protected:
  CgroupPollTest() : pay_(&tree_, "pay", true), batch_(&tree_, "batch", false) {}

  void Follow(bool cgroups = true, bool shutting_down = false) {
    poll_.Follow(cells_, cgroups, shutting_down);
  }
  // Ticks of `ms` in all, each cell's stall growing by its share of every tick meanwhile.
  void Run(uint64_t ms, double pay_share, double batch_share) {
    for (uint64_t t = 0; t < ms; t += CgroupPoll::kPollMs) {
      pay_.AddStall(static_cast<uint64_t>(pay_share * CgroupPoll::kPollMs * 1000));
      batch_.AddStall(static_cast<uint64_t>(batch_share * CgroupPoll::kPollMs * 1000));
      time_.Advance(CgroupPoll::kPollMs);
    }
  }

  SimulatedTimeSource time_;
  FakeCgroupTree tree_;
  FileCell pay_;
  FileCell batch_;
  std::vector<CgroupPoll::Polled*> cells_{&pay_, &batch_};
  CgroupPoll poll_{&time_};
};

// The wiring end to end: batch's stall grows, so pay's cpu event cuts pay's limit; once batch's
// stall stops growing, pay's next event only holds growth (spared). Pay's own stall, 90% all
// along, counts for neither.
TEST_F(CgroupPollTest, ANeighboursGrowingStallMakesACpuEventCutAndItsIdleOneSparesIt) {
  admission::AdaptiveLimit limit(&time_, admission::AdaptiveLimit::Options{});
  limit.SetBounds(16, 64);  // the limit at 16, then the floor back at 1: a cut shows
  limit.SetBounds(1, 64);
  ASSERT_EQ(limit.limit(), 16u);
  Follow();
  time_.RunDue();

  Run(1'000, 0.9, 0.4);
  EXPECT_EQ(poll_.Judge(pay_), CpuNeighbours::kWaiting);
  limit.OnPressure(Signal::kCpuPressure, poll_.Judge(pay_));
  EXPECT_EQ(limit.limit(), 12u);
  EXPECT_EQ(limit.changes_by(LimitCause::kCpuPressure), 1u);

  Run(1'250, 0.9, 0.0);
  EXPECT_EQ(poll_.Judge(pay_), CpuNeighbours::kNoneWaiting);
  limit.OnPressure(Signal::kCpuPressure, poll_.Judge(pay_));
  EXPECT_EQ(limit.limit(), 12u) << "cut with no cell waiting";
  EXPECT_EQ(limit.cpu_pressure_spared(), 1u);
  // Pay waits for a CPU too, all along: batch's events would cut.
  EXPECT_EQ(poll_.Judge(batch_), CpuNeighbours::kWaiting);
}

TEST_F(CgroupPollTest, ReadsEachCellsCgroupOncePerTickOnlyWhileAnAdaptiveCellRunsWithCgroups) {
  Follow(/*cgroups=*/false);
  time_.Advance(1'000);
  EXPECT_EQ(pay_.reads + batch_.reads, 0) << "read without cgroups";
  EXPECT_FALSE(poll_.running());

  Follow();
  time_.RunDue();  // the first tick at the next turn
  EXPECT_EQ(pay_.reads, 1);
  EXPECT_EQ(batch_.reads, 1);
  Follow();  // after every reload: the period stays
  time_.Advance(CgroupPoll::kPollMs - 1);
  EXPECT_EQ(pay_.reads, 1);
  time_.Advance(1);
  EXPECT_EQ(pay_.reads, 2);
  EXPECT_EQ(batch_.reads, 2);
  time_.Advance(750);
  EXPECT_EQ(pay_.reads, 5);
  EXPECT_EQ(batch_.reads, 5);

  // Only fixed cells left (a reload removed the adaptive one): no poll.
  std::vector<CgroupPoll::Polled*> fixed_only{&batch_};
  poll_.Follow(fixed_only, true, false);
  time_.Advance(1'000);
  EXPECT_EQ(batch_.reads, 5);
  EXPECT_FALSE(poll_.running());

  Follow();
  time_.Advance(500);
  EXPECT_EQ(batch_.reads, 8);
  Follow(/*cgroups=*/true, /*shutting_down=*/true);
  time_.Advance(1'000);
  EXPECT_EQ(batch_.reads, 8) << "read while shutting down";
}

TEST_F(CgroupPollTest, ANeighbourWithoutAWorkerWaitsForNothingAndOneJustStartedIsUnknown) {
  Follow();
  time_.RunDue();
  Run(1'000, 0.9, 0.4);
  batch_.runs = false;
  EXPECT_EQ(poll_.Judge(pay_), CpuNeighbours::kNoneWaiting) << "its worker ended";
  time_.Advance(CgroupPoll::kPollMs);
  batch_.runs = true;  // a new worker: one reading since, too few to judge
  time_.Advance(CgroupPoll::kPollMs);
  EXPECT_EQ(poll_.Judge(pay_), CpuNeighbours::kUnknown);
  Run(1'000, 0.9, 0.4);
  EXPECT_EQ(poll_.Judge(pay_), CpuNeighbours::kWaiting);

  // A reload removed batch: pay alone has no neighbour.
  std::vector<CgroupPoll::Polled*> pay_only{&pay_};
  poll_.Follow(pay_only, true, false);
  EXPECT_EQ(poll_.Judge(pay_), CpuNeighbours::kNoneWaiting);
  // Given back, it starts from fresh readings.
  Follow();
  EXPECT_EQ(poll_.Judge(pay_), CpuNeighbours::kUnknown);
}

}  // namespace
}  // namespace bulkhead::supervisor
