// SPDX-License-Identifier: MIT
// RestartPolicy: backoff growth, cap and reset after uptime; jitter bounds; the sliding start
// limit, the crash loop it starts (start_limit_action "backoff") or the give-up ("fail") and their
// reasons; restart modes; Reset. Times are plain numbers: no clock, no sleeps.
#include "cell/restart_policy.h"

#include <gtest/gtest.h>

#include <vector>

namespace bulkhead::cell {
namespace {

using Verdict = RestartPolicy::Verdict;

RestartPolicy::Options MakeOptions(uint64_t delay_ms, uint64_t max_delay_ms) {
  RestartPolicy::Options options;
  options.delay_ms = delay_ms;
  options.max_delay_ms = max_delay_ms;
  options.start_limit_interval_ms = 0;  // no start limit unless a test sets one
  return options;
}

// Starts a worker at `*now`, lets it run `uptime_ms`, ends it (failed) and returns the decision;
// on kRestart, advances `*now` to the next start.
RestartPolicy::Decision RunOnce(RestartPolicy& policy, uint64_t* now, uint64_t uptime_ms,
                                std::string_view exit = "exit 1") {
  policy.RecordStart(*now);
  *now += uptime_ms;
  RestartPolicy::Decision decision = policy.OnExit(*now, /*clean=*/false, exit);
  if (decision.verdict == Verdict::kRestart) *now += decision.delay_ms;
  return decision;
}

TEST(RestartPolicy, FirstDelayIsRestartDelay) {
  RestartPolicy policy(MakeOptions(100, 30'000), RestartPolicy::NoJitter());
  uint64_t now = 1000;
  RestartPolicy::Decision decision = RunOnce(policy, &now, 10);
  EXPECT_EQ(decision.verdict, Verdict::kRestart);
  EXPECT_EQ(decision.delay_ms, 100u);
  EXPECT_TRUE(decision.reason.empty());
}

TEST(RestartPolicy, DoublesThenCapsDelayAtMax) {
  RestartPolicy policy(MakeOptions(100, 1000), RestartPolicy::NoJitter());
  uint64_t now = 0;
  std::vector<uint64_t> delays;
  for (int i = 0; i < 7; ++i) delays.push_back(RunOnce(policy, &now, 10).delay_ms);
  EXPECT_EQ(delays, (std::vector<uint64_t>{100, 200, 400, 800, 1000, 1000, 1000}));
  EXPECT_EQ(policy.NextStepMs(), 1000u);
}

TEST(RestartPolicy, DoublingSaturatesWithoutOverflow) {
  RestartPolicy policy(MakeOptions(1, 24 * 3600 * 1000), RestartPolicy::NoJitter());
  uint64_t now = 0;
  uint64_t last = 0;
  for (int i = 0; i < 200; ++i) {
    const uint64_t delay = RunOnce(policy, &now, 0).delay_ms;
    EXPECT_GE(delay, last);
    EXPECT_LE(delay, 24u * 3600 * 1000);
    last = delay;
  }
  EXPECT_EQ(last, 24u * 3600 * 1000);
}

TEST(RestartPolicy, ZeroDelayStaysZero) {
  RestartPolicy policy(MakeOptions(0, 30'000), RestartPolicy::NoJitter());
  uint64_t now = 0;
  for (int i = 0; i < 5; ++i) EXPECT_EQ(RunOnce(policy, &now, 1).delay_ms, 0u);
  EXPECT_EQ(policy.steps(), 0u);
}

TEST(RestartPolicy, UptimeOfResetAfterGoesBackToTheFirstStep) {
  RestartPolicy::Options options = MakeOptions(100, 30'000);
  options.reset_after_ms = 10'000;
  RestartPolicy policy(options, RestartPolicy::NoJitter());
  uint64_t now = 0;
  RunOnce(policy, &now, 10);                                // 100
  RunOnce(policy, &now, 10);                                // 200
  EXPECT_EQ(RunOnce(policy, &now, 9'999).delay_ms, 400u);   // just short of the reset
  EXPECT_EQ(RunOnce(policy, &now, 10'000).delay_ms, 100u);  // stayed up long enough
  EXPECT_EQ(RunOnce(policy, &now, 10).delay_ms, 200u);      // and grows again from there
}

TEST(RestartPolicy, JitterOnlyShortensAndStaysWithinItsFraction) {
  // u = 0.5 takes half of the 20% off.
  RestartPolicy half(MakeOptions(1000, 1000), [] { return 0.5; });
  uint64_t now = 0;
  EXPECT_EQ(RunOnce(half, &now, 1).delay_ms, 900u);

  RestartPolicy top(MakeOptions(1000, 4000), [] { return 0.999999; });
  now = 0;
  const uint64_t first = RunOnce(top, &now, 1).delay_ms;
  EXPECT_GT(first, 800u);
  EXPECT_LE(first, 1000u);
}

TEST(RestartPolicy, JitteredDelaysNeverExceedTheCap) {
  RestartPolicy policy(MakeOptions(100, 3000), RestartPolicy::SeededJitter(42));
  uint64_t now = 0;
  for (int i = 0; i < 1000; ++i) {
    const uint64_t step = policy.NextStepMs();
    const uint64_t delay = RunOnce(policy, &now, 1).delay_ms;
    EXPECT_LE(delay, step);
    EXPECT_LE(delay, 3000u);
    EXPECT_GT(static_cast<double>(delay),
              static_cast<double>(step) * (1 - RestartPolicy::kJitterFraction) - 1);
  }
}

TEST(RestartPolicy, SeededJitterRepeatsAndStaysInRange) {
  RestartPolicy::Jitter a = RestartPolicy::SeededJitter(7);
  RestartPolicy::Jitter b = RestartPolicy::SeededJitter(7);
  for (int i = 0; i < 100; ++i) {
    const double x = a();
    EXPECT_EQ(x, b());
    EXPECT_GE(x, 0.0);
    EXPECT_LT(x, 1.0);
  }
  RestartPolicy::Jitter random = RestartPolicy::RandomJitter();
  const double r = random();
  EXPECT_GE(r, 0.0);
  EXPECT_LT(r, 1.0);
}

TEST(RestartPolicy, GivesUpOnTheStartThatWouldExceedTheBurst) {
  RestartPolicy::Options options = MakeOptions(100, 30'000);
  options.start_limit_burst = 5;
  options.start_limit_interval_ms = 60'000;
  options.start_limit_action = StartLimitAction::kFail;
  RestartPolicy policy(options, RestartPolicy::NoJitter());
  uint64_t now = 0;
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(RunOnce(policy, &now, 10).verdict, Verdict::kRestart) << "start " << i + 1;
  }
  // The fifth start is allowed; a sixth would make six within 60s.
  RestartPolicy::Decision decision = RunOnce(policy, &now, 10);
  EXPECT_EQ(decision.verdict, Verdict::kGiveUp);
  EXPECT_EQ(decision.reason, "gave up: 5 starts in 60s, last exit 1");
  EXPECT_EQ(policy.StartsWithin(now), 5u);
}

TEST(RestartPolicy, GiveUpReasonShowsTheExitAsGivenAndTheIntervalInMs) {
  RestartPolicy::Options options = MakeOptions(0, 0);
  options.start_limit_burst = 1;
  options.start_limit_interval_ms = 1500;
  options.start_limit_action = StartLimitAction::kFail;
  RestartPolicy policy(options, RestartPolicy::NoJitter());
  uint64_t now = 0;
  RestartPolicy::Decision decision = RunOnce(policy, &now, 10, "signal 9");
  EXPECT_EQ(decision.verdict, Verdict::kGiveUp);
  EXPECT_EQ(decision.reason, "gave up: 1 start in 1500ms, last signal 9");
}

TEST(RestartPolicy, StartsOutsideTheSlidingWindowDoNotCount) {
  RestartPolicy::Options options = MakeOptions(100, 100);
  options.start_limit_burst = 2;
  options.start_limit_interval_ms = 1000;
  options.reset_after_ms = 1'000'000;
  RestartPolicy policy(options, RestartPolicy::NoJitter());
  uint64_t now = 0;
  // One start every 1000 ms or more: never two within a window.
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(RunOnce(policy, &now, 900).verdict, Verdict::kRestart) << "start " << i + 1;
  }
}

TEST(RestartPolicy, WindowEndsAtTheNextStartNotAtTheExit) {
  RestartPolicy::Options options = MakeOptions(400, 400);
  options.start_limit_burst = 2;
  options.start_limit_interval_ms = 1000;
  options.start_limit_action = StartLimitAction::kFail;
  {
    RestartPolicy policy(options, RestartPolicy::NoJitter());
    policy.RecordStart(0);
    ASSERT_EQ(policy.OnExit(100, false, "exit 1").verdict, Verdict::kRestart);
    policy.RecordStart(500);
    // The next start would be at 1000, when the start at 0 has left the window.
    EXPECT_EQ(policy.OnExit(600, false, "exit 1").verdict, Verdict::kRestart);
  }
  {
    RestartPolicy policy(options, RestartPolicy::NoJitter());
    policy.RecordStart(0);
    ASSERT_EQ(policy.OnExit(100, false, "exit 1").verdict, Verdict::kRestart);
    policy.RecordStart(500);
    // The next start would be at 950: three starts within 1000 ms.
    EXPECT_EQ(policy.OnExit(550, false, "exit 1").verdict, Verdict::kGiveUp);
  }
}

TEST(RestartPolicy, ZeroIntervalMeansNoStartLimit) {
  RestartPolicy::Options options = MakeOptions(0, 0);
  options.start_limit_burst = 1;
  options.start_limit_interval_ms = 0;
  RestartPolicy policy(options, RestartPolicy::NoJitter());
  uint64_t now = 0;
  for (int i = 0; i < 100; ++i) ASSERT_EQ(RunOnce(policy, &now, 0).verdict, Verdict::kRestart);
  EXPECT_EQ(policy.StartsWithin(now), 0u);
}

TEST(RestartPolicy, ExecFailuresCountAsFailedStarts) {
  RestartPolicy::Options options = MakeOptions(100, 30'000);
  options.mode = RestartMode::kOnFailure;
  options.start_limit_burst = 3;
  options.start_limit_interval_ms = 60'000;
  options.start_limit_action = StartLimitAction::kFail;
  RestartPolicy policy(options, RestartPolicy::NoJitter());
  uint64_t now = 0;
  const std::string_view exec_failed = "start failed: exec /bin/nope: No such file or directory";
  EXPECT_EQ(RunOnce(policy, &now, 0, exec_failed).verdict, Verdict::kRestart);
  EXPECT_EQ(RunOnce(policy, &now, 0, exec_failed).verdict, Verdict::kRestart);
  RestartPolicy::Decision decision = RunOnce(policy, &now, 0, exec_failed);
  EXPECT_EQ(decision.verdict, Verdict::kGiveUp);
  EXPECT_EQ(decision.reason,
            "gave up: 3 starts in 60s, last start failed: exec /bin/nope: No such file or "
            "directory");
}

TEST(RestartPolicy, NeverStaysStoppedAfterAnyExit) {
  RestartPolicy::Options options = MakeOptions(100, 30'000);
  options.mode = RestartMode::kNever;
  RestartPolicy policy(options, RestartPolicy::NoJitter());
  policy.RecordStart(0);
  RestartPolicy::Decision failed = policy.OnExit(10, /*clean=*/false, "signal 11");
  EXPECT_EQ(failed.verdict, Verdict::kStay);
  EXPECT_EQ(failed.reason, "restart = \"never\"");
  policy.RecordStart(20);
  EXPECT_EQ(policy.OnExit(30, /*clean=*/true, "exit 0").verdict, Verdict::kStay);
}

TEST(RestartPolicy, OnFailureStaysAfterACleanExitOnly) {
  RestartPolicy::Options options = MakeOptions(100, 30'000);
  options.mode = RestartMode::kOnFailure;
  RestartPolicy policy(options, RestartPolicy::NoJitter());
  policy.RecordStart(0);
  RestartPolicy::Decision clean = policy.OnExit(10, /*clean=*/true, "exit 0");
  EXPECT_EQ(clean.verdict, Verdict::kStay);
  EXPECT_EQ(clean.reason, "exited cleanly and restart = \"on-failure\"");
  policy.RecordStart(20);
  RestartPolicy::Decision failed = policy.OnExit(30, /*clean=*/false, "exit 2");
  EXPECT_EQ(failed.verdict, Verdict::kRestart);
  EXPECT_EQ(failed.delay_ms, 100u);
}

TEST(RestartPolicy, AlwaysRestartsAfterACleanExit) {
  RestartPolicy policy(MakeOptions(100, 30'000), RestartPolicy::NoJitter());
  policy.RecordStart(0);
  EXPECT_EQ(policy.OnExit(10, /*clean=*/true, "exit 0").verdict, Verdict::kRestart);
}

TEST(RestartPolicy, ResetClearsStartsAndDelay) {
  RestartPolicy::Options options = MakeOptions(100, 30'000);
  options.start_limit_burst = 3;
  options.start_limit_interval_ms = 60'000;
  options.start_limit_action = StartLimitAction::kFail;
  RestartPolicy policy(options, RestartPolicy::NoJitter());
  uint64_t now = 0;
  RunOnce(policy, &now, 10);
  RunOnce(policy, &now, 10);
  ASSERT_EQ(RunOnce(policy, &now, 10).verdict, Verdict::kGiveUp);

  policy.Reset();
  EXPECT_EQ(policy.steps(), 0u);
  EXPECT_EQ(policy.StartsWithin(now), 0u);
  RestartPolicy::Decision decision = RunOnce(policy, &now, 10);
  EXPECT_EQ(decision.verdict, Verdict::kRestart);
  EXPECT_EQ(decision.delay_ms, 100u);
}

// ---------------------------------------------------------------------------------------------
// Crash loops (issue 25 section 1): the default start_limit_action keeps starting.

TEST(RestartPolicy, TheDefaultsKeepStartingACrashLoopTwelveSecondsApartThenDoublingToFiveMinutes) {
  RestartPolicy::Options options;  // the defaults: 100ms, 5min, 10s; 5 starts in 60s; backoff
  EXPECT_EQ(options.start_limit_action, StartLimitAction::kBackoff);
  RestartPolicy policy(options, RestartPolicy::NoJitter());
  EXPECT_EQ(policy.CrashLoopStepMs(), 12'000u);
  uint64_t now = 0;
  std::vector<uint64_t> delays;
  std::vector<bool> looping;
  for (int i = 0; i < 14; ++i) {
    RestartPolicy::Decision decision = RunOnce(policy, &now, 10);
    ASSERT_EQ(decision.verdict, Verdict::kRestart) << "end " << i + 1;
    delays.push_back(decision.delay_ms);
    looping.push_back(decision.crash_looping);
    // The fifth end would make a sixth start within 60s: the loop begins there, and only there.
    EXPECT_EQ(decision.crash_loop_began, i == 4) << "end " << i + 1;
    if (i == 4) {
      EXPECT_EQ(decision.reason, "crash-looping: 5 starts in 60s");
    }
    if (i == 13) {
      EXPECT_EQ(decision.reason, "crash-looping: 14 ends in a row within 10s of the start");
    }
  }
  EXPECT_EQ(delays, (std::vector<uint64_t>{100, 200, 400, 800, 12'000, 12'000, 12'000, 12'800,
                                           25'600, 51'200, 102'400, 204'800, 300'000, 300'000}));
  EXPECT_EQ(looping, (std::vector<bool>{false, false, false, false, true, true, true, true, true,
                                        true, true, true, true, true}));
  EXPECT_TRUE(policy.crash_looping());
  EXPECT_EQ(policy.short_runs(), 14u);
}

TEST(RestartPolicy, AWorkerThatRanResetAfterEndsTheCrashLoop) {
  RestartPolicy::Options options = MakeOptions(100, 10'000);
  options.start_limit_burst = 2;
  options.start_limit_interval_ms = 1000;
  options.reset_after_ms = 2000;
  RestartPolicy policy(options, RestartPolicy::NoJitter());
  uint64_t now = 0;
  EXPECT_FALSE(RunOnce(policy, &now, 10).crash_looping);  // one start in the window
  RestartPolicy::Decision looping = RunOnce(policy, &now, 10);
  EXPECT_TRUE(looping.crash_looping);
  EXPECT_EQ(looping.delay_ms, 500u);  // 1000ms / 2 starts, over the 200 of the backoff
  EXPECT_EQ(RunOnce(policy, &now, 10).delay_ms, 500u);
  EXPECT_EQ(RunOnce(policy, &now, 1999).delay_ms, 800u);  // just short of restart_reset_after
  EXPECT_TRUE(policy.crash_looping());
  // This one served 2 s: its end is a new failure, started over at restart_delay.
  RestartPolicy::Decision after = RunOnce(policy, &now, 2000);
  EXPECT_EQ(after.verdict, Verdict::kRestart);
  EXPECT_FALSE(after.crash_looping);
  EXPECT_TRUE(after.reason.empty());
  EXPECT_EQ(after.delay_ms, 100u);
  EXPECT_FALSE(policy.crash_looping());
  EXPECT_EQ(policy.short_runs(), 0u);
  // A new loop is a new beginning.
  EXPECT_FALSE(RunOnce(policy, &now, 10).crash_looping);
  RestartPolicy::Decision again = RunOnce(policy, &now, 10);
  EXPECT_TRUE(again.crash_looping);
  EXPECT_TRUE(again.crash_loop_began);
}

// The boot-time crash loop's starts do not make one crash after a recovery a crash loop: with
// the defaults, 5 starts that exit at once, then a worker that serves past restart_reset_after and
// is killed restarts after restart_delay (it used to wait 12 s, "crash-looping: 5 starts in 60s").
TEST(RestartPolicy, OneEndAfterARecoveryStartsOverAtRestartDelayNotCrashLooping) {
  RestartPolicy policy(RestartPolicy::Options{}, RestartPolicy::NoJitter());
  uint64_t now = 0;
  for (int i = 0; i < 4; ++i) ASSERT_FALSE(RunOnce(policy, &now, 10).crash_looping);
  ASSERT_TRUE(RunOnce(policy, &now, 10).crash_loop_began);  // the fifth start hit the limit
  // This one serves 15 s (restart_reset_after is 10 s), well within the 60 s window, then is
  // killed.
  RestartPolicy::Decision after = RunOnce(policy, &now, 15'000, "signal 9");
  EXPECT_EQ(after.verdict, Verdict::kRestart);
  EXPECT_FALSE(after.crash_looping);
  EXPECT_TRUE(after.reason.empty());
  EXPECT_EQ(after.delay_ms, 100u);
  EXPECT_FALSE(policy.crash_looping());
  // Only its own start is left from before: the restart is the second in the window.
  EXPECT_EQ(policy.StartsWithin(now), 1u);
  // The next ones are a new failure's backoff, as from a fresh start: 200, 400, 800 ms, and the
  // start limit is hit again at the same count as at boot.
  EXPECT_EQ(RunOnce(policy, &now, 10).delay_ms, 200u);
  EXPECT_EQ(RunOnce(policy, &now, 10).delay_ms, 400u);
  EXPECT_EQ(RunOnce(policy, &now, 10).delay_ms, 800u);
  EXPECT_TRUE(RunOnce(policy, &now, 10).crash_loop_began);
}

// start_limit_action = "fail" counts the same starts: the ones before a worker that ran
// restart_reset_after do not make a later crash give up (systemd counts every start in the
// window; ours is a crash loop's limit, and a worker that ran well ended the loop).
TEST(RestartPolicy, FailDoesNotCountTheStartsBeforeAWorkerThatRanResetAfter) {
  RestartPolicy::Options options;
  options.start_limit_action = StartLimitAction::kFail;
  RestartPolicy policy(options, RestartPolicy::NoJitter());
  uint64_t now = 0;
  for (int i = 0; i < 3; ++i) ASSERT_EQ(RunOnce(policy, &now, 10).verdict, Verdict::kRestart);
  ASSERT_EQ(RunOnce(policy, &now, 10'000).verdict, Verdict::kRestart);  // it ran well
  // Within 60 s of the first start: the fifth and sixth starts of the window, but the second and
  // third since the loop ended.
  EXPECT_EQ(RunOnce(policy, &now, 10).verdict, Verdict::kRestart);
  EXPECT_EQ(RunOnce(policy, &now, 10).verdict, Verdict::kRestart);
  // A new loop still gives up at the burst: five starts since the worker that ran well.
  EXPECT_EQ(RunOnce(policy, &now, 10).verdict, Verdict::kRestart);
  RestartPolicy::Decision gave_up = RunOnce(policy, &now, 10);
  EXPECT_EQ(gave_up.verdict, Verdict::kGiveUp);
  EXPECT_EQ(gave_up.reason, "gave up: 5 starts in 60s, last exit 1");
}

// A worker stopped at its start_timeout never came up: however long that took, its end keeps
// the start limit's count (docs/config.md start_timeout: it counts towards start_limit_burst).
TEST(RestartPolicy, AStartThatFailedKeepsTheStartLimitCountWhateverItsUptime) {
  RestartPolicy::Options options = MakeOptions(100, 4000);
  options.start_limit_burst = 2;
  options.start_limit_interval_ms = 600'000;
  options.start_limit_action = StartLimitAction::kFail;
  RestartPolicy policy(options, RestartPolicy::NoJitter());
  uint64_t now = 0;
  ASSERT_EQ(RunOnce(policy, &now, 10).verdict, Verdict::kRestart);
  policy.RecordStart(now);
  policy.MarkStartFailed();
  now += 90'000;  // restart_reset_after (10 s) and more, but never ready
  RestartPolicy::Decision decision = policy.OnExit(now, false, "start timeout");
  EXPECT_EQ(decision.verdict, Verdict::kGiveUp);
  EXPECT_EQ(decision.reason, "gave up: 2 starts in 600s, last start timeout");
}

TEST(RestartPolicy, AZeroRestartDelayCrashLoopIsPacedByTheStartLimit) {
  RestartPolicy::Options options = MakeOptions(0, 300'000);
  options.start_limit_burst = 5;
  options.start_limit_interval_ms = 60'000;
  RestartPolicy policy(options, RestartPolicy::NoJitter());
  uint64_t now = 0;
  for (int i = 0; i < 4; ++i) EXPECT_EQ(RunOnce(policy, &now, 1).delay_ms, 0u);
  // restart_delay 0 would restart at once forever; the loop waits 60s / 5 between starts.
  for (int i = 0; i < 5; ++i) EXPECT_EQ(RunOnce(policy, &now, 1).delay_ms, 12'000u);
}

// restart_max_delay below start_limit_interval / start_limit_burst paces the loop (it caps every
// wait): the reason counts the starts really made in the window, not start_limit_burst + 1.
TEST(RestartPolicy, ACrashLoopPacedByRestartMaxDelayCountsEveryStartInTheWindow) {
  struct Case {
    uint64_t max_delay_ms;
    uint32_t burst;
    uint64_t interval_ms;
    const char*
        steady_reason;  // once the window is full, each start max_delay + 10 ms after the last
  };
  const std::vector<Case> cases = {
      {1000, 3, 10'000, "crash-looping: 9 starts in 10s"},  // 9 starts 1010 ms apart in 10 s
      {1000, 5, 60'000, "crash-looping: 59 starts in 60s"},
      {1000, 1, 2000, "crash-looping: 1 start in 2s"},
      {2000, 3, 10'000, "crash-looping: 4 starts in 10s"},  // 2010 ms apart
  };
  for (const Case& c : cases) {
    SCOPED_TRACE("max_delay " + std::to_string(c.max_delay_ms) + ", burst " +
                 std::to_string(c.burst) + " in " + std::to_string(c.interval_ms));
    RestartPolicy::Options options = MakeOptions(100, c.max_delay_ms);
    options.start_limit_burst = c.burst;
    options.start_limit_interval_ms = c.interval_ms;
    RestartPolicy policy(options, RestartPolicy::NoJitter());
    uint64_t now = 0;
    std::vector<uint64_t> starts;
    RestartPolicy::Decision decision;
    for (int i = 0; i < 200; ++i) {
      starts.push_back(now);
      decision = RunOnce(policy, &now, 10);
      ASSERT_EQ(decision.verdict, Verdict::kRestart);
      // The start limit was not hit at this end (the loop's other reason), or not yet looping.
      if (!decision.crash_looping || decision.reason.find("ends in a row") != std::string::npos) {
        continue;
      }
      // The count is of the window that ends at the next start (`now`): the starts made in it.
      size_t in_window = 0;
      for (uint64_t start : starts) in_window += now - start < c.interval_ms ? 1 : 0;
      EXPECT_EQ(decision.reason, "crash-looping: " + std::to_string(in_window) +
                                     (in_window == 1 ? " start in " : " starts in ") +
                                     std::to_string(c.interval_ms / 1000) + "s")
          << "end " << i + 1;
    }
    EXPECT_EQ(decision.reason, c.steady_reason);
  }
}

// Past 1024 starts in the window the count is a floor, and says so.
TEST(RestartPolicy, ACrashLoopCountsAtMost1024StartsAndSaysSo) {
  RestartPolicy::Options options = MakeOptions(0, 0);
  options.start_limit_burst = 1;
  options.start_limit_interval_ms = 86'400'000;
  RestartPolicy policy(options, RestartPolicy::NoJitter());
  uint64_t now = 0;
  RestartPolicy::Decision decision;
  for (int i = 0; i < 1023; ++i) decision = RunOnce(policy, &now, 1);
  EXPECT_EQ(decision.reason, "crash-looping: 1023 starts in 86400s");
  for (int i = 0; i < 10; ++i) decision = RunOnce(policy, &now, 1);
  EXPECT_EQ(decision.reason, "crash-looping: 1024 or more starts in 86400s");
}

TEST(RestartPolicy, JitterShortensTheCrashLoopStepToo) {
  RestartPolicy::Options options;
  RestartPolicy policy(options, [] { return 0.5; });
  uint64_t now = 0;
  for (int i = 0; i < 4; ++i) RunOnce(policy, &now, 10);
  // 12000 less half of its 20%: cells that loop together do not start in lockstep.
  EXPECT_EQ(RunOnce(policy, &now, 10).delay_ms, 10'800u);
}

TEST(RestartPolicy, FailGivesUpAndSaysItWasCrashLooping) {
  RestartPolicy::Options options = MakeOptions(100, 30'000);
  options.start_limit_burst = 2;
  options.start_limit_interval_ms = 60'000;
  options.start_limit_action = StartLimitAction::kFail;
  RestartPolicy policy(options, RestartPolicy::NoJitter());
  uint64_t now = 0;
  RunOnce(policy, &now, 10);
  RestartPolicy::Decision decision = RunOnce(policy, &now, 10);
  EXPECT_EQ(decision.verdict, Verdict::kGiveUp);
  EXPECT_TRUE(decision.crash_looping);
  EXPECT_EQ(decision.reason, "gave up: 2 starts in 60s, last exit 1");
  EXPECT_TRUE(policy.crash_looping());
}

TEST(RestartPolicy, ResetEndsTheCrashLoop) {
  RestartPolicy::Options options = MakeOptions(100, 30'000);
  options.start_limit_burst = 1;
  options.start_limit_interval_ms = 60'000;
  RestartPolicy policy(options, RestartPolicy::NoJitter());
  uint64_t now = 0;
  ASSERT_TRUE(RunOnce(policy, &now, 10).crash_looping);
  policy.Reset();
  EXPECT_FALSE(policy.crash_looping());
  EXPECT_EQ(policy.short_runs(), 0u);
  EXPECT_EQ(policy.NextStepMs(), 100u);
}

// A re-exec carries the start limit's window as ages (docs/reexec.md): the new image, whose clock
// reads otherwise, counts the previous image's starts towards the start limit, and a crash loop
// goes on as one (its short runs in a row continue).
TEST(RestartPolicy, ARestoredWindowCountsThePreviousImagesStartsAndKeepsTheCrashLoop) {
  RestartPolicy::Options options = MakeOptions(100, 30'000);
  options.start_limit_burst = 3;
  options.start_limit_interval_ms = 60'000;
  RestartPolicy before(options, RestartPolicy::NoJitter());
  uint64_t now = 5'000;
  RunOnce(before, &now, 10);
  RunOnce(before, &now, 10);
  ASSERT_TRUE(RunOnce(before, &now, 10).crash_looping);
  const RestartPolicy::Window window = before.CarryWindow(now);
  EXPECT_EQ(window.start_ages_ms.size(), 3u);
  EXPECT_TRUE(window.crash_looping);
  EXPECT_EQ(window.short_runs, 3u);

  // The new image: another clock, far from the old one's readings.
  RestartPolicy after(options, RestartPolicy::NoJitter());
  uint64_t later = 900'000'000;
  after.RestoreWindow(window, later);
  EXPECT_TRUE(after.crash_looping());
  EXPECT_EQ(after.short_runs(), 3u);
  EXPECT_EQ(after.StartsWithin(later), 3u);
  // Its next end is a turn of the same loop, not the first failure of a fresh policy.
  const RestartPolicy::Decision decision = RunOnce(after, &later, 10);
  EXPECT_TRUE(decision.crash_looping);
  EXPECT_FALSE(decision.crash_loop_began);
  EXPECT_GE(decision.delay_ms, after.CrashLoopStepMs());
}

// A start older than the new clock's reading counts at 0, not in the future.
TEST(RestartPolicy, ARestoredStartOlderThanTheClockCountsAtZero) {
  RestartPolicy::Options options = MakeOptions(100, 30'000);
  options.start_limit_interval_ms = 60'000;
  RestartPolicy policy(options, RestartPolicy::NoJitter());
  policy.RestoreWindow({.start_ages_ms = {5'000, 100}, .crash_looping = false, .short_runs = 1},
                       1'000);
  EXPECT_EQ(policy.StartsWithin(1'000), 2u);
  EXPECT_EQ(policy.CarryWindow(1'000).start_ages_ms, (std::vector<uint64_t>{1'000, 100}));
}

TEST(RestartPolicy, StartLimitActionNames) {
  EXPECT_STREQ(StartLimitActionName(StartLimitAction::kBackoff), "backoff");
  EXPECT_STREQ(StartLimitActionName(StartLimitAction::kFail), "fail");
}

TEST(RestartPolicy, ModeNames) {
  EXPECT_STREQ(RestartModeName(RestartMode::kAlways), "always");
  EXPECT_STREQ(RestartModeName(RestartMode::kOnFailure), "on-failure");
  EXPECT_STREQ(RestartModeName(RestartMode::kNever), "never");
}

}  // namespace
}  // namespace bulkhead::cell

namespace bulkhead::cell {
namespace {

// A config reload: new options apply to the next decision, the backoff step and the counted
// starts are kept.
TEST(RestartPolicy, SetOptionsKeepsStepAndStarts) {
  RestartPolicy::Options options = MakeOptions(100, 30'000);
  options.start_limit_burst = 100;
  options.start_limit_interval_ms = 60'000;
  RestartPolicy policy(options, RestartPolicy::NoJitter());
  uint64_t now = 1000;
  EXPECT_EQ(RunOnce(policy, &now, 10).delay_ms, 100u);
  EXPECT_EQ(RunOnce(policy, &now, 10).delay_ms, 200u);

  RestartPolicy::Options lower = options;
  lower.max_delay_ms = 300;
  policy.SetOptions(lower);
  EXPECT_EQ(policy.NextStepMs(), 300u);  // 400, capped by the new max
  EXPECT_EQ(RunOnce(policy, &now, 10).delay_ms, 300u);

  RestartPolicy::Options never = lower;
  never.mode = RestartMode::kNever;
  policy.SetOptions(never);
  EXPECT_EQ(RunOnce(policy, &now, 10).verdict, Verdict::kStay);

  // A start limit set by the reload counts the starts made before it.
  RestartPolicy::Options limited = lower;
  limited.start_limit_burst = 4;
  limited.start_limit_action = StartLimitAction::kFail;
  policy.SetOptions(limited);
  EXPECT_EQ(RunOnce(policy, &now, 10).verdict, Verdict::kGiveUp);
}

}  // namespace
}  // namespace bulkhead::cell
