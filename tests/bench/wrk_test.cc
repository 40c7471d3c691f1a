// SPDX-License-Identifier: MIT
#include "bench/wrk.h"

#include <gtest/gtest.h>

#include <string>

namespace bulkhead::bench {
namespace {

// What wrk 4.1 prints with --latency and the bench's summary script (kWrkSummaryScript).
constexpr char kOutput[] =
    "Running 3s test @ http://127.0.0.1:40123/\n"
    "  1 threads and 16 connections\n"
    "  Thread Stats   Avg      Stdev     Max   +/- Stdev\n"
    "    Latency   325.32us  102.11us   2.91ms   86.13%\n"
    "    Req/Sec    48.97k     2.07k   52.05k    73.33%\n"
    "  Latency Distribution\n"
    "     50%  307.00us\n"
    "     99%  712.00us\n"
    "  146191 requests in 3.00s, 14.22MB read\n"
    "  Non-2xx or 3xx responses: 5\n"
    "Requests/sec:  48719.14\n"
    "Transfer/sec:      4.74MB\n"
    "bulkhead-bench-wrk: requests=146191 duration_us=3000622 p50_us=307 p99_us=712 status=5 "
    "connect=0 read=1 write=0 timeout=2\n";

TEST(WrkSummary, ReadsTheScriptsLineExactly) {
  Result<WrkSummary> summary = ParseWrkSummary(kOutput);
  ASSERT_TRUE(summary.ok()) << summary.status().message();
  EXPECT_EQ(summary->requests, 146191u);
  EXPECT_DOUBLE_EQ(summary->seconds, 3.000622);
  EXPECT_DOUBLE_EQ(summary->p50_us, 307);
  EXPECT_DOUBLE_EQ(summary->p99_us, 712);
  EXPECT_EQ(summary->status_errors, 5u);
  EXPECT_EQ(summary->socket_errors, 3u);
  EXPECT_NEAR(summary->rate(), 146191 / 3.000622, 1e-6);
}

TEST(WrkSummary, OutputWithoutTheLineIsAnError) {
  Result<WrkSummary> summary =
      ParseWrkSummary("unable to connect to 127.0.0.1:1 Connection refused\n");
  ASSERT_FALSE(summary.ok());
  EXPECT_NE(summary.status().message().find("no summary line"), std::string::npos);
}

TEST(WrkSummary, AMissingOrMalformedFieldIsNamed) {
  Result<WrkSummary> missing = ParseWrkSummary(
      "bulkhead-bench-wrk: requests=1 duration_us=2 p50_us=3 status=0 connect=0 read=0 write=0 "
      "timeout=0\n");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("p99_us"), std::string::npos);
  Result<WrkSummary> malformed = ParseWrkSummary(
      "bulkhead-bench-wrk: requests=1k duration_us=2 p50_us=3 p99_us=4 status=0 connect=0 read=0 "
      "write=0 timeout=0\n");
  ASSERT_FALSE(malformed.ok());
  EXPECT_NE(malformed.status().message().find("requests is not a number"), std::string::npos);
}

}  // namespace
}  // namespace bulkhead::bench
