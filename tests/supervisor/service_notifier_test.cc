// SPDX-License-Identifier: MIT
// ServiceNotifier against a datagram socket the test owns (the service manager's side of
// sd_notify(3)), and without $NOTIFY_SOCKET; DescribeCellStates, the STATUS= summary.
#include "supervisor/service_notifier.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <time.h>

#include <string>

#include "tests/helpers/notify_listener.h"

namespace bulkhead::supervisor {
namespace {

using State = lifecycle::Lifecycle::State;
using ::testing::ElementsAre;
using testing::NotifyListener;
using ::testing::StartsWith;

uint64_t MonotonicUsec() {
  struct timespec now {};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1000000 + static_cast<uint64_t>(now.tv_nsec) / 1000;
}

// Sets $NOTIFY_SOCKET for one test (or unsets it with nullptr) and puts the old value back.
class ScopedNotifySocket {
 public:
  explicit ScopedNotifySocket(const char* value) {
    if (const char* old = ::getenv("NOTIFY_SOCKET")) old_ = old;
    if (value != nullptr) {
      ::setenv("NOTIFY_SOCKET", value, 1);
    } else {
      ::unsetenv("NOTIFY_SOCKET");
    }
  }
  ~ScopedNotifySocket() {
    if (old_) {
      ::setenv("NOTIFY_SOCKET", old_->c_str(), 1);
    } else {
      ::unsetenv("NOTIFY_SOCKET");
    }
  }

 private:
  std::optional<std::string> old_;
};

// A service manager's socket in $NOTIFY_SOCKET for the length of a test.
class ServiceNotifierWithManager : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<NotifyListener> bound = NotifyListener::Bind(dir_.Join("notify"));
    ASSERT_TRUE(bound.ok()) << bound.status().message();
    listener_.emplace(std::move(bound).value());
    env_.emplace(listener_->path().c_str());
  }

  testing::TempDir dir_;
  std::optional<NotifyListener> listener_;
  std::optional<ScopedNotifySocket> env_;
};

TEST(DescribeCellStates, CountsEachStateInLifecycleOrder) {
  EXPECT_EQ(DescribeCellStates({State::kBackoff, State::kRunning, State::kRunning}),
            "3 cells: 2 running, 1 backoff");
  EXPECT_EQ(
      DescribeCellStates({State::kFailed, State::kStarting, State::kStopped, State::kStopping}),
      "4 cells: 1 stopped, 1 starting, 1 stopping, 1 failed");
  EXPECT_EQ(DescribeCellStates({State::kRunning}), "1 cell: 1 running");
  EXPECT_EQ(DescribeCellStates({}), "0 cells");
}

TEST_F(ServiceNotifierWithManager, SendsEachMessageAsOneDatagram) {
  ServiceNotifier notifier;
  EXPECT_TRUE(notifier.enabled());
  notifier.Status("1 cell: 1 starting");
  notifier.Ready();
  notifier.Stopping();
  ASSERT_TRUE(listener_->WaitFor([](const std::string& m) { return m == "STOPPING=1"; }));
  EXPECT_THAT(listener_->messages(),
              ElementsAre("STATUS=1 cell: 1 starting", "READY=1", "STOPPING=1"));
  EXPECT_EQ(notifier.sent(), 3u);
}

TEST_F(ServiceNotifierWithManager, ReloadingCarriesTheMonotonicClockInMicroseconds) {
  ServiceNotifier notifier;
  uint64_t before = MonotonicUsec();
  notifier.Reloading();
  uint64_t after = MonotonicUsec();
  std::optional<std::string> message = listener_->WaitForField("RELOADING=1");
  ASSERT_TRUE(message.has_value());
  const std::string prefix = "RELOADING=1\nMONOTONIC_USEC=";
  ASSERT_THAT(*message, StartsWith(prefix));
  uint64_t usec = std::stoull(message->substr(prefix.size()));
  EXPECT_LE(before, usec);
  EXPECT_LE(usec, after);
}

TEST_F(ServiceNotifierWithManager, StatusIsSentOnlyWhenItChangesAndStaysOneLine) {
  ServiceNotifier notifier;
  notifier.Status("2 cells: 2 running");
  notifier.Status("2 cells: 2 running");
  notifier.Status("two\nlines");
  notifier.Status("2 cells: 2 running");
  notifier.Ready();  // the last one: everything before it has arrived once it has
  ASSERT_TRUE(listener_->WaitForField("READY=1"));
  EXPECT_THAT(listener_->messages(), ElementsAre("STATUS=2 cells: 2 running", "STATUS=two lines",
                                                 "STATUS=2 cells: 2 running", "READY=1"));
}

TEST(ServiceNotifier, WithoutNotifySocketSendsNothingAndNothingBreaks) {
  ScopedNotifySocket env(nullptr);
  ServiceNotifier notifier;
  EXPECT_FALSE(notifier.enabled());
  notifier.Ready();
  notifier.Reloading();
  notifier.Status("1 cell: 1 running");
  notifier.Stopping();
  EXPECT_EQ(notifier.sent(), 0u);
}

TEST(ServiceNotifier, AManagerThatIsGoneIsNotAnError) {
  testing::TempDir dir;
  ScopedNotifySocket env(dir.Join("nobody-listens").c_str());
  ServiceNotifier notifier;
  EXPECT_TRUE(notifier.enabled());
  notifier.Ready();  // ECONNREFUSED/ENOENT: logged once, not fatal
  notifier.Stopping();
  EXPECT_EQ(notifier.sent(), 0u);
}

}  // namespace
}  // namespace bulkhead::supervisor
