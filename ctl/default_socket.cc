// SPDX-License-Identifier: MIT
// The control socket bulkheadctl connects to (see default_socket.h).
#include "ctl/default_socket.h"

#include <unistd.h>

#include <cstdlib>
#include <vector>

namespace bulkhead::ctl {
namespace {

bool IsAbsolute(std::string_view path) { return !path.empty() && path.front() == '/'; }

// Lexical normalisation of an absolute path, as config::NormalizePath does for absolute paths.
// REQUIRES: IsAbsolute(path).
std::string NormalizeAbsolute(std::string_view path) {
  std::vector<std::string_view> segments;
  size_t i = 0;
  while (i < path.size()) {
    size_t end = path.find('/', i);
    if (end == std::string_view::npos) end = path.size();
    const std::string_view segment = path.substr(i, end - i);
    i = end + 1;
    if (segment.empty() || segment == ".") continue;
    if (segment == "..") {
      if (!segments.empty()) segments.pop_back();  // "/.." is "/"
      continue;
    }
    segments.push_back(segment);
  }
  if (segments.empty()) return "/";
  std::string out;
  for (std::string_view segment : segments) {
    out += '/';
    out.append(segment);
  }
  return out;
}

std::string RuntimeDir(uid_t uid, std::string_view runtime_directory_env,
                       std::string_view xdg_runtime_dir_env) {
  const std::string_view first = runtime_directory_env.substr(0, runtime_directory_env.find(':'));
  if (IsAbsolute(first)) return NormalizeAbsolute(first);
  if (uid == 0) return "/run/bulkhead";
  if (IsAbsolute(xdg_runtime_dir_env)) {
    return NormalizeAbsolute(std::string(xdg_runtime_dir_env) + "/bulkhead");
  }
  return "/tmp/bulkhead-" + std::to_string(uid);
}

}  // namespace

std::string DefaultControlSocket(uid_t uid, std::string_view runtime_directory_env,
                                 std::string_view xdg_runtime_dir_env) {
  std::string dir = RuntimeDir(uid, runtime_directory_env, xdg_runtime_dir_env);
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
