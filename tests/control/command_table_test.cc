// SPDX-License-Identifier: MIT
// CommandTable: a request line becomes one row's handler call, with what every command shares
// (the line, the credentials, the "cell" argument, unknown commands) answered in one place, row by
// row without a socket or a supervisor.
#include "control/command_table.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace bulkhead::control {
namespace {

using ::testing::HasSubstr;

constexpr uid_t kOwnUid = 1000;

ControlPeer Peer(uid_t uid) {
  ControlPeer peer;
  peer.uid = uid;
  peer.gid = uid;
  return peer;
}

// Handlers that answer {"ok":true,"command":NAME,"cell":CELL} and record each call.
class CommandTableTest : public ::testing::Test {
 protected:
  CommandTableTest()
      : table_(ControlAccess(kOwnUid, std::nullopt), Handlers(), [] {
          return std::vector<std::string>{"payments", "catalog"};
        }) {}

  CommandHandlers Handlers() {
    CommandHandler record = [this](const CommandCall& call) {
      calls_.push_back(std::string(call.row.name) + " " + call.cell);
      return nlohmann::json({{"ok", true}, {"command", call.row.name}, {"cell", call.cell}}).dump();
    };
    return CommandHandlers{.status = record,
                           .metrics = record,
                           .logs = record,
                           .reload = record,
                           .start = record,
                           .stop = record,
                           .restart = record,
                           .reexec = record};
  }
  nlohmann::json Ask(const std::string& line, uid_t uid = kOwnUid) {
    return nlohmann::json::parse(table_.Handle(line, Peer(uid)));
  }

