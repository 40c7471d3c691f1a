// SPDX-License-Identifier: MIT
// Lexical arithmetic on POSIX paths, as the config loader resolves relative paths: pure string
// operations, no filesystem access and no symlink resolution. Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace bulkhead {

bool IsAbsolutePath(std::string_view path);

// Collapses repeated '/', drops "." segments and a trailing '/', and lets ".." remove the segment
// before it ("/a/b/../c" -> "/a/c"). ".." at the root stays at the root ("/.." -> "/"); leading
// ".." segments of a relative path are kept ("../a"). An empty or all-"." path gives ".".
// Lexical: "a/.." gives "." even when a is a symlink to another directory.
std::string NormalizePath(std::string_view path);

// `path` itself when absolute, else `path` appended to `base_dir`; normalised either way.
// REQUIRES: base_dir is absolute.
std::string ResolvePath(std::string_view path, std::string_view base_dir);

// The directory part of `path`, as dirname(3) without touching the filesystem:
// "/etc/bulkhead.toml" -> "/etc", "/bulkhead.toml" -> "/", "bulkhead.toml" -> ".", "" -> ".".
std::string ParentDirectory(std::string_view path);

}  // namespace bulkhead
