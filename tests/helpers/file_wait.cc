// SPDX-License-Identifier: MIT
#include "tests/helpers/file_wait.h"

#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <thread>

#include "base/unique_fd.h"

namespace bulkhead::testing {

bool WaitForFile(const std::string& path, const std::function<bool()>& ready,
                 std::optional<std::chrono::milliseconds> timeout) {
  using Clock = std::chrono::steady_clock;
  const std::optional<Clock::time_point> deadline =
      timeout ? std::optional(Clock::now() + *timeout) : std::nullopt;
  const size_t slash = path.rfind('/');
  const std::string folder =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  UniqueFd inotify(::inotify_init1(IN_CLOEXEC | IN_NONBLOCK));
  bool watching = inotify.valid() && ::inotify_add_watch(inotify.get(), folder.c_str(),
                                                         IN_CREATE | IN_MOVED_TO | IN_MODIFY |
                                                             IN_CLOSE_WRITE | IN_ATTRIB) >= 0;
  while (!ready()) {
    // Milliseconds left, -1 for no deadline (poll(2)'s infinite wait).
    int wait_ms = -1;
    if (deadline) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline - Clock::now());
      if (left.count() <= 0) return false;
      wait_ms = static_cast<int>(std::min<int64_t>(left.count(), 1 << 30));
    }
    if (!watching) {
      std::this_thread::sleep_for(
          std::chrono::milliseconds(wait_ms < 0 ? 1000 : std::min(wait_ms, 1000)));
      continue;
    }
    pollfd readable{.fd = inotify.get(), .events = POLLIN, .revents = 0};
    const int polled = ::poll(&readable, 1, wait_ms);
    if (polled < 0 && errno != EINTR) watching = false;
    if (polled <= 0) continue;
    // Any event in the folder is a reason to look again; their names need not be parsed.
    alignas(inotify_event) char events[4096];
    while (::read(inotify.get(), events, sizeof events) > 0) {
    }
  }
  return true;
}

}  // namespace bulkhead::testing
