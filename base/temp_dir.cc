// SPDX-License-Identifier: MIT
#include "base/temp_dir.h"

#include <stdlib.h>

#include <filesystem>
#include <system_error>

#include "base/check.h"

namespace bulkhead {

TempDir::~TempDir() {
  if (path_.empty()) return;
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

Status TempDir::Create(std::string_view prefix) {
  BH_CHECK(path_.empty());
  const std::string pattern = "/tmp/" + std::string(prefix) + "-XXXXXX";
  // mkdtemp fills in the X's even when it fails: the error names the pattern as asked.
  std::string path = pattern;
  if (::mkdtemp(path.data()) == nullptr) return Status::FromErrno("mkdtemp " + pattern);
  path_ = std::move(path);
  return Status::Ok();
}

std::string TempDir::Join(std::string_view name) const {
  std::string joined = path_;
  joined += '/';
  joined += name;
  return joined;
}

}  // namespace bulkhead
