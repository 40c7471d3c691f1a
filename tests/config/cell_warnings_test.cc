// SPDX-License-Identifier: MIT
// LoadResult::warnings: what is valid but likely wrong, each at file:line:col with its key, never
// refusing the file (issue 11 item 7: request_timeout without stall_timeout, stall_timeout below
// request_timeout; issue 13: a command that does not resolve to an executable, a relative script
// argument). Also start_timeout's forms.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <string>
#include <vector>

#include "base/temp_dir.h"
#include "config/config.h"

namespace bulkhead::config {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

class ConfigWarnings : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.Create("bh-cfgwarn").ok());
    file_ = dir_.Join("bulkhead.toml");
    // An executable the commands below may name.
    worker_ = dir_.Join("worker");
    std::ofstream(worker_) << "#!/bin/sh\nexit 0\n";
    ASSERT_EQ(::chmod(worker_.c_str(), 0755), 0);
  }

  // One cell "a" with `keys`; the file must be valid. Its warnings as "file:line:col: key: msg".
  std::vector<std::string> Warnings(const std::string& keys) {
    const std::string text =
        "[supervisor]\nruntime_dir = \"/run/bh\"\n[cells.a]\n"
        "max_concurrent = 1\n" +
        keys;
    LoadResult result = ParseConfig(text, file_);
    std::vector<std::string> lines;
    for (const ConfigError& error : result.errors) lines.push_back("error: " + error.ToString());
    EXPECT_TRUE(result.config.has_value()) << ::testing::PrintToString(lines);
    for (const ConfigError& warning : result.warnings) lines.push_back(warning.ToString());
    return lines;
  }
  // "file:line:col: cells.a.KEY: message", as ConfigError::ToString writes it.
  std::string At(int line, int column, const std::string& key, const std::string& message) {
    return file_ + ":" + std::to_string(line) + ":" + std::to_string(column) + ": cells.a." + key +
           ": " + message;
  }
  std::string Command() { return "command = [\"" + worker_ + "\"]\n"; }

  TempDir dir_;
  std::string file_;
  std::string worker_;
};

TEST_F(ConfigWarnings, RequestTimeoutWithoutStallTimeout) {
  EXPECT_THAT(Warnings(Command() + "request_timeout = \"2s\"\n"),
              ElementsAre(At(6, 19, "request_timeout",
                             "set without stall_timeout: a request answered FAILED timeout keeps "
                             "its slot until the worker answers, so a hung worker holds its "
                             "slots, and the cell, forever; set stall_timeout too (docs/config.md, "
                             "Restarts, \"Timeouts\")")));
}

TEST_F(ConfigWarnings, StallTimeoutShorterThanRequestTimeout) {
  EXPECT_THAT(
      Warnings(Command() + "stall_timeout = \"1s\"\nrequest_timeout = \"30s\"\n"),
      ElementsAre(At(6, 17, "stall_timeout",
                     "is shorter than request_timeout (\"30000ms\"): a worker with one request in "
                     "flight that is allowed \"30000ms\" is killed as stalled after \"1000ms\"; "
                     "make stall_timeout at least request_timeout")));
}

// restart_max_delay below start_limit_interval / start_limit_burst paces a crash loop faster than
// the start limit (it caps every wait): said at restart_max_delay, for "backoff" only.
TEST_F(ConfigWarnings, RestartMaxDelayBelowTheStartLimitsPace) {
  EXPECT_THAT(
      Warnings(
          Command() +
          "restart_max_delay = \"1s\"\nstart_limit_burst = 3\nstart_limit_interval = \"10s\"\n"),
      ElementsAre(At(6, 21, "restart_max_delay",
                     "\"1000ms\" is below start_limit_interval / start_limit_burst (\"3333ms\"): "
                     "a crash loop starts the worker every \"1000ms\", more than "
                     "start_limit_burst (3) times per start_limit_interval, as restart_max_delay "
                     "caps every wait; raise restart_max_delay to \"3333ms\" for the start "
                     "limit's pace (docs/config.md, Restarts)")));
  // At the pace, with "fail" (the loop gives up), or without a start limit: nothing to say.
  EXPECT_THAT(Warnings(Command() + "restart_max_delay = \"2s\"\nstart_limit_burst = 5\n"
                                   "start_limit_interval = \"10s\"\n"),
              IsEmpty());
  EXPECT_THAT(Warnings(Command() + "restart_max_delay = \"1s\"\nstart_limit_action = \"fail\"\n"),
              IsEmpty());
  EXPECT_THAT(Warnings(Command() + "restart_max_delay = \"1s\"\nstart_limit_interval = \"0s\"\n"),
              IsEmpty());
}

