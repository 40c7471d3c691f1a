// SPDX-License-Identifier: MIT
// Where bulkheadctl looks for the control socket: --socket, else $BULKHEAD_SOCKET, else the
// default `[supervisor] control_socket` of the config (docs/config.md), which this file computes
// again because ctl/ may not link config/. tests/ctl/default_socket_test.cc checks that both agree.
// DefaultControlSocket is pure and thread-safe; the *FromEnvironment functions read the
// environment and must not race with setenv(3).
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

namespace bulkhead::ctl {

// <runtime_dir>/control.sock, with runtime_dir chosen by DefaultRuntimeDir (base/runtime_dir.h), as
// the config does:
//   1. the first ':'-separated entry of `runtime_directory_env` ($RUNTIME_DIRECTORY);
//   2. /run/bulkhead when `uid` is 0;
//   3. `xdg_runtime_dir_env`/bulkhead ($XDG_RUNTIME_DIR);
//   4. /tmp/bulkhead-<uid>.
// An empty or relative variable counts as unset. The result is absolute and lexically normalised
// (repeated '/', "." and ".." segments collapsed, no trailing '/').
std::string DefaultControlSocket(uid_t uid, std::string_view runtime_directory_env,
                                 std::string_view xdg_runtime_dir_env);

// DefaultControlSocket for getuid(), $RUNTIME_DIRECTORY and $XDG_RUNTIME_DIR.
std::string DefaultControlSocketFromEnvironment();

// The socket bulkheadctl uses: `flag` (--socket) when not empty, else $BULKHEAD_SOCKET when set
// and not empty, else DefaultControlSocketFromEnvironment().
std::string ControlSocketFromEnvironment(std::string_view flag);

}  // namespace bulkhead::ctl
