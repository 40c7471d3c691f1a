// SPDX-License-Identifier: MIT
// A cell's TCP `listen` addresses end to end: frame requests over TCP beside the Unix socket, the
// bound port of "127.0.0.1:0" in status and `bulkheadctl status`, one connection limit over both,
// a bind error at startup that names the cell and the address, and a reload that would change the
// addresses refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/exit_status.h"
#include "tests/e2e/e2e_test.h"

namespace bulkhead::e2e {
namespace {

using testing::ConnectTcp;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;

// The cell's first listen address as status reports it (the port the kernel picked for port 0).
std::string FirstListenAddress(Harness& h, const std::string& cell) {
  nlohmann::json c = h.Cell(cell);
  if (!c.is_object() || !c["listen"].is_array() || c["listen"].empty()) return "";
  return c["listen"][0].get<std::string>();
}

Result<ipc::Client> ConnectClient(const std::string& address) {
  Result<UniqueFd> fd = ConnectTcp(address);
  if (!fd.ok()) return fd.status();
  ipc::Client client = ipc::Client::FromFd(std::move(fd).value(), address);
  Status timeout = client.SetTimeout(std::chrono::seconds(10));
  if (!timeout.ok()) return timeout;
  return client;
}

TEST(Listen, FrameRequestsOverTcpBesideTheUnixSocket) {
  Harness h(TestOptions(
      {CellSpec{.name = "c", .max_concurrent = 2, .extra_toml = "listen = [\"127.0.0.1:0\"]\n"}}));
  ASSERT_STARTED(h);
  const std::string address = FirstListenAddress(h, "c");
  ASSERT_THAT(address, MatchesRegex("127\\.0\\.0\\.1:[1-9][0-9]*")) << h.Cell("c").dump();

  Result<ipc::Client> tcp = ConnectClient(address);
  ASSERT_TRUE(tcp.ok()) << tcp.status().message();
  EXPECT_OK_REPLY(tcp->Call("echo over tcp"), "over tcp");
  // Several on one connection, as on the Unix socket.
  EXPECT_OK_REPLY(tcp->Call("echo again"), "again");
  EXPECT_OK_REPLY(h.Call("c", "echo over unix"), "over unix");
  EXPECT_EQ(h.Cell("c")["ok"], 3) << h.Cell("c").dump();

  Result<ProcessResult> status = h.Ctl({"status", "c"});
  ASSERT_TRUE(status.ok()) << status.status().message();
  EXPECT_THAT(status->out, HasSubstr("    listen:            " + address + "\n")) << status->out;
}

TEST(Listen, OneConnectionLimitOverTcpAndUnix) {
  Harness h(TestOptions(
      {CellSpec{.name = "c", .extra_toml = "listen = [\"127.0.0.1:0\"]\nmax_connections = 2\n"}}));
  ASSERT_STARTED(h);
  const std::string address = FirstListenAddress(h, "c");
  Result<ipc::Client> unix_client = h.Connect("c");
  ASSERT_TRUE(unix_client.ok()) << unix_client.status().message();
  Result<ipc::Client> tcp = ConnectClient(address);
  ASSERT_TRUE(tcp.ok()) << tcp.status().message();
  ASSERT_TRUE(h.WaitForCell("c", [](const nlohmann::json& c) { return c["clients"] == 2; }));

  Result<ipc::Client> third = ConnectClient(address);
  ASSERT_TRUE(third.ok()) << third.status().message();
  Result<ipc::Client::Reply> refused = third->Call("echo x");
  EXPECT_TRUE(IsReply(refused, ipc::ReplyStatus::kRejected, ipc::Reason::kTooManyConnections))
      << Describe(refused);
  EXPECT_EQ(h.Cell("c")["connections_refused"], 1);
  EXPECT_OK_REPLY(tcp->Call("echo kept"), "kept");
}

TEST(Listen, ABindErrorAtStartupNamesTheCellAndTheAddress) {
  Result<testing::TcpListener> held = testing::ListenTcpLoopback();  // holds the port
  ASSERT_TRUE(held.ok()) << held.status().message();
  const std::string taken = held->address;

  Harness h(TestOptions({CellSpec{.name = "c", .extra_toml = "listen = [\"" + taken + "\"]\n"}}));
  Result<ProcessResult> run =
      RunProcess({BulkheaddPath(), "--config", h.config_path()}, "", std::chrono::seconds(20));
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_NE(run->exit_code(), 0) << run->Describe();
  EXPECT_THAT(run->err, HasSubstr("cells.c: listen " + taken + ": ")) << run->Describe();
  EXPECT_THAT(run->err, HasSubstr("address already in use")) << run->Describe();
  // docs/config.md quotes the message for 127.0.0.1:8081: it is the one written (issue 25
  // section 7; the doc said "bind:" where the message says "listen:").
  const std::string prefix = "cells.c: listen " + taken + ": ";
  const size_t at = run->err.find(prefix);
  ASSERT_NE(at, std::string::npos) << run->Describe();
  std::string said = run->err.substr(at + prefix.size());
  said = said.substr(0, said.find_first_of("\"\n"));  // the log line quotes the message
  const std::string doc =
      testing::ReadFile(std::string(BULKHEAD_SOURCE_DIR) + "/docs/config.md").value_or("");
  EXPECT_NE(doc.find("`cells.NAME: listen 127.0.0.1:8081: " + said + "`"), std::string::npos)
      << "docs/config.md does not quote: " << said;
}

TEST(Listen, AReloadThatChangesTheAddressesIsRefused) {
  CellSpec cell{.name = "c", .extra_toml = "listen = [\"127.0.0.1:0\"]\n"};
  Harness h(TestOptions({cell}));
  ASSERT_STARTED(h);
  const std::string address = FirstListenAddress(h, "c");

  CellSpec moved = cell;
  moved.extra_toml = "listen = [\"127.0.0.1:0\", \"[::1]:0\"]\n";
  h.RewriteConfig({moved});
  Result<ProcessResult> run = h.Ctl({"reload"});
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->exit_code(), kExitConfigInvalid) << run->Describe();
  // Placed at the new value (file:line:col), not at the [cells.c] header.
  const std::string place = PlaceInConfig(h.config_path(), "listen = ");
  ASSERT_NE(place, "");
  EXPECT_THAT(run->err,
              HasSubstr(place + ": cells.c.listen: a running cell's TCP addresses are bound "
                                "when it is added and cannot change by reload"));
  EXPECT_EQ(FirstListenAddress(h, "c"), address);
  EXPECT_EQ(h.Cell("c")["listen"].size(), 1u);
  Result<ipc::Client> tcp = ConnectClient(address);
  ASSERT_TRUE(tcp.ok()) << tcp.status().message();
  EXPECT_OK_REPLY(tcp->Call("echo still"), "still");
}

}  // namespace
}  // namespace bulkhead::e2e
