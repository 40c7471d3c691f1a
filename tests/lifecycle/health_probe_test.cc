// SPDX-License-Identifier: MIT
// HealthProbe in simulated time, against a worker socket the test serves itself on a real loop:
// readiness probes at once and every kReadyIntervalMs until a 2xx, an attempt gets
// kAttemptTimeoutMs, liveness finds no 2xx for stall_timeout and says so after the next poll, a
// 2xx that waited in the socket voids that verdict, a reload re-times the probe, and kOff stops
// everything.
#include "lifecycle/health_probe.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include <optional>
#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "tests/helpers/simulated_time_source.h"
#include "tests/helpers/test_support.h"
#include "tests/lifecycle/probe_peer.h"

namespace bulkhead::lifecycle {
namespace {

using bulkhead::testing::SimulatedTimeSource;
using bulkhead::testing::TempDir;
using bulkhead::testing::WaitFor;
using ::testing::HasSubstr;

constexpr char kOk[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
constexpr char kUnavailable[] = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n";

class HealthProbeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(uv_loop_init(&loop_), 0);
    after_poll_.emplace(&loop_, [this] { probe_->OnAfterPoll(); });
    Result<UniqueFd> listening = bulkhead::testing::ListenUnix(config_.worker_socket);
    ASSERT_TRUE(listening.ok()) << listening.status().message();
    worker_ = std::move(listening).value();
    ASSERT_EQ(::fcntl(worker_.get(), F_SETFL, O_NONBLOCK), 0);
    probe_.emplace(
        &loop_, &time_, &*after_poll_, &cell_,
        HealthProbe::Callbacks{
            .on_ready = [this](std::string what) { ready_.push_back(std::move(what)); },
            .on_stalled = [this](std::string why) { stalled_.push_back(std::move(why)); }});
  }
  void TearDown() override {
    probe_->Follow(HealthProbe::State::kOff, 0, config_);
    probe_.reset();
    bool closed = false;
    after_poll_->Close([&] { closed = true; });
    uv_run(&loop_, UV_RUN_DEFAULT);
    EXPECT_TRUE(closed);
    EXPECT_EQ(uv_loop_close(&loop_), 0) << "a handle was left open";
  }

  static config::CellConfig Config(const std::string& dir) {
    config::CellConfig config;
    config.name = "web";
    config.worker_socket = dir + "/web.worker.sock";
    config.ready = config::ReadyMode::kHttp;
    config.ready_http_path = "/healthz";
    config.stall_timeout = std::chrono::milliseconds(2000);
    return config;
  }

  void RunOnce() { uv_run(&loop_, UV_RUN_NOWAIT); }
  bool ConnectionWaits() const { return testing::ProbeWaits(worker_.get()); }
  // The worker's side of the next probe: accepts it once the loop has connected it, and reads its
  // request head.
  UniqueFd AcceptProbe() {
    std::string head;
    UniqueFd conn = testing::AcceptProbe(
        worker_.get(), [this] { RunOnce(); }, &head);
    EXPECT_THAT(head, ::testing::StartsWith("GET /healthz HTTP/1.1\r\n"));
    return conn;
  }
  void Answer(const UniqueFd& conn, std::string_view answer) { testing::AnswerProbe(conn, answer); }
  // Runs the loop until the probe has taken `answer` in.
  void RunUntilAnswered(const std::string& answer) {
    EXPECT_TRUE(WaitFor([&] {
      RunOnce();
      return probe_->last_answer() == answer;
    })) << "last answer: "
        << probe_->last_answer();
  }

