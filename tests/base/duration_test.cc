// SPDX-License-Identifier: MIT
// ParseDuration: accepted forms with their values, refused forms with the problem they name.
#include "base/duration.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>

namespace bulkhead {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;

milliseconds Parsed(std::string_view text) {
  Result<milliseconds> result = ParseDuration(text);
  EXPECT_TRUE(result.ok()) << text << ": " << result.status().message();
  return result.ok() ? result.value() : milliseconds(-1);
}

TEST(ParseDuration, AcceptsEachUnit) {
  EXPECT_EQ(Parsed("500ms"), milliseconds(500));
  EXPECT_EQ(Parsed("2s"), milliseconds(2'000));
  EXPECT_EQ(Parsed("3m"), milliseconds(180'000));
  EXPECT_EQ(Parsed("1h"), milliseconds(3'600'000));
}

TEST(ParseDuration, AcceptsZero) {
  EXPECT_EQ(Parsed("0s"), milliseconds(0));
  EXPECT_EQ(Parsed("0ms"), milliseconds(0));
}

TEST(ParseDuration, AcceptsGroupsLargestUnitFirst) {
  EXPECT_EQ(Parsed("1m30s"), milliseconds(90'000));
  EXPECT_EQ(Parsed("1s500ms"), milliseconds(1'500));
  EXPECT_EQ(Parsed("1h2m3s4ms"), milliseconds(3'723'004));
  EXPECT_EQ(Parsed("1h30s"), milliseconds(3'630'000));  // Units may be skipped.
  EXPECT_EQ(Parsed("90s"), milliseconds(90'000));       // A first group may exceed the next unit,
  EXPECT_EQ(Parsed("1h90s"), milliseconds(3'690'000));  // and a later one the unit it skipped,
  EXPECT_EQ(Parsed("1m59s999ms"), milliseconds(119'999));  // each below the unit before it.
  EXPECT_EQ(Parsed("1s999ms"), milliseconds(1'999));
  EXPECT_EQ(Parsed("0m59s"), milliseconds(59'000));
  EXPECT_EQ(Parsed("007s"), milliseconds(7'000));
}

TEST(ParseDuration, AcceptsUpToExactly24h) {
  EXPECT_EQ(Parsed("24h"), kMaxDuration);
  EXPECT_EQ(Parsed("23h59m59s999ms"), kMaxDuration - milliseconds(1));
  EXPECT_EQ(Parsed("86400000ms"), kMaxDuration);
}

struct Refused {
  std::string_view text;
  std::string_view problem;
};

TEST(ParseDuration, RefusesWithTheProblemAndTheAcceptedForm) {
  const Refused cases[] = {
      {"", "empty"},
      {"5", "a unit is required, a bare number is ambiguous; write \"5s\" for seconds; expected"},
      {"0", "a bare number is ambiguous; write \"0s\" for seconds"},
      {"86400", "a bare number is ambiguous; write \"86400s\" for seconds"},
      {"86401", "a bare number is ambiguous; write \"86401ms\" for milliseconds"},
      {"86400001", "a bare number is ambiguous; expected"},
      {"-1s", "a sign is not allowed"},
      {"+1s", "a sign is not allowed"},
      {"1.5s", "decimals are not allowed"},
      {"1,5s", "decimals are not allowed"},
      {"1 s", "spaces are not allowed"},
      {" 1s", "spaces are not allowed"},
      {"1s\n", "spaces are not allowed"},
      {"5sec", "unknown unit \"sec\""},
      {"5S", "unknown unit \"S\""},
      {"1d", "unknown unit \"d\""},
      {"5us", "unknown unit \"us\""},
      {"s", "missing number before unit \"s\""},
      {"1m30", "missing unit after \"30\""},
      {"30s1m", "units must go from largest to smallest, each at most once"},
      {"1s1s", "units must go from largest to smallest, each at most once"},
      {"1ms1s", "units must go from largest to smallest, each at most once"},
      {"500ms1s", "units must go from largest to smallest, each at most once"},
      // A group after the first is less than one of the unit before it: one spelling per value.
      {"1m90s",
       "\"90s\" is 1m or more, after a group in m (a group must be less than one of the "
       "unit before it); write \"2m30s\"; expected"},
      {"1m60s", "\"60s\" is 1m or more, after a group in m"},
      {"23h60m",
       "\"60m\" is 1h or more, after a group in h (a group must be less than one of the "
       "unit before it); write \"24h\""},
      {"1s1500ms",
       "\"1500ms\" is 1s or more, after a group in s (a group must be less than one "
       "of the unit before it); write \"2500ms\""},
      {"1h60m", "write \"2h\""},
      {"1h1m90s", "write \"1h2m30s\""},
      {"1h3600s", "write \"2h\""},
      {"1s#", "unexpected character '#'"},
      {"25h", "longer than the maximum of 24h"},
      {"24h1ms", "longer than the maximum of 24h"},
      {"86400001ms", "longer than the maximum of 24h"},
  };
  for (const Refused& c : cases) {
    Result<milliseconds> result = ParseDuration(c.text);
    ASSERT_FALSE(result.ok()) << "accepted \"" << c.text << "\"";
    const std::string& message = result.status().message();
    EXPECT_THAT(message, HasSubstr("invalid duration \"" + std::string(c.text) + "\": "));
    EXPECT_THAT(message, HasSubstr(std::string(c.problem))) << c.text;
    EXPECT_THAT(message, HasSubstr("such as \"500ms\", \"2s\" or \"1m30s\" (units: h, m, s, ms)"))
        << c.text;
  }
}

// What people write for a duration gets the accepted form, in the refusal too.
TEST(SuggestDuration, GivesTheAcceptedFormOfWhatPeopleWrite) {
  const std::pair<std::string_view, std::string_view> cases[] = {
      {"1.5s", "1500ms"}, {"0.5m", "30s"},   {"1,5s", "1500ms"},    {"2.5h", "2h30m"},
      {"3sec", "3s"},     {"3 s", "3s"},     {" 3s ", "3s"},        {"3 secs", "3s"},
      {"5S", "5s"},       {"2 mins", "2m"},  {"1 hour", "1h"},      {"1h 30m", "1h30m"},
      {"30s1m", "1m30s"}, {"1s1s", "2s"},    {"250 msec", "250ms"}, {"61.5s", "1m1500ms"},
      {"1.0s", "1s"},     {"0.001s", "1ms"}, {"90S", "90s"},        {"90 Sec", "90s"},
      {"1H90S", "1h90s"}, {"5MS", "5ms"},
  };
  // A group to carry: the total is written anew.
  const std::pair<std::string_view, std::string_view> carried[] = {
      {"1m90s", "2m30s"}, {"1MIN90S", "2m30s"},   {"1 min 90 s", "2m30s"},
      {"23h60m", "24h"},  {"1s1500ms", "2500ms"},
  };
  for (const auto& [text, accepted] : carried) {
    EXPECT_EQ(SuggestDuration(text), std::optional<std::string>(accepted)) << text;
    EXPECT_TRUE(ParseDuration(accepted).ok()) << accepted;
  }
  for (const auto& [text, accepted] : cases) {
    EXPECT_EQ(SuggestDuration(text), std::optional<std::string>(accepted)) << text;
    EXPECT_TRUE(ParseDuration(accepted).ok()) << accepted;
  }
  for (std::string_view text :
       {"2s", "5", "1.0005s", "1d", "5us", "-1s", "s", "25h", "1.5", "3 s s", "", "1.s", "256M"}) {
    EXPECT_EQ(SuggestDuration(text), std::nullopt) << text;
  }
  EXPECT_THAT(ParseDuration("1.5s").status().message(),
              HasSubstr("decimals are not allowed; write \"1500ms\"; expected"));
  EXPECT_THAT(ParseDuration("3sec").status().message(),
              HasSubstr("unknown unit \"sec\"; write \"3s\"; expected"));
  EXPECT_THAT(ParseDuration("3 s").status().message(),
              HasSubstr("spaces are not allowed; write \"3s\"; expected"));
  // Finer than a millisecond: the nearest whole ms, said to be rounded; none when that is 0.
  EXPECT_THAT(
      ParseDuration("1.0001s").status().message(),
      HasSubstr("decimals are not allowed; durations are whole milliseconds: the nearest is "
                "\"1s\"; expected"));
  EXPECT_THAT(ParseDuration("1.0005s").status().message(),
              HasSubstr("the nearest is \"1001ms\"; expected"));
  EXPECT_THAT(ParseDuration("0.0001s").status().message(),
              HasSubstr("decimals are not allowed; durations are whole milliseconds; expected"));
  // Only the case is off: the number is kept.
  EXPECT_THAT(ParseDuration("90S").status().message(),
              HasSubstr("unknown unit \"S\"; write \"90s\"; expected"));
}

TEST(ParseDuration, DoesNotOverflowOnHugeNumbers) {
  // 2^64 ms and far beyond: would wrap around to small values if accumulated naively.
  const std::string cases[] = {"18446744073709551616ms", std::string(400, '9') + "h",
                               "9223372036854775807h9223372036854775807m"};
  for (const std::string& text : cases) {
    Result<milliseconds> result = ParseDuration(text);
    ASSERT_FALSE(result.ok()) << text;
    EXPECT_THAT(result.status().message(), HasSubstr("longer than the maximum of 24h"));
  }
}

}  // namespace
}  // namespace bulkhead
