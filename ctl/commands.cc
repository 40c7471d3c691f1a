// SPDX-License-Identifier: MIT
// bulkheadctl's subcommands; see commands.h.
#include "ctl/commands.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/duration.h"
#include "base/exit_status.h"
#include "base/log.h"
#include "ctl/cell_call.h"
#include "ctl/control_client.h"
#include "ctl/default_socket.h"
#include "ctl/lifecycle_wait.h"
#include "ctl/log_command.h"
#include "ctl/reexec_command.h"
#include "ctl/reload_command.h"
#include "ctl/status_table.h"
#include "ctl/status_view.h"
#include "ctl/stop_waves.h"
#include "ipc/frame.h"
namespace bulkhead::ctl {
namespace {

// Bound on how long start/stop/restart wait for the outcome when --timeout is not given: systemd's
// DefaultTimeoutStartSec= (systemd-system.conf(5)).
constexpr std::chrono::seconds kDefaultWaitTimeout{90};

// How often a waiting command (start/stop/restart, logs --follow) asks the supervisor again.
constexpr std::chrono::milliseconds kPollInterval{100};

// Writes all of `bytes` to `stream`; false on error.
bool WriteAll(std::FILE* stream, const std::string& bytes) {
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), stream) != bytes.size()) {
    return false;
  }
  return std::fflush(stream) == 0;
}

// Prints why `reply` has no response and returns the exit code for it.
int ReportNoResponse(const ControlReply& reply) {
  if (reply.unreachable) {
    PrintError(DescribeUnreachable(reply));
    return kExitUnreachable;
  }
  PrintError(reply.error);
  return kExitFailure;
}

// Asks for the status of every cell or of `cell`. On failure prints why and sets *exit_code.
std::optional<nlohmann::json> QueryStatus(const std::string& socket, const std::string& cell,
                                          Deadline deadline, int* exit_code) {
  ControlReply reply = QueryControl(socket, StatusRequest(cell), deadline);
  if (!reply.response) {
    *exit_code = ReportNoResponse(reply);
    return std::nullopt;
  }
  const nlohmann::json& response = *reply.response;
  if (response.value("ok", false) != true) {
    auto error = response.find("error");
    PrintError(error != response.end() && error->is_string() ? error->get<std::string>()
                                                             : "status failed: " + response.dump());
    *exit_code = IsPermissionDenied(response) ? kExitPermissionDenied : kExitFailure;
    return std::nullopt;
  }
  return response;
}

// The text `status` prints for `response`: the long form of one cell when `cell` is named,
// else the status table and the activity table (ctl/status_view.h).
Result<std::string> StatusText(const nlohmann::json& response, const std::string& cell) {
  if (!cell.empty() && response.contains("cells") && response["cells"].is_array() &&
      response["cells"].size() == 1 && response["cells"][0].contains("recent")) {
    return FormatCellLong(response["cells"][0]);
  }
  Result<std::string> table = FormatStatusTable(response);
  if (!table.ok()) return table;
  Result<std::string> activity = FormatActivityTable(response);
  if (!activity.ok()) return activity;
  if (activity->empty()) return table;
  return *table + "\n" + *activity;
}

// The exit code of `status CELL` once printed, as `systemctl status UNIT`'s: kExitOk when the
// cell is running, kExitNotRunning (LSB "program is not running") in any other state. `status`
// without a cell exits kExitOk.
int StatusExitCode(const nlohmann::json& response, const std::string& cell) {
  if (cell.empty()) return kExitOk;
  const nlohmann::json& cells = response["cells"];
  if (!cells.is_array() || cells.size() != 1 || !cells[0].contains("state") ||
      !cells[0]["state"].is_string()) {
    PrintError("status response for cell " + cell + " has no state: " + response.dump());
    return kExitFailure;
  }
  return IsActiveState(cells[0]["state"].get<std::string>()) ? kExitOk : kExitNotRunning;
}

volatile sig_atomic_t g_interrupted = 0;

// SIGINT and SIGTERM set g_interrupted and interrupt the sleeps of a watch or a follow.
void CatchInterrupts() {
  struct sigaction action {};
  action.sa_handler = [](int) { g_interrupted = 1; };
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
}

