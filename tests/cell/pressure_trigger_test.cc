// SPDX-License-Identifier: MIT
// Host tests of cell/pressure_trigger.h. On plain files in a temporary directory: the exact bytes
// a registration writes, the descriptor's flags, the errors, and that a plain file never reports
// an event (a trigger on a plain file cannot fire). Against the host kernel's /proc/pressure/ when
// it has PSI and lets us write there (skipped otherwise; never /sys/fs/cgroup): the kernel takes
// the format, and why the NUL is written. That a trigger fires, and a removed cgroup's POLLERR,
// are proved in the VM (tests/vm/cgroup_probe.cc, psi.*).
#include "cell/pressure_trigger.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "base/temp_dir.h"

namespace bulkhead::cell {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr PressureThreshold kMemory{PressureKind::kSome, 100000, 1000000};

std::string ReadBytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

class PressureTriggerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Status created = dir_.Create("bulkhead-pressure-test");
    ASSERT_TRUE(created.ok()) << created.message();
    dir_fd_ = UniqueFd(open(dir_.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(dir_fd_.valid());
    std::ofstream(dir_.Join("memory.pressure")).flush();
  }

  TempDir dir_;
  UniqueFd dir_fd_;
};

TEST_F(PressureTriggerTest, RegisterWritesTheThresholdAndItsNulInOneWrite) {
  Result<PressureTrigger> trigger =
      PressureTrigger::Register(dir_fd_.get(), dir_.path(), PressureResource::kMemory, kMemory);
  ASSERT_TRUE(trigger.ok()) << trigger.status().message();
  EXPECT_EQ(ReadBytes(dir_.Join("memory.pressure")), std::string("some 100000 1000000\0", 20));
  EXPECT_EQ(trigger->path(), dir_.path() + "/memory.pressure");
  EXPECT_EQ(trigger->threshold().stall_us, 100000u);
}

TEST_F(PressureTriggerTest, TheDescriptorIsNonBlockingReadWriteAndCloseOnExec) {
  Result<PressureTrigger> trigger =
      PressureTrigger::Register(dir_fd_.get(), dir_.path(), PressureResource::kMemory, kMemory);
  ASSERT_TRUE(trigger.ok()) << trigger.status().message();
  const int flags = fcntl(trigger->fd(), F_GETFL);
  EXPECT_EQ(flags & O_ACCMODE, O_RDWR);
  EXPECT_NE(flags & O_NONBLOCK, 0);
  EXPECT_NE(fcntl(trigger->fd(), F_GETFD) & FD_CLOEXEC, 0);
}

TEST_F(PressureTriggerTest, APlainFileNeverReportsAnEvent) {
  Result<PressureTrigger> trigger =
      PressureTrigger::Register(dir_fd_.get(), dir_.path(), PressureResource::kMemory, kMemory);
  ASSERT_TRUE(trigger.ok()) << trigger.status().message();
  Result<PressureTrigger::Event> now = trigger->Check();
  ASSERT_TRUE(now.ok()) << now.status().message();
  EXPECT_EQ(now.value(), PressureTrigger::Event::kNone);
  Result<PressureTrigger::Event> waited = trigger->Wait(20);
  ASSERT_TRUE(waited.ok());
  EXPECT_EQ(waited.value(), PressureTrigger::Event::kNone);
  EXPECT_EQ(PressureEventName(waited.value()), "none");
}

TEST_F(PressureTriggerTest, AMissingFileIsAnErrorThatNamesItAndKeepsTheErrno) {
  Result<PressureTrigger> trigger =
      PressureTrigger::Register(dir_fd_.get(), dir_.path(), PressureResource::kCpu, kMemory);
  ASSERT_FALSE(trigger.ok());
  EXPECT_EQ(trigger.status().error_number(), ENOENT);
  EXPECT_THAT(trigger.status().message(), HasSubstr("open " + dir_.path() + "/cpu.pressure"));
}

TEST_F(PressureTriggerTest, AThresholdOutOfTheKernelsBoundsFailsBeforeAnyWrite) {
  Result<PressureTrigger> trigger = PressureTrigger::Register(
      dir_fd_.get(), dir_.path(), PressureResource::kMemory, {PressureKind::kSome, 1, 100000});
  ASSERT_FALSE(trigger.ok());
  EXPECT_THAT(trigger.status().message(),
              HasSubstr(dir_.path() + "/memory.pressure: pressure trigger window 100000 us"));
  EXPECT_EQ(ReadBytes(dir_.Join("memory.pressure")), "");
}

TEST_F(PressureTriggerTest, RegisterPathTakesAnAbsolutePath) {
  const std::string path = dir_.path() + "/memory.pressure";
  Result<PressureTrigger> trigger =
      PressureTrigger::RegisterPath(path, {PressureKind::kFull, 50000, 2000000});
  ASSERT_TRUE(trigger.ok()) << trigger.status().message();
  EXPECT_EQ(ReadBytes(path), std::string("full 50000 2000000\0", 19));
  EXPECT_EQ(trigger->path(), path);
}

// The host kernel's system-wide pressure files, when it has PSI and lets this process register a
// trigger there (root, or Linux >= 6.5 with a 2 s window); else skipped.
bool HostTakesTriggers(std::string* why) {
  Result<PressureTrigger> probe =
      PressureTrigger::RegisterPath("/proc/pressure/cpu", {PressureKind::kSome, 500000, 2000000});
  if (probe.ok()) return true;
  *why = probe.status().message();
  return false;
}

TEST(PressureTriggerOnTheHostKernel, TheKernelTakesTheFormat) {
  std::string why;
  if (!HostTakesTriggers(&why)) GTEST_SKIP() << why;
  for (const char* path : {"/proc/pressure/cpu", "/proc/pressure/memory", "/proc/pressure/io"}) {
    Result<PressureTrigger> trigger =
        PressureTrigger::RegisterPath(path, {PressureKind::kSome, 150000, 2000000});
    ASSERT_TRUE(trigger.ok()) << trigger.status().message();
    Result<PressureTrigger::Event> event = trigger->Check();
    ASSERT_TRUE(event.ok()) << event.status().message();
    EXPECT_NE(event.value(), PressureTrigger::Event::kGone) << path;  // fired or not: both fine
  }
}

// Why the NUL is written: /proc/pressure's writer overwrites the last byte it was given with NUL,
// so "some 150000 2000000" without it is read as "some 150000 200000", a stall longer than the
// window, which the kernel refuses.
TEST(PressureTriggerOnTheHostKernel, WithoutTheNulTheKernelLosesTheLastDigit) {
  std::string why;
  if (!HostTakesTriggers(&why)) GTEST_SKIP() << why;
  UniqueFd fd(open("/proc/pressure/cpu", O_RDWR | O_NONBLOCK | O_CLOEXEC));
  ASSERT_TRUE(fd.valid());
  const std::string text = "some 250000 2000000";
  EXPECT_EQ(write(fd.get(), text.data(), text.size()), -1);
  // Root: EINVAL (stall above the window). Unprivileged on Linux >= 6.5 the 200 ms window is
  // refused first, with EPERM (not a multiple of 2 s).
  EXPECT_EQ(errno, geteuid() == 0 ? EINVAL : EPERM);
  Result<PressureTrigger> trigger =
      PressureTrigger::RegisterPath("/proc/pressure/cpu", {PressureKind::kSome, 250000, 2000000});
  EXPECT_TRUE(trigger.ok()) << trigger.status().message();
}

}  // namespace
}  // namespace bulkhead::cell
