// SPDX-License-Identifier: MIT
// libFuzzer target for ParseNotifyMessage: any datagram a worker can send to $NOTIFY_SOCKET must
// give either a message or an error, never a crash, and the result must keep the promises of
// cell/notify_message.h. Built with -DBULKHEAD_FUZZ=ON and clang (ctest entry
// fuzz.notify_message_fuzzer).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "base/check.h"
#include "cell/notify_message.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view datagram(reinterpret_cast<const char*>(data), size);
  const auto result = bulkhead::cell::ParseNotifyMessage(datagram);
  const bool refused = size > bulkhead::cell::kMaxNotifyMessageBytes ||
                       datagram.find('\0') != std::string_view::npos;
  BH_CHECK(result.ok() != refused);
  if (!result.ok()) return 0;
  const bulkhead::cell::NotifyMessage& message = result.value();
  if (message.main_pid) BH_CHECK(*message.main_pid > 0);
  if (message.error) BH_CHECK(*message.error >= 0);
  if (message.status) BH_CHECK(message.status->size() < size);
  // Every flag or value set comes from at least one line, and so does every ignored line.
  const size_t set = message.ready + message.reloading + message.stopping + message.watchdog_ping +
                     message.watchdog_trigger + message.status.has_value() +
                     message.main_pid.has_value() + message.error.has_value();
  size_t lines = 0;
  for (char c : datagram) lines += c == '\n';
  BH_CHECK(set + message.ignored_lines <= lines + 1);
  return 0;
}
