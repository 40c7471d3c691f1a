// SPDX-License-Identifier: MIT
// ParseListenAddress, `[supervisor] metrics_listen` and a cell's `listen`: TCP and Unix forms,
// overlapping addresses, and errors that name file:line:col and the key.
#include "config/listen_address.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

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

TEST(ListenAddress, OverlapsOnTheSamePortAtTheSameOrAWildcardAddress) {
  auto overlaps = [](std::string_view a, std::string_view b) {
    return ParseListenAddress(a)->Overlaps(ParseListenAddress(b).value());
  };
  EXPECT_TRUE(overlaps("127.0.0.1:8081", "127.0.0.1:8081"));
  EXPECT_TRUE(overlaps("0.0.0.0:8081", "127.0.0.1:8081"));
  EXPECT_TRUE(overlaps("127.0.0.1:8081", "0.0.0.0:8081"));
  EXPECT_TRUE(overlaps("[::1]:9000", "[0:0::1]:9000"));  // one address, two spellings
  EXPECT_TRUE(overlaps("[::]:9000", "[::1]:9000"));
  EXPECT_FALSE(overlaps("127.0.0.1:8081", "127.0.0.1:8082"));
  EXPECT_FALSE(overlaps("127.0.0.1:8081", "127.0.0.2:8081"));
  // Bound IPV6_V6ONLY: the IPv6 wildcard leaves IPv4 alone.
  EXPECT_FALSE(overlaps("[::]:8081", "0.0.0.0:8081"));
  // Port 0 is a fresh port for each.
  EXPECT_FALSE(overlaps("127.0.0.1:0", "127.0.0.1:0"));
  EXPECT_FALSE(overlaps("/run/a.sock", "/run/a.sock"));  // Unix paths are SocketChecks' business
}

