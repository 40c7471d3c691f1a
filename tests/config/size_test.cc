// SPDX-License-Identifier: MIT
// ParseSize: accepted forms with their byte counts, refused forms with the problem and hint they
// name.
#include "config/size.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace bulkhead::config {
namespace {

using ::testing::HasSubstr;

uint64_t Parsed(std::string_view text) {
  Result<uint64_t> result = ParseSize(text);
  EXPECT_TRUE(result.ok()) << text << ": " << result.status().message();
  return result.ok() ? result.value() : 12345;
}

TEST(ParseSize, AcceptsEachUnitAsAPowerOf1024) {
  EXPECT_EQ(Parsed("512K"), 512u * 1024);
  EXPECT_EQ(Parsed("256M"), 256u * 1024 * 1024);
  EXPECT_EQ(Parsed("1G"), uint64_t{1} << 30);
  EXPECT_EQ(Parsed("1T"), uint64_t{1} << 40);
  EXPECT_EQ(Parsed("1536M"), uint64_t{1536} << 20);
}

TEST(ParseSize, IecSpellingsAreTheSameUnits) {
  EXPECT_EQ(Parsed("512Ki"), Parsed("512K"));
  EXPECT_EQ(Parsed("256Mi"), Parsed("256M"));
  EXPECT_EQ(Parsed("2Gi"), uint64_t{2} << 30);
  EXPECT_EQ(Parsed("3Ti"), uint64_t{3} << 40);
}

TEST(ParseSize, AcceptsZeroAndLeadingZeros) {
  EXPECT_EQ(Parsed("0M"), 0u);
  EXPECT_EQ(Parsed("0K"), 0u);
  EXPECT_EQ(Parsed("007M"), uint64_t{7} << 20);
}

TEST(ParseSize, AcceptsUpToTheLargestTomlInteger) {
  // 8388607T = 2^63 - 2^40 is the largest whole number of T within kMaxSizeBytes = 2^63 - 1.
  EXPECT_EQ(Parsed("8388607T"), (uint64_t{1} << 63) - (uint64_t{1} << 40));
  EXPECT_EQ(kMaxSizeBytes, uint64_t{INT64_MAX});
}

struct Refused {
  std::string_view text;
  std::string_view problem;
};

TEST(ParseSize, RefusesWithTheProblemAndTheAcceptedForms) {
  const Refused cases[] = {
      {"", "empty"},
      {"1048576",
       "a unit is required in a string; write bytes as a TOML integer without quotes "
       "(1048576), or add a unit"},
      {"0", "a unit is required in a string; write bytes as a TOML integer without quotes (0)"},
      {"-1", "a sign is not allowed"},
      {"-1M", "a sign is not allowed"},
      {"+1M", "a sign is not allowed"},
      {"32Mb", "unknown unit \"Mb\"; write \"32M\""},
      {"32MB", "unknown unit \"MB\"; write \"32M\""},
      {"1GiB", "unknown unit \"GiB\"; write \"1Gi\""},
      {"1g", "unknown unit \"g\"; write \"1G\""},
      {"4kb", "unknown unit \"kb\"; write \"4K\""},
      {"1GI", "unknown unit \"GI\"; write \"1Gi\""},
      {"100B", "unknown unit \"B\""},
      {"1P", "unknown unit \"P\""},
      {"1E", "unknown unit \"E\""},
      {"5mega", "unknown unit \"mega\""},
      {"750M # note",
       "a '#' inside the quotes is not a comment; end the string before it: "
       "\"750M\"  # ..."},
      {"750M#note", "a '#' inside the quotes is not a comment; end the string before it: \"750M\""},
      {"1 G", "spaces are not allowed"},
      {" 1G", "spaces are not allowed"},
      {"1G\n", "spaces are not allowed"},
      {"1.5G", "decimals are not allowed; use a smaller unit (\"1536M\", not \"1.5G\")"},
      {"1,5G", "decimals are not allowed"},
      {"0.25M", "decimals are not allowed; use a smaller unit (\"256K\", not \"0.25M\")"},
      {"1.0009765625M",
       "decimals are not allowed; use a smaller unit (\"1025K\", not "
       "\"1.0009765625M\")"},
      {"0.5K",
       "decimals are not allowed; write 512 (bytes, a TOML integer without quotes), not "
       "\"0.5K\""},
      {"0.1G", "decimals are not allowed; use a smaller unit (\"1536M\", not \"1.5G\")"},
      {"1.5", "decimals are not allowed"},
      {".5G", "decimals are not allowed"},
      {"M", "missing number before unit \"M\""},
      {"1M1K", "unexpected character '1'"},
      {"1M%", "unexpected character '%'"},
      {"%", "unexpected character '%'"},
      {"max", "leave the key out for no limit"},
      {"infinity", "leave the key out for no limit"},
      {"8388608T", "larger than the maximum of 9223372036854775807 bytes (just under 8 EiB)"},
      {"18446744073709551616K", "larger than the maximum of 9223372036854775807 bytes"},
  };
  for (const Refused& c : cases) {
    Result<uint64_t> result = ParseSize(c.text);
    ASSERT_FALSE(result.ok()) << "accepted \"" << c.text << "\"";
    const std::string& message = result.status().message();
    EXPECT_THAT(message, HasSubstr("invalid size \"" + std::string(c.text) + "\": "));
    EXPECT_THAT(message, HasSubstr(std::string(c.problem))) << c.text;
    EXPECT_THAT(message, HasSubstr(std::string(kSizeForms))) << c.text;
  }
}

TEST(ParseSize, DoesNotOverflowOnHugeNumbers) {
  // 2^64 K, and far beyond: would wrap around to small values if accumulated naively.
  const std::string cases[] = {"18014398509481984K", std::string(400, '9') + "T",
                               std::string(400, '9') + "K", "9223372036854775808M"};
  for (const std::string& text : cases) {
    Result<uint64_t> result = ParseSize(text);
    ASSERT_FALSE(result.ok()) << text;
    EXPECT_THAT(result.status().message(), HasSubstr("larger than the maximum")) << text;
  }
}

}  // namespace
}  // namespace bulkhead::config
