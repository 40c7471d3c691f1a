// SPDX-License-Identifier: MIT
// ParseConfig / LoadConfigFile as a whole: a full config with defaults filled, the documented
// example, TOML syntax errors, unknown and misplaced keys, wrong types, several errors at once in
// file order, path resolution, damaged input, and unreadable files. Each section of the file has
// its own test file: supervisor_table_test.cc, cell_table_test.cc, limits_test.cc,
// privileges_test.cc, socket_checks_test.cc, cell_warnings_test.cc.
#include "config/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/lexical_path.h"
#include "tests/config/config_test_util.h"

namespace bulkhead::config {
namespace {

using std::chrono::milliseconds;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;

// The example of docs/config.md, plus an explicit socket and control socket.
constexpr std::string_view kFullConfig = R"([supervisor]
runtime_dir = "/run/bulkhead"
control_socket = "/run/bulkhead/ctl.sock"
max_payload_bytes = 1048576
log_level = "debug"

[cells.payments]
command = ["/usr/lib/bulkhead/gateway-worker", "--upstream", "https://pay.example.com"]
max_concurrent = 2
max_queue = 1
queue_timeout = "500ms"
restart_delay = "2s"
working_directory = "/var/lib/payments"
socket = "/run/payments/api.sock"

[cells.payments.environment]
PAYMENTS_MODE = "live"
LANG = "C.UTF-8"

[cells.catalog]
command = ["echo-worker"]
max_concurrent = 2
)";

TEST(ParseConfig, FullConfigWithDefaultsFilled) {
  const Config config = MustParse(kFullConfig);
  EXPECT_EQ(config.source, kFile);

  EXPECT_EQ(config.supervisor.runtime_dir, "/run/bulkhead");
  EXPECT_EQ(config.supervisor.control_socket, "/run/bulkhead/ctl.sock");
  EXPECT_EQ(config.supervisor.max_payload_bytes, 1048576u);
  EXPECT_EQ(config.supervisor.log_level, "debug");

  ASSERT_EQ(config.cells.size(), 2u);
  // File order, not the key order toml++ iterates in.
  const CellConfig& payments = config.cells[0];
  EXPECT_EQ(payments.name, "payments");
  EXPECT_THAT(payments.command, ElementsAre("/usr/lib/bulkhead/gateway-worker", "--upstream",
                                            "https://pay.example.com"));
  EXPECT_EQ(payments.socket, "/run/payments/api.sock");
  EXPECT_EQ(payments.worker_socket, "/run/bulkhead/payments.worker.sock");
  EXPECT_EQ(payments.max_concurrent, 2u);
  EXPECT_EQ(payments.max_queue, 1u);
  EXPECT_EQ(payments.queue_timeout, milliseconds(500));
  EXPECT_EQ(payments.restart_delay, milliseconds(2000));
  EXPECT_THAT(payments.environment,
              ElementsAre(Pair("PAYMENTS_MODE", "live"), Pair("LANG", "C.UTF-8")));
  EXPECT_EQ(payments.working_directory, "/var/lib/payments");
  EXPECT_EQ(payments.position.line, 7);
  EXPECT_EQ(payments.position.column, 1);

  const CellConfig& catalog = config.cells[1];
  EXPECT_EQ(catalog.name, "catalog");
  EXPECT_THAT(catalog.command, ElementsAre("echo-worker"));
  EXPECT_EQ(catalog.socket, "/run/bulkhead/catalog.sock");
  EXPECT_EQ(catalog.worker_socket, "/run/bulkhead/catalog.worker.sock");
  EXPECT_EQ(catalog.max_concurrent, 2u);
  EXPECT_EQ(catalog.max_queue, 0u);
  EXPECT_EQ(catalog.queue_timeout, milliseconds(1000));
  EXPECT_EQ(catalog.restart_delay, milliseconds(100));
  EXPECT_THAT(catalog.environment, IsEmpty());
  EXPECT_EQ(catalog.working_directory, "/");
  EXPECT_EQ(catalog.position.line, 20);
  EXPECT_EQ(catalog.position.column, 1);
}

// The example in docs/config.md parses to what its table says.
TEST(ParseConfig, DocumentedExample) {
  std::ifstream doc(std::string(BULKHEAD_SOURCE_DIR) + "/docs/config.md");
  ASSERT_TRUE(doc.good());
  std::string example;
  bool in_block = false;
  for (std::string line; std::getline(doc, line);) {
    if (!in_block && line == "```toml") {
      in_block = true;
    } else if (in_block && line == "```") {
      break;
    } else if (in_block) {
      example += line + "\n";
    }
  }
  ASSERT_FALSE(example.empty());

  // As if run as root without systemd.
  ScopedEnv env("RUNTIME_DIRECTORY", "/run/bulkhead");
  const Config config = MustParse(example, "/etc/bulkhead/bulkhead.toml");
  EXPECT_EQ(config.supervisor.control_socket, "/run/bulkhead/control.sock");
  ASSERT_EQ(config.cells.size(), 2u);
  const CellConfig& payments = config.cells[0];
  EXPECT_EQ(payments.name, "payments");
  EXPECT_EQ(payments.socket, "/run/bulkhead/payments.sock");
  EXPECT_EQ(payments.worker_socket, "/run/bulkhead/payments.worker.sock");
  EXPECT_EQ(payments.max_concurrent, 2u);
  EXPECT_EQ(payments.max_queue, 1u);
  EXPECT_EQ(payments.queue_timeout, milliseconds(500));
  EXPECT_EQ(payments.restart_delay, milliseconds(2000));
  EXPECT_EQ(payments.working_directory, "/var/lib/bulkhead/payments");
  EXPECT_EQ(payments.cpu_max_quota_us, 50000u);
  EXPECT_EQ(payments.cpu_max_period_us, 100000u);
  EXPECT_EQ(payments.memory_max, 268435456u);
  EXPECT_EQ(payments.pids_max, 64u);
  const CellConfig& catalog = config.cells[1];
  EXPECT_EQ(catalog.name, "catalog");
  EXPECT_EQ(catalog.socket, "/run/bulkhead/catalog.sock");
  EXPECT_EQ(catalog.worker_socket, "/run/bulkhead/catalog.worker.sock");
  EXPECT_EQ(catalog.max_concurrent, 2u);
  EXPECT_EQ(catalog.max_queue, 0u);
  EXPECT_EQ(catalog.queue_timeout, milliseconds(1000));
  EXPECT_EQ(catalog.restart_delay, milliseconds(100));
  EXPECT_EQ(catalog.working_directory, "/");
  EXPECT_EQ(catalog.cpu_max_quota_us, std::nullopt);
  EXPECT_EQ(catalog.memory_max, std::nullopt);
  EXPECT_EQ(catalog.pids_max, std::nullopt);
}

TEST(ParseConfig, InlineTablesKeepFileOrder) {
  const Config config = MustParse(
      R"(supervisor = { runtime_dir = "/run/bh" }
cells = { b = { command = ["x"], max_concurrent = 1 }, a = { command = ["y"], max_concurrent = 2, environment = { Z = "1", A = "2" } } }
)");
  ASSERT_EQ(config.cells.size(), 2u);
  EXPECT_EQ(config.cells[0].name, "b");
  EXPECT_EQ(config.cells[0].position.line, 2);
  EXPECT_EQ(config.cells[0].position.column, 15);
  EXPECT_EQ(config.cells[1].name, "a");
  EXPECT_THAT(config.cells[1].environment, ElementsAre(Pair("Z", "1"), Pair("A", "2")));
}

TEST(ParseConfig, AcceptsRangeBoundaries) {
  const Config config = MustParse(R"([supervisor]
runtime_dir = "/run/bh"
max_payload_bytes = 1073741824
[cells.a]
command = ["x"]
max_concurrent = 65535
max_queue = 1000000
queue_timeout = "1ms"
restart_delay = "0s"
[cells.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa]
command = ["x"]
max_concurrent = 1
socket = "/run/bh/a-64-chars.sock"
)");
  EXPECT_EQ(config.supervisor.max_payload_bytes, 1073741824u);
  ASSERT_EQ(config.cells.size(), 2u);
  EXPECT_EQ(config.cells[0].max_concurrent, 65535u);
  EXPECT_EQ(config.cells[0].max_queue, 1000000u);
  EXPECT_EQ(config.cells[0].queue_timeout, milliseconds(1));
  EXPECT_EQ(config.cells[0].restart_delay, milliseconds(0));
  EXPECT_EQ(config.cells[1].name.size(), 64u);
}

TEST(ParseConfig, SyntaxErrorIsReportedAlone) {
  EXPECT_THAT(Errors(R"([cells.a]
command = ["x"]
max_concurrent = = 1
max_queue = "not checked"
)"),
              ElementsAre(std::string(kFile) +
                          ":3:18: cells.a.max_concurrent: error while parsing value: could not "
                          "determine value type"));
}

// toml++ stops at the unit of a bare duration with "expected digit"; the message says to quote it
// (issue 25 section 7), at the same place.
TEST(ParseConfig, AnUnquotedDurationIsASyntaxErrorWithAHint) {
  EXPECT_THAT(Errors(R"([cells.a]
command = ["x"]
max_concurrent = 1
stall_timeout = 3s
)"),
              ElementsAre(std::string(kFile) +
                          ":4:18: cells.a.stall_timeout: error while parsing decimal integer: "
                          "expected digit, saw 's'; "
                          "durations are strings: stall_timeout = \"3s\""));
}

TEST(ParseConfig, DuplicateKeyIsASyntaxError) {
  EXPECT_THAT(
      Errors(R"([cells.a]
command = ["x"]
max_concurrent = 1
max_concurrent = 2
)"),
      ElementsAre(std::string(kFile) +
                  ":4:18: cells.a.max_concurrent: error while parsing key-value pair: cannot "
                  "redefine existing integer 'max_concurrent'"));
}

// toml++ names no key with a syntax error: the enclosing table header and the line's key do, as
// every other config error does (file:line:col: cells.NAME.key: message).
TEST(ParseConfig, SyntaxErrorsNameTheEnclosingTableAndKey) {
  EXPECT_THAT(Errors(R"([supervisor]
runtime_dir = "/run/bh"
[cells.payments]
command = ["x"]
note = """
[cells.inside_a_string]
"""
limits.memory_max = 256M
)"),
              ElementsAre(::testing::StartsWith(std::string(kFile) +
                                                ":8:24: cells.payments.limits.memory_max: ")));
  // A redefined table is its own path; a line that is no key is its table's.
  EXPECT_THAT(Errors("[cells.a]\ncommand = [\"x\"]\n[cells.b]\n[ cells . a ]\n"),
              ElementsAre(::testing::HasSubstr(":4:1: cells.a: ")));
  // Inside a multi-line array: the array's key.
  EXPECT_THAT(Errors("[cells.a]\ncommand = [\"x\",\n  3s]\n"),
              ElementsAre(::testing::HasSubstr(":3:4: cells.a.command: ")));
  EXPECT_THAT(Errors("x = = 1\n"), ElementsAre(::testing::HasSubstr(":1:5: x: ")));
}

// A cell written as an inline table: the error names the key inside it, and a duration in another
// form (`1.5s`, `3sec`, `3 s`) gets the accepted one.
TEST(ParseConfig, ABareDurationInAnInlineTableIsNamedAndShownAsItShouldRead) {
  EXPECT_THAT(Errors("[cells]\na = { command = [\"x\"], stall_timeout = 1.5s }\n"),
              ElementsAre(::testing::EndsWith(
                  ":2:43: cells.a.stall_timeout: error while parsing floating-point: expected "
                  "decimal digit, saw 's'; durations are strings: stall_timeout = \"1500ms\"")));
  EXPECT_THAT(Errors("[cells.a]\nstall_timeout = 3 s\n"),
              ElementsAre(::testing::HasSubstr("; durations are strings: stall_timeout = \"3s\"")));
  EXPECT_THAT(
      Errors("[cells.a]\ncommand = [\"x\"]\nmax_concurrent = 1\nstall_timeout = \"3sec\"\n"),
      ElementsAre(::testing::HasSubstr("cells.a.stall_timeout: invalid duration \"3sec\": "
                                       "unknown unit \"sec\"; write \"3s\"")));
}

TEST(ParseConfig, InvalidUtf8IsASyntaxError) {
  const std::vector<std::string> errors = Errors("[cells.a]\ncommand = [\"\xff\"]\n");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0], ::testing::StartsWith(std::string(kFile) + ":2:"));
}

