// SPDX-License-Identifier: MIT
// TempDir: a fresh directory under /tmp that its owner removes, with everything in it, on
// destruction. Names are short (/tmp/<prefix>-XXXXXX) so that Unix socket paths inside stay far
// below the 108-byte sun_path limit. For tools, demos and tests; not for the supervisor's loop.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace bulkhead {

class TempDir {
 public:
  TempDir() = default;
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // Makes /tmp/<prefix>-XXXXXX (mkdtemp(3), mode 0700). REQUIRES: not created yet. Error names
  // the pattern and the errno.
  Status Create(std::string_view prefix);

  // Empty until Create succeeded.
  const std::string& path() const { return path_; }
  // path() + "/" + name.
  std::string Join(std::string_view name) const;

 private:
  std::string path_;
};

}  // namespace bulkhead
