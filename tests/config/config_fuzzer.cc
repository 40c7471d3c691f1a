// SPDX-License-Identifier: MIT
// libFuzzer harness for ParseConfig: any input must give either a Config or sorted errors, and
// must never throw or crash. Built only with -DBULKHEAD_FUZZ=ON and clang (see CMakeLists.txt).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "base/check.h"
#include "config/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const bulkhead::config::LoadResult result =
      bulkhead::config::ParseConfig(text, "/etc/bulkhead/fuzz.toml");
  BH_CHECK(result.config.has_value() == result.errors.empty());
  for (size_t i = 1; i < result.errors.size(); ++i) {
    const auto& prev = result.errors[i - 1];
    const auto& cur = result.errors[i];
    BH_CHECK(prev.line < cur.line || (prev.line == cur.line && prev.column <= cur.column));
  }
  if (result.config) {
    BH_CHECK(!result.config->cells.empty());
    for (const auto& cell : result.config->cells) {
      BH_CHECK(!cell.command.empty() && cell.socket.front() == '/' &&
               cell.worker_socket.front() == '/' && cell.working_directory.front() == '/');
    }
  }
  return 0;
}
