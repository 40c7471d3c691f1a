// SPDX-License-Identifier: MIT
// The control socket bulkheadctl connects to (see default_socket.h).
#include "ctl/default_socket.h"

#include <unistd.h>

#include <cstdlib>

#include "base/runtime_dir.h"

namespace bulkhead::ctl {

std::string DefaultControlSocket(uid_t uid, std::string_view runtime_directory_env,
                                 std::string_view xdg_runtime_dir_env) {
  // The same rule as the config's default control_socket: <runtime_dir>/control.sock.
  std::string dir = DefaultRuntimeDir(uid, runtime_directory_env, xdg_runtime_dir_env);
  if (dir != "/") dir += '/';
  return dir + "control.sock";
}

std::string DefaultControlSocketFromEnvironment() {
  const char* runtime_directory = std::getenv("RUNTIME_DIRECTORY");
  const char* xdg_runtime_dir = std::getenv("XDG_RUNTIME_DIR");
  return DefaultControlSocket(::getuid(), runtime_directory ? runtime_directory : "",
                              xdg_runtime_dir ? xdg_runtime_dir : "");
}

std::string ControlSocketFromEnvironment(std::string_view flag) {
  if (!flag.empty()) return std::string(flag);
  const char* env = std::getenv("BULKHEAD_SOCKET");
  if (env != nullptr && *env != '\0') return env;
  return DefaultControlSocketFromEnvironment();
}

}  // namespace bulkhead::ctl
