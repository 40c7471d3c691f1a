// SPDX-License-Identifier: MIT
// BULKHEAD_VERSION is defined for this file alone (base/CMakeLists.txt), from PROJECT_VERSION.
#include "base/version.h"

namespace bulkhead {

std::string_view Version() { return BULKHEAD_VERSION; }

std::string VersionLine(std::string_view program) {
  std::string line(program);
  line += ' ';
  line.append(Version());
  return line;
}

}  // namespace bulkhead