TEST_F(ConfigWarnings, NoneForSaneTimeoutsOrAResolvableCommand) {
  EXPECT_THAT(Warnings(Command()), IsEmpty());
  EXPECT_THAT(Warnings(Command() + "request_timeout = \"2s\"\nstall_timeout = \"2s\"\n"),
              IsEmpty());
  EXPECT_THAT(Warnings(Command() + "stall_timeout = \"1s\"\n"), IsEmpty());
  // A bare name found in the default PATH (sh is in /bin or /usr/bin on every host).
  EXPECT_THAT(Warnings("command = [\"sh\", \"-c\", \"exit 0\"]\n"), IsEmpty());
}

TEST_F(ConfigWarnings, CommandThatDoesNotResolveToAnExecutable) {
  const std::string missing = dir_.Join("missing");
  EXPECT_THAT(Warnings("command = [\"" + missing + "\"]\n"),
              ElementsAre(At(5, 12, "command[0]",
                             missing + ": No such file or directory; the worker's start will fail "
                                       "(exec)")));
  const std::string plain = dir_.Join("plain");
  std::ofstream(plain) << "not a program\n";
  ASSERT_EQ(::chmod(plain.c_str(), 0644), 0);
  // No x bit at all: refused to root too.
  EXPECT_THAT(Warnings("command = [\"./plain\"]\n"),
              ElementsAre(At(5, 12, "command[0]",
                             plain + ": not executable (no x permission); the worker's start "
                                     "will fail (exec)")));
  EXPECT_THAT(Warnings("command = [\"" + dir_.path() + "\"]\n"),
              ElementsAre(::testing::HasSubstr(": not a regular file;")));
}

TEST_F(ConfigWarnings, BareCommandIsSearchedInTheWorkersPath) {
  EXPECT_THAT(
      Warnings("command = [\"bulkhead-no-such-program\"]\n"),
      ElementsAre(At(5, 12, "command[0]",
                     "\"bulkhead-no-such-program\" is not an executable file in any directory of "
                     "the worker's PATH (" +
                         std::string(kDefaultWorkerPath) +
                         ", from the default; bulkheadd's own PATH is not passed on); the "
                         "worker's start will fail (exec); write an absolute path")));
  // environment.PATH is the worker's PATH: "worker" is found in the test's directory, and only
  // there.
  EXPECT_THAT(Warnings("command = [\"worker\"]\n[cells.a.environment]\nPATH = \"/nonexistent:" +
                       dir_.path() + "\"\n"),
              IsEmpty());
  EXPECT_THAT(Warnings("command = [\"worker\"]\n"),
              ElementsAre(::testing::HasSubstr("from the default;")));
  EXPECT_THAT(Warnings("command = [\"sh\"]\n[cells.a.environment]\nPATH = \"/nonexistent\"\n"),
              ElementsAre(At(5, 12, "command[0]",
                             "\"sh\" is not an executable file in any directory of the worker's "
                             "PATH (/nonexistent, from cells.a.environment.PATH); the worker's "
                             "start will fail (exec); write an absolute path")));
}

