// SPDX-License-Identifier: MIT
// bulkheadctl: a thin client of bulkheadd's control socket (docs/control.md). Parse the command
// line, ask the supervisor, print, and exit with a code from base/exit_status.h.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
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
#include "ctl/reload_command.h"
#include "ctl/status_table.h"
#include "ctl/status_view.h"
#include "ipc/frame.h"

namespace bulkhead::ctl {
namespace {

// Bound on a control-socket exchange when --timeout is not given.
constexpr std::chrono::seconds kDefaultControlTimeout{10};

// At priority err when stderr is the journal (bulkheadctl as a unit's ExecReload=).
void PrintError(const std::string& message) {
  WriteStderrLine(LogLevel::kError, "bulkheadctl: " + message);
}

// Writes all of `bytes` to `stream`; false on error.
bool WriteAll(std::FILE* stream, const std::string& bytes) {
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), stream) != bytes.size()) {
    return false;
  }
  return std::fflush(stream) == 0;
}

// Asks for the status of every cell or of `cell`. On failure prints why and sets *exit_code.
std::optional<nlohmann::json> QueryStatus(const std::string& socket, const std::string& cell,
                                          Deadline deadline, int* exit_code) {
  ControlReply reply = QueryControl(socket, StatusRequest(cell), deadline);
  if (!reply.response) {
    if (reply.unreachable) {
      PrintError("cannot reach bulkheadd at " + reply.error +
                 " (is it running? --socket or $BULKHEAD_SOCKET selects another control socket)");
      *exit_code = kExitUnreachable;
    } else {
      PrintError(reply.error);
      *exit_code = kExitFailure;
    }
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

int Status(const std::string& socket, const std::string& cell, bool json, Deadline deadline) {
  int exit_code = kExitOk;
  std::optional<nlohmann::json> response = QueryStatus(socket, cell, deadline, &exit_code);
  if (!response) return exit_code;
  if (json) return WriteAll(stdout, response->dump() + "\n") ? kExitOk : kExitFailure;
  Result<std::string> text = StatusText(*response, cell);
  if (!text.ok()) {
    PrintError(text.status().message());
    return kExitFailure;
  }
  return WriteAll(stdout, *text) ? kExitOk : kExitFailure;
}

volatile sig_atomic_t g_interrupted = 0;

// status --watch: clears the terminal and redraws every `interval` until SIGINT or SIGTERM, then
// exits 0. Each query is bounded by `timeout` (or kDefaultControlTimeout); a failed query ends the
// watch with its exit code.
int WatchStatus(const std::string& socket, const std::string& cell, bool json,
                std::chrono::milliseconds interval,
                std::optional<std::chrono::milliseconds> timeout) {
  struct sigaction action {};
  action.sa_handler = [](int) { g_interrupted = 1; };
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
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
    // Home, clear screen, then the new view: it replaces the last one in place.
    if (!WriteAll(stdout, "\033[H\033[2J" + *text)) return kExitFailure;
    // nanosleep returns early (EINTR) when SIGINT arrives: the watch ends at once.
    timespec rest{static_cast<time_t>(interval.count() / 1000),
                  static_cast<long>(interval.count() % 1000) * 1'000'000L};
    ::nanosleep(&rest, nullptr);
  }
  return kExitOk;
}

// Prints why `reply` has no response and returns the exit code for it.
int ReportNoResponse(const ControlReply& reply) {
  if (reply.unreachable) {
    PrintError("cannot reach bulkheadd at " + reply.error +
               " (is it running? --socket or $BULKHEAD_SOCKET selects another control socket)");
    return kExitUnreachable;
  }
  PrintError(reply.error);
  return kExitFailure;
}

// metrics: the Prometheus text exposition of every cell, as the metrics endpoint serves it.
int Metrics(const std::string& socket, Deadline deadline) {
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

int Call(const std::string& socket, const std::string& cell, const std::optional<std::string>& data,
         bool raw, Deadline deadline) {
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

// start / stop / restart: one lifecycle command for one cell; the change itself is asynchronous.
int CellCommand(const std::string& socket, const std::string& command, const std::string& cell,
                Deadline deadline) {
  ControlReply reply = QueryControl(socket, CellCommandRequest(command, cell), deadline);
  if (!reply.response) return ReportNoResponse(reply);
  CommandOutcome outcome = InterpretCellCommand(command, *reply.response);
  if (!outcome.success) {
    PrintError(command + " " + cell + ": " + outcome.error);
    return outcome.permission_denied ? kExitPermissionDenied : kExitFailure;
  }
  if (!outcome.note.empty()) WriteAll(stdout, cell + ": " + outcome.note + "\n");
  return kExitOk;
}

// reload: the supervisor re-reads its config file and applies it; refused files change nothing.
int Reload(const std::string& socket, Deadline deadline) {
  ControlReply reply = QueryControl(socket, ReloadRequest(), deadline);
  if (!reply.response) return ReportNoResponse(reply);
  ReloadOutcome outcome = InterpretReload(*reply.response);
  // A refusal's lines (each error, then the verdict), each at priority err under a unit.
  std::string_view err = outcome.err;
  while (!err.empty()) {
    size_t end = err.find('\n');
    WriteStderrLine(LogLevel::kError, err.substr(0, end));
    err.remove_prefix(end == std::string_view::npos ? err.size() : end + 1);
  }
  if (!WriteAll(stdout, outcome.out)) return kExitFailure;
  return outcome.exit_code;
}

int Main(int argc, char** argv) {
  CLI::App app{"bulkheadctl: inspect bulkheadd and send requests to its cells (docs/control.md)"};
  app.require_subcommand(1);
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
                       "redraw in place every INTERVAL (default 2s, e.g. 500ms) until Ctrl-C")
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

  std::string command_cell;
  std::vector<CLI::App*> cell_commands;
  for (auto [name, what] : {
           std::pair{"start", "start a stopped or failed cell's worker"},
           std::pair{"stop", "stop a cell's worker; its requests are refused until start"},
           std::pair{"restart", "replace a cell's worker gracefully"},
       }) {
    CLI::App* sub = app.add_subcommand(name, what);
    sub->add_option("cell", command_cell, "the cell")->required();
    cell_commands.push_back(sub);
  }

  CLI::App* reload = app.add_subcommand(
      "reload", "re-read bulkheadd's config file and apply the changes (docs/config.md, Reload)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  }

  Deadline deadline;
  if (!timeout_text.empty()) {
    Result<std::chrono::milliseconds> timeout = ParseDuration(timeout_text);
    if (!timeout.ok()) {
      PrintError("--timeout: " + timeout.status().message());
      return kExitUsage;
    }
    deadline = std::chrono::steady_clock::now() + *timeout;
  }
  const std::string socket = ControlSocketFromEnvironment(socket_flag);

  if (status->parsed() && watch_option->count() > 0) {
    std::chrono::milliseconds interval{2000};
    if (!watch_text.empty()) {
      Result<std::chrono::milliseconds> parsed = ParseDuration(watch_text);
      if (!parsed.ok() || parsed->count() <= 0) {
        PrintError("--watch: bad interval \"" + watch_text + "\": " +
                   (parsed.ok() ? std::string("must be more than 0") : parsed.status().message()) +
                   " (e.g. 500ms, 2s)");
        return kExitUsage;
      }
      interval = *parsed;
    }
    std::optional<std::chrono::milliseconds> timeout;
    if (!timeout_text.empty()) timeout = ParseDuration(timeout_text).value();
    return WatchStatus(socket, status_cell, json, interval, timeout);
  }
  if (metrics->parsed()) {
    if (!deadline) deadline = std::chrono::steady_clock::now() + kDefaultControlTimeout;
    return Metrics(socket, deadline);
  }
  if (status->parsed()) {
    if (!deadline) deadline = std::chrono::steady_clock::now() + kDefaultControlTimeout;
    return Status(socket, status_cell, json, deadline);
  }
  if (reload->parsed()) {
    if (!deadline) deadline = std::chrono::steady_clock::now() + kDefaultControlTimeout;
    return Reload(socket, deadline);
  }
  for (CLI::App* sub : cell_commands) {
    if (!sub->parsed()) continue;
    if (!deadline) deadline = std::chrono::steady_clock::now() + kDefaultControlTimeout;
    return CellCommand(socket, sub->get_name(), command_cell, deadline);
  }
  std::optional<std::string> payload;
  if (data_option->count() > 0) payload = data;
  return Call(socket, call_cell, payload, raw, deadline);
}

}  // namespace
}  // namespace bulkhead::ctl

int main(int argc, char** argv) { return bulkhead::ctl::Main(argc, argv); }
