// SPDX-License-Identifier: MIT
// CommandTable: the control socket's commands (docs/control.md, "Control protocol"), one row each:
// its name, who may call it (ControlAccess), what its request needs, and its handler, which the
// owner of the cells (the supervisor) supplies. A request's "command" becomes a row in one lookup
// (s6-supervise maps a control byte through its string of command letters to an index); what every
// command shares (parsing the line, the credentials check, the "cell" argument, the errors) is done
// once here, so a handler only does its command. REQUIRES: loop thread only.
#pragma once

#include <array>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "control/control_access.h"

namespace bulkhead::control {

// Who may call a command (docs/control.md, "Credentials").
enum class CommandAccess : uint8_t {
  kAnyone,    // read-only: anyone who could connect to the control socket
  kOperator,  // uid 0, bulkheadd's own uid, or a member of [supervisor] control_group
};

// What a command's request needs besides "command".
enum class CellArgument : uint8_t {
  kNone,      // no "cell"; one given is ignored
  kOptional,  // "cell" may be given: a string, "" for every cell, else the name of a cell
  kRequired,  // a "cell" string naming a cell
};

struct CommandRow;

// One request, as a handler gets it: its row, the whole request object, the caller, and the
// "cell" argument (checked against CellArgument: the name of an existing cell, or "" when the
// command takes none or it was "" or left out).
struct CommandCall {
  const CommandRow& row;
  const nlohmann::json& request;
  const ControlPeer& peer;
  std::string cell;
};

// A handler answers one request with one response line (a JSON object, without the newline).
using CommandHandler = std::function<std::string(const CommandCall& call)>;

// The handlers the owner supplies, one per command; a handler may serve several (start, stop and
// restart share one that reads call.row.name).
struct CommandHandlers {
  CommandHandler status;
  CommandHandler metrics;
  CommandHandler logs;
  CommandHandler reload;
  CommandHandler start;
  CommandHandler stop;
  CommandHandler restart;
  CommandHandler reexec;
};

struct CommandRow {
  std::string_view name;
  CommandAccess access;
  CellArgument cell;
  // What a refused caller "may not" do, for the permission error; "" says `run "NAME"`.
  std::string_view refused_action;
  CommandHandler CommandHandlers::*handler;
};

// Every command, one row each, in the order docs/control.md lists them.
inline constexpr std::array<CommandRow, 8> kCommandRows = {{
    {"status", CommandAccess::kAnyone, CellArgument::kOptional, "", &CommandHandlers::status},
    {"metrics", CommandAccess::kAnyone, CellArgument::kNone, "", &CommandHandlers::metrics},
    {"start", CommandAccess::kOperator, CellArgument::kRequired, "start cells",
     &CommandHandlers::start},
    {"stop", CommandAccess::kOperator, CellArgument::kRequired, "stop cells",
     &CommandHandlers::stop},
    {"restart", CommandAccess::kOperator, CellArgument::kRequired, "restart cells",
     &CommandHandlers::restart},
    {"logs", CommandAccess::kOperator, CellArgument::kRequired, "", &CommandHandlers::logs},
    {"reload", CommandAccess::kOperator, CellArgument::kNone, "", &CommandHandlers::reload},
    {"reexec", CommandAccess::kOperator, CellArgument::kNone, "re-execute bulkheadd",
     &CommandHandlers::reexec},
}};

// The row named `name`, or nullptr when no command has that name.
const CommandRow* FindCommand(std::string_view name);

// {"ok":false,"error":MESSAGE}: the plain error response.
std::string CommandError(const std::string& message);

class CommandTable {
 public:
  // `access` decides who may run what; `cell_names()` gives the names of the cells that exist now
  // (an unknown cell's error offers the closest: `no cell named Web; did you mean "web"?`).
  // REQUIRES: every handler of `handlers` set (checked).
  CommandTable(ControlAccess access, CommandHandlers handlers,
               std::function<std::vector<std::string>()> cell_names);

  // One request line in, one response line out (docs/control.md): a line that is not a JSON
  // object with a "command" string, a command the caller may not run (refused before anything
  // else is looked at, unknown commands included: they are not read-only), an unknown command
  // (the error names the known ones, and the closest), or a "cell" argument its row does not
  // allow, is answered with an error here; anything else goes to the row's handler.
  std::string Handle(const std::string& request_line, const ControlPeer& peer) const;

 private:
  ControlAccess access_;
  CommandHandlers handlers_;
  std::function<std::vector<std::string>()> cell_names_;
};

}  // namespace bulkhead::control