// Sleeps `interval`; returns early (EINTR) when SIGINT or SIGTERM arrives.
void Pause(std::chrono::milliseconds interval) {
  timespec rest{static_cast<time_t>(interval.count() / 1000),
                static_cast<long>(interval.count() % 1000) * 1'000'000L};
  ::nanosleep(&rest, nullptr);
}

// The largest payload to read from stdin when the supervisor does not tell its max_payload_bytes:
// the largest the config allows (docs/config.md).
constexpr uint64_t kMaxPayloadBytesLimit = uint64_t{1} << 30;

// All of stdin, as bytes, but never more than `limit` + 1 bytes: a longer input is cut there (the
// caller refuses it). nullopt when read(2) fails.
std::optional<std::string> ReadStdin(uint64_t limit) {
  std::string data;
  char buffer[64 * 1024];
  while (data.size() <= limit) {
    const size_t want =
        static_cast<size_t>(std::min<uint64_t>(sizeof buffer, limit + 1 - data.size()));
    ssize_t n = ::read(STDIN_FILENO, buffer, want);
    if (n > 0) {
      data.append(buffer, static_cast<size_t>(n));
    } else if (n == 0) {
      return data;
    } else if (errno != EINTR) {
      return std::nullopt;
    }
  }
  return data;
}

// The status of every cell, by name, in config order (names). On failure prints why and sets
// *exit_code.
std::optional<std::vector<nlohmann::json>> QueryCells(const std::string& socket, Deadline deadline,
                                                      int* exit_code) {
  std::optional<nlohmann::json> response = QueryStatus(socket, "", deadline, exit_code);
  if (!response) return std::nullopt;
  const nlohmann::json& cells = (*response)["cells"];
  std::vector<nlohmann::json> out;
  for (const nlohmann::json& cell : cells) {
    if (!cell.is_object() || !cell.contains("name") || !cell["name"].is_string()) {
      PrintError("status response has a cell without a name: " + cell.dump());
      *exit_code = kExitFailure;
      return std::nullopt;
    }
    out.push_back(cell);
  }
  return out;
}

// The first failure wins the exit code of a command on several cells.
void KeepFirstFailure(int* exit_code, int code) {
  if (*exit_code == kExitOk) *exit_code = code;
}

// A cell to wait for once a command was accepted: it has got where `command` asked it to go when
// JudgeLifecycle(command, starts_before, its status) says so.
struct AwaitedCell {
  std::string cell;
  std::string command;  // "start", "stop" or "restart"
  uint64_t starts_before = 0;
  // AutomaticRestarts before the command (start, restart); nullopt: not judged (reload).
  std::optional<uint64_t> automatic_restarts_before;
  std::string label;  // what its messages start with: "restart web", "reload: web"
};

