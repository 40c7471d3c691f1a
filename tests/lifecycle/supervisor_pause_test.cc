// SPDX-License-Identifier: MIT
// A pause of bulkheadd itself (SIGSTOP, a frozen host, CPU starvation) is no silence of its
// workers (issue 11, item 3): the replies and WATCHDOG=1 they sent meanwhile wait in the sockets,
// and libuv runs the expired timers before it reads them. stall_timeout, request_timeout and the
// watchdog must judge only silence that really happened: after the pause, healthy workers keep
// running and answered requests get their answers.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <thread>

#include "tests/lifecycle/lifecycle_fixture.h"

namespace bulkhead::lifecycle_test {
namespace {

// Stops bulkheadd for its lifetime: SIGCONT in the destructor, however the test ends.
class PausedSupervisor {
 public:
  explicit PausedSupervisor(pid_t pid) : pid_(pid) { stopped_ = ::kill(pid_, SIGSTOP) == 0; }
  ~PausedSupervisor() {
    if (stopped_) ::kill(pid_, SIGCONT);
  }
  PausedSupervisor(const PausedSupervisor&) = delete;
  PausedSupervisor& operator=(const PausedSupervisor&) = delete;
  bool stopped() const { return stopped_; }

 private:
  pid_t pid_;
  bool stopped_ = false;
};

TEST(SupervisorPause, TimeoutsFireOnlyForSilenceThatHappened) {
  // Every timeout is 3 s; the workers answer while bulkheadd is stopped (when the test creates
  // `go`) and the watchdog worker pings every 1.5 s, and bulkheadd sleeps through every timeout:
  // 4 s from the pause, itself less than 3 s after the requests were dispatched (the timeouts
  // are wall-clock time here, long enough for a loaded machine to reach the pause first).
  Harness h(TestOptions({
      CellSpec{.name = "stall", .extra_toml = "stall_timeout = \"3s\"\n"},
      CellSpec{.name = "deadline", .extra_toml = "request_timeout = \"3s\"\n"},
      CellSpec{.name = "watchdog",
               .command = {e2e::TestWorkerPath(), "--watchdog"},
               .extra_toml = "watchdog = \"3s\"\n"},
  }));
  ASSERT_STARTED(h);
  const nlohmann::json before = h.Status();
  Tally stall_tally;
  Tally deadline_tally;

  const std::string go = h.dir() + "/go.flag";
  Result<ipc::Client> stall = SendOn(h, "stall", 1, "wait-file " + go);
  Result<ipc::Client> deadline = SendOn(h, "deadline", 2, "wait-file " + go);
  ASSERT_TRUE(stall.ok() && deadline.ok());
  ASSERT_TRUE(CellShows(h, "stall", "running", 1));
  ASSERT_TRUE(CellShows(h, "deadline", "running", 1));
  {
    PausedSupervisor paused(h.pid());
    ASSERT_TRUE(paused.stopped());
    // The pause is the scenario, not a wait for anything: the workers answer now and ping every
    // 1.5 s while bulkheadd sleeps through every 3 s timeout.
    CreateFlag(go);
    std::this_thread::sleep_for(std::chrono::seconds(4));
  }

  Result<ipc::Client::Reply> stall_reply = stall->Receive();
  stall_tally.Count(stall_reply);
  EXPECT_OK_REPLY(stall_reply, "found " + go);
  Result<ipc::Client::Reply> deadline_reply = deadline->Receive();
  deadline_tally.Count(deadline_reply);
  EXPECT_OK_REPLY(deadline_reply, "found " + go);

  // Answered after the verdicts of the first loop iteration after the pause: no worker was
  // replaced.
  const nlohmann::json after = h.Status();
  for (const char* name : {"stall", "deadline", "watchdog"}) {
    nlohmann::json was;
    nlohmann::json now;
    for (const nlohmann::json& c : before["cells"]) {
      if (c["name"] == name) was = c;
    }
    for (const nlohmann::json& c : after["cells"]) {
      if (c["name"] == name) now = c;
    }
    EXPECT_EQ(now["pid"], was["pid"]) << name << " was replaced:\n" << h.Log();
    EXPECT_EQ(now["restarts"], 0) << now.dump();
    EXPECT_EQ(now["state"], "running") << now.dump();
  }
  EXPECT_EQ(h.Log().find("watchdog timeout"), std::string::npos) << h.Log();
  EXPECT_EQ(h.Log().find("stalled"), std::string::npos) << h.Log();
  ExpectCountersMatch(h, "stall", stall_tally);
  ExpectCountersMatch(h, "deadline", deadline_tally);
}

}  // namespace
}  // namespace bulkhead::lifecycle_test
