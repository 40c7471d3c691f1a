// SPDX-License-Identifier: MIT
// PressureWatch on a cgroup of plain files (tests/lifecycle/fake_cgroup_tree.h): the triggers
// registered, retried and left off as the kernel answers, and a trigger's POLLPRI as one fired
// signal (the usage poll is the supervisor's: tests/supervisor/cgroup_poll_test.cc). The kernel's
// trigger is stood in for by a Unix socket whose urgent byte (MSG_OOB) polls POLLPRI; a real one
// fires in the VM (vm.supervisor_compartments).
#include "lifecycle/pressure_watch.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <uv.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/unique_fd.h"
#include "tests/lifecycle/fake_cgroup_tree.h"

namespace bulkhead::lifecycle {
namespace {

using admission::Signal;
using admission::SignalBit;
using bulkhead::testing::FakeCgroupTree;
using ::testing::ElementsAre;

class PressureWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(uv_loop_init(&loop_), 0);
    ASSERT_NE(tree_.tree(), nullptr);
    dir_ = tree_.MakeCell("pay");
    Result<cell::CellCgroup> made = cell::CellCgroup::Create(*tree_.tree(), "pay");
    ASSERT_TRUE(made.ok()) << made.status().message();
    cgroup_.emplace(std::move(made).value());
  }
  void TearDown() override {
    if (watch_) {
      bool closed = false;
      watch_->Close([&] { closed = true; });
      uv_run(&loop_, UV_RUN_DEFAULT);
      EXPECT_TRUE(closed);
      watch_.reset();
    }
    EXPECT_EQ(uv_loop_close(&loop_), 0) << "a handle was left open";
  }

  // A watch whose triggers register through `registrar` (null: the kernel's, on the plain files).
  void MakeWatch(PressureWatch::Registrar registrar = nullptr) {
    watch_.emplace(
        &loop_, &name_,
        PressureWatch::Callbacks{.on_fired = [this](Signal s) { fired_.push_back(s); },
                                 .on_signals = [this](uint8_t live) { signals_.push_back(live); }},
        std::move(registrar));
  }
  // What an adaptive cell with memory.max and no cpu.max quota asks.
  PressureWatch::Want Adaptive() const {
    return PressureWatch::Want{.cgroup = &*cgroup_,
                               .memory_trigger = true,
                               .cpu_trigger = true,
                               .polled_signals = SignalBit(Signal::kMemoryUsage)};
  }
  // A registrar whose triggers are sockets: urgent data on the peer (Urgent) is a kernel event.
  PressureWatch::Registrar SocketTriggers() {
    return [this](const cell::CellCgroup&, cell::PressureResource resource,
                  const cell::PressureThreshold& threshold) -> Result<cell::PressureTrigger> {
      int fds[2];
      if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) != 0) {
        return Status::FromErrno("socketpair");
      }
      peers_[static_cast<size_t>(resource)] = UniqueFd(fds[1]);
      thresholds_.push_back(threshold);
      return cell::PressureTrigger::Adopt(UniqueFd(fds[0]),
                                          std::string(cell::PressureFile(resource)), threshold);
    };
  }
  // The kernel's event on `resource`'s trigger: POLLPRI until the watch's side reads it.
  void Urgent(cell::PressureResource resource) {
    const char byte = '!';
    ASSERT_EQ(::send(peers_[static_cast<size_t>(resource)].get(), &byte, 1, MSG_OOB), 1)
        << std::strerror(errno);
  }
  void RunOnce() { uv_run(&loop_, UV_RUN_NOWAIT); }

  uv_loop_t loop_{};
  FakeCgroupTree tree_;
  std::string dir_;
  std::optional<cell::CellCgroup> cgroup_;
  std::string name_ = "pay";
  std::optional<PressureWatch> watch_;
  std::vector<Signal> fired_;
  std::vector<uint8_t> signals_;
  UniqueFd peers_[3];
  std::vector<cell::PressureThreshold> thresholds_;
};

TEST_F(PressureWatchTest, ATriggersPollpriIsOneFiredSignalOfItsResource) {
  MakeWatch(SocketTriggers());
  watch_->Follow(Adaptive());
  EXPECT_EQ(watch_->live(), SignalBit(Signal::kMemoryUsage) | SignalBit(Signal::kMemoryPressure) |
                                SignalBit(Signal::kCpuPressure));
  ASSERT_EQ(thresholds_.size(), 2u);
  EXPECT_EQ(thresholds_[0].stall_us, admission::kMemoryTrigger.stall_us);
  EXPECT_EQ(thresholds_[0].window_us, admission::kMemoryTrigger.window_us);
  EXPECT_EQ(thresholds_[1].stall_us, admission::kCpuTrigger.stall_us);
  RunOnce();
  EXPECT_TRUE(fired_.empty());
  Urgent(cell::PressureResource::kMemory);
  RunOnce();
  EXPECT_THAT(fired_, ElementsAre(Signal::kMemoryPressure));
}

