// SPDX-License-Identifier: MIT
// bulkheadctl: a thin client of bulkheadd's control socket (docs/control.md). Parse the command
// line and run one subcommand (ctl/commands.h), which asks the supervisor, prints, and returns an
// exit code from base/exit_status.h.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/ascii.h"
#include "base/closest_match.h"
#include "base/duration.h"
#include "base/exit_status.h"
#include "base/version.h"
#include "ctl/commands.h"
#include "ctl/default_socket.h"
#include "ctl/lifecycle_wait.h"

namespace bulkhead::ctl {
namespace {

// `--timeout: invalid duration "5": a unit is required...; expected ... such as "500ms"...`:
// ParseDuration's message names the text and gives the accepted form, once; a zero duration
// `--watch: "0s" must be more than 0`.
// Both flags must be more than 0: a bare zero ("0", "00") is told so, not told to write "0s".
std::string DurationFlagError(const char* flag, const std::string& text,
                              const Result<std::chrono::milliseconds>& parsed) {
  const bool bare_zero = !text.empty() && text.find_first_not_of('0') == std::string::npos;
  if (!parsed.ok() && !bare_zero) return std::string(flag) + ": " + parsed.status().message();
  return std::string(flag) + ": \"" + text + "\" must be more than 0 (a duration such as " +
         "\"500ms\" or \"2s\")";
}

// The shortest `status --watch` interval, as watch(1)'s 0.1 s minimum.
constexpr std::chrono::milliseconds kMinWatchInterval{100};

// `--watch ""` (or `--watch=`): CLI11 reads it as --watch with no value, the 2 s default; an
// empty interval given on purpose is refused instead. Returns the offending flag, or "".
std::string EmptyWatchInterval(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--watch=" || arg == "-w=") return std::string(arg);
    if ((arg == "--watch" || arg == "-w") && i + 1 < argc && argv[i + 1][0] == '\0') {
      return std::string(arg) + " \"\"";
    }
    if (arg == "--") break;
  }
  return "";
}

// `unknown command "stats"; did you mean "status"? ...` for a word that names no subcommand.
std::string UnknownCommand(CLI::App& app, const std::string& word) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    names.push_back(sub->get_name());
  }
  const std::vector<std::string_view> candidates(names.begin(), names.end());
  return "unknown command \"" + word + "\"" + DidYouMean(word, candidates) +
         " (bulkheadctl --help lists the commands)";
}

