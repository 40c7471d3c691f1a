// SPDX-License-Identifier: MIT
// Init mode's pure half: reading /proc/self/mountinfo and deciding what PID 1 mounts. The mounts
// themselves run only in the VM (tests/vm/scenarios/pid1.sh).
#include "supervisor/init_mode.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace bulkhead::supervisor {
namespace {

using ::testing::IsEmpty;

// A host with everything mounted (lines as proc(5) shows them), /sys/fs/cgroup a cgroup v1 tmpfs.
constexpr char kHybridHost[] =
    "22 28 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
    "23 28 0:22 / /proc rw,nosuid,nodev,noexec,relatime shared:13 - proc proc rw\n"
    "24 28 0:5 / /dev rw,nosuid,relatime shared:2 - devtmpfs udev rw,size=4008348k,mode=755\n"
    "26 28 0:24 / /run rw,nosuid,nodev,noexec,relatime shared:5 - tmpfs tmpfs rw,mode=755\n"
    "28 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro\n"
    "30 22 0:26 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755\n"
    "31 30 0:27 / /sys/fs/cgroup/unified rw,nosuid shared:10 - cgroup2 cgroup2 rw,nsdelegate\n";

MountDecision DecisionFor(const std::vector<MountStep>& steps, std::string_view target) {
  for (const MountStep& step : steps) {
    if (step.mount->target == target) return step.decision;
  }
  ADD_FAILURE() << "no step for " << target;
  return MountDecision::kMount;
}

TEST(ParseMountInfo, ReadsMountPointTypeAndSourceAcrossOptionalFields) {
  std::vector<MountInfoEntry> entries = ParseMountInfo(kHybridHost);
  ASSERT_EQ(entries.size(), 7u);
  EXPECT_EQ(entries[0].mount_point, "/sys");
  EXPECT_EQ(entries[0].fs_type, "sysfs");
  EXPECT_EQ(entries[2].mount_point, "/dev");
  EXPECT_EQ(entries[2].fs_type, "devtmpfs");
  EXPECT_EQ(entries[2].source, "udev");
  EXPECT_EQ(entries[6].mount_point, "/sys/fs/cgroup/unified");
  EXPECT_EQ(entries[6].fs_type, "cgroup2");
}

TEST(ParseMountInfo, NoOptionalFieldsAndSeveralOfThem) {
  std::vector<MountInfoEntry> entries = ParseMountInfo(
      "1 0 0:1 / / rw - rootfs rootfs rw\n"
      "40 1 0:33 / /mnt rw shared:3 master:1 propagate_from:2 unbindable - xfs /dev/vdb rw\n");
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].mount_point, "/");
  EXPECT_EQ(entries[0].fs_type, "rootfs");
  EXPECT_EQ(entries[1].mount_point, "/mnt");
  EXPECT_EQ(entries[1].fs_type, "xfs");
  EXPECT_EQ(entries[1].source, "/dev/vdb");
}

TEST(ParseMountInfo, DecodesOctalEscapesInMountPoints) {
  std::vector<MountInfoEntry> entries =
      ParseMountInfo("50 28 0:40 / /media/my\\040disk\\134x rw - vfat /dev/sdb\\0401 rw\n");
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].mount_point, "/media/my disk\\x");
  EXPECT_EQ(entries[0].source, "/dev/sdb 1");
}

TEST(ParseMountInfo, SkipsMalformedLinesAndKeepsTheRest) {
  std::vector<MountInfoEntry> entries = ParseMountInfo(
      "garbage\n"
      "\n"
      "23 28 0:22 / /proc rw shared:13 proc proc rw\n"  // no "-" separator
      "24 28 0:5 / /dev rw - devtmpfs\n"                // nothing after the type
      "25 28 0:5 / relative rw - tmpfs tmpfs rw\n"      // mount point not absolute
      "26 28 0:24 / /run rw - tmpfs tmpfs rw");         // no final newline
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].mount_point, "/run");
  EXPECT_EQ(entries[0].fs_type, "tmpfs");
}

TEST(PlanMounts, AnEmptyInitramfsGetsEverythingInOrder) {
  // What an initramfs shows once PID 1 mounted /proc: the rootfs and /proc itself.
  std::vector<MountStep> steps = PlanMounts(
      ParseMountInfo("1 1 0:2 / / rw - rootfs rootfs rw\n2 1 0:20 / /proc rw - proc proc rw\n"));
  ASSERT_EQ(steps.size(), 5u);
  std::vector<std::string_view> targets;
  for (const MountStep& step : steps) targets.push_back(step.mount->target);
  EXPECT_THAT(targets, ::testing::ElementsAre("/proc", "/dev", "/sys", "/sys/fs/cgroup", "/run"));
  EXPECT_EQ(steps[0].decision, MountDecision::kPresent);
  for (size_t i = 1; i < steps.size(); ++i) {
    EXPECT_EQ(steps[i].decision, MountDecision::kMount) << steps[i].mount->target;
    EXPECT_THAT(steps[i].present_type, IsEmpty());
  }
  EXPECT_EQ(steps[3].mount->fs_type, "cgroup2");
  EXPECT_EQ(steps[1].mount->fs_type, "devtmpfs");
}

