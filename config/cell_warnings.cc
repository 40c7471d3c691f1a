// SPDX-License-Identifier: MIT
// The warnings about a valid cell (config/cell_warnings.h). Looks at the filesystem: stat(2),
// access(2).
#include "config/cell_warnings.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string_view>

namespace bulkhead::config {
namespace {

using std::chrono::milliseconds;

// Why exec(2) of `file` would fail here: "" when it is a regular file we may execute.
std::string NotExecutable(const std::string& file) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) return std::strerror(errno);
  if (!S_ISREG(st.st_mode)) return "not a regular file";
  if (::access(file.c_str(), X_OK) != 0) return "not executable (no x permission)";
  return "";
}

// Why chdir(2) to `dir` would fail here ("does not exist", "is not a directory", the errno
// text): "" when it is a directory.
std::string NotADirectory(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    return errno == ENOENT ? "does not exist"
                           : "cannot be reached: " + std::string(std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) return "is not a directory";
  return "";
}

// An argument that reads as a relative path to a file: "app.py", "./run.sh", "lib/main.js";
// not an option ("-m"), an assignment ("a=b"), a URL, an absolute path, a pattern (a regular
// expression or a glob: "^api/v[0-9]+$", "logs/*.gz"), a CIDR network or a ratio ("10.0.0.0/8",
// "3/4") or a sed script ("s/a/b/g").
bool LooksLikeRelativeScript(std::string_view arg) {
  if (arg.empty() || arg.front() == '-' || arg.front() == '/' ||
      arg.find_first_of("=: \t*?[]^$\\{}()|+") != std::string_view::npos) {
    return false;
  }
  if (arg.find_first_not_of("0123456789./") == std::string_view::npos) return false;
  if ((arg.starts_with("s/") || arg.starts_with("y/")) &&
      std::count(arg.begin(), arg.end(), '/') >= 3) {
    return false;
  }
  if (arg.find('/') != std::string_view::npos) return true;
  static constexpr std::array<std::string_view, 12> kScriptSuffixes = {
      ".py", ".sh", ".bash", ".js", ".mjs", ".cjs", ".ts", ".rb", ".pl", ".php", ".lua", ".jar"};
  return std::any_of(kScriptSuffixes.begin(), kScriptSuffixes.end(),
                     [arg](std::string_view suffix) { return arg.ends_with(suffix); });
}

}  // namespace

// request_timeout answers a request but leaves its slot taken until the worker answers; only
// stall_timeout replaces a worker that never does.
void WarnAboutTimeouts(ValueReader& reader, const CellConfig& cell, const std::string& path,
                       SourcePosition request_timeout_at, SourcePosition stall_timeout_at) {
  const auto text = [](milliseconds d) { return Quoted(std::to_string(d.count()) + "ms"); };
  if (cell.request_timeout.count() > 0 && cell.stall_timeout.count() == 0) {
    reader.AddWarning(request_timeout_at, JoinKey(path, "request_timeout"),
                      "set without stall_timeout: a request answered FAILED timeout keeps its slot "
                      "until the worker answers, so a hung worker holds its slots, and the cell, "
                      "forever; set stall_timeout too (docs/config.md, Restarts, \"Timeouts\")");
  } else if (cell.request_timeout.count() > 0 && cell.stall_timeout < cell.request_timeout) {
    reader.AddWarning(stall_timeout_at, JoinKey(path, "stall_timeout"),
                      "is shorter than request_timeout (" + text(cell.request_timeout) +
                          "): a worker with one request in flight that is allowed " +
                          text(cell.request_timeout) + " is killed as stalled after " +
                          text(cell.stall_timeout) +
                          "; make stall_timeout at least request_timeout");
  }
}