TEST(ParseConfig, UnknownKeysWithHints) {
  EXPECT_THAT(
      Errors(R"([supervisor]
runtime_dir = "/run/bh"
log_levle = "debug"
[cell.x]
command = ["x"]
[cells.a]
command = ["x"]
max_concurrent = 1
max_queu = 3
colour = "red"
worker_socket = "/run/x.sock"
[cells.a.environment]
A = "1"
[extra]
)"),
      ElementsAre(At(3, 1, "supervisor.log_levle", "unknown key; did you mean \"log_level\"?"),
                  At(4, 2, "cell", "unknown key; did you mean \"cells\"?"),
                  At(9, 1, "cells.a.max_queu", "unknown key; did you mean \"max_queue\"?"),
                  At(10, 1, "cells.a.colour", "unknown key"),
                  At(11, 1, "cells.a.worker_socket",
                     "unknown key; the worker socket is always "
                     "<runtime_dir>/NAME.worker.sock"),
                  At(14, 2, "extra", "unknown key")));
}

TEST(ParseConfig, MisplacedKeysAtTopLevel) {
  EXPECT_THAT(
      Errors(R"(runtime_dir = "/run/bh"
max_queue = 1
[cells.a]
command = ["x"]
max_concurrent = 1
)"),
      ElementsAre(At(1, 1, "runtime_dir", "unknown key; runtime_dir belongs in [supervisor]"),
                  At(2, 1, "max_queue", "unknown key; max_queue belongs in a [cells.NAME] table")));
}

