// SPDX-License-Identifier: MIT
#include "supervisor/service_notifier.h"

#include <systemd/sd-daemon.h>

#include <array>
#include <cstdlib>
#include <cstring>

#include "base/clock.h"
#include "base/log.h"

namespace bulkhead::supervisor {

std::string DescribeCellStates(const std::vector<lifecycle::Lifecycle::State>& states) {
  std::array<size_t, lifecycle::Lifecycle::kStateCount> counts{};
  for (lifecycle::Lifecycle::State state : states) ++counts[static_cast<size_t>(state)];
  std::string text = std::to_string(states.size()) + (states.size() == 1 ? " cell" : " cells");
  const char* separator = ": ";
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] == 0) continue;
    text += separator + std::to_string(counts[i]) + " " +
            lifecycle::Lifecycle::StateName(static_cast<lifecycle::Lifecycle::State>(i));
    separator = ", ";
  }
  return text;
}

ServiceNotifier::ServiceNotifier() {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  enabled_ = socket != nullptr && socket[0] != '\0';
}

void ServiceNotifier::Ready() { Send("READY=1"); }

void ServiceNotifier::Reloading() {
  // Read now, not the loop's cached time: it must not be older than the SIGHUP that asked for
  // the reload.
  Send("RELOADING=1\nMONOTONIC_USEC=" + std::to_string(MonotonicClock().NowUs()));
}

void ServiceNotifier::Stopping() { Send("STOPPING=1"); }

void ServiceNotifier::Status(std::string_view text) {
  std::string line(text);
  for (char& c : line) {
    if (c == '\n') c = ' ';
  }
  if (line == last_status_) return;
  last_status_ = line;
  Send("STATUS=" + line);
}

void ServiceNotifier::Send(const std::string& message) {
  if (!enabled_) return;
  int rc = sd_notify(/*unset_environment=*/0, message.c_str());
  if (rc > 0) {
    ++sent_;
    return;
  }
  if (warned_) return;
  warned_ = true;
  LogWarning("cannot notify the service manager ($NOTIFY_SOCKET): " +
             std::string(rc < 0 ? std::strerror(-rc) : "NOTIFY_SOCKET is not set") +
             "; further notification errors are not logged");
}

}  // namespace bulkhead::supervisor