// Asks for the status every kPollInterval until each of `cells` has got where it was asked to go,
// or `wait_deadline`. Prints what a held start waits for (once per change), each failure and each
// cell still pending at the deadline; returns kExitOk, kExitFailure for any of those, or the exit
// code of a status query that failed.
template <typename ExchangeDeadline>
int AwaitCells(const std::string& socket, std::vector<AwaitedCell> waiting,
               const ExchangeDeadline& exchange_deadline, Deadline wait_deadline) {
  int exit_code = kExitOk;
  // What each held start last said it waits for, printed once per change: a start held for the
  // cells it needs is not silent.
  std::map<std::string, std::string> said;
  while (!waiting.empty()) {
    int query_exit = kExitOk;
    std::optional<std::vector<nlohmann::json>> now =
        QueryCells(socket, exchange_deadline(), &query_exit);
    if (!now) return query_exit;
    std::vector<AwaitedCell> still;
    for (AwaitedCell& awaited : waiting) {
      const std::string& cell = awaited.cell;
      auto it = std::find_if(now->begin(), now->end(),
                             [&cell](const nlohmann::json& c) { return c["name"] == cell; });
      if (it == now->end()) {
        PrintError(awaited.label + ": the cell is gone (removed by a reload)");
        KeepFirstFailure(&exit_code, kExitFailure);
        continue;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          *wait_deadline - std::chrono::steady_clock::now());
      LifecycleProgress progress =
          JudgeLifecycle(awaited.command, awaited.starts_before, *it,
                         static_cast<uint64_t>(std::max<int64_t>(0, left.count())),
                         awaited.automatic_restarts_before);
      if (progress.verdict == LifecycleVerdict::kPending) {
        if (!progress.detail.empty() && said[cell] != progress.detail_key) {
          WriteAll(stdout, cell + ": " + progress.detail + "\n");
          said[cell] = progress.detail_key;
        }
        still.push_back(std::move(awaited));
      } else if (progress.verdict == LifecycleVerdict::kHeld) {
        PrintError(awaited.label + ": " + progress.detail);
        KeepFirstFailure(&exit_code, kExitFailure);
      } else if (progress.verdict == LifecycleVerdict::kFailed) {
        PrintError(awaited.label + ": " + progress.detail + " (bulkheadctl status " + cell +
                   ", bulkheadctl logs " + cell + ")");
        KeepFirstFailure(&exit_code, kExitFailure);
      }
    }
    waiting = std::move(still);
    if (waiting.empty()) break;
    if (std::chrono::steady_clock::now() + kPollInterval >= *wait_deadline) {
      for (const AwaitedCell& awaited : waiting) {
        PrintError(awaited.label + ": timed out waiting for the outcome; the " + awaited.command +
                   " goes on (--timeout sets the wait, --no-block does not wait)");
      }
      KeepFirstFailure(&exit_code, kExitFailure);
      break;
    }
    Pause(kPollInterval);
  }
  return exit_code;
}

}  // namespace

// At priority err when stderr is the journal (bulkheadctl as a unit's ExecReload=).
void PrintError(const std::string& message) {
  WriteStderrLine(LogLevel::kError, "bulkheadctl: " + message);
}

int StatusCommand(const std::string& socket, const std::string& cell, bool json,
                  Deadline deadline) {
  int exit_code = kExitOk;
  std::optional<nlohmann::json> response = QueryStatus(socket, cell, deadline, &exit_code);
  if (!response) return exit_code;
  if (json) {
    if (!WriteAll(stdout, response->dump() + "\n")) return kExitFailure;
    return StatusExitCode(*response, cell);
  }
  Result<std::string> text = StatusText(*response, cell);
  if (!text.ok()) {
    PrintError(text.status().message());
    return kExitFailure;
  }
  if (!WriteAll(stdout, *text)) return kExitFailure;
  return StatusExitCode(*response, cell);
}

int IsStateCommand(const std::string& socket, const std::vector<std::string>& cells,
                   bool (*matches)(std::string_view), int not_matched, bool quiet,
                   Deadline deadline) {
  int exit_code = kExitOk;
  std::optional<nlohmann::json> response = QueryStatus(socket, "", deadline, &exit_code);
  if (!response) return exit_code;
  const IsStateOutcome outcome = JudgeIsState(*response, cells, matches);
  if (!quiet && !WriteAll(stdout, outcome.out)) return kExitFailure;
  for (const std::string& error : outcome.errors) PrintError(error);
  return outcome.any ? kExitOk : not_matched;
}

// status --watch: redraws every `interval` until SIGINT or SIGTERM, then exits 0. On a terminal
// each view replaces the last one (the screen is cleared first); elsewhere (a pipe, a file) the
// views follow one another, with no control codes. Each query is bounded by `timeout` (or
// kDefaultControlTimeout); a failed query ends the watch with its exit code.
int WatchStatusCommand(const std::string& socket, const std::string& cell, bool json,
                       std::chrono::milliseconds interval,
                       std::optional<std::chrono::milliseconds> timeout) {
  CatchInterrupts();
  const bool terminal = ::isatty(STDOUT_FILENO) == 1;
  while (!g_interrupted) {
    int exit_code = kExitOk;
    Deadline deadline = std::chrono::steady_clock::now() + timeout.value_or(kDefaultControlTimeout);
    std::optional<nlohmann::json> response = QueryStatus(socket, cell, deadline, &exit_code);
    if (!response) return exit_code;
    Result<std::string> text =
        json ? Result<std::string>(response->dump() + "\n") : StatusText(*response, cell);
    if (!text.ok()) {
      PrintError(text.status().message());
      return kExitFailure;
    }
    // On a terminal: home, clear screen, then the new view, which replaces the last one in place.
    // Elsewhere: the new view after an empty line (a JSON view is one line each).
    const std::string separator = terminal ? "\033[H\033[2J" : (json ? "" : "\n");
    if (!WriteAll(stdout, separator + *text)) return kExitFailure;
    Pause(interval);
  }
  return kExitOk;
}

