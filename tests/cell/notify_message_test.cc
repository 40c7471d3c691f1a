// SPDX-License-Identifier: MIT
// ParseNotifyMessage: the sd_notify(3) assignments bulkhead acts on, exact-match values, first
// assignment wins, malformed and unknown lines ignored, and the datagram-level refusals.
#include "cell/notify_message.h"

#include <gtest/gtest.h>

#include <string>

namespace bulkhead::cell {
namespace {

NotifyMessage MustParse(std::string_view datagram) {
  Result<NotifyMessage> result = ParseNotifyMessage(datagram);
  EXPECT_TRUE(result.ok()) << result.status().message();
  return result.ok() ? result.value() : NotifyMessage{};
}

TEST(ParseNotifyMessage, ReadyAlone) {
  const NotifyMessage m = MustParse("READY=1");
  EXPECT_TRUE(m.ready);
  EXPECT_FALSE(m.reloading);
  EXPECT_FALSE(m.stopping);
  EXPECT_FALSE(m.watchdog_ping);
  EXPECT_FALSE(m.watchdog_trigger);
  EXPECT_FALSE(m.status.has_value());
  EXPECT_FALSE(m.main_pid.has_value());
  EXPECT_FALSE(m.error.has_value());
  EXPECT_EQ(m.ignored_lines, 0u);
}

TEST(ParseNotifyMessage, SeveralAssignmentsWithTrailingNewline) {
  const NotifyMessage m =
      MustParse("READY=1\nSTATUS=Processing requests: 3 in flight\nMAINPID=4242\nWATCHDOG=1\n");
  EXPECT_TRUE(m.ready);
  EXPECT_TRUE(m.watchdog_ping);
  EXPECT_EQ(m.status, "Processing requests: 3 in flight");
  EXPECT_EQ(m.main_pid, 4242);
  EXPECT_EQ(m.ignored_lines, 0u);
}

TEST(ParseNotifyMessage, FlagsOfTheProtocol) {
  EXPECT_TRUE(MustParse("RELOADING=1").reloading);
  EXPECT_TRUE(MustParse("STOPPING=1").stopping);
  EXPECT_TRUE(MustParse("WATCHDOG=1").watchdog_ping);
  const NotifyMessage trigger = MustParse("WATCHDOG=trigger");
  EXPECT_TRUE(trigger.watchdog_trigger);
  EXPECT_FALSE(trigger.watchdog_ping);
  EXPECT_EQ(MustParse("ERRNO=2").error, 2);
  EXPECT_EQ(MustParse("ERRNO=0").error, 0);
}

TEST(ParseNotifyMessage, FlagValuesMustMatchExactly) {
  for (const char* line : {"READY=0", "READY=true", "READY= 1", "READY=1 ", "READY=1\r", "READY",
                           "ready=1", "WATCHDOG=2", "STOPPING=yes"}) {
    const NotifyMessage m = MustParse(line);
    EXPECT_FALSE(m.ready || m.watchdog_ping || m.watchdog_trigger || m.stopping) << line;
    EXPECT_EQ(m.ignored_lines, 1u) << line;
  }
}

TEST(ParseNotifyMessage, EmptyStatusClearsAndValueIsKeptVerbatim) {
  EXPECT_EQ(MustParse("STATUS=").status, "");
  EXPECT_EQ(MustParse("STATUS= a=b  ").status, " a=b  ");
  EXPECT_EQ(MustParse("STATUS=caf\xc3\xa9 \xe2\x9c\x93").status, "caf\xc3\xa9 \xe2\x9c\x93");
}

TEST(ParseNotifyMessage, StatusThatIsNotUtf8IsIgnored) {
  for (std::string_view bad : {std::string_view("STATUS=\xff"),
                               std::string_view("STATUS=\xc3"),                 // truncated
                               std::string_view("STATUS=\xc0\xaf"),             // overlong '/'
                               std::string_view("STATUS=\xed\xa0\x80"),         // surrogate
                               std::string_view("STATUS=\xf4\x90\x80\x80")}) {  // > U+10FFFF
    const NotifyMessage m = MustParse(bad);
    EXPECT_FALSE(m.status.has_value());
    EXPECT_EQ(m.ignored_lines, 1u);
  }
}

TEST(ParseNotifyMessage, FirstWellFormedAssignmentWins) {
  const NotifyMessage m =
      MustParse("STATUS=first\nSTATUS=second\nMAINPID=x\nMAINPID=7\nMAINPID=8\nERRNO=5\nERRNO=6");
  EXPECT_EQ(m.status, "first");
  EXPECT_EQ(m.main_pid, 7);
  EXPECT_EQ(m.error, 5);
  EXPECT_EQ(m.ignored_lines, 4u);  // STATUS=second, MAINPID=x, MAINPID=8, ERRNO=6
}

TEST(ParseNotifyMessage, NumbersArePlainDecimalsInRange) {
  for (const char* line : {"MAINPID=0", "MAINPID=-1", "MAINPID=+5", "MAINPID= 5", "MAINPID=5x",
                           "MAINPID=", "MAINPID=2147483648", "MAINPID=99999999999999999999",
                           "ERRNO=-1", "ERRNO=abc"}) {
    const NotifyMessage m = MustParse(line);
    EXPECT_FALSE(m.main_pid.has_value()) << line;
    EXPECT_FALSE(m.error.has_value()) << line;
    EXPECT_EQ(m.ignored_lines, 1u) << line;
  }
  EXPECT_EQ(MustParse("MAINPID=2147483647").main_pid, 2147483647);
}

// 19 digits pass the length bound but can exceed int64_t: the parser must refuse them without
// overflowing (signed overflow is undefined; the asan-ubsan build stops on it). Found while
// writing fuzz.notify_message_fuzzer.
TEST(ParseNotifyMessage, NineteenDigitNumbersDoNotOverflow) {
  for (const char* line : {"MAINPID=9999999999999999999", "ERRNO=9999999999999999999",
                           "ERRNO=9223372036854775808", "MAINPID=9223372036854775807"}) {
    const NotifyMessage m = MustParse(line);
    EXPECT_FALSE(m.main_pid.has_value()) << line;
    EXPECT_FALSE(m.error.has_value()) << line;
    EXPECT_EQ(m.ignored_lines, 1u) << line;
  }
  EXPECT_EQ(MustParse("ERRNO=0000000000000000009").error, 9);
}

TEST(ParseNotifyMessage, MalformedAndUnknownLinesAreIgnored) {
  const NotifyMessage m =
      MustParse("garbage\n=1\nRE ADY=1\nFDSTORE=1\nEXTEND_TIMEOUT_USEC=5000000\n\n\nREADY=1");
  EXPECT_TRUE(m.ready);
  EXPECT_EQ(m.ignored_lines, 5u);
}

TEST(ParseNotifyMessage, EmptyDatagramSaysNothing) {
  const NotifyMessage m = MustParse("");
  EXPECT_FALSE(m.ready);
  EXPECT_EQ(m.ignored_lines, 0u);
  EXPECT_EQ(MustParse("\n\n").ignored_lines, 0u);
}

TEST(ParseNotifyMessage, SizeBoundIsInclusive) {
  std::string at_limit = "STATUS=";
  at_limit.append(kMaxNotifyMessageBytes - at_limit.size(), 'x');
  ASSERT_EQ(at_limit.size(), kMaxNotifyMessageBytes);
  EXPECT_EQ(MustParse(at_limit).status->size(), kMaxNotifyMessageBytes - 7);

  const std::string over = at_limit + "x";
  Result<NotifyMessage> result = ParseNotifyMessage(over);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().message(), "notify message of 4097 bytes exceeds the 4096-byte limit");
}

TEST(ParseNotifyMessage, NulByteRefusesTheWholeDatagram) {
  Result<NotifyMessage> result = ParseNotifyMessage(std::string_view("READY=1\n\0STATUS=x", 17));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().message(), "notify message contains a NUL byte");
}

}  // namespace
}  // namespace bulkhead::cell