TEST(ListenAddress, FromSockaddrGivesBackWhatToSockaddrMade) {
  for (const char* text : {"127.0.0.1:8081", "[::1]:9000", "0.0.0.0:0", "[fe80::1]:65535"}) {
    Result<ListenAddress> address = ParseListenAddress(text);
    ASSERT_TRUE(address.ok()) << text;
    const sockaddr_storage addr = address->ToSockaddr();
    Result<ListenAddress> back =
        ListenAddressFromSockaddr(reinterpret_cast<const sockaddr*>(&addr));
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(back->ToString(), text);
  }
  sockaddr_storage unix_addr{};
  unix_addr.ss_family = AF_UNIX;
  EXPECT_FALSE(ListenAddressFromSockaddr(reinterpret_cast<const sockaddr*>(&unix_addr)).ok());
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

// A cell with `listen` = `listen_value`, after `supervisor` lines.
LoadResult ParseCellListen(const std::string& listen_value, const std::string& supervisor = "",
                           const std::string& more_cells = "") {
  return ParseConfig("[supervisor]\nruntime_dir = \"/run/x\"\n" + supervisor +
                         "[cells.a]\ncommand = [\"/bin/true\"]\nmax_concurrent = 1\nlisten = " +
                         listen_value + "\n" + more_cells,
                     "/etc/b.toml");
}

std::string Errors(const LoadResult& result) {
  std::string out;
  for (const ConfigError& error : result.errors) out += error.ToString() + "\n";
  return out;
}

TEST(CellListen, DefaultsToNoTcpAddress) {
  LoadResult result =
      ParseConfig(std::string("[supervisor]\nruntime_dir = \"/run/x\"\n") + kCell, "/etc/b.toml");
  ASSERT_TRUE(result.config.has_value()) << Errors(result);
  EXPECT_TRUE(result.config->cells[0].listen.empty());
  EXPECT_EQ(result.config->cells[0].socket, "/run/x/a.sock");
}

TEST(CellListen, TakesTcpAddressesBesideTheUnixSocket) {
  LoadResult result = ParseCellListen(R"(["127.0.0.1:8081", "[::1]:9000", "0.0.0.0:0"])");
  ASSERT_TRUE(result.config.has_value()) << Errors(result);
  const CellConfig& cell = result.config->cells[0];
  ASSERT_EQ(cell.listen.size(), 3u);
  EXPECT_EQ(cell.listen[0].ToString(), "127.0.0.1:8081");
  EXPECT_EQ(cell.listen[1].ToString(), "[::1]:9000");
  EXPECT_TRUE(cell.listen[1].is_v6());
  EXPECT_EQ(cell.listen[2].port, 0);
  EXPECT_EQ(cell.socket, "/run/x/a.sock") << "the Unix socket stays";
}

TEST(CellListen, BadAddressesNameTheirElement) {
  LoadResult result =
      ParseCellListen(R"(["127.0.0.1:8081", "localhost:80", 8082, "/run/x/a.sock"])");
  ASSERT_FALSE(result.config.has_value());
  EXPECT_EQ(Errors(result),
            "/etc/b.toml:6:29: cells.a.listen[1]: host must be a numeric IPv4 or [IPv6] address, "
            "got \"localhost\"\n"
            "/etc/b.toml:6:45: cells.a.listen[2]: expected string, got integer (quote it)\n"
            "/etc/b.toml:6:51: cells.a.listen[3]: must be a TCP address HOST:PORT with a numeric "
            "IPv4 address or a bracketed IPv6 one, as in \"127.0.0.1:8081\", \"[::1]:8081\", or "
            "\"0.0.0.0:8081\" / \"[::]:8081\" for every address (the cell's Unix socket is "
            "`socket`), got \"/run/x/a.sock\"\n");

  LoadResult not_array = ParseCellListen(R"("127.0.0.1:8081")");
  EXPECT_THAT(Errors(not_array),
              ::testing::HasSubstr("/etc/b.toml:6:10: cells.a.listen: expected array of strings, "
                                   "got string"));
}

// An address without a port gets the forms `listen` takes, not ParseListenAddress's "HOST:PORT
// or an absolute Unix socket path" (`listen` refuses Unix paths).
TEST(CellListen, AddressWithoutAPortGetsTheFormsListenTakes) {
  LoadResult result = ParseCellListen(R"(["127.0.0.1", "[::1]", "localhost"])");
  ASSERT_FALSE(result.config.has_value());
  const std::string forms =
      "expected HOST:PORT with a numeric IPv4 address or a bracketed IPv6 one, as in "
      "\"127.0.0.1:8081\", \"[::1]:8081\", or \"0.0.0.0:8081\" / \"[::]:8081\" for every address "
      "(the port is required), got ";
  EXPECT_EQ(Errors(result), "/etc/b.toml:6:11: cells.a.listen[0]: " + forms + "\"127.0.0.1\"\n" +
                                "/etc/b.toml:6:24: cells.a.listen[1]: " + forms + "\"[::1]\"\n" +
                                "/etc/b.toml:6:33: cells.a.listen[2]: " + forms +
                                "\"localhost\"\n");
  EXPECT_THAT(Errors(result), ::testing::Not(::testing::HasSubstr("Unix socket path")));
}

TEST(CellListen, RefusesAnAddressUsedTwice) {
  // Within the cell, across cells, with a wildcard address, and with metrics_listen.
  LoadResult result = ParseCellListen(
      R"(["127.0.0.1:8081", "127.0.0.1:8081"])", "metrics_listen = \"127.0.0.1:9464\"\n",
      "[cells.b]\ncommand = [\"/bin/true\"]\nmax_concurrent = 1\n"
      "listen = [\"0.0.0.0:8081\", \"127.0.0.1:9464\", \"127.0.0.1:0\", \"127.0.0.1:0\"]\n");
  ASSERT_FALSE(result.config.has_value());
  EXPECT_EQ(Errors(result),
            "/etc/b.toml:7:29: cells.a.listen[1]: 127.0.0.1:8081 is also used by "
            "cells.a.listen[0]\n"
            "/etc/b.toml:11:11: cells.b.listen[0]: 0.0.0.0:8081 overlaps 127.0.0.1:8081 of "
            "cells.a.listen[0] (the same port on the same address, or on a wildcard address, "
            "which takes it on every address of its family)\n"
            "/etc/b.toml:11:27: cells.b.listen[1]: 127.0.0.1:9464 is also used by "
            "supervisor.metrics_listen\n");
}

}  // namespace
}  // namespace bulkhead::config
