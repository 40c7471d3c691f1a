// SPDX-License-Identifier: MIT
// ConfigError::ToString.
#include "config/config_error.h"

namespace bulkhead::config {

std::string ConfigError::ToString() const {
  std::string out = file;
  if (line > 0) {
    out += ':';
    out += std::to_string(line);
    if (column > 0) {
      out += ':';
      out += std::to_string(column);
    }
  }
  out += ": ";
  if (!key.empty()) {
    out += key;
    out += ": ";
  }
  out += message;
  return out;
}

}  // namespace bulkhead::config