// metrics: the Prometheus text exposition of every cell, as the metrics endpoint serves it.
int MetricsCommand(const std::string& socket, Deadline deadline) {
  ControlReply reply = QueryControl(socket, nlohmann::json{{"command", "metrics"}}, deadline);
  if (!reply.response) return ReportNoResponse(reply);
  const nlohmann::json& response = *reply.response;
  auto text = response.find("text");
  if (response.value("ok", false) != true || text == response.end() || !text->is_string()) {
    auto error = response.find("error");
    PrintError(error != response.end() && error->is_string()
                   ? error->get<std::string>()
                   : "metrics failed: " + response.dump());
    return kExitFailure;
  }
  return WriteAll(stdout, text->get<std::string>()) ? kExitOk : kExitFailure;
}

int CallCommand(const std::string& socket, const std::string& cell,
                const std::optional<std::string>& data, bool raw, Deadline deadline) {
  if (data && data->size() > ipc::kMaxEncodablePayload) {
    PrintError("request of " + std::to_string(data->size()) + " bytes is too large");
    return kExitUsage;
  }
  int exit_code = kExitOk;
  Deadline lookup_deadline = deadline;
  if (!lookup_deadline) lookup_deadline = std::chrono::steady_clock::now() + kDefaultControlTimeout;
  std::optional<nlohmann::json> response = QueryStatus(socket, cell, lookup_deadline, &exit_code);
  if (!response) return exit_code;
  std::optional<std::string> payload = data;
  if (!payload) {
    // A person at a terminal may not know that the request is read from stdin.
    if (::isatty(STDIN_FILENO) == 1) {
      WriteAll(stderr, "bulkheadctl: reading the request for " + cell +
                           " from stdin; end it with Ctrl-D (or give it with --data TEXT)\n");
    }
    // Never more of stdin than the supervisor would accept (`call c < /dev/zero` ends here).
    uint64_t limit = kMaxPayloadBytesLimit;
    const nlohmann::json& supervisor = (*response)["supervisor"];
    if (supervisor.is_object() && supervisor.contains("max_payload_bytes") &&
        supervisor["max_payload_bytes"].is_number_unsigned()) {
      limit = supervisor["max_payload_bytes"].get<uint64_t>();
    }
    payload = ReadStdin(limit);
    if (!payload) {
      PrintError(std::string("cannot read the request from stdin: ") + std::strerror(errno));
      return kExitFailure;
    }
    if (payload->size() > limit) {
      PrintError("the request on stdin is longer than max_payload_bytes (" + std::to_string(limit) +
                 " bytes): not sent");
      return kExitUsage;
    }
  }
  const nlohmann::json& cells = (*response)["cells"];
  if (!cells.is_array() || cells.size() != 1 || !cells[0].is_object() ||
      !cells[0].contains("socket") || !cells[0]["socket"].is_string()) {
    PrintError("status response for cell " + cell + " has no socket: " + response->dump());
    return kExitFailure;
  }
  const std::string cell_socket = cells[0]["socket"].get<std::string>();
  // `call` speaks frames (docs/protocol.md); an HTTP cell's socket would answer it with a 400.
  if (cells[0].value("protocol", "frames") == "http") {
    PrintError("cell " + cell +
               " speaks HTTP/1.1 (protocol = \"http\"), not frames: call it with an HTTP client, "
               "e.g. curl --unix-socket " +
               cell_socket + " http://" + cell + "/");
    return kExitUsage;
  }

  CallResult result = CallCell(cell_socket, *payload, deadline);
  if (!result.reply) {
    if (result.unreachable) {
      PrintError("cannot reach cell " + cell + ": " + result.error);
      return kExitUnreachable;
    }
    PrintError("cell " + cell + ": " + result.error);
    return kExitFailure;
  }
  CallOutcome outcome = DescribeReply(*result.reply, cell, raw);
  if (!outcome.err.empty()) WriteAll(stderr, outcome.err);
  if (!WriteAll(stdout, outcome.out)) return kExitFailure;
  return outcome.exit_code;
}

