// SPDX-License-Identifier: MIT
#include "bench/control_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/unique_fd.h"

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
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (control_socket.empty() || control_socket.size() >= sizeof addr.sun_path) {
    return Status::Error("control socket path \"" + control_socket + "\" is too long");
  }
  control_socket.copy(addr.sun_path, control_socket.size());
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return Status::FromErrno("socket");
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    return Status::FromErrno("connect " + control_socket);
  }
  const std::string line = nlohmann::json{{"command", "status"}, {"cell", cell}}.dump() + "\n";
  if (::send(fd.get(), line.data(), line.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(line.size())) {
    return Status::FromErrno("send " + control_socket);
  }
  std::string response;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (response.find('\n') == std::string::npos) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return Status::Error(control_socket + ": no status response in time");
    pollfd pfd{fd.get(), POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(left.count())) < 0 && errno != EINTR) {
      return Status::FromErrno("poll " + control_socket);
    }
    char buf[8192];
    ssize_t n = ::recv(fd.get(), buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0) return Status::Error(control_socket + ": closed without a response");
    if (n < 0 && errno != EAGAIN && errno != EINTR) {
      return Status::FromErrno("recv " + control_socket);
    }
    if (n > 0) response.append(buf, static_cast<size_t>(n));
  }
  response.resize(response.find('\n'));
  nlohmann::json parsed = nlohmann::json::parse(response, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    return Status::Error("control: not a JSON object: " + response);
  }
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