TEST(ParseConfig, WrongTypes) {
  EXPECT_THAT(
      Errors(R"([supervisor]
runtime_dir = "/run/bh"
max_payload_bytes = 1.5
log_level = 3
[cells.a]
command = "/usr/bin/worker"
max_concurrent = "2"
queue_timeout = 5
environment = ["A=1"]
socket = true
[cells.b]
command = ["/usr/bin/worker", 5]
max_concurrent = 1
max_queue = 2024-01-01
[cells.b.environment]
PORT = 8080
)"),
      ElementsAre(
          At(3, 21, "supervisor.max_payload_bytes",
             "expected size, got float (write bytes as an integer, 268435456, or a string with a "
             "unit, \"256M\")"),
          At(4, 13, "supervisor.log_level", "expected string, got integer"),
          At(6, 11, "cells.a.command",
             "expected array of strings, got string (write the program and its arguments as "
             "command = [\"/usr/bin/worker\", \"--flag\"])"),
          At(7, 18, "cells.a.max_concurrent", "expected integer, got string"),
          At(8, 17, "cells.a.queue_timeout",
             "expected string, got integer (a duration is a string such as \"500ms\" or \"2s\")"),
          At(9, 15, "cells.a.environment", "expected table, got array"),
          At(10, 10, "cells.a.socket", "expected string, got boolean"),
          At(12, 31, "cells.b.command[1]", "expected string, got integer (quote it)"),
          At(14, 13, "cells.b.max_queue", "expected integer, got date"),
          At(16, 8, "cells.b.environment.PORT", "expected string, got integer (quote it)")));
}