// start / stop / restart CELL... (or every cell with `all`): sends the command for each cell,
// then, unless `no_block`, waits until each has got where it was asked to go (JudgeLifecycle),
// by asking for the status every kPollInterval until `wait_deadline`. Exchanges are bounded by
// `deadline` when given (--timeout bounds the whole command), else each by kDefaultControlTimeout.
int CellCommands(const std::string& socket, const std::string& command,
                 std::vector<std::string> cells, bool all, bool no_block, Deadline deadline) {
  auto exchange_deadline = [&deadline]() -> Deadline {
    return deadline ? deadline : std::chrono::steady_clock::now() + kDefaultControlTimeout;
  };
  const Deadline wait_deadline =
      deadline ? deadline : std::chrono::steady_clock::now() + kDefaultWaitTimeout;
  int exit_code = kExitOk;

  // The starts counter of each cell before the command: a start or restart is done once a worker
  // started after it runs.
  std::map<std::string, uint64_t> starts_before;
  std::map<std::string, uint64_t> automatic_restarts_before;
  // Cells that were starting (a worker spawned, not yet READY=1) before the command.
  std::set<std::string> starting_before;
  // Cells whose overlapping restart had handed over before the command (its swap draining,
  // signalled or killed): the worker that took over is the one that restart started.
  std::set<std::string> handed_over_before;
  // Each cell's "needs": a stop of several cells stops each before the cells it needs.
  std::map<std::string, std::vector<std::string>> needs;
  const bool stop_in_waves = command == "stop" && (all || cells.size() > 1);
  if (all || !no_block || stop_in_waves) {
    std::optional<std::vector<nlohmann::json>> before =
        QueryCells(socket, exchange_deadline(), &exit_code);
    if (!before) return exit_code;
    for (const nlohmann::json& cell : *before) {
      const std::string name = cell["name"].get<std::string>();
      if (all) cells.push_back(name);
      starts_before[name] = cell.value("starts", uint64_t{0});
      automatic_restarts_before[name] = AutomaticRestarts(cell);
      if (auto it = cell.find("needs"); it != cell.end() && it->is_array()) {
        for (const nlohmann::json& need : *it) {
          if (need.is_string()) needs[name].push_back(need.get<std::string>());
        }
      }
      if (cell.value("state", std::string()) == "starting") starting_before.insert(name);
      if (auto swap = cell.find("swap"); swap != cell.end() && swap->is_object()) {
        const std::string phase = swap->value("phase", std::string());
        if (phase == "draining" || phase == "signalled" || phase == "killed") {
          handed_over_before.insert(name);
        }
      }
    }
  }

  std::vector<AwaitedCell> waiting;
  auto wait_for = [&](const std::string& cell) {
    waiting.push_back({.cell = cell,
                       .command = command,
                       .starts_before = starts_before[cell],
                       .automatic_restarts_before = automatic_restarts_before[cell],
                       .label = command + " " + cell});
  };
  // Sends the command for each cell of `batch`, adding to `waiting` those to wait for; false when
  // the supervisor did not answer (`exit_code` then says why).
  auto send = [&](const std::vector<std::string>& batch) {
    for (const std::string& cell : batch) {
      ControlReply reply =
          QueryControl(socket, CellCommandRequest(command, cell), exchange_deadline());
      if (!reply.response) {
        exit_code = ReportNoResponse(reply);
        return false;
      }
      CommandOutcome outcome = InterpretCellCommand(command, *reply.response);
      if (!outcome.success) {
        PrintError(command + " " + cell + ": " + outcome.error);
        KeepFirstFailure(&exit_code,
                         outcome.permission_denied ? kExitPermissionDenied : kExitFailure);
        continue;
      }
      if (!outcome.note.empty()) WriteAll(stdout, cell + ": " + outcome.note + "\n");
      if (no_block) continue;
      // A start of a cell still starting waits for the start under way, as `systemctl start` of an
      // activating unit waits for its activation; a restart joining an overlapping restart past its
      // handover finds the worker that restart started already serving (the previous one drains).
      // Either way the worker to see running was counted in starts_before already.
      const bool joins_a_counted_start =
          (command == "start" && outcome.note == "already started" &&
           starting_before.contains(cell)) ||
          (command == "restart" && outcome.note == "restart in progress" &&
           handed_over_before.contains(cell));
      if (joins_a_counted_start && starts_before[cell] > 0) {
        --starts_before[cell];
        wait_for(cell);
        continue;
      }
      // "already started" (running) / "already stopped": nothing to wait for.
      if (outcome.note.rfind("already ", 0) != 0) wait_for(cell);
    }
    return true;
  };
  if (!stop_in_waves) {
    if (!send(cells)) return exit_code;
    KeepFirstFailure(&exit_code,
                     AwaitCells(socket, std::move(waiting), exchange_deadline, wait_deadline));
    return exit_code;
  }
  // A cell stops before the cells it needs, as at bulkheadd's shutdown: each wave is sent once the
  // one before has stopped (with --no-block, the stops are sent in that order without waiting). A
  // wave that fails or times out does not hold back the next: the stop asked for goes on.
  for (const std::vector<std::string>& wave : StopWaves(cells, needs)) {
    if (!send(wave)) return exit_code;
    KeepFirstFailure(&exit_code,
                     AwaitCells(socket, std::move(waiting), exchange_deadline, wait_deadline));
    waiting.clear();
  }
  return exit_code;
}