TEST(PlanMounts, NeverMountsOverAnotherTypeAndNamesIt) {
  std::vector<MountStep> steps = PlanMounts(ParseMountInfo(kHybridHost));
  EXPECT_EQ(DecisionFor(steps, "/proc"), MountDecision::kPresent);
  EXPECT_EQ(DecisionFor(steps, "/dev"), MountDecision::kPresent);
  EXPECT_EQ(DecisionFor(steps, "/sys"), MountDecision::kPresent);
  EXPECT_EQ(DecisionFor(steps, "/run"), MountDecision::kPresent);
  // cgroup v1 hybrid: a tmpfs at /sys/fs/cgroup, cgroup2 only below it.
  EXPECT_EQ(DecisionFor(steps, "/sys/fs/cgroup"), MountDecision::kPresentAsOther);
  EXPECT_EQ(steps[3].present_type, "tmpfs");
}

TEST(PlanMounts, TheTopmostMountAtATargetDecides) {
  // A container runtime that mounted a tmpfs on /sys/fs/cgroup and then cgroup2 over it.
  std::vector<MountStep> steps =
      PlanMounts(ParseMountInfo("30 22 0:26 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n"
                                "31 30 0:27 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"));
  EXPECT_EQ(DecisionFor(steps, "/sys/fs/cgroup"), MountDecision::kPresent);
  // Only /sys/fs/cgroup itself counts: a mount below /run is not /run.
  steps = PlanMounts(ParseMountInfo("40 1 0:50 / /run/user/1000 rw - tmpfs tmpfs rw\n"));
  EXPECT_EQ(DecisionFor(steps, "/run"), MountDecision::kMount);
}

// A rootless-looking podman container (mountinfo as `podman run` shows it): /dev is a tmpfs and
// /run is not mounted. In a container nothing is mounted over or added; outside, /run would be.
TEST(PlanMounts, InAContainerMissingMountsAreLeftToTheRuntime) {
  const std::string podman =
      "500 400 0:60 / / rw - overlay overlay rw\n"
      "501 500 0:62 / /proc rw,nosuid,nodev,noexec - proc proc rw\n"
      "502 500 0:63 / /dev rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755\n"
      "503 500 0:64 / /sys ro,nosuid,nodev,noexec - sysfs sysfs ro\n"
      "504 503 0:26 / /sys/fs/cgroup ro,nosuid,nodev,noexec - cgroup2 cgroup2 rw\n";
  std::vector<MountStep> steps = PlanMounts(ParseMountInfo(podman), /*in_container=*/true);
  EXPECT_EQ(DecisionFor(steps, "/run"), MountDecision::kLeftToRuntime);
  EXPECT_EQ(DecisionFor(steps, "/dev"), MountDecision::kPresentAsOther);
  EXPECT_EQ(DecisionFor(steps, "/sys/fs/cgroup"), MountDecision::kPresent);
  steps = PlanMounts(ParseMountInfo(podman), /*in_container=*/false);
  EXPECT_EQ(DecisionFor(steps, "/run"), MountDecision::kMount);
}

TEST(EndProcess, ExitReturnsTheCodeAndPoweroffOutsidePid1DoesNothingElse) {
  // Not PID 1: "poweroff" and "reboot" must never reach reboot(2) (this test would not return).
  EXPECT_EQ(EndProcess(config::ShutdownAction::kExit, 3, /*pid1=*/false), 3);
  EXPECT_EQ(EndProcess(config::ShutdownAction::kPoweroff, 0, /*pid1=*/false), 0);
  EXPECT_EQ(EndProcess(config::ShutdownAction::kReboot, 1, /*pid1=*/false), 1);
}

// Failure 5 of docs/reexec.md with no previous binary left to run: PID 1 of a machine powers off
// or reboots as on_shutdown says, and reboots where it says "exit" (an exit of PID 1 panics the
// kernel); PID 1 of a container and any other bulkheadd end as on_shutdown says.
TEST(TakeoverFailedAction, Pid1OfAMachineNeverExits) {
  using config::ShutdownAction;
  struct Row {
    ShutdownAction on_shutdown;
    bool pid1;
    bool in_container;
    ShutdownAction want;
  };
  const Row rows[] = {
      {ShutdownAction::kExit, true, false, ShutdownAction::kReboot},
      {ShutdownAction::kPoweroff, true, false, ShutdownAction::kPoweroff},
      {ShutdownAction::kReboot, true, false, ShutdownAction::kReboot},
      {ShutdownAction::kExit, true, true, ShutdownAction::kExit},
      {ShutdownAction::kPoweroff, true, true, ShutdownAction::kPoweroff},
      {ShutdownAction::kExit, false, false, ShutdownAction::kExit},
      {ShutdownAction::kPoweroff, false, false, ShutdownAction::kPoweroff},
      {ShutdownAction::kReboot, false, true, ShutdownAction::kReboot},
  };
  for (const Row& row : rows) {
    EXPECT_EQ(TakeoverFailedAction(row.on_shutdown, row.pid1, row.in_container), row.want)
        << static_cast<int>(row.on_shutdown) << " pid1 " << row.pid1 << " container "
        << row.in_container;
  }
}

}  // namespace
}  // namespace bulkhead::supervisor
