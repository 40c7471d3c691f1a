// SPDX-License-Identifier: MIT
// One [cells.NAME] table of the config (docs/config.md, "[cells.NAME]"): every key checked (by
// its ValueSpec in config/config_keys.h, or for the few keys of kind kOwn by a case of its own),
// the defaults filled, the checks across keys, the cell's sockets recorded for the cross-file
// checks, and the warnings (config/cell_warnings.h). Internal to config/; thread-compatible.
#pragma once

#include <optional>
#include <string_view>

#include "config/config.h"
#include "config/socket_checks.h"
#include "config/value_reader.h"

namespace bulkhead::config {

// A cell's name, as [cells.NAME] and `needs` write it: 1 to 64 of A-Z, a-z, 0-9, '_' and '-', not
// starting with '-'.
bool IsValidCellName(std::string_view name);

// The cell `name` = `node` of [cells], or nullopt after its errors went to `reader`. `supervisor`
// is the parsed [supervisor] (runtime_dir and max_payload_bytes give defaults).
std::optional<CellConfig> ParseCellTable(const toml::key& name, const toml::node& node,
                                         const SupervisorConfig& supervisor, ValueReader& reader,
                                         SocketChecks& sockets);

}  // namespace bulkhead::config