// logs CELL [-f] [-n N]: the cell's recent lines from the supervisor's ring; or, when bulkheadd
// logs to the journal, journalctl run in place of this process (execvp: its exit code, pager and
// --follow are journalctl's). With `follow`, asks for newer lines every kPollInterval until
// SIGINT or SIGTERM, then exits 0; lines the ring dropped before they were read are counted on
// stderr.
int LogsCommand(const std::string& socket, const std::string& cell, bool follow,
                std::optional<uint64_t> lines, Deadline deadline) {
  auto exchange_deadline = [&deadline]() -> Deadline {
    return deadline ? deadline : std::chrono::steady_clock::now() + kDefaultControlTimeout;
  };
  std::optional<uint64_t> from;
  if (follow) CatchInterrupts();
  bool first = true;
  while (!g_interrupted) {
    ControlReply reply = QueryControl(socket, LogsRequest(cell, from, first ? lines : std::nullopt),
                                      exchange_deadline());
    if (!reply.response) return ReportNoResponse(reply);
    Result<LogsPage> page = ParseLogsPage(*reply.response);
    if (!page.ok()) {
      PrintError("logs " + cell + ": " + page.status().message());
      return IsPermissionDenied(*reply.response) ? kExitPermissionDenied : kExitFailure;
    }
    if (first && page->journal) {
      std::vector<std::string> args = JournalctlArgv(*page->journal, cell, follow, lines);
      std::vector<char*> argv;
      argv.reserve(args.size() + 1);
      for (std::string& arg : args) argv.push_back(arg.data());
      argv.push_back(nullptr);
      ::execvp(argv[0], argv.data());
      PrintError(std::string("cannot run journalctl: ") + std::strerror(errno) +
                 "; bulkheadd logs to the journal: " + args[0] + " " + args[1] + " ...");
      return kExitFailure;
    }
    if (page->missed > 0) {
      WriteAll(stderr, "bulkheadctl: " + std::to_string(page->missed) +
                           " lines were dropped from the ring before they could be read\n");
    }
    std::string text;
    for (const std::string& line : page->lines) text += line + "\n";
    if (!WriteAll(stdout, text)) return kExitFailure;
    if (!follow) return kExitOk;
    first = false;
    from = page->next;
    Pause(kPollInterval);
  }
  return kExitOk;
}

