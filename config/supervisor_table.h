// SPDX-License-Identifier: MIT
// The [supervisor] table of the config (docs/config.md, "[supervisor]"): every key checked and
// filled in, the defaults derived from runtime_dir, and the socket paths it names recorded for the
// cross-file checks. Internal to config/; thread-compatible.
#pragma once

#include <string>

#include "config/config.h"
#include "config/socket_checks.h"
#include "config/value_reader.h"

namespace bulkhead::config {

// Fills `out` from `table`, null when [supervisor] is absent (or not a table): then every key
// takes its default. `default_runtime_dir` is runtime_dir's default (base/runtime_dir.h). Errors
// go to `reader`; the control socket and a Unix metrics_listen go to `sockets`.
void ParseSupervisorTable(const toml::table* table, const std::string& default_runtime_dir,
                          ValueReader& reader, SocketChecks& sockets, SupervisorConfig& out);

}  // namespace bulkhead::config
