// SPDX-License-Identifier: MIT
// Default runtime directory (see runtime_dir.h). Reads the environment only in
// DefaultRuntimeDirFromEnvironment.
#include "base/runtime_dir.h"

#include <unistd.h>

#include <cstdlib>

#include "base/lexical_path.h"

namespace bulkhead {

std::string DefaultRuntimeDir(uid_t uid, std::string_view runtime_directory_env,
                              std::string_view xdg_runtime_dir_env) {
  const std::string_view first_runtime_directory =
      runtime_directory_env.substr(0, runtime_directory_env.find(':'));
  if (IsAbsolutePath(first_runtime_directory)) return NormalizePath(first_runtime_directory);
  if (uid == 0) return "/run/bulkhead";
  if (IsAbsolutePath(xdg_runtime_dir_env)) {
    return NormalizePath(std::string(xdg_runtime_dir_env) + "/bulkhead");
  }
  return "/tmp/bulkhead-" + std::to_string(uid);
}

std::string DefaultRuntimeDirFromEnvironment() {
  const char* runtime_directory = std::getenv("RUNTIME_DIRECTORY");
  const char* xdg_runtime_dir = std::getenv("XDG_RUNTIME_DIR");
  return DefaultRuntimeDir(getuid(), runtime_directory ? runtime_directory : "",
                           xdg_runtime_dir ? xdg_runtime_dir : "");
}

}  // namespace bulkhead