TEST_F(PressureWatchTest, ARefusedOneSecondWindowIsRetriedWithTwoSecondsAndTwiceTheStall) {
  int calls = 0;
  PressureWatch::Registrar sockets = SocketTriggers();
  MakeWatch([&](const cell::CellCgroup& cgroup, cell::PressureResource resource,
                const cell::PressureThreshold& threshold) -> Result<cell::PressureTrigger> {
    ++calls;
    if (threshold.window_us < 2'000'000) return Status::FromErrno("write", EPERM);
    return sockets(cgroup, resource, threshold);
  });
  watch_->Follow(Adaptive());
  EXPECT_EQ(calls, 4);
  ASSERT_EQ(thresholds_.size(), 2u);
  EXPECT_EQ(thresholds_[0].stall_us, 200'000u);
  EXPECT_EQ(thresholds_[0].window_us, 2'000'000u);
  EXPECT_EQ(thresholds_[1].stall_us, 1'000'000u);
  EXPECT_EQ(watch_->live() & SignalBit(Signal::kMemoryPressure),
            SignalBit(Signal::kMemoryPressure));
}

TEST_F(PressureWatchTest, WithoutPsiTheSignalStaysOffAndIsNotTriedAtEveryEvent) {
  int calls = 0;
  MakeWatch([&](const cell::CellCgroup&, cell::PressureResource,
                const cell::PressureThreshold&) -> Result<cell::PressureTrigger> {
    ++calls;
    return Status::FromErrno("open memory.pressure", ENOENT);
  });
  watch_->Follow(Adaptive());
  watch_->Follow(Adaptive());
  EXPECT_EQ(calls, 2) << "one try per trigger";
  EXPECT_EQ(watch_->live(), SignalBit(Signal::kMemoryUsage));
  // Status says why (docs/control.md, "signals_off").
  EXPECT_EQ(watch_->failure(Signal::kMemoryPressure),
            "no PSI: open memory.pressure: " + std::string(std::strerror(ENOENT)));
  EXPECT_EQ(watch_->failure(Signal::kCpuPressure),
            "no PSI: open memory.pressure: " + std::string(std::strerror(ENOENT)));
  EXPECT_THAT(signals_, ElementsAre(SignalBit(Signal::kMemoryUsage)));
  // A reload to fixed and back tries again.
  watch_->Follow(PressureWatch::Want{});
  EXPECT_EQ(watch_->live(), 0);
  watch_->Follow(Adaptive());
  EXPECT_EQ(calls, 4);
}

TEST_F(PressureWatchTest, OnAPlainFileTheTriggerIsWrittenButNotWatchable) {
  MakeWatch();  // the kernel's registration, on the fake tree's plain pressure files
  watch_->Follow(Adaptive());
  EXPECT_EQ(FakeCgroupTree::Read(dir_ + "/memory.pressure"),
            std::string("some 100000 1000000\0", 20));
  EXPECT_EQ(FakeCgroupTree::Read(dir_ + "/cpu.pressure"), std::string("some 500000 1000000\0", 20));
  // epoll refuses a regular file (EPERM): the signal is off, as status shows.
  EXPECT_EQ(watch_->live(), SignalBit(Signal::kMemoryUsage));
  EXPECT_THAT(watch_->failure(Signal::kMemoryPressure), ::testing::StartsWith("cannot watch "));
  watch_->Follow(PressureWatch::Want{});
  EXPECT_EQ(watch_->failure(Signal::kMemoryPressure), "") << "no longer wanted";
}

TEST_F(PressureWatchTest, TurnedOffItClosesTheTriggersAndTellsTheSignalsOff) {
  MakeWatch(SocketTriggers());
  watch_->Follow(Adaptive());
  watch_->Follow(PressureWatch::Want{});
  EXPECT_EQ(watch_->live(), 0);
  ASSERT_EQ(signals_.size(), 2u);
  EXPECT_EQ(signals_.back(), 0);
  // The watch's descriptor is closed: the peer's urgent byte has nowhere to go.
  const char byte = '!';
  EXPECT_EQ(::send(peers_[static_cast<size_t>(cell::PressureResource::kMemory)].get(), &byte, 1,
                   MSG_OOB | MSG_NOSIGNAL),
            -1);
  RunOnce();
  EXPECT_TRUE(fired_.empty());
}

// POLLERR (a removed cgroup's trigger): the watch closes, the signal goes off and stays off while
// wanted. A UDP socket that got ICMP port unreachable on loopback stands in: its pending error
// polls POLLERR.
TEST_F(PressureWatchTest, AnErrorOnTheTriggerClosesItsWatchAndTheSignalGoesOff) {
  int memory_fd = -1;
  int calls = 0;
  PressureWatch::Registrar sockets = SocketTriggers();
  MakeWatch([&](const cell::CellCgroup& cgroup, cell::PressureResource resource,
                const cell::PressureThreshold& threshold) -> Result<cell::PressureTrigger> {
    ++calls;
    if (resource != cell::PressureResource::kMemory) return sockets(cgroup, resource, threshold);
    UniqueFd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    sockaddr_in closed{};
    closed.sin_family = AF_INET;
    closed.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    closed.sin_port = htons(9);  // discard: nothing listens in the test
    if (!fd.valid() ||
        ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&closed), sizeof closed) != 0) {
      return Status::FromErrno("udp");
    }
    memory_fd = fd.get();
    return cell::PressureTrigger::Adopt(std::move(fd), "memory.pressure", threshold);
  });
  watch_->Follow(Adaptive());
  ASSERT_NE(memory_fd, -1);
  ASSERT_NE(watch_->live() & SignalBit(Signal::kMemoryPressure), 0);
  const char byte = '!';
  ASSERT_EQ(::send(memory_fd, &byte, 1, 0), 1) << std::strerror(errno);
  for (int i = 0; i < 100 && (watch_->live() & SignalBit(Signal::kMemoryPressure)) != 0; ++i) {
    RunOnce();
  }
  EXPECT_EQ(watch_->live(), SignalBit(Signal::kMemoryUsage) | SignalBit(Signal::kCpuPressure));
  EXPECT_EQ(signals_.back(), watch_->live());
  EXPECT_TRUE(fired_.empty());
  watch_->Follow(Adaptive());
  EXPECT_EQ(calls, 2) << "a failed trigger was tried again while still wanted";
}

}  // namespace
}  // namespace bulkhead::lifecycle
