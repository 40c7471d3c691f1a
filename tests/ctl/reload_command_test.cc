// SPDX-License-Identifier: MIT
// InterpretReload: what `bulkheadctl reload` prints and returns for each kind of response.
#include "ctl/reload_command.h"

#include <gtest/gtest.h>

#include "base/exit_status.h"

namespace bulkhead::ctl {
namespace {

TEST(ReloadCommand, RequestIsTheReloadCommand) {
  EXPECT_EQ(ReloadRequest().dump(), R"({"command":"reload"})");
}

TEST(ReloadCommand, SuccessPrintsTheSummary) {
  ReloadOutcome outcome = InterpretReload({{"ok", true},
                                           {"result", "reloaded: a unchanged, b added"},
                                           {"cells", nlohmann::json::array()}});
  EXPECT_EQ(outcome.exit_code, kExitOk);
  EXPECT_EQ(outcome.out, "reloaded: a unchanged, b added\n");
  EXPECT_EQ(outcome.err, "");
}

TEST(ReloadCommand, RefusalPrintsEveryErrorAndExitsConfigInvalid) {
  ReloadOutcome outcome =
      InterpretReload({{"ok", false},
                       {"error", "reload refused; nothing changed"},
                       {"errors",
                        {"/b.toml:3:18: cells.a.max_concurrent: must be between 1 and 65535, got 0",
                         "/b.toml: supervisor.cgroup: changed"}}});
  EXPECT_EQ(outcome.exit_code, kExitConfigInvalid);
  EXPECT_EQ(outcome.out, "");
  EXPECT_EQ(outcome.err,
            "/b.toml:3:18: cells.a.max_concurrent: must be between 1 and 65535, got 0\n"
            "/b.toml: supervisor.cgroup: changed\n"
            "bulkheadctl: reload refused; nothing changed\n");
}

// The file's warnings reach the operator whether the reload applied or was refused.
TEST(ReloadCommand, WarningsAreKeptAppliedOrRefused) {
  const std::string warning = "/b.toml:4:17: cells.a.request_timeout: set without stall_timeout";
  ReloadOutcome applied = InterpretReload({{"ok", true},
                                           {"result", "reloaded: a updated"},
                                           {"cells", nlohmann::json::array()},
                                           {"warnings", {warning}}});
  EXPECT_EQ(applied.exit_code, kExitOk);
  EXPECT_EQ(applied.warnings, std::vector<std::string>{warning});
  ReloadOutcome refused = InterpretReload({{"ok", false},
                                           {"error", "reload refused; nothing changed"},
                                           {"errors", {"/b.toml:3:18: cells.a.x: unknown key"}},
                                           {"warnings", {warning}}});
  EXPECT_EQ(refused.exit_code, kExitConfigInvalid);
  EXPECT_EQ(refused.warnings, std::vector<std::string>{warning});
  EXPECT_TRUE(InterpretReload({{"ok", true}, {"result", "reloaded"}}).warnings.empty());
}

TEST(ReloadCommand, OtherFailuresExitFailure) {
  ReloadOutcome unknown = InterpretReload({{"ok", false}, {"error", "unknown command \"reload\""}});
  EXPECT_EQ(unknown.exit_code, kExitFailure);
  EXPECT_EQ(unknown.err, "bulkheadctl: reload: unknown command \"reload\"\n");
  ReloadOutcome odd = InterpretReload(nlohmann::json::array());
  EXPECT_EQ(odd.exit_code, kExitFailure);
  EXPECT_EQ(InterpretReload({{"ok", true}}).exit_code, kExitFailure);
}

TEST(ReloadCommand, PermissionDeniedExitsNoPerm) {
  ReloadOutcome denied =
      InterpretReload({{"ok", false},
                       {"error", "permission denied: uid 65534 may not run \"reload\""},
                       {"code", "permission_denied"}});
  EXPECT_EQ(denied.exit_code, kExitPermissionDenied);
  EXPECT_EQ(denied.err,
            "bulkheadctl: reload: permission denied: uid 65534 may not run \"reload\"\n");
}

// A reload whose new worker did not take over, or whose limits are not in force, exits 1: its
// summary ("web restarted") is no success line on stdout, but what was applied, on stderr.
TEST(ReloadCommand, TheSummaryIsOnStdoutOnlyWhenTheReloadSucceeded) {
  ReloadOutcome applied = InterpretReload({{"ok", true},
                                           {"result", "reloaded: web restarted (command changed)"},
                                           {"cells", nlohmann::json::array()}});
  ReloadSummary ok = SummaryAfterWaits(applied, kExitOk);
  EXPECT_EQ(ok.out, "reloaded: web restarted (command changed)\n");
  EXPECT_EQ(ok.err, "");
  ReloadSummary failed = SummaryAfterWaits(applied, kExitFailure);
  EXPECT_EQ(failed.out, "");
  EXPECT_EQ(failed.err,
            "bulkheadctl: reloaded: web restarted (command changed); not every change is in force "
            "(see above)\n");
  ReloadOutcome refused = InterpretReload({{"ok", false},
                                           {"error", "reload refused; nothing changed"},
                                           {"errors", {"/b.toml:3:18: cells.a.x: unknown key"}}});
  EXPECT_EQ(SummaryAfterWaits(refused, refused.exit_code).out, "");
  EXPECT_EQ(SummaryAfterWaits(refused, refused.exit_code).err, "");
}

}  // namespace
}  // namespace bulkhead::ctl