TEST(ParseConfig, CellsMustBeATableOfTables) {
  EXPECT_THAT(Errors(R"([[cells]]
command = ["x"]
)"),
              ElementsAre(At(1, 1, "cells",
                             "expected table, got array (write each cell as a [cells.NAME] "
                             "table, not [[cells]])")));
  EXPECT_THAT(Errors(R"(cells.a = 1
)"),
              ElementsAre(At(1, 11, "cells.a",
                             "expected table, got integer (write the cell as a [cells.NAME] "
                             "table)")));
}

// Without a cells table the error points at the end of the file, where one would go.
TEST(ParseConfig, NoCells) {
  EXPECT_THAT(Errors(""), ElementsAre(At(1, 1, "cells",
                                         "no cells defined; add at least one [cells.NAME] table")));
  EXPECT_THAT(
      Errors("[supervisor]\nlog_level = \"info\"\n"),
      ElementsAre(At(3, 1, "cells", "no cells defined; add at least one [cells.NAME] table")));
  EXPECT_THAT(
      Errors("[supervisor]\nlog_level = \"info\""),
      ElementsAre(At(2, 19, "cells", "no cells defined; add at least one [cells.NAME] table")));
  EXPECT_THAT(
      Errors("cells = {}\n"),
      ElementsAre(At(1, 9, "cells", "no cells defined; add at least one [cells.NAME] table")));
  EXPECT_THAT(
      Errors("[supervisor]\n[cells]\n"),
      ElementsAre(At(2, 1, "cells", "no cells defined; add at least one [cells.NAME] table")));
}

