// SPDX-License-Identifier: MIT
// QueryControl (see control_client.h): connect(2), then poll(2) with the deadline around every
// send and read, so that a stuck supervisor cannot hang bulkheadctl past --timeout.
#include "ctl/control_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include "base/unique_fd.h"

namespace bulkhead::ctl {
namespace {

// Waits for `events` on `fd`. false on timeout (errno ETIMEDOUT) or poll failure (its errno).
bool Wait(int fd, short events, Deadline deadline) {
  pollfd p{.fd = fd, .events = events, .revents = 0};
  while (true) {
    int rc = ::poll(&p, 1, PollTimeoutMs(deadline));
    if (rc > 0) return true;
    if (rc == 0) {
      errno = ETIMEDOUT;
      return false;
    }
    if (errno != EINTR) return false;
  }
}

ControlReply Unreachable(const std::string& socket_path, const std::string& what) {
  ControlReply reply;
  reply.unreachable = true;
  reply.error = socket_path + ": " + what;
  return reply;
}

// How ControlReply::not_control's error begins, after the path.
constexpr std::string_view kNotControl = "did not answer as a bulkheadd control socket";

}  // namespace

nlohmann::json StatusRequest(const std::string& cell) {
  nlohmann::json request = {{"command", "status"}};
  if (!cell.empty()) request["cell"] = cell;
  return request;
}

nlohmann::json CellCommandRequest(const std::string& command, const std::string& cell) {
  return {{"command", command}, {"cell", cell}};
}

bool IsPermissionDenied(const nlohmann::json& response) {
  auto code = response.find("code");
  return response.value("ok", false) != true && code != response.end() &&
         *code == "permission_denied";
}

CommandOutcome InterpretCellCommand(const std::string& command, const nlohmann::json& response) {
  CommandOutcome outcome;
  const std::string result =
      response.contains("result") && response["result"].is_string() ? response["result"] : "";
  if (response.value("ok", false) == true) {
    outcome.success = true;
    return outcome;
  }
  // Already where it was asked to go, or on its way there: `systemctl restart` twice succeeds too.
  if ((command == "start" && result == "already started") ||
      (command == "stop" && (result == "already stopped" || result == "stop in progress")) ||
      (command == "restart" && result == "restart in progress")) {
    outcome.success = true;
    outcome.note = result;
    return outcome;
  }
  outcome.permission_denied = IsPermissionDenied(response);
  if (response.contains("error") && response["error"].is_string()) {
    outcome.error = response["error"];
  } else {
    outcome.error = "unexpected response " + response.dump();
  }
  return outcome;
}

std::string DescribeUnreachable(const ControlReply& reply) {
  constexpr std::string_view kOther = "--socket or $BULKHEAD_SOCKET selects another control socket";
  // Something answered (the connect succeeded), not as bulkheadd does.
  if (reply.not_control) {
    return "cannot reach bulkheadd at " + reply.error + " (is it a cell's socket? " +
           std::string(kOther) + ")";
  }
  std::string hint;
  switch (reply.connect_error) {
    case ENOENT:
    case ECONNREFUSED:
      hint = "is it running? ";
      hint += kOther;
      break;
    case EACCES:
    case EPERM:
      hint =
          "permission denied: run as root or as a member of the group that owns the socket "
          "(control_socket_mode, control_socket_group: docs/config.md); ";
      hint += kOther;
      break;
    case ENOTSOCK:
      hint = "bulkheadd's control socket is not at this path; ";
      hint += kOther;
      break;
    default:
      hint = kOther;
  }
  return "cannot reach bulkheadd at " + reply.error + " (" + hint + ")";
}

ControlReply QueryControl(const std::string& socket_path, const nlohmann::json& request,
                          Deadline deadline) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.empty() || socket_path.size() >= sizeof addr.sun_path) {
    return Unreachable(socket_path, "socket path must be 1 to " +
                                        std::to_string(sizeof addr.sun_path - 1) + " bytes long");
  }
  std::memcpy(addr.sun_path, socket_path.data(), socket_path.size());
  // Non-blocking, so that every wait below goes through poll(2) and its deadline. A Unix stream
  // connect completes at once or fails (EAGAIN when the listener's backlog is full).
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return Unreachable(socket_path, std::string("socket: ") + std::strerror(errno));
  int rc;
  do {
    rc = ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  } while (rc < 0 && errno == EINTR);
  if (rc < 0) {
    int error = errno;
    struct stat st {};
    if (error == ECONNREFUSED && ::stat(socket_path.c_str(), &st) == 0 && !S_ISSOCK(st.st_mode)) {
      error = ENOTSOCK;
    }
    ControlReply reply = Unreachable(
        socket_path, error == ENOTSOCK ? std::string("is not a socket")
                                       : std::string("cannot connect: ") + std::strerror(error));
    reply.connect_error = error;
    return reply;
  }

  const std::string line = request.dump() + "\n";
  size_t sent = 0;
  while (sent < line.size()) {
    ssize_t n = ::send(fd.get(), line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (n >= 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      return Unreachable(socket_path, std::string("send: ") + std::strerror(errno));
    }
    if (!Wait(fd.get(), POLLOUT, deadline)) {
      return Unreachable(socket_path, errno == ETIMEDOUT
                                          ? "timed out sending the request"
                                          : std::string("poll: ") + std::strerror(errno));
    }
  }

  std::string received;
  size_t newline = std::string::npos;
  char buffer[16 * 1024];
  while (newline == std::string::npos) {
    if (received.size() > kMaxResponseLine) {
      return Unreachable(
          socket_path, "response line longer than " + std::to_string(kMaxResponseLine) + " bytes");
    }
    ssize_t n = ::recv(fd.get(), buffer, sizeof buffer, 0);
    if (n > 0) {
      size_t old_size = received.size();
      received.append(buffer, static_cast<size_t>(n));
      newline = received.find('\n', old_size);
      continue;
    }
    if (n == 0) {
      if (received.empty()) return Unreachable(socket_path, "connection closed before a response");
      // bulkheadd answers every request with a whole line: this is another server.
      ControlReply reply = Unreachable(
          socket_path, std::string(kNotControl) + ": it sent " + std::to_string(received.size()) +
                           " bytes and closed without a response line");
      reply.not_control = true;
      return reply;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      return Unreachable(socket_path, std::string("read: ") + std::strerror(errno));
    }
    if (!Wait(fd.get(), POLLIN, deadline)) {
      return Unreachable(socket_path, errno == ETIMEDOUT
                                          ? "timed out waiting for a response"
                                          : std::string("poll: ") + std::strerror(errno));
    }
  }

  ControlReply reply;
  received.resize(newline);
  nlohmann::json response = nlohmann::json::parse(received, nullptr, /*allow_exceptions=*/false);
  if (response.is_discarded() || !response.is_object()) {
    reply.error =
        socket_path + ": " + std::string(kNotControl) +
        " (is it a cell's socket?): its response is not a JSON object: " + received.substr(0, 200);
    reply.not_control = true;
    return reply;
  }
  reply.response = std::move(response);
  return reply;
}

}  // namespace bulkhead::ctl
