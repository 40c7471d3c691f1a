// SPDX-License-Identifier: MIT
#include "control/command_table.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "base/check.h"
#include "base/closest_match.h"

namespace bulkhead::control {

const CommandRow* FindCommand(std::string_view name) {
  auto row = std::find_if(kCommandRows.begin(), kCommandRows.end(),
                          [name](const CommandRow& r) { return r.name == name; });
  return row == kCommandRows.end() ? nullptr : &*row;
}

std::string CommandError(const std::string& message) {
  return nlohmann::json({{"ok", false}, {"error", message}}).dump();
}

namespace {

// `unknown command "restat"; did you mean "restart"? (commands: status, metrics, ...)`.
std::string UnknownCommand(const nlohmann::json& command) {
  std::vector<std::string_view> names;
  names.reserve(kCommandRows.size());
  for (const CommandRow& row : kCommandRows) names.push_back(row.name);
  std::string message =
      "unknown command " + command.dump() + DidYouMean(command.get<std::string>(), names);
  message += " (commands:";
  for (size_t i = 0; i < names.size(); ++i) {
    message += i == 0 ? " " : ", ";
    message.append(names[i]);
  }
  return message + ")";
}

// `no cell named Web; did you mean "web"?` (`bulkheadctl restart Web`).
std::string UnknownCell(const std::string& cell, const std::vector<std::string>& names) {
  const std::vector<std::string_view> candidates(names.begin(), names.end());
  return "no cell named " + cell + DidYouMean(cell, candidates);
}

}  // namespace

CommandTable::CommandTable(ControlAccess access, CommandHandlers handlers,
                           std::function<std::vector<std::string>()> cell_names)
    : access_(access), handlers_(std::move(handlers)), cell_names_(std::move(cell_names)) {
  for (const CommandRow& row : kCommandRows) BH_CHECK(handlers_.*row.handler != nullptr);
  BH_CHECK(cell_names_ != nullptr);
}

std::string CommandTable::Handle(const std::string& request_line, const ControlPeer& peer) const {
  nlohmann::json request = nlohmann::json::parse(request_line, nullptr, /*allow_exceptions=*/false);
  if (request.is_discarded() || !request.is_object()) {
    return CommandError("request is not a JSON object");
  }
  auto command = request.find("command");
  if (command == request.end() || !command->is_string()) {
    return CommandError("request has no \"command\" string");
  }
  const std::string name = command->get<std::string>();
  if (std::string denied = access_.Check(name, peer); !denied.empty()) {
    return nlohmann::json({{"ok", false}, {"error", denied}, {"code", "permission_denied"}}).dump();
  }
  const CommandRow* row = FindCommand(name);
  if (row == nullptr) return CommandError(UnknownCommand(*command));

  std::string cell;
  if (row->cell != CellArgument::kNone) {
    auto given = request.find("cell");
    const bool is_string = given != request.end() && given->is_string();
    if (row->cell == CellArgument::kRequired && !is_string) {
      return CommandError("\"" + name + "\" needs a \"cell\" string");
    }
    if (given != request.end() && !is_string) return CommandError("\"cell\" must be a string");
    if (is_string) cell = given->get<std::string>();
    // "" asks for every cell where the cell is optional; a required one is never "".
    if (row->cell == CellArgument::kRequired || !cell.empty()) {
      const std::vector<std::string> names = cell_names_();
      if (std::find(names.begin(), names.end(), cell) == names.end()) {
        return CommandError(UnknownCell(cell, names));
      }
    }
  }
  return (handlers_.*row->handler)(
      CommandCall{.row = *row, .request = request, .peer = peer, .cell = std::move(cell)});
}

}  // namespace bulkhead::control
