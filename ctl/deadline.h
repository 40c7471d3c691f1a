// SPDX-License-Identifier: MIT
// Deadline: an optional point in time by which a blocking bulkheadctl operation must end, and its
// conversion to a poll(2) timeout. Pure functions of the clock; thread-safe.
#pragma once

#include <chrono>
#include <optional>

namespace bulkhead::ctl {

// Empty: no deadline, wait as long as it takes.
using Deadline = std::optional<std::chrono::steady_clock::time_point>;

// Whole milliseconds left until `deadline` for poll(2), rounded up: -1 (forever) without one, 0
// once it has passed.
int PollTimeoutMs(Deadline deadline);

}  // namespace bulkhead::ctl
