// SPDX-License-Identifier: MIT
// QueryControl against fake supervisors: a good answer (split across writes), no listener, a
// supervisor that hangs up or never answers (the deadline holds), and an answer that is not JSON.
#include "ctl/control_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <fstream>

#include "tests/ctl/fake_server.h"

namespace bulkhead::ctl {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

Deadline In(milliseconds ms) { return Clock::now() + ms; }

// Reads one request line (up to '\n') from `fd`.
std::string ReadLine(int fd) {
  std::string line;
  char c;
  while (::read(fd, &c, 1) == 1 && c != '\n') line += c;
  return line;
}

TEST(QueryControl, SendsOneLineAndParsesTheResponse) {
  std::string seen;
  {
    FakeServer server([&](int fd) {
      seen = ReadLine(fd);
      FakeServer::Write(fd, R"({"ok":true,)");
      FakeServer::Write(fd, R"("cells":[]})"
                            "\n");
      FakeServer::ReadToEnd(fd);
    });
    ASSERT_EQ(server.error(), "");
    ControlReply reply =
        QueryControl(server.path(), StatusRequest("payments"), In(milliseconds(5000)));
    ASSERT_TRUE(reply.response.has_value()) << reply.error;
    EXPECT_EQ(*reply.response, nlohmann::json::parse(R"({"ok":true,"cells":[]})"));
  }
  EXPECT_EQ(nlohmann::json::parse(seen),
            nlohmann::json::parse(R"({"command":"status","cell":"payments"})"));
}

TEST(QueryControl, NoListenerIsUnreachableAndNamesThePath) {
  testing::TempDir dir;
  const std::string path = dir.Join("control.sock");
  ControlReply reply = QueryControl(path, StatusRequest(), In(milliseconds(5000)));
  EXPECT_FALSE(reply.response.has_value());
  EXPECT_TRUE(reply.unreachable);
  EXPECT_EQ(reply.error, path + ": cannot connect: No such file or directory");
}

// Only a missing socket, or one nobody listens on, asks whether bulkheadd runs: a file that is no
// socket, or a socket the caller may not open, says what failed.
TEST(QueryControl, ASocketThatCannotBeOpenedSaysWhatFailed) {
  testing::TempDir dir;
  const std::string path = dir.Join("control.sock");
  EXPECT_THAT(DescribeUnreachable(QueryControl(path, StatusRequest(), In(milliseconds(5000)))),
              ::testing::HasSubstr("(is it running? "));
  std::ofstream(path) << "not a socket";
  ControlReply file = QueryControl(path, StatusRequest(), In(milliseconds(5000)));
  EXPECT_TRUE(file.unreachable);
  EXPECT_EQ(file.connect_error, ENOTSOCK);
  EXPECT_EQ(DescribeUnreachable(file),
            "cannot reach bulkheadd at " + path +
                ": is not a socket (bulkheadd's control socket is not at this path; --socket or "
                "$BULKHEAD_SOCKET selects another control socket)");
  ControlReply denied;
  denied.unreachable = true;
  denied.error = path + ": cannot connect: Permission denied";
  denied.connect_error = EACCES;
  const std::string said = DescribeUnreachable(denied);
  EXPECT_THAT(said, ::testing::HasSubstr("Permission denied (permission denied: run as root or as "
                                         "a member of the group that owns the socket"));
  EXPECT_THAT(said, ::testing::Not(::testing::HasSubstr("is it running")));
}

TEST(QueryControl, HangUpBeforeAnsweringIsUnreachable) {
  FakeServer server([](int fd) { ReadLine(fd); });
  ControlReply reply = QueryControl(server.path(), StatusRequest(), In(milliseconds(5000)));
  EXPECT_FALSE(reply.response.has_value());
  EXPECT_TRUE(reply.unreachable);
  EXPECT_NE(reply.error.find("connection closed before a response"), std::string::npos)
      << reply.error;
}

// A cell's front socket given as the control socket answers the request line with a frame and
// closes: named as a socket that did not answer as bulkheadd's control socket, maybe a cell's.
TEST(QueryControl, BytesWithoutAResponseLineDidNotAnswerAsAControlSocket) {
  FakeServer server([](int fd) {
    ReadLine(fd);
    FakeServer::Write(fd, std::string("\0\0\0\x2a\x01\x02\x03\x20"
                                      "bad frame",
                                      17));
  });
  ControlReply reply = QueryControl(server.path(), StatusRequest(), In(milliseconds(5000)));
  EXPECT_FALSE(reply.response.has_value());
  EXPECT_TRUE(reply.unreachable);
  EXPECT_TRUE(reply.not_control);
  EXPECT_EQ(reply.error, server.path() +
                             ": did not answer as a bulkheadd control socket: it sent 17 bytes and "
                             "closed without a response line");
  EXPECT_EQ(DescribeUnreachable(reply),
            "cannot reach bulkheadd at " + reply.error +
                " (is it a cell's socket? --socket or $BULKHEAD_SOCKET selects another control "
                "socket)");
}

TEST(QueryControl, DeadlineBoundsASilentSupervisor) {
  FakeServer server([](int fd) { FakeServer::ReadToEnd(fd); });
  auto start = Clock::now();
  ControlReply reply = QueryControl(server.path(), StatusRequest(), In(milliseconds(200)));
  auto elapsed = Clock::now() - start;
  EXPECT_FALSE(reply.response.has_value());
  EXPECT_TRUE(reply.unreachable);
  EXPECT_NE(reply.error.find("timed out waiting for a response"), std::string::npos) << reply.error;
  EXPECT_GE(elapsed, milliseconds(200));  // never gives up early
}

TEST(QueryControl, ResponseThatIsNotJsonIsAProtocolError) {
  FakeServer server([](int fd) {
    ReadLine(fd);
    FakeServer::Write(fd, "hello\n");
    FakeServer::ReadToEnd(fd);
  });
  ControlReply reply = QueryControl(server.path(), StatusRequest(), In(milliseconds(5000)));
  EXPECT_FALSE(reply.response.has_value());
  EXPECT_FALSE(reply.unreachable);
  EXPECT_TRUE(reply.not_control);
  EXPECT_NE(reply.error.find("not a JSON object: hello"), std::string::npos) << reply.error;
  EXPECT_EQ(reply.error.rfind(server.path() + ": did not answer as a bulkheadd control socket", 0),
            0u)
      << reply.error;
}

TEST(InterpretCellCommand, AcceptedAndAlreadyThereSucceed) {
  CommandOutcome accepted = InterpretCellCommand(
      "restart", nlohmann::json::parse(R"({"ok":true,"cell":"a","result":"ok"})"));
  EXPECT_TRUE(accepted.success);
  EXPECT_EQ(accepted.note, "");

  CommandOutcome started = InterpretCellCommand(
      "start",
      nlohmann::json::parse(
          R"({"ok":false,"cell":"a","result":"already started","error":"already started"})"));
  EXPECT_TRUE(started.success);
  EXPECT_EQ(started.note, "already started");

  CommandOutcome stopped = InterpretCellCommand(
      "stop",
      nlohmann::json::parse(
          R"({"ok":false,"cell":"a","result":"already stopped","error":"already stopped"})"));
  EXPECT_TRUE(stopped.success);
  EXPECT_EQ(stopped.note, "already stopped");
}

// A second `restart` while one is under way joins it, as a second `systemctl restart` does; so does
// a second `stop`.
TEST(InterpretCellCommand, ASecondRestartOrStopUnderWaySucceeds) {
  CommandOutcome restart = InterpretCellCommand(
      "restart",
      nlohmann::json::parse(
          R"({"ok":false,"cell":"a","result":"restart in progress","error":"restart in progress"})"));
  EXPECT_TRUE(restart.success);
  EXPECT_EQ(restart.note, "restart in progress");
  CommandOutcome stop = InterpretCellCommand(
      "stop",
      nlohmann::json::parse(
          R"({"ok":false,"cell":"a","result":"stop in progress","error":"stop in progress"})"));
  EXPECT_TRUE(stop.success);
  EXPECT_EQ(stop.note, "stop in progress");
  // A restart refused because a stop is under way stays a refusal.
  CommandOutcome crossed = InterpretCellCommand(
      "restart",
      nlohmann::json::parse(
          R"({"ok":false,"cell":"a","result":"stop in progress","error":"stop in progress"})"));
  EXPECT_FALSE(crossed.success);
}

TEST(InterpretCellCommand, OtherRefusalsFail) {
  // "already started" is success for start only.
  CommandOutcome crossed = InterpretCellCommand(
      "stop",
      nlohmann::json::parse(
          R"({"ok":false,"cell":"a","result":"already started","error":"already started"})"));
  EXPECT_FALSE(crossed.success);
  EXPECT_EQ(crossed.error, "already started");

  CommandOutcome busy = InterpretCellCommand(
      "start",
      nlohmann::json::parse(
          R"({"ok":false,"cell":"a","result":"restart in progress","error":"restart in progress"})"));
  EXPECT_FALSE(busy.success);
  EXPECT_EQ(busy.error, "restart in progress");

  CommandOutcome unknown = InterpretCellCommand(
      "start", nlohmann::json::parse(R"({"ok":false,"error":"no cell named x"})"));
  EXPECT_FALSE(unknown.success);
  EXPECT_EQ(unknown.error, "no cell named x");

  CommandOutcome odd = InterpretCellCommand("start", nlohmann::json::parse(R"({"ok":false})"));
  EXPECT_FALSE(odd.success);
  EXPECT_EQ(odd.error, R"(unexpected response {"ok":false})");
}

}  // namespace
}  // namespace bulkhead::ctl
