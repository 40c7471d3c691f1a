// SPDX-License-Identifier: MIT
// Lexical path arithmetic for the config loader (see lexical_path.h). Pure functions; thread-safe.
#include "base/lexical_path.h"

#include <vector>

#include "base/check.h"

namespace bulkhead {

bool IsAbsolutePath(std::string_view path) { return !path.empty() && path.front() == '/'; }

std::string NormalizePath(std::string_view path) {
  const bool absolute = IsAbsolutePath(path);
  std::vector<std::string_view> segments;
  size_t i = 0;
  while (i < path.size()) {
    size_t end = path.find('/', i);
    if (end == std::string_view::npos) end = path.size();
    const std::string_view segment = path.substr(i, end - i);
    i = end + 1;
    if (segment.empty() || segment == ".") continue;
    if (segment == "..") {
      if (!segments.empty() && segments.back() != "..") {
        segments.pop_back();
        continue;
      }
      if (absolute) continue;  // "/.." is "/".
    }
    segments.push_back(segment);
  }

  if (segments.empty()) return absolute ? std::string("/") : std::string(".");
  std::string out;
  for (size_t s = 0; s < segments.size(); ++s) {
    if (absolute || s > 0) out += '/';
    out.append(segments[s]);
  }
  return out;
}

std::string ResolvePath(std::string_view path, std::string_view base_dir) {
  if (IsAbsolutePath(path)) return NormalizePath(path);
  BH_CHECK(IsAbsolutePath(base_dir));
  std::string joined(base_dir);
  joined += '/';
  joined.append(path);
  return NormalizePath(joined);
}

std::string ParentDirectory(std::string_view path) {
  // Trailing slashes do not name a segment: "a/b/" is in "a", like dirname(3).
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  const size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) return ".";
  std::string_view dir = path.substr(0, slash);
  while (dir.size() > 1 && dir.back() == '/') dir.remove_suffix(1);
  if (dir.empty()) return "/";
  return std::string(dir);
}

}  // namespace bulkhead