TEST(ParseConfig, SeveralErrorsReportedTogetherInFileOrder) {
  LoadResult result = ParseConfig(R"([cells.b]
command = ["x"]
max_concurrent = 0
[cells.a]
max_queue = "big"
[supervisor]
runtime_dir = "/run/bh"
log_level = "loud"
)",
                                  kFile);
  EXPECT_FALSE(result.config.has_value());
  EXPECT_THAT(ErrorLines(result),
              ElementsAre(At(3, 18, "cells.b.max_concurrent", "must be between 1 and 65535, got 0"),
                          At(4, 1, "cells.a.command", "missing required key"),
                          At(4, 1, "cells.a.max_concurrent", "missing required key"),
                          At(5, 13, "cells.a.max_queue", "expected integer, got string"),
                          At(8, 13, "supervisor.log_level",
                             "must be one of debug, info, warning, error; got \"loud\"")));
  // The structured fields agree with the text.
  ASSERT_EQ(result.errors.size(), 5u);
  EXPECT_EQ(result.errors[3].file, kFile);
  EXPECT_EQ(result.errors[3].line, 5);
  EXPECT_EQ(result.errors[3].column, 13);
  EXPECT_EQ(result.errors[3].key, "cells.a.max_queue");
  EXPECT_EQ(result.errors[3].message, "expected integer, got string");
}

TEST(ParseConfig, RelativePathsResolveAgainstTheConfigDirectory) {
  const Config config = MustParse(R"([supervisor]
runtime_dir = "../run"
control_socket = "ctl/control.sock"
[cells.a]
command = ["../bin/worker", "--data", "./data"]
max_concurrent = 1
socket = "sockets//a.sock"
working_directory = "."
[cells.b]
command = ["worker", "x/y"]
max_concurrent = 1
working_directory = "/srv/b/../b2/"
)",
                                  "/etc/bulkhead/conf.d/main.toml");
  EXPECT_EQ(config.supervisor.runtime_dir, "/etc/bulkhead/run");
  EXPECT_EQ(config.supervisor.control_socket, "/etc/bulkhead/conf.d/ctl/control.sock");
  ASSERT_EQ(config.cells.size(), 2u);
  const CellConfig& a = config.cells[0];
  // Only command[0] is a path; arguments are passed as written.
  EXPECT_THAT(a.command, ElementsAre("/etc/bulkhead/bin/worker", "--data", "./data"));
  EXPECT_EQ(a.socket, "/etc/bulkhead/conf.d/sockets/a.sock");
  EXPECT_EQ(a.worker_socket, "/etc/bulkhead/run/a.worker.sock");
  EXPECT_EQ(a.working_directory, "/etc/bulkhead/conf.d");
  const CellConfig& b = config.cells[1];
  // No '/': looked up in $PATH at exec time, so kept as is.
  EXPECT_THAT(b.command, ElementsAre("worker", "x/y"));
  EXPECT_EQ(b.socket, "/etc/bulkhead/run/b.sock");
  EXPECT_EQ(b.working_directory, "/srv/b2");
}