  uv_loop_t loop_{};
  SimulatedTimeSource time_;
  TempDir dir_;
  std::string cell_ = "web";
  config::CellConfig config_ = Config(dir_.path());
  UniqueFd worker_;
  std::optional<loop::AfterPoll> after_poll_;
  std::optional<HealthProbe> probe_;
  std::vector<std::string> ready_;
  std::vector<std::string> stalled_;
};

TEST_F(HealthProbeTest, ReadinessProbesAtOnceThenEveryIntervalUntilA2xx) {
  probe_->Follow(HealthProbe::State::kReadiness, 42, config_);
  EXPECT_FALSE(ConnectionWaits()) << "from the timer, not from inside Follow";
  time_.RunDue();
  UniqueFd first = AcceptProbe();
  Answer(first, kUnavailable);
  RunUntilAnswered("503");
  EXPECT_TRUE(ready_.empty());

  time_.Advance(HealthProbe::kReadyIntervalMs - 1);
  RunOnce();
  EXPECT_FALSE(ConnectionWaits());
  time_.Advance(1);
  UniqueFd second = AcceptProbe();
  Answer(second, kOk);
  RunUntilAnswered("200");
  EXPECT_EQ(ready_, std::vector<std::string>{"GET /healthz answered 200"});
  EXPECT_TRUE(stalled_.empty());
}

TEST_F(HealthProbeTest, AnAttemptGetsItsTimeoutThenCountsAsUnanswered) {
  probe_->Follow(HealthProbe::State::kReadiness, 42, config_);
  time_.RunDue();
  UniqueFd silent = AcceptProbe();
  // Ticks while the attempt is younger than kAttemptTimeoutMs start nothing new.
  time_.Advance(900);
  RunOnce();
  EXPECT_TRUE(probe_->busy());
  EXPECT_FALSE(ConnectionWaits());
  // The tick at 1050 ms: the attempt is over a second old.
  time_.Advance(150);
  UniqueFd next = AcceptProbe();
  EXPECT_EQ(probe_->last_answer(), "no answer within 1000 ms");
  // An answer whose body never ends fails the same way, naming its status.
  Answer(next, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc");
  RunOnce();  // reads the head: the status is known
  RunOnce();
  time_.Advance(HealthProbe::kAttemptTimeoutMs + HealthProbe::kReadyIntervalMs);
  UniqueFd third = AcceptProbe();
  EXPECT_EQ(probe_->last_answer(), "200 whose body did not end within 1000 ms");
  EXPECT_TRUE(ready_.empty());
}

TEST_F(HealthProbeTest, LivenessWithoutA2xxForStallTimeoutIsAStallSaidAfterThePoll) {
  probe_->Follow(HealthProbe::State::kLiveness, 42, config_);
  // Every quarter of stall_timeout, the first one interval after the entry.
  EXPECT_EQ(HealthProbe::LivenessIntervalMs(2000), 500u);
  time_.RunDue();
  EXPECT_FALSE(ConnectionWaits());
  for (int tick = 1; tick <= 3; ++tick) {
    time_.Advance(500);
    UniqueFd conn = AcceptProbe();
    Answer(conn, kUnavailable);
    RunUntilAnswered("503");
  }
  time_.Advance(500);  // 2000 ms without a 2xx
  EXPECT_TRUE(stalled_.empty()) << "decided after the next poll, not in the timer";
  RunOnce();
  ASSERT_EQ(stalled_.size(), 1u);
  EXPECT_THAT(stalled_[0], HasSubstr("health probe GET /healthz: no 2xx for 2000 ms ("));
  EXPECT_THAT(stalled_[0], HasSubstr("last answer: 503)"));
  EXPECT_TRUE(ready_.empty());
}

TEST_F(HealthProbeTest, A2xxThatWaitedInTheSocketVoidsTheLivenessVerdict) {
  probe_->Follow(HealthProbe::State::kLiveness, 42, config_);
  for (int tick = 1; tick <= 3; ++tick) {
    time_.Advance(500);
    UniqueFd conn = AcceptProbe();
    if (tick < 3) {
      Answer(conn, kUnavailable);
      RunUntilAnswered("503");
      continue;
    }
    // The worker answers 200 at 1500 ms, but the loop does not run again before the tick at
    // 2000 ms (bulkheadd stopped, frozen or starved): the answer waits in the socket.
    Answer(conn, kOk);
    time_.Advance(500);
    RunOnce();  // the poll reads the 2xx before the verdict
    EXPECT_EQ(probe_->last_answer(), "200");
  }
  EXPECT_TRUE(stalled_.empty()) << stalled_[0];
  // It counts from that 2xx: no verdict until 2000 ms later.
  time_.Advance(1500);
  RunOnce();
  EXPECT_TRUE(stalled_.empty());
}

TEST_F(HealthProbeTest, AReloadReTimesLivenessAndOffStopsEverything) {
  probe_->Follow(HealthProbe::State::kLiveness, 42, config_);
  time_.Advance(300);
  config_.stall_timeout = std::chrono::milliseconds(8000);  // every 2 s from now
  probe_->Follow(HealthProbe::State::kLiveness, 42, config_);
  time_.Advance(1999);
  RunOnce();
  EXPECT_FALSE(ConnectionWaits());
  time_.Advance(1);
  UniqueFd conn = AcceptProbe();
  EXPECT_TRUE(probe_->busy());
  probe_->Follow(HealthProbe::State::kOff, 0, config_);
  EXPECT_FALSE(probe_->busy());
  EXPECT_EQ(probe_->last_answer(), "");
  EXPECT_EQ(time_.armed_timers(), 0u);
  time_.Advance(60'000);
  RunOnce();
  EXPECT_FALSE(ConnectionWaits());
  EXPECT_TRUE(ready_.empty());
  EXPECT_TRUE(stalled_.empty());
}

}  // namespace
}  // namespace bulkhead::lifecycle
