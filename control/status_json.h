// SPDX-License-Identifier: MIT
// StatusJson: one cell's member of the `status` response of the control socket (docs/control.md,
// "status response"): the cell's snapshot and the lifecycle settings of its config, as JSON. Pure
// function; thread-safe.
#pragma once

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "control/cell_snapshot.h"

namespace bulkhead::control {

// `s` with `config`'s policy: one element of the response's `cells` array.
nlohmann::json CellStatusJson(const CellSnapshot& s, const config::CellConfig& config);

}  // namespace bulkhead::control
