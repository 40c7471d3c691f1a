// SPDX-License-Identifier: MIT
#include "tests/helpers/notify_listener.h"

#include <sys/socket.h>
#include <sys/un.h>

#include <cstring>
#include <sstream>

namespace bulkhead::testing {

Result<NotifyListener> NotifyListener::Bind(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof address.sun_path) {
    return Status::Error("socket path too long: " + path);
  }
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  UniqueFd fd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return Status::FromErrno("socket");
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    return Status::FromErrno("bind " + path);
  }
  return NotifyListener(path, std::move(fd));
}

void NotifyListener::Drain() {
  char buffer[4096];
  while (true) {
    ssize_t n = ::recv(fd_.get(), buffer, sizeof buffer, 0);
    if (n < 0) return;  // EAGAIN: nothing more for now
    messages_.emplace_back(buffer, static_cast<size_t>(n));
  }
}

std::optional<std::string> NotifyListener::WaitFor(
    const std::function<bool(const std::string&)>& match, std::chrono::milliseconds timeout) {
  std::optional<std::string> found;
  testing::WaitFor(
      [&] {
        Drain();
        for (const std::string& message : messages_) {
          if (match(message)) {
            found = message;
            return true;
          }
        }
        return false;
      },
      timeout);
  return found;
}

std::optional<std::string> NotifyListener::WaitForField(const std::string& field,
                                                        std::chrono::milliseconds timeout) {
  return WaitFor([&](const std::string& message) { return HasField(message, field); }, timeout);
}

bool NotifyListener::HasField(const std::string& message, const std::string& field) {
  std::istringstream lines(message);
  std::string line;
  while (std::getline(lines, line)) {
    if (!field.empty() && field.back() == '=' ? line.rfind(field, 0) == 0 : line == field) {
      return true;
    }
  }
  return false;
}

}  // namespace bulkhead::testing
