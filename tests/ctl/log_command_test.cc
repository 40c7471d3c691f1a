// SPDX-License-Identifier: MIT
// `bulkheadctl logs`: the request, reading the supervisor's page of lines, and the journalctl
// command used when bulkheadd logs to the journal.
#include "ctl/log_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace bulkhead::ctl {
namespace {

using ::testing::ElementsAre;

TEST(LogCommand, RequestCarriesFromAndLinesOnlyWhenGiven) {
  EXPECT_EQ(LogsRequest("a", std::nullopt, std::nullopt).dump(),
            R"({"cell":"a","command":"logs"})");
  EXPECT_EQ(LogsRequest("a", 7, 20).dump(), R"({"cell":"a","command":"logs","from":7,"lines":20})");
}

TEST(LogCommand, ParsesAPageFromTheRing) {
  Result<LogsPage> page = ParseLogsPage(nlohmann::json::parse(
      R"({"ok":true,"cell":"a","lines":["one","two"],"next":9,"missed":3,"journal":null})"));
  ASSERT_TRUE(page.ok()) << page.status().message();
  EXPECT_THAT(page->lines, ElementsAre("one", "two"));
  EXPECT_EQ(page->next, 9u);
  EXPECT_EQ(page->missed, 3u);
  EXPECT_FALSE(page->journal.has_value());
}

TEST(LogCommand, ParsesTheJournalSource) {
  Result<LogsPage> page =
      ParseLogsPage(nlohmann::json::parse(R"({"ok":true,"cell":"a","lines":[],"next":0,"missed":0,)"
                                          R"("journal":{"unit":"bulkheadd.service","pid":42}})"));
  ASSERT_TRUE(page.ok()) << page.status().message();
  ASSERT_TRUE(page->journal.has_value());
  EXPECT_EQ(page->journal->unit, "bulkheadd.service");
  EXPECT_EQ(page->journal->pid, 42);
}

TEST(LogCommand, ErrorsNameTheMember) {
  EXPECT_EQ(ParseLogsPage(nlohmann::json::parse(R"({"ok":false,"error":"no cell named x"})"))
                .status()
                .message(),
            "no cell named x");
  EXPECT_EQ(ParseLogsPage(nlohmann::json::parse(R"({"ok":true,"lines":[1],"next":0,"missed":0})"))
                .status()
                .message(),
            "logs response: a line is not a string");
  EXPECT_EQ(ParseLogsPage(nlohmann::json::parse(R"({"ok":true,"lines":[],"next":-1,"missed":0})"))
                .status()
                .message(),
            "logs response: \"next\" is not an unsigned integer");
  EXPECT_EQ(ParseLogsPage(nlohmann::json::parse(
                              R"({"ok":true,"lines":[],"next":0,"missed":0,"journal":{"pid":1}})"))
                .status()
                .message(),
            "logs response: \"journal\" needs a \"unit\" string and a \"pid\"");
}

TEST(LogCommand, JournalctlFiltersByUnitAndCellField) {
  EXPECT_THAT(JournalctlArgv({"bulkheadd.service", 42}, "payments", false, std::nullopt),
              ElementsAre("journalctl", "-u", "bulkheadd.service", "CELL=payments"));
  EXPECT_THAT(
      JournalctlArgv({"bulkheadd.service", 42}, "payments", true, 50),
      ElementsAre("journalctl", "-u", "bulkheadd.service", "CELL=payments", "-n", "50", "-f"));
  // Outside a unit, the supervisor's own lines.
  EXPECT_THAT(JournalctlArgv({"", 42}, "payments", false, std::nullopt),
              ElementsAre("journalctl", "_PID=42", "CELL=payments"));
}

}  // namespace
}  // namespace bulkhead::ctl