  CommandTable table_;
  std::vector<std::string> calls_;
};

TEST_F(CommandTableTest, EachCommandReachesItsOwnHandlerWithItsCell) {
  EXPECT_EQ(Ask(R"({"command":"status"})")["command"], "status");
  EXPECT_EQ(Ask(R"({"command":"status","cell":"catalog"})")["cell"], "catalog");
  EXPECT_EQ(Ask(R"({"command":"status","cell":""})")["cell"], "");
  EXPECT_EQ(Ask(R"({"command":"metrics","cell":42})")["command"], "metrics");  // ignored
  EXPECT_EQ(Ask(R"({"command":"reload"})")["command"], "reload");
  for (const char* command : {"start", "stop", "restart", "logs"}) {
    nlohmann::json answer =
        Ask(std::string(R"({"command":")") + command + R"(","cell":"payments"})");
    EXPECT_EQ(answer["command"], command) << answer.dump();
    EXPECT_EQ(answer["cell"], "payments") << answer.dump();
  }
  EXPECT_EQ(calls_, (std::vector<std::string>{"status ", "status catalog", "status ", "metrics ",
                                              "reload ", "start payments", "stop payments",
                                              "restart payments", "logs payments"}));
}

TEST_F(CommandTableTest, EveryRowHasAUniqueNameAndFindCommandFindsIt) {
  std::set<std::string_view> names;
  for (const CommandRow& row : kCommandRows) {
    EXPECT_TRUE(names.insert(row.name).second) << row.name;
    EXPECT_EQ(FindCommand(row.name), &row);
  }
  EXPECT_EQ(FindCommand("Status"), nullptr);
  EXPECT_EQ(FindCommand(""), nullptr);
}

TEST_F(CommandTableTest, MalformedRequestsAreAnsweredWithoutAHandler) {
  EXPECT_EQ(Ask("not json")["error"], "request is not a JSON object");
  EXPECT_EQ(Ask("[1,2]")["error"], "request is not a JSON object");
  EXPECT_EQ(Ask(R"({"cell":"payments"})")["error"], "request has no \"command\" string");
  EXPECT_EQ(Ask(R"({"command":7})")["error"], "request has no \"command\" string");
  EXPECT_TRUE(calls_.empty());
}

TEST_F(CommandTableTest, TheCellArgumentIsCheckedAsTheRowSays) {
  EXPECT_EQ(Ask(R"({"command":"stop"})")["error"], "\"stop\" needs a \"cell\" string");
  EXPECT_EQ(Ask(R"({"command":"logs","cell":3})")["error"], "\"logs\" needs a \"cell\" string");
  EXPECT_EQ(Ask(R"({"command":"start","cell":"nosuch"})")["error"], "no cell named nosuch");
  EXPECT_EQ(Ask(R"({"command":"restart","cell":""})")["error"], "no cell named ");
  EXPECT_EQ(Ask(R"({"command":"status","cell":3})")["error"], "\"cell\" must be a string");
  EXPECT_EQ(Ask(R"({"command":"status","cell":"nosuch"})")["error"], "no cell named nosuch");
  EXPECT_TRUE(calls_.empty());
}

// `bulkheadctl restart Payments`: a near miss of a cell's name gets the closest, as an unknown
// command does.
TEST_F(CommandTableTest, AnUnknownCellOffersTheClosestName) {
  for (const char* command : {"start", "stop", "restart", "logs", "status"}) {
    EXPECT_EQ(Ask(std::string(R"({"command":")") + command + R"(","cell":"Payments"})")["error"],
              "no cell named Payments; did you mean \"payments\"?")
        << command;
  }
  EXPECT_EQ(Ask(R"({"command":"restart","cell":"catalgo"})")["error"],
            "no cell named catalgo; did you mean \"catalog\"?");
  EXPECT_TRUE(calls_.empty());
}

TEST_F(CommandTableTest, AnUnknownCommandNamesTheKnownOnesAndTheClosest) {
  nlohmann::json answer = Ask(R"({"command":"restat","cell":"payments"})");
  EXPECT_EQ(answer["ok"], false);
  EXPECT_EQ(answer["error"],
            "unknown command \"restat\"; did you mean \"restart\"? (commands: status, metrics, "
            "start, stop, restart, logs, reload, reexec)");
  answer = Ask(R"({"command":"frobnicate"})");
  EXPECT_EQ(answer["error"],
            "unknown command \"frobnicate\" (commands: status, metrics, start, stop, restart, "
            "logs, reload, reexec)");
  EXPECT_TRUE(calls_.empty());
}

// docs/control.md, "Credentials": a caller who may only read is refused anything else before the
// request is looked at further, an unknown command included (it is not read-only).
TEST_F(CommandTableTest, ACallerWhoMayOnlyReadIsRefusedBeforeAnythingElse) {
  EXPECT_EQ(Ask(R"({"command":"status"})", 65534)["ok"], true);
  EXPECT_EQ(Ask(R"({"command":"metrics"})", 65534)["ok"], true);
  nlohmann::json refused = Ask(R"({"command":"stop"})", 65534);
  EXPECT_EQ(refused["error"], "permission denied: uid 65534 may not stop cells");
  EXPECT_EQ(refused["code"], "permission_denied");
  EXPECT_EQ(Ask(R"({"command":"logs","cell":"payments"})", 65534)["error"],
            "permission denied: uid 65534 may not run \"logs\"");
  refused = Ask(R"({"command":"restat"})", 65534);
  EXPECT_EQ(refused["error"], "permission denied: uid 65534 may not run \"restat\"");
  EXPECT_EQ(refused["code"], "permission_denied");
  EXPECT_EQ(calls_, (std::vector<std::string>{"status ", "metrics "}));
}

TEST(CommandRows, AccessFollowsTheRow) {
  for (const CommandRow& row : kCommandRows) {
    EXPECT_EQ(ControlAccess::IsReadOnly(row.name), row.access == CommandAccess::kAnyone)
        << row.name;
  }
  EXPECT_TRUE(ControlAccess::IsReadOnly("status"));
  EXPECT_TRUE(ControlAccess::IsReadOnly("metrics"));
  EXPECT_FALSE(ControlAccess::IsReadOnly("reload"));
  EXPECT_FALSE(ControlAccess::IsReadOnly("no-such-command"));
}

}  // namespace
}  // namespace bulkhead::control