TEST_F(ConfigWarnings, RelativeScriptArgumentsAreOpenedFromTheWorkingDirectory) {
  std::ofstream(dir_.Join("app.py")) << "print('hi')\n";
  // Next to the config file, but the worker runs in "/": warned.
  EXPECT_THAT(Warnings("command = [\"sh\", \"-u\", \"app.py\", \"--port=8080\", \"x=1\"]\n"),
              ElementsAre(At(5, 24, "command[2]",
                             "relative path \"app.py\" is opened by the worker from its "
                             "working_directory \"/\" (not from the config file's directory), "
                             "where there is no such file; write an absolute path or set "
                             "working_directory")));
  EXPECT_THAT(Warnings("command = [\"sh\", \"lib/run\"]\n"),
              ElementsAre(::testing::HasSubstr("cells.a.command[1]: relative path \"lib/run\"")));
  // Found in working_directory, or absolute: nothing to say.
  EXPECT_THAT(
      Warnings("command = [\"sh\", \"app.py\"]\nworking_directory = \"" + dir_.path() + "\"\n"),
      IsEmpty());
  EXPECT_THAT(Warnings("command = [\"sh\", \"" + dir_.Join("app.py") + "\"]\n"), IsEmpty());
  EXPECT_THAT(Warnings("command = [\"sh\", \"-c\", \"exit 0\", \"http://x/y.py\"]\n"), IsEmpty());
  // Arguments with a '/' that are not paths: an IPv4 network in CIDR notation, a ratio, a sed
  // script, a regular expression or a glob.
  for (const char* arg :
       {"10.0.0.0/8", "3/4", "s/a/b/g", "y/abc/xyz/", "^api/v[0-9]+$", "logs/*.gz", "a\\\\/b"}) {
    EXPECT_THAT(Warnings(std::string("command = [\"sh\", \"") + arg + "\"]\n"), IsEmpty()) << arg;
  }
}

// A relative working_directory that does not exist was reported as a missing script (issue 25
// section 7): the directory is named, with what it was resolved against, and the scripts in it
// are not.
TEST_F(ConfigWarnings, AMissingWorkingDirectoryIsNamedNotTheScriptsInIt) {
  EXPECT_THAT(
      Warnings("command = [\"sh\", \"app.py\"]\nworking_directory = \"app\"\n"),
      ElementsAre(At(6, 21, "working_directory",
                     "\"app\" is relative: resolved against the config file's directory \"" +
                         dir_.path() + "\", it is \"" + dir_.Join("app") +
                         "\", does not exist; the worker's start will fail (chdir); "
                         "create it or correct the path")));
  EXPECT_THAT(Warnings(Command() + "working_directory = \"/nonexistent/app\"\n"),
              ElementsAre(At(6, 21, "working_directory",
                             "\"/nonexistent/app\" does not exist; the worker's start will fail "
                             "(chdir); create it or correct the path")));
  EXPECT_THAT(Warnings(Command() + "working_directory = \"worker\"\n"),
              ElementsAre(::testing::HasSubstr(", is not a directory; the worker's start")));
  // Once it exists, the script in it is looked for there.
  ASSERT_EQ(::mkdir(dir_.Join("app").c_str(), 0755), 0);
  EXPECT_THAT(Warnings("command = [\"sh\", \"app.py\"]\nworking_directory = \"app\"\n"),
              ElementsAre(::testing::HasSubstr("cells.a.command[1]: relative path \"app.py\"")));
}

TEST_F(ConfigWarnings, StartTimeoutForms) {
  auto start_timeout = [this](const std::string& value) {
    LoadResult result = ParseConfig("[cells.a]\nmax_concurrent = 1\n" + Command() + value, file_);
    EXPECT_THAT(result.errors, IsEmpty()) << value;
    return result.config ? result.config->cells[0].start_timeout.count() : -1;
  };
  EXPECT_EQ(start_timeout(""), 90'000);  // systemd's DefaultTimeoutStartSec
  EXPECT_EQ(start_timeout("start_timeout = \"5s\"\n"), 5000);
  EXPECT_EQ(start_timeout("start_timeout = \"0s\"\n"), 0);
  EXPECT_EQ(start_timeout("start_timeout = \"infinity\"\n"), 0);
  LoadResult bad = ParseConfig(
      "[cells.a]\nmax_concurrent = 1\n" + Command() + "start_timeout = \"forever\"\n", file_);
  ASSERT_EQ(bad.errors.size(), 1u);
  EXPECT_THAT(bad.errors[0].ToString(),
              ::testing::StartsWith(file_ + ":4:17: cells.a.start_timeout: "));
}

}  // namespace
}  // namespace bulkhead::config
