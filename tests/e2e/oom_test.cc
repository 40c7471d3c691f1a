// SPDX-License-Identifier: MIT
// OOM settings of a cell end to end on the host (issue 12): workers never inherit bulkheadd's
// oom_score_adj (oom_score_adjust sets theirs), and oom_policy / oom_score_adjust show in status
// and reload as documented. What the kernel does with them (memory.oom.group, a helper OOM-killed
// while the worker survives) is proved in the VM (tests/vm/supervisor_compartments.cc, oom.*):
// this host's cgroups are never written.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "base/exit_status.h"
#include "tests/e2e/e2e_test.h"

namespace bulkhead::e2e {
namespace {

using ::testing::HasSubstr;

// The worker's "OomScoreAdj:\tN" line of `self`: what it had when it started.
std::string WorkerOomScoreAdj(Harness& h, const std::string& cell) {
  Result<ipc::Client::Reply> reply = h.Call(cell, "self");
  if (!reply.ok()) return "error: " + reply.status().message();
  const std::string& self = reply->payload;
  const std::string key = "OomScoreAdj:\t";
  size_t at = self.find(key);
  if (at == std::string::npos) return "no OomScoreAdj line in: " + self;
  at += key.size();
  return self.substr(at, self.find('\n', at) - at);
}

pid_t PidOf(Harness& h, const std::string& cell) {
  nlohmann::json c = h.Cell(cell);
  return c.is_object() && c["pid"].is_number() ? c["pid"].get<pid_t>() : 0;
}

// bulkheadd started at a non-zero oom_score_adj (some init setups start their supervisor at -1000:
// a worker that inherited it could never be chosen by the OOM killer, and a cell at its
// memory.max would kill nothing). Each worker starts at 0 unless its cell's oom_score_adjust says
// otherwise. bulkheadd is started at 500 here, which needs no privilege (a test host may lack
// CAP_SYS_RESOURCE even as root); the VM starts it at -1000 (tests/vm/supervisor_compartments.cc).
TEST(Oom, WorkersDoNotInheritTheSupervisorsOomScoreAdj) {
  HarnessOptions options =
      TestOptions({CellSpec{.name = "plain"},
                   CellSpec{.name = "lower", .extra_toml = "oom_score_adjust = 100\n"},
                   CellSpec{.name = "expendable", .extra_toml = "oom_score_adjust = 800\n"}});
  options.oom_score_adj = 500;
  Harness h(std::move(options));
  ASSERT_STARTED(h);
  EXPECT_EQ(testing::ReadFile("/proc/" + std::to_string(h.pid()) + "/oom_score_adj"), "500\n");
  EXPECT_EQ(WorkerOomScoreAdj(h, "plain"), "0");
  EXPECT_EQ(WorkerOomScoreAdj(h, "lower"), "100");
  EXPECT_EQ(WorkerOomScoreAdj(h, "expendable"), "800");
  nlohmann::json lower = h.Cell("lower");
  EXPECT_EQ(lower["policy"]["oom_score_adjust"], 100) << lower.dump();
  EXPECT_EQ(lower["policy"]["oom_policy"], "kill") << lower.dump();
  Result<ProcessResult> long_form = h.Ctl({"status", "lower"});
  ASSERT_TRUE(long_form.ok()) << long_form.status().message();
  EXPECT_THAT(long_form->out, HasSubstr("oom_policy=kill oom_score_adjust=100"));
}

// oom_policy rewrites memory.oom.group live (the same worker); oom_score_adjust is set at exec,
// so it restarts the cell. Both show in status.
TEST(Oom, ReloadAppliesOomPolicyLiveAndOomScoreAdjustToTheNextWorker) {
  const CellSpec policy{.name = "policy", .extra_toml = kQuickStop};
  const CellSpec score{.name = "score", .extra_toml = kQuickStop};
  Harness h(TestOptions({policy, score}));
  ASSERT_STARTED(h);
  const pid_t policy_pid = PidOf(h, "policy");
  const pid_t score_pid = PidOf(h, "score");
  EXPECT_EQ(WorkerOomScoreAdj(h, "score"), "0");

  CellSpec policy2 = policy;
  policy2.extra_toml += "oom_policy = \"continue\"\n";
  CellSpec score2 = score;
  score2.extra_toml += "oom_score_adjust = 300\n";
  h.RewriteConfig({policy2, score2});
  Result<ProcessResult> run = h.Ctl({"reload"});
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->exit_code(), kExitOk) << run->Describe();
  EXPECT_EQ(run->out,
            "reloaded: policy updated (oom_policy changed), score restarted (oom_score_adjust "
            "changed)\n");

  nlohmann::json p = h.Cell("policy");
  EXPECT_EQ(p["pid"], policy_pid);
  EXPECT_EQ(p["policy"]["oom_policy"], "continue") << p.dump();
  ASSERT_TRUE(h.WaitForCell("score", [&](const nlohmann::json& c) {
    return c["state"] == "running" && c["pid"].is_number() && c["pid"] != score_pid;
  })) << h.Status().dump();
  EXPECT_EQ(h.Cell("score")["policy"]["oom_score_adjust"], 300);
  EXPECT_EQ(WorkerOomScoreAdj(h, "score"), "300");
}

}  // namespace
}  // namespace bulkhead::e2e
