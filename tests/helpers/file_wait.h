// SPDX-License-Identifier: MIT
// WaitForFile: waits for something to hold of a file (that it exists, that it holds a line) without
// polling on a timer: woken by inotify(7) on the file's folder. Used by the test worker (its
// `wait-file` command) and by tests whose other thread writes a file. Blocks its thread;
// thread-compatible.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

namespace bulkhead::testing {

// Returns true once `ready()` returns true, false if `timeout` passed first (nullopt: waits as
// long as it takes). `ready` is called first and again after each change inotify reports in the
// folder of `path`: a file created, moved in, written, closed after writing, or its attributes
// changed. The watch is set before the first call, so a change made in between is not missed.
// Without inotify (or a folder to watch) it looks once a second instead, which no test relies on.
bool WaitForFile(const std::string& path, const std::function<bool()>& ready,
                 std::optional<std::chrono::milliseconds> timeout);

}  // namespace bulkhead::testing