// reload: the supervisor re-reads its config file and applies it; refused files change nothing.
// Unless `no_block`, then waits for each cell it restarted or added to run a new worker.
int ReloadCommand(const std::string& socket, bool no_block, Deadline deadline) {
  auto exchange_deadline = [&deadline]() -> Deadline {
    return deadline ? deadline : std::chrono::steady_clock::now() + kDefaultControlTimeout;
  };
  const Deadline wait_deadline =
      deadline ? deadline : std::chrono::steady_clock::now() + kDefaultWaitTimeout;
  ControlReply reply = QueryControl(socket, ReloadRequest(), exchange_deadline());
  if (!reply.response) return ReportNoResponse(reply);
  ReloadOutcome outcome = InterpretReload(*reply.response);
  // The file's warnings at priority warning, then a refusal's lines (each error, then the
  // verdict) at priority err, under a unit.
  for (const std::string& warning : outcome.warnings) {
    WriteStderrLine(LogLevel::kWarning, "warning: " + warning);
  }
  auto print_errors = [](std::string_view err) {
    while (!err.empty()) {
      size_t end = err.find('\n');
      WriteStderrLine(LogLevel::kError, err.substr(0, end));
      err.remove_prefix(end == std::string_view::npos ? err.size() : end + 1);
    }
  };
  print_errors(outcome.err);
  int exit_code = outcome.exit_code;
  if (!no_block && !outcome.waits.empty()) {
    // The new workers come up after the answer: the reload is done once each runs, or failed for
    // the cell whose new worker did not (its swap failed, it is in backoff), as `restart` judges.
    std::vector<AwaitedCell> awaited;
    for (const ReloadWait& wait : outcome.waits) {
      awaited.push_back({.cell = wait.cell,
                         .command = wait.command,
                         .starts_before = wait.starts_before,
                         .automatic_restarts_before = std::nullopt,
                         .label = "reload: " + wait.cell});
    }
    KeepFirstFailure(&exit_code,
                     AwaitCells(socket, std::move(awaited), exchange_deadline, wait_deadline));
  }
  // "reloaded: ..." on stdout only for a reload that succeeded.
  const ReloadSummary summary = SummaryAfterWaits(outcome, exit_code);
  print_errors(summary.err);
  if (!WriteAll(stdout, summary.out)) return kExitFailure;
  return exit_code;
}

namespace {

// Asks for the status every kPollInterval until the re-exec that began after `count_before` is
// done (kExitOk), failed (kExitFailure) or `wait_deadline` (kExitReexecUnderWay while status
// says it is under way). Each exchange is bounded by `exchange_deadline()`.
int WaitForReexec(const std::string& socket, uint64_t count_before, Deadline wait_deadline,
                  const std::function<Deadline()>& exchange_deadline) {
  // The supervisor drains, then execs: the control socket stays open meanwhile (connections wait
  // in its backlog), and the new image answers on it.
  std::string under_way;  // where the last status said the re-exec stands, "" when it did not
  while (true) {
    ControlReply status = QueryControl(socket, StatusRequest(), exchange_deadline());
    if (!status.response &&
        (status.connect_error == ECONNREFUSED || status.connect_error == ENOENT)) {
      // The control socket stays open across the exec, so nothing listening there means no
      // bulkheadd: it exited (the new binary failed, or a shutdown came first).
      PrintError("reexec failed: bulkheadd exited during the re-exec (" + status.error +
                 "); its log says why");
      return kExitFailure;
    }
    if (status.response) {
      const ReexecVerdict verdict = JudgeReexec(*status.response, count_before);
      if (verdict.kind == ReexecVerdict::Kind::kDone) {
        return WriteAll(stdout, verdict.text + "\n") ? kExitOk : kExitFailure;
      }
      if (verdict.kind == ReexecVerdict::Kind::kFailed) {
        PrintError("reexec failed, bulkheadd goes on as it was: " + verdict.text);
        return kExitFailure;
      }
      under_way = verdict.text;
    }
    if (std::chrono::steady_clock::now() + kPollInterval >= *wait_deadline) {
      if (!under_way.empty()) {
        // Not a failure: bulkheadd goes on with the re-exec (its own bound, the settling's and
        // the drain's, ends it either way), and status tells how it ended.
        PrintError("reexec: still under way when the wait ended (" + under_way +
                   "); bulkheadd goes on with it: `bulkheadctl status` shows its end");
        return kExitReexecUnderWay;
      }
      PrintError("reexec: no new bulkheadd answered in time");
      return kExitFailure;
    }
    Pause(kPollInterval);
  }
}

// How much longer than bulkheadd's own bound a join waits: the access log's close, the exec and
// the new image's first answer, which the bound does not count.
constexpr std::chrono::seconds kJoinMargin{10};

}  // namespace

