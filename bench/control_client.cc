// SPDX-License-Identifier: MIT
#include "bench/control_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/unique_fd.h"
#include "ctl/control_client.h"

namespace bulkhead::bench {

namespace {

std::optional<CellStatus> ParseCell(const nlohmann::json& cell) {
  if (!cell.is_object()) return std::nullopt;
  CellStatus out;
  for (auto [key, field] : {std::pair{"name", &out.name}, std::pair{"state", &out.state},
                            std::pair{"socket", &out.socket}}) {
    auto it = cell.find(key);
    if (it == cell.end() || !it->is_string()) return std::nullopt;
    *field = it->get<std::string>();
  }
  for (auto [key, field] : {std::pair{"running", &out.running}, std::pair{"queued", &out.queued},
                            std::pair{"ok", &out.ok}, std::pair{"rejected", &out.rejected},
                            std::pair{"failed", &out.failed}}) {
    auto it = cell.find(key);
    if (it == cell.end() || !it->is_number_unsigned()) return std::nullopt;
    *field = it->get<uint64_t>();
  }
  if (auto pid = cell.find("pid"); pid != cell.end() && pid->is_number_integer()) {
    out.pid = pid->get<pid_t>();
  }
  return out;
}

}  // namespace

Result<CellStatus> QueryCellStatus(const std::string& control_socket, const std::string& cell,
                                   std::chrono::milliseconds timeout) {
  ctl::ControlReply reply = ctl::QueryControl(control_socket, ctl::StatusRequest(cell),
                                              std::chrono::steady_clock::now() + timeout);
  if (!reply.response) return Status::Error(reply.error);
  const nlohmann::json& parsed = *reply.response;
  const std::string response = parsed.dump();
  if (auto ok = parsed.find("ok"); ok == parsed.end() || *ok != true) {
    return Status::Error("control: " + response);
  }
  auto cells = parsed.find("cells");
  if (cells == parsed.end() || !cells->is_array() || cells->size() != 1) {
    return Status::Error("control: expected one cell in " + response);
  }
  std::optional<CellStatus> status = ParseCell((*cells)[0]);
  if (!status) return Status::Error("control: unexpected cell object " + (*cells)[0].dump());
  return *status;
}

}  // namespace bulkhead::bench
