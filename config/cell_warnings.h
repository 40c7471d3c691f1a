// SPDX-License-Identifier: MIT
// The warnings about a valid cell (docs/config.md, "Warnings"): what is valid but likely wrong.
// They never refuse the file. Internal to config/; thread-compatible.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/value_reader.h"

namespace bulkhead::config {

// request_timeout without stall_timeout, or stall_timeout shorter than request_timeout: a hung
// worker would keep its slots. `path` is the cell's key path; the positions are where the two
// keys were written.
void WarnAboutTimeouts(ValueReader& reader, const CellConfig& cell, const std::string& path,
                       SourcePosition request_timeout_at, SourcePosition stall_timeout_at);

// restart_max_delay below start_limit_interval / start_limit_burst with start_limit_action
// "backoff": the crash loop goes at restart_max_delay's pace, faster than the start limit's.
// `restart_max_delay_at`: where it was written (or where the cell's table starts).
void WarnAboutCrashLoopPace(ValueReader& reader, const CellConfig& cell, const std::string& path,
                            SourcePosition restart_max_delay_at);

// Where a key's value was written, and its text as written.
struct WrittenText {
  SourcePosition at;
  std::string text;
};

// A working_directory that is not a directory on this host now, said at the key (how a relative
// one was resolved, and against what); then a command[0] that does not resolve to an executable
// file on this host now (in the worker's PATH when it has no '/'), and a relative script argument
// that names no file in an existing working_directory. `command_at`: the position of each element
// of `command`; `working_directory`: as written, when it was.
void WarnAboutCommand(ValueReader& reader, const CellConfig& cell, const std::string& path,
                      const std::vector<SourcePosition>& command_at,
                      const std::optional<WrittenText>& working_directory);

}  // namespace bulkhead::config