int Main(int argc, char** argv) {
  CLI::App app{"bulkheadctl: inspect bulkheadd and send requests to its cells (docs/control.md)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", VersionLine("bulkheadctl"));
  app.fallthrough();  // --socket and --timeout may also follow the subcommand
  std::string socket_flag;
  std::string timeout_text;
  app.add_option("-s,--socket", socket_flag,
                 "control socket (default: $BULKHEAD_SOCKET, else <runtime_dir>/control.sock as "
                 "bulkheadd computes it: " +
                     DefaultControlSocketFromEnvironment() + ")");
  app.add_option("-t,--timeout", timeout_text,
                 "bound on the whole command, e.g. 500ms, 2s, 1m30s (default: 10s for each "
                 "control-socket exchange, none for call's reply)");

  CLI::App* status = app.add_subcommand("status", "show every cell, or one, as a table or JSON");
  std::string status_cell;
  bool json = false;
  status->add_option("cell", status_cell, "only this cell");
  status->add_flag("--json", json, "print the supervisor's JSON response (stable schema)");
  std::string watch_text;
  CLI::Option* watch_option =
      status
          ->add_option("-w,--watch", watch_text,
                       "redraw in place every INTERVAL (default 2s, at least 100ms, e.g. "
                       "500ms) until Ctrl-C; a word that starts with a letter or '_' is the "
                       "cell, not INTERVAL")
          ->expected(0, 1);

  CLI::App* metrics =
      app.add_subcommand("metrics", "print every cell's metrics in the Prometheus text format");

  CLI::App* call = app.add_subcommand("call", "send one request to a cell and print the reply");
  std::string call_cell;
  std::string data;
  bool raw = false;
  call->add_option("cell", call_cell, "the cell")->required();
  CLI::Option* data_option =
      call->add_option("-d,--data", data, "the request payload (default: all of stdin)");
  call->add_flag("--raw", raw, "print the reply payload exactly, without adding a newline");

  std::vector<std::string> command_cells;
  bool all_cells = false;
  bool no_block = false;
  std::vector<CLI::App*> cell_commands;
  for (auto [name, what] : {
           std::pair{"start", "start stopped or failed cells' workers and wait until they run"},
           std::pair{"stop",
                     "stop cells' workers and wait until they are gone; requests are refused "
                     "until start"},
           std::pair{"restart",
                     "replace cells' workers gracefully and wait until the new ones run"},
       }) {
    CLI::App* sub = app.add_subcommand(name, what);
    CLI::Option* cells_option = sub->add_option("cell", command_cells, "the cells");
    CLI::Option* all_option = sub->add_flag(
        "--all", all_cells, "every cell, in config order (stop: a cell before the cells it needs)");
    cells_option->excludes(all_option);
    sub->add_flag("--no-block", no_block,
                  "return once the supervisor has accepted the command, without waiting");
    // One of CELL... or --all: checked after parsing, so that the message names what is missing
    // (CLI11's require_option would count --no-block and list it).
    cell_commands.push_back(sub);
  }

  bool quiet = false;
  std::vector<std::string> state_cells;
  CLI::App* is_active = app.add_subcommand(
      "is-active", "print each cell's state; exit 0 if at least one is running, else 3");
  CLI::App* is_failed = app.add_subcommand(
      "is-failed", "print each cell's state; exit 0 if at least one is failed, else 1");
  for (CLI::App* sub : {is_active, is_failed}) {
    sub->add_option("cell", state_cells, "the cells")->required();
    sub->add_flag("-q,--quiet", quiet, "print nothing; only the exit code tells");
  }

  CLI::App* logs = app.add_subcommand(
      "logs", "print a cell's recent log lines (journalctl when bulkheadd logs to the journal)");
  std::string logs_cell;
  bool follow = false;
  uint64_t logs_lines = 0;
  logs->add_option("cell", logs_cell, "the cell")->required();
  logs->add_flag("-f,--follow", follow, "keep printing new lines until Ctrl-C");
  CLI::Option* lines_option =
      logs->add_option("-n,--lines", logs_lines, "only the last N lines")
          ->check(CLI::Validator(
              [](const std::string& text) {
                const bool digits =
                    !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
                return digits ? std::string() : std::string("must be a whole number, 0 or more");
              },
              "N"));

  CLI::App* reload = app.add_subcommand(
      "reload",
      "re-read bulkheadd's config file, apply the changes and wait until the cells it restarted "
      "run their new workers (docs/config.md, Reload)");
  reload->add_flag("--no-block", no_block,
                   "return once the supervisor has applied the file, without waiting for the "
                   "restarted cells");

  CLI::App* reexec = app.add_subcommand(
      "reexec",
      "make bulkheadd execute its binary as it is on disk now (an upgrade) in the same process, "
      "keeping its workers, sockets and counters, and wait until the new one answers "
      "(docs/reexec.md)");
  CLI::Option* reexec_no_block = reexec->add_flag(
      "--no-block", no_block, "return once bulkheadd has begun, without waiting for the new image");
  std::string settle_text;
  CLI::Option* settle_option = reexec->add_option("--settle-timeout", settle_text,
                     "how long the re-exec may wait for cells starting, stopping or swapping "
                     "workers to settle before it is refused, e.g. 30s (default: the longest "
                     "start_timeout + stop_timeout of the cells, at most 2m)");
  bool join = false;
  CLI::Option* join_option = reexec->add_flag(
      "--join", join,
      "ask for no re-exec: wait for the one under way (as long as bulkheadd says it may last), "
      "or say how the last one ended when none is (after a reexec that exited 75)");
  join_option->excludes(settle_option)->excludes(reexec_no_block);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // An unknown command: CLI11 would only say that a subcommand is required.
    const std::vector<std::string> extra = app.remaining();
    if (app.get_subcommands().empty() && !extra.empty() && !extra.front().starts_with('-')) {
      PrintError(UnknownCommand(app, extra.front()));
      return kExitUsage;
    }
    // CLI11 would say "cell excludes --all".
    if (dynamic_cast<const CLI::ExcludesError*>(&e) != nullptr) {
      for (CLI::App* sub : cell_commands) {
        if (!sub->parsed()) continue;
        PrintError(sub->get_name() + ": name cells or --all, not both");
        return kExitUsage;
      }
    }
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  }

  Deadline deadline;
  if (!timeout_text.empty()) {
    Result<std::chrono::milliseconds> timeout = ParseDuration(timeout_text);
    if (!timeout.ok() || timeout->count() <= 0) {
      // A zero bound would end every command before it could reach bulkheadd.
      PrintError(DurationFlagError("--timeout", timeout_text, timeout));
      return kExitUsage;
    }
    deadline = std::chrono::steady_clock::now() + *timeout;
  }
  const std::string socket = ControlSocketFromEnvironment(socket_flag);

  if (status->parsed() && watch_option->count() > 0) {
    if (std::string empty = EmptyWatchInterval(argc, argv); !empty.empty()) {
      PrintError("--watch: an empty interval (" + empty +
                 "); give one such as \"500ms\" or \"2s\", or no value for 2s");
      return kExitUsage;
    }
    std::chrono::milliseconds interval{2000};
    // `status --watch web`: CLI11 gives --watch the word after it. A cell's name starts with a
    // letter, '_' or a digit, never '-' (config/cell_table.h); an interval with a digit. A word
    // that starts with a letter or '_' is the cell; any other ("5s", "-1", ".5s") is an interval,
    // refused by ParseDuration when it is none, so `--watch -1` names --watch, not a cell "-1".
    if (!watch_text.empty() && (IsAsciiLetter(watch_text.front()) || watch_text.front() == '_')) {
      if (!status_cell.empty()) {
        PrintError("--watch: \"" + watch_text +
                   "\" is not an interval (a duration such as \"500ms\" or \"2s\"), and the "
                   "cell is \"" +
                   status_cell + "\" already");
        return kExitUsage;
      }
      status_cell = std::exchange(watch_text, std::string());
    }
    if (!watch_text.empty()) {
      Result<std::chrono::milliseconds> parsed = ParseDuration(watch_text);
      if (!parsed.ok() || parsed->count() <= 0) {
        PrintError(DurationFlagError("--watch", watch_text, parsed));
        return kExitUsage;
      }
      // watch(1)'s floor: a shorter interval redraws faster than anyone reads and turns the
      // watch into a load on bulkheadd's control socket.
      if (*parsed < kMinWatchInterval) {
        PrintError("--watch: \"" + watch_text + "\" is less than the minimum interval, " +
                   std::to_string(kMinWatchInterval.count()) + "ms (a duration such as " +
                   "\"500ms\" or \"2s\")");
        return kExitUsage;
      }
      interval = *parsed;
    }
    std::optional<std::chrono::milliseconds> timeout;
    if (!timeout_text.empty()) timeout = ParseDuration(timeout_text).value();
    return WatchStatusCommand(socket, status_cell, json, interval, timeout);
  }
  if (metrics->parsed()) {
    if (!deadline) deadline = std::chrono::steady_clock::now() + kDefaultControlTimeout;
    return MetricsCommand(socket, deadline);
  }
  if (status->parsed()) {
    if (!deadline) deadline = std::chrono::steady_clock::now() + kDefaultControlTimeout;
    return StatusCommand(socket, status_cell, json, deadline);
  }
  if (reload->parsed()) return ReloadCommand(socket, no_block, deadline);
  if (reexec->parsed()) {
    if (join) return ReexecJoinCommand(socket, deadline);
    std::optional<std::chrono::milliseconds> settle_timeout;
    if (settle_option->count() > 0) {
      // An empty value (an unset variable in a script) is an error, not the default bound.
      if (settle_text.empty()) {
        PrintError("--settle-timeout: an empty duration; give one such as \"30s\"");
        return kExitUsage;
      }
      Result<std::chrono::milliseconds> parsed = ParseDuration(settle_text);
      if (!parsed.ok()) {
        // 0s is a bound too: refused at once unless every cell can be carried now.
        PrintError("--settle-timeout: " + parsed.status().message());
        return kExitUsage;
      }
      settle_timeout = *parsed;
    }
    return ReexecCommand(socket, no_block, deadline, settle_timeout);
  }
  for (CLI::App* sub : cell_commands) {
    if (!sub->parsed()) continue;
    if (command_cells.empty() && !all_cells) {
      PrintError(sub->get_name() + ": name one or more cells, or --all");
      return kExitUsage;
    }
    return CellCommands(socket, sub->get_name(), command_cells, all_cells, no_block, deadline);
  }
  if (is_active->parsed() || is_failed->parsed()) {
    if (!deadline) deadline = std::chrono::steady_clock::now() + kDefaultControlTimeout;
    return is_active->parsed()
               ? IsStateCommand(socket, state_cells, &IsActiveState, kExitNotRunning, quiet,
                                deadline)
               : IsStateCommand(socket, state_cells, &IsFailedState, kExitFailure, quiet, deadline);
  }
  if (logs->parsed()) {
    std::optional<uint64_t> lines;
    if (lines_option->count() > 0) lines = logs_lines;
    return LogsCommand(socket, logs_cell, follow, lines, deadline);
  }
  std::optional<std::string> payload;
  if (data_option->count() > 0) payload = data;
  return CallCommand(socket, call_cell, payload, raw, deadline);
}

}  // namespace
}  // namespace bulkhead::ctl

int main(int argc, char** argv) { return bulkhead::ctl::Main(argc, argv); }
