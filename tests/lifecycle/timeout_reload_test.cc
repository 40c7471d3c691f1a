// SPDX-License-Identifier: MIT
// A stall_timeout or request_timeout set by reload counts from the reload for the requests already
// running, not from their start (issue 11, item 4; systemd#9467 is the same bug in systemd's
// watchdog). A request that has run longer than the new timeout is not failed, nor its worker
// killed, the moment the reload lands.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "tests/lifecycle/lifecycle_fixture.h"

namespace bulkhead::lifecycle_test {
namespace {

TEST(TimeoutReload, ATimeoutAddedByReloadCountsFromTheReload) {
  std::vector<CellSpec> cells = {CellSpec{.name = "stall"}, CellSpec{.name = "deadline"}};
  Harness h(TestOptions(cells));
  ASSERT_STARTED(h);
  const int stall_pid = WorkerPid(h, "stall");
  const int deadline_pid = WorkerPid(h, "deadline");
  const std::string stall_flag = h.dir() + "/stall.flag";
  const std::string deadline_flag = h.dir() + "/deadline.flag";
  Tally stall_tally;
  Tally deadline_tally;

  Result<ipc::Client> stall = SendOn(h, "stall", 1, "wait-file " + stall_flag);
  Result<ipc::Client> deadline = SendOn(h, "deadline", 2, "wait-file " + deadline_flag);
  ASSERT_TRUE(stall.ok() && deadline.ok());
  ASSERT_TRUE(CellShows(h, "stall", "running", 1));
  ASSERT_TRUE(CellShows(h, "deadline", "running", 1));
  // The scenario: both requests have run longer than the 1 s timeouts the reload brings.
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));

  cells[0].extra_toml = "stall_timeout = \"1s\"\n";
  cells[1].extra_toml = "request_timeout = \"1s\"\n";
  h.RewriteConfig(cells);
  Result<e2e::ProcessResult> reload = h.Ctl({"reload"});
  ASSERT_TRUE(reload.ok()) << reload.status().message();
  ASSERT_EQ(reload->exit_code(), 0) << reload->Describe() << "\n" << h.Log();
  // Each worker has a full second from the reload; it answers at once.
  CreateFlag(stall_flag);
  CreateFlag(deadline_flag);

  Result<ipc::Client::Reply> stall_reply = stall->Receive();
  stall_tally.Count(stall_reply);
  EXPECT_OK_REPLY(stall_reply, "found " + stall_flag);
  Result<ipc::Client::Reply> deadline_reply = deadline->Receive();
  deadline_tally.Count(deadline_reply);
  EXPECT_OK_REPLY(deadline_reply, "found " + deadline_flag);

  EXPECT_EQ(h.Cell("stall")["pid"], stall_pid) << h.Log();
  EXPECT_EQ(h.Cell("deadline")["pid"], deadline_pid) << h.Log();
  ExpectCountersMatch(h, "stall", stall_tally);
  ExpectCountersMatch(h, "deadline", deadline_tally);
}

}  // namespace
}  // namespace bulkhead::lifecycle_test
