// SPDX-License-Identifier: MIT
// A worker's stdout and stderr end up in bulkheadd's log, line by line, with the cell name, the
// pid and the stream (docs/logging.md): including a crashing worker's last words, an over-long
// line bounded by log_line_max, and a flood cut by the cell's rate limit while a neighbour cell
// keeps answering.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <string_view>
#include <thread>

#include "tests/e2e/e2e_test.h"

namespace bulkhead::e2e {
namespace {

using ::bulkhead::testing::ChildGuard;

// The lines of `log` that contain every one of `needles`.
std::vector<std::string> LinesWith(const std::string& log, std::vector<std::string> needles) {
  std::vector<std::string> found;
  size_t start = 0;
  while (start < log.size()) {
    size_t end = log.find('\n', start);
    if (end == std::string::npos) end = log.size();
    std::string line = log.substr(start, end - start);
    start = end + 1;
    bool all = true;
    for (const std::string& needle : needles) all = all && line.find(needle) != std::string::npos;
    if (all) found.push_back(std::move(line));
  }
  return found;
}

// Waits until the log has a line with every one of `needles`.
bool WaitForLogLine(Harness& h, const std::vector<std::string>& needles) {
  return WaitFor([&] { return !LinesWith(h.Log(), needles).empty(); }, std::chrono::seconds(20));
}

std::string PidField(int pid) { return " pid=" + std::to_string(pid) + " "; }

TEST(WorkerOutput, StdoutAndStderrLinesAreLoggedWithCellPidAndStream) {
  Harness h(TestOptions({CellSpec{.name = "talker"}}));
  ASSERT_STARTED(h);
  const int pid = h.Cell("talker")["pid"].get<int>();

  EXPECT_OK_REPLY(h.Call("talker", "print-stdout hello from stdout"), "printed");
  EXPECT_OK_REPLY(h.Call("talker", "print-stderr oops on stderr"), "printed");
  EXPECT_OK_REPLY(h.Call("talker", "print-stdout say \"hi\"\tthere"), "printed");
  EXPECT_OK_REPLY(h.Call("talker", "print-stdout <4>careful"), "printed");

  const std::string prefix = "level=info cell=talker" + PidField(pid);
  EXPECT_TRUE(WaitForLogLine(h, {prefix + "stream=stdout msg=\"hello from stdout\""})) << h.Log();
  EXPECT_TRUE(WaitForLogLine(h, {prefix + "stream=stderr msg=\"oops on stderr\""})) << h.Log();
  // Quotes and tabs are escaped, so the line stays one logfmt line.
  EXPECT_TRUE(WaitForLogLine(h, {prefix + "stream=stdout msg=\"say \\\"hi\\\"\\tthere\""}))
      << h.Log();
  // An sd-daemon priority prefix sets the level and is removed.
  EXPECT_TRUE(WaitForLogLine(
      h, {"level=warning cell=talker" + PidField(pid) + "stream=stdout msg=\"careful\""}))
      << h.Log();
}

TEST(WorkerOutput, LinesBelowTheLogLevelAreDropped) {
  Harness h(TestOptions({CellSpec{.name = "terse"}}, "log_level = \"warning\"\n"));
  ASSERT_STARTED(h);
  EXPECT_OK_REPLY(h.Call("terse", "print-stdout routine detail"), "printed");
  EXPECT_OK_REPLY(h.Call("terse", "print-stdout <4>disk almost full"), "printed");
  ASSERT_TRUE(WaitForLogLine(h, {"level=warning cell=terse", "msg=\"disk almost full\""}))
      << h.Log();
  // Lines of one stream are logged in order: the info line, written first, was dropped.
  EXPECT_EQ(h.Log().find("routine detail"), std::string::npos) << h.Log();
}

TEST(WorkerOutput, OutputNullAndInheritAreNotLoggedAsLines) {
  Harness h(TestOptions({CellSpec{.name = "silent", .extra_toml = "output = \"null\"\n"},
                         CellSpec{.name = "direct", .extra_toml = "output = \"inherit\"\n"}}));
  ASSERT_STARTED(h);
  EXPECT_OK_REPLY(h.Call("silent", "print-stdout into the void"), "printed");
  EXPECT_OK_REPLY(h.Call("direct", "print-stdout straight through"), "printed");
  // "inherit": the raw line lands in bulkheadd's own stderr/stdout file, not as a log line.
  ASSERT_TRUE(WaitFor([&] { return h.Log().find("\nstraight through\n") != std::string::npos; }))
      << h.Log();
  ASSERT_TRUE(h.Stop().ok());
  EXPECT_EQ(h.Log().find("into the void"), std::string::npos) << h.Log();
  EXPECT_TRUE(LinesWith(h.Log(), {"msg=\"straight through\""}).empty()) << h.Log();
}

TEST(WorkerOutput, CrashingWorkersLastWordsAreLogged) {
  Harness h(TestOptions(
      {CellSpec{.name = "fragile", .environment = {{"ASAN_OPTIONS", "handle_segv=0"}}}}));
  ASSERT_STARTED(h);
  const int pid = h.Cell("fragile")["pid"].get<int>();
  // Unterminated, and written just before the SIGSEGV: only draining the pipe at exit logs it.
  Result<ipc::Client::Reply> reply = h.Call("fragile", "last-words about to dereference null");
  EXPECT_TRUE(IsReply(reply, ipc::ReplyStatus::kFailed, ipc::Reason::kWorkerDied))
      << Describe(reply);
  EXPECT_TRUE(WaitForLogLine(
      h, {"cell=fragile" + PidField(pid) + "stream=stderr msg=\"about to dereference null\""}))
      << h.Log();
}

TEST(WorkerOutput, OverLongLineIsTruncatedToLogLineMax) {
  Harness h(TestOptions({CellSpec{.name = "verbose", .extra_toml = "log_line_max = \"1K\"\n"}}));
  ASSERT_STARTED(h);
  EXPECT_OK_REPLY(h.Call("verbose", "long-line 1048576"), "wrote 1048576");
  EXPECT_OK_REPLY(h.Call("verbose", "print-stdout after the long line"), "printed");
  ASSERT_TRUE(WaitForLogLine(h, {"cell=verbose", "msg=\"after the long line\""})) << h.Log();

  const std::string log = h.Log();
  std::vector<std::string> truncated = LinesWith(log, {"cell=verbose", "truncated=true"});
  ASSERT_EQ(truncated.size(), 1u) << log.substr(0, 4096);
  EXPECT_NE(
      truncated[0].find("stream=stdout truncated=true msg=\"" + std::string(1024, 'x') + "\""),
      std::string::npos)
      << truncated[0].substr(0, 300);
  // The other 1047552 bytes of the line were dropped, not logged as more lines.
  EXPECT_LT(log.size(), 64u * 1024) << log.substr(0, 4096);
}

// Logged "flood line" lines plus the "suppressed K lines" summaries of `cell`.
uint64_t AccountedFloodLines(const std::string& log, const std::string& cell) {
  uint64_t total = LinesWith(log, {"cell=" + cell + " ", "msg=\"flood line "}).size();
  for (const std::string& line : LinesWith(log, {"cell=" + cell + " ", "msg=\"suppressed "})) {
    size_t at = line.find("msg=\"suppressed ") + 16;
    total += std::strtoull(line.c_str() + at, nullptr, 10);
  }
  return total;
}

TEST(WorkerOutput, FloodIsRateLimitedAndDoesNotSlowANeighbour) {
  constexpr int kFloodLines = 200000;
  constexpr int kNeighbourCalls = 50;
  Harness h(TestOptions(
      {CellSpec{.name = "chatty",
                .extra_toml = "log_rate_limit_burst = 100\nlog_rate_limit_interval = \"200ms\"\n"},
       CellSpec{.name = "quiet", .max_concurrent = 2}}));
  ASSERT_STARTED(h);

  std::atomic<bool> flood_done{false};
  Result<ipc::Client::Reply> flood = Status::Error("not sent");
  std::thread flooder([&] {
    flood = h.Call("chatty", "flood " + std::to_string(kFloodLines), std::chrono::seconds(120));
    flood_done.store(true);
  });
  // The neighbour answers every request while the flood runs (and at least kNeighbourCalls).
  int calls = 0;
  int ok = 0;
  while (!flood_done.load() || calls < kNeighbourCalls) {
    Result<ipc::Client::Reply> reply = h.Call("quiet", "echo " + std::to_string(calls));
    ++calls;
    if (IsReply(reply, ipc::ReplyStatus::kOk, ipc::Reason::kNone) &&
        reply->payload == std::to_string(calls - 1)) {
      ++ok;
    } else {
      ADD_FAILURE() << "call " << calls - 1 << ": " << Describe(reply);
    }
  }
  flooder.join();
  EXPECT_OK_REPLY(flood, "flooded " + std::to_string(kFloodLines));
  EXPECT_EQ(ok, calls);

  // Every line is either logged or counted in a summary, once its window has ended.
  ASSERT_TRUE(WaitFor([&] { return AccountedFloodLines(h.Log(), "chatty") == kFloodLines; },
                      std::chrono::seconds(20)))
      << AccountedFloodLines(h.Log(), "chatty") << " of " << kFloodLines << " accounted for";
  const std::string log = h.Log();
  EXPECT_FALSE(LinesWith(log, {"level=warning cell=chatty", "msg=\"suppressed "}).empty());
  EXPECT_LT(LinesWith(log, {"cell=chatty ", "msg=\"flood line "}).size(),
            static_cast<size_t>(kFloodLines));
}

TEST(WorkerOutput, AGrandchildHoldingThePipesDoesNotDelayTheRestart) {
  Harness h(TestOptions({CellSpec{.name = "parent"}}));
  ASSERT_STARTED(h);
  const int old_pid = h.Cell("parent")["pid"].get<int>();
  Result<ipc::Client::Reply> grandchild = h.Call("parent", "spawn-grandchild");
  ASSERT_TRUE(IsReply(grandchild, ipc::ReplyStatus::kOk, ipc::Reason::kNone))
      << Describe(grandchild);
  // It left the worker's process group and session (the harness is its subreaper): killed and
  // reaped here by pid. Without a cgroup nothing else stops it, and it keeps stdout and stderr.
  ChildGuard grandchild_guard(std::atoi(grandchild->payload.c_str()));

  Result<ipc::Client::Reply> died = h.Call("parent", "exit 3");
  EXPECT_TRUE(IsReply(died, ipc::ReplyStatus::kFailed, ipc::Reason::kWorkerDied)) << Describe(died);
  ASSERT_TRUE(h.WaitForCell("parent", [&](const nlohmann::json& c) {
    return c["state"] == "running" && c["pid"].is_number_integer() && c["pid"] != old_pid;
  })) << h.Status().dump();
  const int new_pid = h.Cell("parent")["pid"].get<int>();
  // The new generation has pipes of its own.
  EXPECT_OK_REPLY(h.Call("parent", "print-stdout second generation"), "printed");
  EXPECT_TRUE(WaitForLogLine(
      h, {"cell=parent" + PidField(new_pid) + "stream=stdout msg=\"second generation\""}))
      << h.Log();
}

}  // namespace
}  // namespace bulkhead::e2e
