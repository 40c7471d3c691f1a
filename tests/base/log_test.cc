// SPDX-License-Identifier: MIT
#include "base/log.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace bulkhead {
namespace {

// 2026-11-29T22:41:07.123Z
constexpr timespec kNow = {1795992067, 123456789};

std::string Format(LogStyle style, LogLevel level, std::string_view cell, int pid,
                   std::vector<LogField> fields, std::string_view message) {
  std::string out;
  FormatLogLine(style, kNow, level, cell, pid, fields, message, &out);
  return out;
}

std::string Message(std::string_view message) {
  return Format(LogStyle::kJournal, LogLevel::kInfo, "", 0, {}, message);
}

TEST(FormatLogLine, TimestampStyleStartsWithAnRfc3339UtcStamp) {
  EXPECT_EQ(Format(LogStyle::kTimestamp, LogLevel::kInfo, "payments", 41234, {}, "worker started"),
            "2026-11-29T22:41:07.123Z level=info cell=payments pid=41234 msg=\"worker started\"\n");
}

TEST(FormatLogLine, JournalStyleStartsWithThePriorityPrefix) {
  EXPECT_EQ(Format(LogStyle::kJournal, LogLevel::kError, "", 0, {}, "boom"),
            "<3>level=error msg=\"boom\"\n");
  EXPECT_EQ(Format(LogStyle::kJournal, LogLevel::kWarning, "a", 0, {}, "x"),
            "<4>level=warning cell=a msg=\"x\"\n");
  EXPECT_EQ(Format(LogStyle::kJournal, LogLevel::kDebug, "", 7, {}, "x"),
            "<7>level=debug pid=7 msg=\"x\"\n");
}

TEST(FormatLogLine, FieldsGoBetweenPidAndMessageQuotedWhenNeeded) {
  EXPECT_EQ(
      Format(LogStyle::kJournal, LogLevel::kInfo, "c", 5,
             {{"stream", "stdout"}, {"note", "two words"}, {"empty", ""}, {"eq", "a=b"}}, "hi"),
      "<6>level=info cell=c pid=5 stream=stdout note=\"two words\" empty=\"\" eq=\"a=b\" "
      "msg=\"hi\"\n");
}

TEST(FormatLogLine, MessageQuotesAndEscapes) {
  EXPECT_EQ(Message("say \"hi\" \\ bye"), "<6>level=info msg=\"say \\\"hi\\\" \\\\ bye\"\n");
  EXPECT_EQ(Message("a\nb\rc\td"), "<6>level=info msg=\"a\\nb\\rc\\td\"\n");
  EXPECT_EQ(Message(std::string_view("\x1b[1m\x00\x7f", 6)),
            "<6>level=info msg=\"\\x1b[1m\\x00\\x7f\"\n");
  EXPECT_EQ(Message(""), "<6>level=info msg=\"\"\n");
}

TEST(FormatLogLine, ValidUtf8IsKeptAndInvalidBytesAreEscaped) {
  EXPECT_EQ(Message("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x90\x8d"),
            "<6>level=info msg=\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x90\x8d\"\n");
  // A lone continuation byte, a truncated sequence, an overlong '/', a surrogate, > U+10FFFF.
  EXPECT_EQ(Message("\x80|\xc3|\xc0\xaf|\xed\xa0\x80|\xf4\x90\x80\x80"),
            "<6>level=info msg=\"\\x80|\\xc3|\\xc0\\xaf|\\xed\\xa0\\x80|\\xf4\\x90\\x80\\x80\"\n");
  // Truncated at the very end.
  EXPECT_EQ(Message("\xe2\x82"), "<6>level=info msg=\"\\xe2\\x82\"\n");
}

TEST(LogLevel, ParseAcceptsTheFourNamesOnly) {
  EXPECT_EQ(ParseLogLevel("debug"), LogLevel::kDebug);
  EXPECT_EQ(ParseLogLevel("info"), LogLevel::kInfo);
  EXPECT_EQ(ParseLogLevel("warning"), LogLevel::kWarning);
  EXPECT_EQ(ParseLogLevel("error"), LogLevel::kError);
  EXPECT_EQ(ParseLogLevel("warn"), std::nullopt);
  EXPECT_EQ(ParseLogLevel("INFO"), std::nullopt);
  EXPECT_EQ(ParseLogLevel(""), std::nullopt);
}

TEST(StripPriorityPrefix, MapsSdDaemonPrioritiesToLevels) {
  struct Case {
    std::string_view in;
    std::optional<LogLevel> level;
    std::string_view rest;
  };
  for (const Case& c : std::vector<Case>{{"<0>emerg", LogLevel::kError, "emerg"},
                                         {"<3>err", LogLevel::kError, "err"},
                                         {"<4>warn", LogLevel::kWarning, "warn"},
                                         {"<5>notice", LogLevel::kInfo, "notice"},
                                         {"<6>", LogLevel::kInfo, ""},
                                         {"<7>dbg", LogLevel::kDebug, "dbg"},
                                         {"<8>x", std::nullopt, "<8>x"},
                                         {"<a>x", std::nullopt, "<a>x"},
                                         {"<6", std::nullopt, "<6"},
                                         {" <6>x", std::nullopt, " <6>x"}}) {
    std::string_view text = c.in;
    EXPECT_EQ(StripPriorityPrefix(&text), c.level) << c.in;
    EXPECT_EQ(text, c.rest) << c.in;
  }
}

}  // namespace
}  // namespace bulkhead