TEST(ParseConfig, RelativeSourcePathIsAnchoredAtTheCwd) {
  char cwd[PATH_MAX];
  ASSERT_NE(getcwd(cwd, sizeof(cwd)), nullptr);
  const Config config = MustParse(R"([supervisor]
runtime_dir = "run"
[cells.a]
command = ["./worker"]
max_concurrent = 1
)",
                                  "conf/bulkhead.toml");
  EXPECT_EQ(config.source, "conf/bulkhead.toml");
  EXPECT_EQ(config.supervisor.runtime_dir, NormalizePath(std::string(cwd) + "/conf/run"));
  ASSERT_EQ(config.cells.size(), 1u);
  EXPECT_THAT(config.cells[0].command,
              ElementsAre(NormalizePath(std::string(cwd) + "/conf/worker")));
}

TEST(ParseConfig, NeverThrowsAndKeepsItsContractOnDamagedInput) {
  // Every prefix of a valid file, and the file with each byte replaced by characters that break
  // TOML in different ways. Only the contract is checked: config set iff no errors, every error
  // names the file, and errors are sorted.
  std::vector<std::string> inputs;
  for (size_t n = 0; n <= kFullConfig.size(); ++n) inputs.emplace_back(kFullConfig.substr(0, n));
  for (size_t i = 0; i < kFullConfig.size(); ++i) {
    for (char c : {'"', '[', '=', '\n', '\0', '\xff', '.', '0'}) {
      std::string damaged(kFullConfig);
      damaged[i] = c;
      inputs.push_back(std::move(damaged));
    }
  }
  for (const std::string& input : inputs) {
    LoadResult result;
    ASSERT_NO_THROW(result = ParseConfig(input, kFile)) << input;
    ASSERT_EQ(result.config.has_value(), result.errors.empty()) << input;
    for (size_t e = 0; e < result.errors.size(); ++e) {
      ASSERT_EQ(result.errors[e].file, kFile);
      ASSERT_FALSE(result.errors[e].message.empty());
      if (e > 0) {
        const ConfigError& prev = result.errors[e - 1];
        const ConfigError& cur = result.errors[e];
        ASSERT_TRUE(prev.line < cur.line || (prev.line == cur.line && prev.column <= cur.column))
            << input;
      }
    }
  }
}

// LoadConfigFile against real files in a fresh temporary directory.
class LoadConfigFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "bulkhead-config-XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    for (const std::string& file : files_) unlink(file.c_str());
    rmdir(dir_.c_str());
  }
  std::string Write(const std::string& name, std::string_view text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    files_.push_back(path);
    return path;
  }

  std::string dir_;
  std::vector<std::string> files_;
};

TEST_F(LoadConfigFileTest, ReadsAndAnchorsPathsAtTheFile) {
  const std::string path = Write("bulkhead.toml", R"([supervisor]
runtime_dir = "run"
[cells.a]
command = ["x"]
max_concurrent = 1
)");
  LoadResult result = LoadConfigFile(path);
  ASSERT_THAT(ErrorLines(result), IsEmpty());
  ASSERT_TRUE(result.config.has_value());
  EXPECT_EQ(result.config->source, path);
  EXPECT_EQ(result.config->supervisor.runtime_dir, NormalizePath(dir_ + "/run"));
}

TEST_F(LoadConfigFileTest, ReportsErrorsUnderThePathAsGiven) {
  const std::string path = Write("bad.toml", "[cells.a]\nmax_concurrent = 1\n");
  LoadResult result = LoadConfigFile(path);
  EXPECT_FALSE(result.config.has_value());
  EXPECT_THAT(ErrorLines(result),
              ElementsAre(path + ":1:1: cells.a.command: missing required key"));
}

TEST_F(LoadConfigFileTest, MissingFileGivesOneClearError) {
  const std::string path = dir_ + "/missing.toml";
  LoadResult result = LoadConfigFile(path);
  EXPECT_FALSE(result.config.has_value());
  EXPECT_THAT(ErrorLines(result),
              ElementsAre(path + ": cannot open config file: No such file or directory"));
}

