// SPDX-License-Identifier: MIT
// ConfigError: one problem found in a config file, positioned at the offending key or value.
// Value type; thread-compatible.
#pragma once

#include <string>

namespace bulkhead::config {

struct ConfigError {
  std::string file;  // The config path as given to LoadConfigFile / ParseConfig.
  int line = 0;      // 1-based; 0 when the error has no position (unreadable file, no cells).
  int column = 0;    // 1-based, in characters as counted by toml++; 0 when unknown.
  // Dotted key path, TOML-quoted where a segment is not a bare key: "cells.payments.max_queue",
  // "supervisor.runtime_dir", "cells.payments", "cells.payments.command[1]"; "" for syntax errors.
  std::string key;
  std::string message;

  // "file:line:col: key: message", the form compilers use so that editors can jump to it.
  // ": key" is left out when key is empty, ":col" when column is 0, ":line:col" when line is 0.
  std::string ToString() const;
};

}  // namespace bulkhead::config
