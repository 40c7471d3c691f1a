// SPDX-License-Identifier: MIT
// ctl::ParseDuration accepts and refuses exactly what config::ParseDuration does, with the same
// values, so that --timeout reads like the config file.
#include "ctl/duration.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/duration.h"

namespace bulkhead::ctl {
namespace {

using std::chrono::milliseconds;

TEST(CtlParseDuration, ParsesTheConfigForms) {
  EXPECT_EQ(ParseDuration("500ms").value(), milliseconds(500));
  EXPECT_EQ(ParseDuration("2s").value(), milliseconds(2000));
  EXPECT_EQ(ParseDuration("1m30s").value(), milliseconds(90000));
  EXPECT_EQ(ParseDuration("1h2m3s4ms").value(), milliseconds(3723004));
  EXPECT_EQ(ParseDuration("0s").value(), milliseconds(0));
  EXPECT_EQ(ParseDuration("24h").value(), milliseconds(86400000));
}

TEST(CtlParseDuration, RefusesWithAMessageQuotingTheText) {
  Result<milliseconds> bare = ParseDuration("5");
  ASSERT_FALSE(bare.ok());
  EXPECT_NE(bare.status().message().find("\"5\""), std::string::npos) << bare.status().message();
  EXPECT_NE(bare.status().message().find("500ms"), std::string::npos) << bare.status().message();
}

TEST(CtlParseDuration, AgreesWithTheConfigParser) {
  const std::vector<std::string> inputs = {
      "",          "0",          "5",
      "0ms",       "1ms",        "500ms",
      "2s",        "1m30s",      "1h",
      "24h",       "24h1ms",     "25h",
      "1440m",     "86400000ms", "86400001ms",
      "30s1m",     "1s1s",       "1.5s",
      "1,5s",      "-1s",        "+1s",
      " 1s",       "1s ",        "1 s",
      "5sec",      "ms",         "s5",
      "1m30",      "1S",         "1MS",
      "10x",       "1h1m1s1ms",  "99999999999999999999999s",
      "0h0m0s0ms", "1_000ms",    "1s!",
      "m1s",       "00001s",     "1h30s",
      "1ms1s",     "h",          "1d",
      "1us",       "1Ms",
  };
  for (const std::string& input : inputs) {
    Result<milliseconds> ours = ParseDuration(input);
    Result<milliseconds> config = config::ParseDuration(input);
    ASSERT_EQ(ours.ok(), config.ok())
        << "\"" << input << "\": ctl says " << (ours.ok() ? "ok" : ours.status().message())
        << ", config says " << (config.ok() ? "ok" : config.status().message());
    if (ours.ok()) {
      EXPECT_EQ(*ours, *config) << "\"" << input << "\"";
    }
  }
}

}  // namespace
}  // namespace bulkhead::ctl
