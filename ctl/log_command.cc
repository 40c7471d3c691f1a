// SPDX-License-Identifier: MIT
#include "ctl/log_command.h"

namespace bulkhead::ctl {

nlohmann::json LogsRequest(const std::string& cell, std::optional<uint64_t> from,
                           std::optional<uint64_t> lines) {
  nlohmann::json request = {{"command", "logs"}, {"cell", cell}};
  if (from) request["from"] = *from;
  if (lines) request["lines"] = *lines;
  return request;
}

Result<LogsPage> ParseLogsPage(const nlohmann::json& response) {
  if (!response.is_object()) return Status::Error("logs response is not an object");
  if (response.value("ok", false) != true) {
    auto error = response.find("error");
    return Status::Error(error != response.end() && error->is_string()
                             ? error->get<std::string>()
                             : "logs failed: " + response.dump());
  }
  LogsPage page;
  auto lines = response.find("lines");
  if (lines == response.end() || !lines->is_array()) {
    return Status::Error("logs response: \"lines\" is not an array");
  }
  for (const nlohmann::json& line : *lines) {
    if (!line.is_string()) return Status::Error("logs response: a line is not a string");
    page.lines.push_back(line.get<std::string>());
  }
  for (auto [key, field] : {std::pair{"next", &page.next}, std::pair{"missed", &page.missed}}) {
    auto it = response.find(key);
    if (it == response.end() || !it->is_number_unsigned()) {
      return Status::Error(std::string("logs response: \"") + key +
                           "\" is not an unsigned integer");
    }
    *field = it->get<uint64_t>();
  }
  if (auto journal = response.find("journal"); journal != response.end() && !journal->is_null()) {
    if (!journal->is_object() || !journal->contains("unit") || !(*journal)["unit"].is_string() ||
        !journal->contains("pid") || !(*journal)["pid"].is_number_integer()) {
      return Status::Error("logs response: \"journal\" needs a \"unit\" string and a \"pid\"");
    }
    page.journal =
        JournalSource{(*journal)["unit"].get<std::string>(), (*journal)["pid"].get<pid_t>()};
  }
  return page;
}

std::vector<std::string> JournalctlArgv(const JournalSource& source, const std::string& cell,
                                        bool follow, std::optional<uint64_t> lines) {
  std::vector<std::string> argv = {"journalctl"};
  if (!source.unit.empty()) {
    argv.insert(argv.end(), {"-u", source.unit});
  } else {
    argv.push_back("_PID=" + std::to_string(source.pid));
  }
  argv.push_back("CELL=" + cell);
  if (lines) argv.insert(argv.end(), {"-n", std::to_string(*lines)});
  if (follow) argv.push_back("-f");
  return argv;
}

}  // namespace bulkhead::ctl
