// SPDX-License-Identifier: MIT
// The checks of socket paths across the file (config/socket_checks.h): no two uses of one path
// (the earlier use named, reported at the later one), and every path within sun_path.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/config.h"
#include "tests/config/config_test_util.h"

namespace bulkhead::config {
namespace {

using ::testing::ElementsAre;

TEST(ParseConfig, DuplicateSocketsNameTheEarlierUse) {
  EXPECT_THAT(Errors(R"([supervisor]
runtime_dir = "/run/bh"
control_socket = "/run/bh/api.sock"
[cells.a]
command = ["x"]
max_concurrent = 1
socket = "/run/bh/api.sock"
[cells.b]
command = ["x"]
max_concurrent = 1
socket = "/run/bh/./sub/../a.worker.sock"
[cells.d]
command = ["x"]
max_concurrent = 1
socket = "/run/bh/d.sock"
)"),
              ElementsAre(At(7, 10, "cells.a.socket",
                             "socket /run/bh/api.sock is also used by supervisor.control_socket"),
                          At(11, 10, "cells.b.socket",
                             "socket /run/bh/a.worker.sock is also used by the worker socket of "
                             "cells.a")));
}

// The hidden NAME.notify socket clashes like any other: a cell socket placed there would be
// removed and replaced by the cell's NOTIFY_SOCKET at startup, and its worker never heard.
TEST(ParseConfig, SocketOnAnotherCellsNotifySocketIsRefused) {
  EXPECT_THAT(Errors(R"([supervisor]
runtime_dir = "/run/bh"
[cells.a]
command = ["x"]
max_concurrent = 1
[cells.b]
command = ["x"]
max_concurrent = 1
socket = "/run/bh/a.notify"
)"),
              ElementsAre(At(9, 10, "cells.b.socket",
                             "socket /run/bh/a.notify is also used by the notify socket of "
                             "cells.a")));
}

TEST(ParseConfig, NotifySocketIsDerivedFromTheRuntimeDir) {
  Config config = MustParse(R"([supervisor]
runtime_dir = "/run/bh"
[cells.a]
command = ["x"]
max_concurrent = 1
)");
  EXPECT_EQ(config.cells[0].notify_socket, "/run/bh/a.notify");
}

TEST(ParseConfig, DuplicateSocketIsReportedAtTheLaterUseInFileOrder) {
  EXPECT_THAT(Errors(R"([cells.a]
command = ["x"]
max_concurrent = 1
socket = "/run/bh/api.sock"
[cells.b]
command = ["x"]
max_concurrent = 1
socket = "/run/bh/api.sock"
[supervisor]
runtime_dir = "/run/bh"
control_socket = "/run/bh/api.sock"
)"),
              ElementsAre(At(8, 10, "cells.b.socket",
                             "socket /run/bh/api.sock is also used by cells.a.socket"),
                          At(11, 18, "supervisor.control_socket",
                             "socket /run/bh/api.sock is also used by cells.a.socket")));
}

TEST(ParseConfig, CellNamedControlClashesWithDefaultControlSocket) {
  EXPECT_THAT(Errors(R"([supervisor]
runtime_dir = "/run/bh"
[cells.control]
command = ["x"]
max_concurrent = 1
)"),
              ElementsAre(At(3, 1, "cells.control.socket",
                             "default socket /run/bh/control.sock is also used by "
                             "supervisor.control_socket")));
}

TEST(ParseConfig, SocketPathLongerThanSunPath) {
  const std::string fits = "/" + std::string(106, 'x');      // 107 bytes.
  const std::string too_long = "/" + std::string(107, 'y');  // 108 bytes.
  EXPECT_THAT(Errors(R"([supervisor]
runtime_dir = "/run/bh"
[cells.a]
command = ["x"]
max_concurrent = 1
socket = ")" + fits + R"("
[cells.b]
command = ["x"]
max_concurrent = 1
socket = ")" + too_long +
                     R"("
)"),
              ElementsAre(At(10, 10, "cells.b.socket",
                             "socket " + too_long +
                                 " is 108 bytes, over the 107-byte limit of a Unix socket path "
                                 "(sun_path)")));
}

TEST(ParseConfig, RuntimeDirTooLongForDerivedSockets) {
  const std::string runtime_dir = "/" + std::string(95, 'r');  // 96 bytes.
  EXPECT_THAT(
      Errors(R"([supervisor]
runtime_dir = ")" +
             runtime_dir + R"("
[cells.a]
command = ["x"]
max_concurrent = 1
)"),
      ElementsAre(At(2, 15, "supervisor.control_socket",
                     "default socket " + runtime_dir +
                         "/control.sock is 109 bytes, over the 107-byte limit of a Unix socket "
                         "path (sun_path); shorten supervisor.runtime_dir"),
                  // a.sock is 103 bytes and fits.
                  At(3, 1, "cells.a",
                     "worker socket " + runtime_dir +
                         "/a.worker.sock is 110 bytes, over the 107-byte limit of a Unix socket "
                         "path (sun_path); shorten supervisor.runtime_dir or the cell name")));
}

}  // namespace
}  // namespace bulkhead::config
