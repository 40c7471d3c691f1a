// SPDX-License-Identifier: MIT
// CellLogs at its seams: the journal fields a line becomes (what `journalctl CELL=...` selects
// by), that lines go to the journal instead of stderr when it takes them, and that every line of a
// cell lands in its ring. The real journal is exercised by the systemd VM test.
#include "lifecycle/cell_logs.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace bulkhead::lifecycle {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::SizeIs;

TEST(JournalFields, WorkerOutputCarriesCellPidAndStream) {
  LogField stream[] = {{"stream", "stderr"}};
  std::vector<std::string> fields = JournalFields(
      LogRecord{LogLevel::kWarning, "payments", 4242, stream, "disk \"slow\""}, "bulkheadd");
  EXPECT_THAT(
      fields,
      ElementsAre(
          R"(MESSAGE=level=warning cell=payments pid=4242 stream=stderr msg="disk \"slow\"")",
          "PRIORITY=4", "SYSLOG_IDENTIFIER=bulkheadd", "CELL=payments", "WORKER_PID=4242",
          "STREAM=stderr"));
}

TEST(JournalFields, PriorityFollowsTheLevelAndEmptyFieldsAreLeftOut) {
  std::vector<std::string> error =
      JournalFields(LogRecord{LogLevel::kError, "", 0, {}, "config refused"}, "bulkheadd");
  EXPECT_THAT(error, ElementsAre(R"(MESSAGE=level=error msg="config refused")", "PRIORITY=3",
                                 "SYSLOG_IDENTIFIER=bulkheadd"));
  LogField truncated[] = {{"stream", "stdout"}, {"truncated", "true"}};
  std::vector<std::string> debug =
      JournalFields(LogRecord{LogLevel::kDebug, "a", 7, truncated, "x"}, "b");
  EXPECT_THAT(
      debug, ElementsAre(R"(MESSAGE=level=debug cell=a pid=7 stream=stdout truncated=true msg="x")",
                         "PRIORITY=7", "SYSLOG_IDENTIFIER=b", "CELL=a", "WORKER_PID=7",
                         "STREAM=stdout", "TRUNCATED=true"));
}

TEST(CellLogs, WithTheJournalLinesAreSentThereAndNotToStderr) {
  std::vector<std::vector<std::string>> sent;
  CellLogs logs(/*journal=*/true, [&sent](const std::vector<std::string>& fields) {
    sent.push_back(fields);
    return 0;
  });
  ASSERT_TRUE(logs.journal().has_value());
  EXPECT_EQ(logs.journal()->pid, ::getpid());
  LogField stream[] = {{"stream", "stdout"}};
  EXPECT_TRUE(logs.Consume(LogRecord{LogLevel::kInfo, "payments", 99, stream, "hello"}));
  ASSERT_THAT(sent, SizeIs(1));
  EXPECT_THAT(sent[0], ::testing::Contains("CELL=payments"));
  EXPECT_THAT(sent[0], ::testing::Contains("STREAM=stdout"));
  EXPECT_THAT(sent[0], ::testing::Contains("WORKER_PID=99"));
  EXPECT_THAT(sent[0], ::testing::Contains("PRIORITY=6"));
}

TEST(CellLogs, ALineTheJournalRefusesGoesToStderr) {
  CellLogs logs(/*journal=*/true, [](const std::vector<std::string>&) { return -ENOENT; });
  EXPECT_FALSE(logs.Consume(LogRecord{LogLevel::kInfo, "", 0, {}, "hello"}));
}

TEST(CellLogs, WithoutTheJournalLinesGoToStderrAndTheCellsRing) {
  int sends = 0;
  CellLogs logs(/*journal=*/false, [&sends](const std::vector<std::string>&) {
    ++sends;
    return 0;
  });
  EXPECT_FALSE(logs.journal().has_value());
  LogField stream[] = {{"stream", "stdout"}};
  EXPECT_FALSE(logs.Consume(LogRecord{LogLevel::kInfo, "payments", 99, stream, "hello"}));
  EXPECT_FALSE(logs.Consume(LogRecord{LogLevel::kInfo, "catalog", 98, stream, "other"}));
  EXPECT_FALSE(logs.Consume(LogRecord{LogLevel::kInfo, "", 0, {}, "no cell"}));
  EXPECT_EQ(sends, 0);
  LogRing::Page page = logs.Read("payments", std::nullopt, std::nullopt);
  ASSERT_THAT(page.lines, SizeIs(1));
  EXPECT_THAT(
      page.lines[0],
      MatchesRegex(
          R"(^[0-9-]+T[0-9:.]+Z level=info cell=payments pid=99 stream=stdout msg="hello"$)"));
  EXPECT_THAT(logs.Read("nosuch", std::nullopt, std::nullopt).lines, SizeIs(0));
  logs.Forget("payments");
  EXPECT_THAT(logs.Read("payments", std::nullopt, std::nullopt).lines, SizeIs(0));
  EXPECT_THAT(logs.Read("catalog", std::nullopt, std::nullopt).lines[0], HasSubstr("other"));
}

// Installed as the sink, it sees what Log lets through: lines below the level never reach it.
TEST(CellLogs, AsTheLogSinkItSeesLinesAtOrAboveTheLevel) {
  CellLogs logs(/*journal=*/false);
  LogSink* previous = GetLogSink();
  SetLogSink(&logs);
  Log(LogLevel::kDebug, "payments", 1, "hidden");
  Log(LogLevel::kWarning, "payments", 1, "shown");
  SetLogSink(previous);
  EXPECT_THAT(logs.Read("payments", std::nullopt, std::nullopt).lines,
              ElementsAre(HasSubstr("msg=\"shown\"")));
}

}  // namespace
}  // namespace bulkhead::lifecycle
