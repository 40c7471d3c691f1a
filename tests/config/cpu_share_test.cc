// SPDX-License-Identifier: MIT
// ParseCpuShare and CpuQuotaUs: accepted shares in thousandths of a percent, refused forms with the
// problem they name, and the cpu.max quota of a share.
#include "config/cpu_share.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace bulkhead::config {
namespace {

using ::testing::HasSubstr;

uint64_t Parsed(std::string_view text) {
  Result<uint64_t> result = ParseCpuShare(text);
  EXPECT_TRUE(result.ok()) << text << ": " << result.status().message();
  return result.ok() ? result.value() : 12345;
}

TEST(ParseCpuShare, AcceptsWholePercentages) {
  EXPECT_EQ(Parsed("50%"), 50'000u);
  EXPECT_EQ(Parsed("100%"), 100'000u);
  EXPECT_EQ(Parsed("150%"), 150'000u);
  EXPECT_EQ(Parsed("1%"), 1'000u);
  EXPECT_EQ(Parsed("050%"), 50'000u);
}

TEST(ParseCpuShare, AcceptsUpToThreeDecimals) {
  EXPECT_EQ(Parsed("12.5%"), 12'500u);
  EXPECT_EQ(Parsed("0.5%"), 500u);
  EXPECT_EQ(Parsed("0.125%"), 125u);
  EXPECT_EQ(Parsed("0.001%"), 1u);
  EXPECT_EQ(Parsed("33.30%"), 33'300u);
  EXPECT_EQ(Parsed("1.0%"), 1'000u);
}

TEST(ParseCpuShare, AcceptsUpToTheMaximum) { EXPECT_EQ(Parsed("10000000%"), kMaxCpuShare); }

struct Refused {
  std::string_view text;
  std::string_view problem;
};

TEST(ParseCpuShare, RefusesWithTheProblemAndTheAcceptedForm) {
  const Refused cases[] = {
      {"", "empty"},
      {"50", "missing '%'; write \"50%\" for 50% of one CPU"},
      {"0.5", "missing '%'; write \"0.5%\" for 0.5% of one CPU"},
      {"0%", "must be greater than 0%; leave cpu_max out for no limit"},
      {"0.000%", "must be greater than 0%"},
      {"-50%", "a sign is not allowed"},
      {"+50%", "a sign is not allowed"},
      {"12.3456%", "more than 3 decimals"},
      {"12,5%", "the decimal point is '.', not ','"},
      {".5%", "missing digit before '.'; write \"0.5%\""},
      {"5.%", "missing digits after '.'"},
      {"%", "missing number"},
      {"half", "missing number"},
      {"50 %", "spaces are not allowed"},
      {" 50%", "spaces are not allowed"},
      {"50% # half", "a '#' inside the quotes is not a comment; end the string before it: \"50%\""},
      {"50%%", "unexpected character '%' after '%'"},
      {"50%cpu", "unexpected character 'c' after '%'"},
      {"1.5cpu", "unexpected character 'c'"},
      {"0.5x", "unexpected character 'x'"},
      {"10000000.001%", "above the maximum of 10000000%"},
      {"99999999999999999999999%", "above the maximum of 10000000%"},
  };
  for (const Refused& c : cases) {
    Result<uint64_t> result = ParseCpuShare(c.text);
    ASSERT_FALSE(result.ok()) << "accepted \"" << c.text << "\"";
    const std::string& message = result.status().message();
    EXPECT_THAT(message, HasSubstr("invalid CPU share \"" + std::string(c.text) + "\": "));
    EXPECT_THAT(message, HasSubstr(std::string(c.problem))) << c.text;
    EXPECT_THAT(message, HasSubstr("such as \"50%\", \"150%\" (1.5 CPUs) or \"12.5%\" (at most 3 "
                                   "decimals)"))
        << c.text;
  }
}

TEST(CpuQuotaUs, IsShareTimesPeriodOver100) {
  EXPECT_EQ(CpuQuotaUs(50'000, 100'000), 50'000u);    // "50%" of the default period.
  EXPECT_EQ(CpuQuotaUs(150'000, 100'000), 150'000u);  // 1.5 CPUs.
  EXPECT_EQ(CpuQuotaUs(12'500, 100'000), 12'500u);
  EXPECT_EQ(CpuQuotaUs(20'000, 1'000'000), 200'000u);  // "20%" of 1s.
  EXPECT_EQ(CpuQuotaUs(50'000, 1'000), 500u);          // Under the kernel's 1000 μs minimum.
}

TEST(CpuQuotaUs, RoundsToTheNearestMicrosecond) {
  EXPECT_EQ(CpuQuotaUs(12'345, 1'000), 123u);  // 123.45 μs.
  EXPECT_EQ(CpuQuotaUs(12'355, 1'000), 124u);  // 123.55 μs.
  EXPECT_EQ(CpuQuotaUs(12'350, 1'000), 124u);  // 123.5 μs: halves round up.
}

TEST(CpuQuotaUs, DoesNotOverflowAtTheLimits) {
  EXPECT_EQ(CpuQuotaUs(kMaxCpuShare, 1'000'000), 100'000ull * 1'000'000);
}

}  // namespace
}  // namespace bulkhead::config
