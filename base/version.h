// SPDX-License-Identifier: MIT
// The version bulkhead was built as (CMake's PROJECT_VERSION), in one place: `bulkheadd --version`,
// `bulkheadctl --version` and the status JSON's supervisor.version all read it from here. Pure;
// thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace bulkhead {

// "0.1.0".
std::string_view Version();
// What `PROGRAM --version` prints, without the newline: "bulkheadd 0.1.0" (the GNU coding
// standards' --version line: the program's name, then its version).
std::string VersionLine(std::string_view program);

}  // namespace bulkhead
