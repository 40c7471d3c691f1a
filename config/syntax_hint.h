// SPDX-License-Identifier: MIT
// SyntaxHint: what to add to a TOML syntax error that toml++ reports without context. A bare
// duration, size or percentage (`stall_timeout = 3s`, `memory_max = 256M`, `cpu_max = 50%`) is
// not TOML: toml++ stops at the unit with "expected digit"; the hint says the value is a string
// and shows the line as it should read. Pure; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "config/config.h"

namespace bulkhead::config {

// `at` is where toml++ stopped in `toml_text` (1-based line and column, as its source_region).
// Returns "" when the text there is not a bare value with a unit; else a hint such as
// `durations are strings: stall_timeout = "3s"` (or `write "3s"` inside an array or inline
// table, where the key is not the value's own).
std::string SyntaxHint(std::string_view toml_text, SourcePosition at);

// The key path of the line `at` names, read from the text alone (toml++ gives none with a syntax
// error): the table header that encloses the line ("cells.payments" for `[cells.payments]`,
// "cells" for `[[cells]]`), then the line's own bare or dotted key when it starts with one
// (`stall_timeout = 3s`: "cells.payments.stall_timeout"); a header line is its own path. Lines
// inside multi-line strings are skipped. "" when neither is found.
std::string SyntaxErrorKey(std::string_view toml_text, SourcePosition at);

// Where the text ends, as a position: the line after a last newline, column 1 ("" is 1:1).
SourcePosition EndOf(std::string_view toml_text);

}  // namespace bulkhead::config
