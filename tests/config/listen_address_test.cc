// SPDX-License-Identifier: MIT
// ParseListenAddress and `[supervisor] metrics_listen`: TCP and Unix forms, and errors that name
// file:line:col and the key.
#include "config/listen_address.h"

#include <gtest/gtest.h>

#include "config/config.h"

namespace bulkhead::config {
namespace {

TEST(ListenAddress, ParsesIpv4Ipv6AndUnixPaths) {
  Result<ListenAddress> v4 = ParseListenAddress("127.0.0.1:9464");
  ASSERT_TRUE(v4.ok()) << v4.status().message();
  EXPECT_TRUE(v4->is_tcp());
  EXPECT_EQ(v4->host, "127.0.0.1");
  EXPECT_EQ(v4->port, 9464);
  EXPECT_EQ(v4->ToString(), "127.0.0.1:9464");

  Result<ListenAddress> v6 = ParseListenAddress("[::1]:0");
  ASSERT_TRUE(v6.ok()) << v6.status().message();
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 0);
  EXPECT_EQ(v6->ToString(), "[::1]:0");

  Result<ListenAddress> unix_path = ParseListenAddress("/run/bulkhead//metrics.sock");
  ASSERT_TRUE(unix_path.ok()) << unix_path.status().message();
  EXPECT_FALSE(unix_path->is_tcp());
  EXPECT_EQ(unix_path->path, "/run/bulkhead/metrics.sock");
}

TEST(ListenAddress, RefusesWhatItCannotBind) {
  EXPECT_EQ(ParseListenAddress("metrics.sock").status().message(),
            "expected HOST:PORT or an absolute Unix socket path, got \"metrics.sock\"");
  EXPECT_EQ(ParseListenAddress("127.0.0.1:99999").status().message(),
            "port must be 0 to 65535, got \"99999\"");
  EXPECT_EQ(ParseListenAddress("127.0.0.1:").status().message(),
            "port must be 0 to 65535, got \"\"");
  EXPECT_EQ(ParseListenAddress("localhost:9464").status().message(),
            "host must be a numeric IPv4 or [IPv6] address, got \"localhost\"");
  EXPECT_FALSE(ParseListenAddress("::1:9464").ok());  // IPv6 needs brackets
  EXPECT_FALSE(ParseListenAddress("").ok());
}

constexpr char kCell[] = "[cells.a]\ncommand = [\"/bin/true\"]\nmax_concurrent = 1\n";

TEST(MetricsListen, UnsetMeansNoEndpoint) {
  LoadResult result =
      ParseConfig(std::string("[supervisor]\nruntime_dir = \"/run/x\"\n") + kCell, "/etc/b.toml");
  ASSERT_TRUE(result.config.has_value());
  EXPECT_FALSE(result.config->supervisor.metrics_listen.has_value());
}

TEST(MetricsListen, AcceptsTcpAndUnix) {
  LoadResult tcp = ParseConfig(
      std::string("[supervisor]\nmetrics_listen = \"127.0.0.1:9464\"\n") + kCell, "/etc/b.toml");
  ASSERT_TRUE(tcp.config.has_value());
  ASSERT_TRUE(tcp.config->supervisor.metrics_listen.has_value());
  EXPECT_EQ(tcp.config->supervisor.metrics_listen->ToString(), "127.0.0.1:9464");

  LoadResult unix_path =
      ParseConfig(std::string("[supervisor]\nmetrics_listen = \"/run/x/metrics.sock\"\n") + kCell,
                  "/etc/b.toml");
  ASSERT_TRUE(unix_path.config.has_value());
  EXPECT_EQ(unix_path.config->supervisor.metrics_listen->path, "/run/x/metrics.sock");
}

TEST(MetricsListen, ErrorsNameFileLineColumnAndKey) {
  LoadResult bad = ParseConfig(
      std::string("[supervisor]\nmetrics_listen = \"localhost:9464\"\n") + kCell, "/etc/b.toml");
  ASSERT_FALSE(bad.config.has_value());
  ASSERT_EQ(bad.errors.size(), 1u);
  EXPECT_EQ(bad.errors[0].ToString(),
            "/etc/b.toml:2:18: supervisor.metrics_listen: host must be a numeric IPv4 or [IPv6] "
            "address, got \"localhost\"");

  LoadResult wrong_type =
      ParseConfig(std::string("[supervisor]\nmetrics_listen = 9464\n") + kCell, "/etc/b.toml");
  ASSERT_EQ(wrong_type.errors.size(), 1u);
  EXPECT_EQ(wrong_type.errors[0].ToString(),
            "/etc/b.toml:2:18: supervisor.metrics_listen: expected string, got integer");
}

}  // namespace
}  // namespace bulkhead::config
