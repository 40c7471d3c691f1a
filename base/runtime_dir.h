// SPDX-License-Identifier: MIT
// The runtime directory bulkheadd uses when supervisor.runtime_dir is not set: where its control
// socket and the cells' sockets live by default. DefaultRuntimeDir is pure and thread-safe;
// DefaultRuntimeDirFromEnvironment reads the environment, so it must not race with setenv(3).
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

namespace bulkhead {

// In order of preference:
//   1. the first entry of `runtime_directory_env` ($RUNTIME_DIRECTORY, set by systemd for
//      RuntimeDirectory=, see systemd.exec(5); a colon-separated list when several are set);
//   2. /run/bulkhead when `uid` is 0;
//   3. `xdg_runtime_dir_env`/bulkhead ($XDG_RUNTIME_DIR, XDG Base Directory Specification);
//   4. /tmp/bulkhead-<uid>.
// An empty or relative variable counts as unset (the XDG spec says to ignore relative paths).
// The result is absolute and lexically normalised.
std::string DefaultRuntimeDir(uid_t uid, std::string_view runtime_directory_env,
                              std::string_view xdg_runtime_dir_env);

// DefaultRuntimeDir for getuid(), $RUNTIME_DIRECTORY and $XDG_RUNTIME_DIR.
std::string DefaultRuntimeDirFromEnvironment();

}  // namespace bulkhead