int ReexecCommand(const std::string& socket, bool no_block, Deadline deadline,
                  std::optional<std::chrono::milliseconds> settle_timeout) {
  auto exchange_deadline = [&deadline]() -> Deadline {
    return deadline ? deadline : std::chrono::steady_clock::now() + kDefaultControlTimeout;
  };
  std::optional<uint64_t> settle_ms;
  if (settle_timeout) settle_ms = static_cast<uint64_t>(settle_timeout->count());
  ControlReply reply = QueryControl(socket, ReexecRequest(settle_ms), exchange_deadline());
  if (!reply.response) return ReportNoResponse(reply);
  const nlohmann::json& response = *reply.response;
  if (response.value("ok", false) != true) {
    auto error = response.find("error");
    PrintError("reexec refused: " + (error != response.end() && error->is_string()
                                         ? error->get<std::string>()
                                         : response.dump()));
    return IsPermissionDenied(response) ? kExitPermissionDenied : kExitFailure;
  }
  const uint64_t count_before = response.value("count", uint64_t{0});
  // A re-exec may first wait for its cells to settle, as long as bulkheadd says.
  const Deadline wait_deadline =
      deadline ? deadline
               : std::chrono::steady_clock::now() + kDefaultWaitTimeout +
                     std::chrono::milliseconds(response.value("settle_timeout_ms", uint64_t{0}));
  if (no_block) {
    return WriteAll(stdout, "re-executing " + response.value("binary", std::string()) + "\n")
               ? kExitOk
               : kExitFailure;
  }
  return WaitForReexec(socket, count_before, wait_deadline, exchange_deadline);
}

int ReexecJoinCommand(const std::string& socket, Deadline deadline) {
  auto exchange_deadline = [&deadline]() -> Deadline {
    return deadline ? deadline : std::chrono::steady_clock::now() + kDefaultControlTimeout;
  };
  ControlReply reply = QueryControl(socket, StatusRequest(), exchange_deadline());
  if (!reply.response) return ReportNoResponse(reply);
  if (reply.response->value("ok", false) != true) {
    auto error = reply.response->find("error");
    PrintError("reexec --join: " + (error != reply.response->end() && error->is_string()
                                        ? error->get<std::string>()
                                        : reply.response->dump()));
    return IsPermissionDenied(*reply.response) ? kExitPermissionDenied : kExitFailure;
  }
  const ReexecJoin join = JudgeJoin(*reply.response);
  switch (join.verdict.kind) {
    case ReexecVerdict::Kind::kDone:
      return WriteAll(stdout, join.verdict.text + "\n") ? kExitOk : kExitFailure;
    case ReexecVerdict::Kind::kFailed:
      PrintError("reexec failed, bulkheadd goes on as it was: " + join.verdict.text);
      return kExitFailure;
    case ReexecVerdict::Kind::kWaiting:
      break;
  }
  // As long as bulkheadd's own bound, and what follows it; a bulkheadd that does not say its
  // bound: as long as a reexec waits past the settling.
  const Deadline wait_deadline =
      deadline ? deadline
               : std::chrono::steady_clock::now() + kJoinMargin +
                     (join.ends_within_ms
                          ? std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                std::chrono::milliseconds(*join.ends_within_ms))
                          : std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                kDefaultWaitTimeout));
  return WaitForReexec(socket, join.count_before, wait_deadline, exchange_deadline);
}

}  // namespace bulkhead::ctl