// restart_max_delay caps every wait, a crash loop's too (cell/restart_policy.h): below
// start_limit_interval / start_limit_burst it sets the loop's pace, and the start limit, hit at
// every end, never slows it.
void WarnAboutCrashLoopPace(ValueReader& reader, const CellConfig& cell, const std::string& path,
                            SourcePosition restart_max_delay_at) {
  if (cell.start_limit_interval.count() == 0 ||
      cell.start_limit_action != StartLimitAction::kBackoff) {
    return;
  }
  const milliseconds pace = cell.start_limit_interval / cell.start_limit_burst;
  if (cell.restart_max_delay >= pace) return;
  const auto text = [](milliseconds d) { return Quoted(std::to_string(d.count()) + "ms"); };
  reader.AddWarning(restart_max_delay_at, JoinKey(path, "restart_max_delay"),
                    text(cell.restart_max_delay) +
                        " is below start_limit_interval / start_limit_burst (" + text(pace) +
                        "): a crash loop starts the worker every " + text(cell.restart_max_delay) +
                        ", more than start_limit_burst (" + std::to_string(cell.start_limit_burst) +
                        ") times per start_limit_interval, as restart_max_delay caps every wait; "
                        "raise restart_max_delay to " +
                        text(pace) + " for the start limit's pace (docs/config.md, Restarts)");
}

// exec(2) happens later, as another user maybe, on a host that may not be this one: what does
// not resolve here is a warning, not an error (docs/config.md, "Warnings", says why).
// `command_at`: the position of each element of `command`.
void WarnAboutCommand(ValueReader& reader, const CellConfig& cell, const std::string& path,
                      const std::vector<SourcePosition>& command_at,
                      const std::optional<WrittenText>& working_directory) {
  // chdir(2) comes before exec: a missing directory is what the worker's start fails on, and
  // every relative script "missing" in it follows from it, so it is said once, at its key.
  const std::string cwd_problem = NotADirectory(cell.working_directory);
  if (!cwd_problem.empty() && working_directory) {
    std::string message = Quoted(working_directory->text);
    if (!working_directory->text.starts_with('/')) {
      message += " is relative: resolved against the config file's directory " +
                 Quoted(reader.base_dir()) + ", it is " + Quoted(cell.working_directory) + ",";
    }
    message +=
        " " + cwd_problem + "; the worker's start will fail (chdir); create it or correct the path";
    reader.AddWarning(working_directory->at, JoinKey(path, "working_directory"),
                      std::move(message));
  }
  if (command_at.size() != cell.command.size()) return;
  const std::string key = JoinKey(path, "command");
  const std::string& program = cell.command[0];
  const auto under_cwd = [&cell](const std::string& name) {
    return name.starts_with('/') ? name : JoinPath(cell.working_directory, name);
  };
  if (program.find('/') != std::string::npos) {
    if (std::string why = NotExecutable(program); !why.empty()) {
      reader.AddWarning(command_at[0], key + "[0]",
                        program + ": " + why + "; the worker's start will fail (exec)");
    }
  } else {
    std::string search_path = kDefaultWorkerPath;
    for (const auto& [name, value] : cell.environment) {
      if (name == "PATH") search_path = value;
    }
    bool found = false;
    for (size_t begin = 0; !found && begin <= search_path.size();) {
      size_t end = std::min(search_path.find(':', begin), search_path.size());
      // POSIX: an empty PATH element is the current directory, the worker's working_directory.
      std::string dir = search_path.substr(begin, end - begin);
      found = NotExecutable(under_cwd(JoinPath(dir.empty() ? "." : dir, program))).empty();
      begin = end + 1;
    }
    if (!found) {
      reader.AddWarning(
          command_at[0], key + "[0]",
          Quoted(program) +
              " is not an executable file in any directory of the "
              "worker's PATH (" +
              search_path + ", from " +
              (search_path == kDefaultWorkerPath ? std::string("the default; bulkheadd's own "
                                                               "PATH is not passed on")
                                                 : JoinKey(JoinKey(path, "environment"), "PATH")) +
              "); the worker's start will fail (exec); write an absolute path");
    }
  }
  // python3 app.py: the script is opened by the worker, from its working directory.
  for (size_t i = 1; i < cell.command.size() && cwd_problem.empty(); ++i) {
    const std::string& arg = cell.command[i];
    if (!LooksLikeRelativeScript(arg)) continue;
    struct stat st {};
    if (::stat(under_cwd(arg).c_str(), &st) == 0) continue;
    std::string message = "relative path " + Quoted(arg) +
                          " is opened by the worker from its working_directory " +
                          Quoted(cell.working_directory) +
                          " (not from the config file's directory), where there is no such "
                          "file; write an absolute path or set working_directory";
    reader.AddWarning(command_at[i], key + "[" + std::to_string(i) + "]", std::move(message));
  }
}

}  // namespace bulkhead::config