TEST_F(LoadConfigFileTest, DirectoryGivesOneClearError) {
  LoadResult result = LoadConfigFile(dir_);
  EXPECT_FALSE(result.config.has_value());
  EXPECT_THAT(ErrorLines(result), ElementsAre(dir_ + ": cannot read config file: Is a directory"));
}

// --check-config, startup and reload all refuse an access_log file bulkheadd could not open,
// naming the key's place, rather than startup failing on it with no position (exit 1, not 3).
TEST_F(LoadConfigFileTest, AnAccessLogFileThatCannotBeOpenedIsRefusedAtItsKey) {
  const std::string cell = "[cells.a]\ncommand = [\"x\"]\nmax_concurrent = 1\n";
  const std::string config_path = dir_ + "/bulkhead.toml";
  struct Case {
    std::string value;
    std::string message;
  };
  const std::vector<Case> cases = {
      {dir_ + "/missing/access.log", "cannot create " + dir_ + "/missing/access.log: directory " +
                                         dir_ + "/missing does not exist"},
      {dir_, dir_ + " is a directory"},
      {dir_ + "/bulkhead.toml/access.log",
       "cannot open " + dir_ + "/bulkhead.toml/access.log: Not a directory"},
  };
  for (const Case& c : cases) {
    Write("bulkhead.toml", "[supervisor]\naccess_log = \"" + c.value + "\"\n" + cell);
    LoadResult result = LoadConfigFile(config_path);
    EXPECT_FALSE(result.config.has_value()) << c.value;
    EXPECT_THAT(ErrorLines(result),
                ElementsAre(config_path + ":2:14: supervisor.access_log: " + c.message));
  }
  // Reported with the file's other errors, in one round.
  Write("bulkhead.toml", "[supervisor]\naccess_log = \"" + cases[0].value +
                             "\"\n[cells.a]\ncommand = [\"x\"]\nmax_concurrent = 0\n");
  EXPECT_THAT(ErrorLines(LoadConfigFile(config_path)),
              ElementsAre(config_path + ":2:14: supervisor.access_log: " + cases[0].message,
                          config_path +
                              ":5:18: cells.a.max_concurrent: must be between 1 and 65535, got 0"));
  // A file that can be created, one that exists, and stderr are fine.
  for (const std::string& fine : {dir_ + "/access.log", config_path, std::string("stderr")}) {
    Write("bulkhead.toml", "[supervisor]\naccess_log = \"" + fine + "\"\n" + cell);
    LoadResult result = LoadConfigFile(config_path);
    EXPECT_THAT(ErrorLines(result), IsEmpty()) << fine;
  }
}

// A named pipe is opened only while its reader runs (proxy::AccessLog::Open refuses it at once
// without one). --check-config cannot tell whether one runs without ending a waiting reader's
// stream, so it says so as a warning at the key rather than a silent "ok".
TEST_F(LoadConfigFileTest, ANamedPipeAccessLogGetsAWarningThatItNeedsItsReader) {
  const std::string fifo = dir_ + "/access.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string config_path = dir_ + "/bulkhead.toml";
  Write("bulkhead.toml", "[supervisor]\naccess_log = \"" + fifo +
                             "\"\n[cells.a]\ncommand = [\"x\"]\nmax_concurrent = 1\n");
  LoadResult result = LoadConfigFile(config_path);
  ASSERT_TRUE(result.config.has_value());
  EXPECT_THAT(ErrorLines(result), IsEmpty());
  // (The other warning is the cell's: no `x` command on this host.)
  const auto warning =
      std::find_if(result.warnings.begin(), result.warnings.end(),
                   [](const ConfigError& w) { return w.key == "supervisor.access_log"; });
  ASSERT_NE(warning, result.warnings.end());
  EXPECT_EQ(warning->line, 2);
  EXPECT_NE(warning->message.find(fifo + " is a named pipe: bulkheadd opens it only while its "
                                         "reader runs"),
            std::string::npos)
      << warning->message;
}

}  // namespace
}  // namespace bulkhead::config
