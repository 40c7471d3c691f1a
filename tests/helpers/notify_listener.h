// SPDX-License-Identifier: MIT
// NotifyListener: plays the service manager's side of sd_notify(3) in tests. It binds a datagram
// socket at a path (what a test puts in $NOTIFY_SOCKET) and collects what arrives, so a test can
// wait for "READY=1" or a "STATUS=" line with a deadline. Thread-compatible; one thread.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"
#include "tests/helpers/test_support.h"

namespace bulkhead::testing {

class NotifyListener {
 public:
  // Binds a SOCK_DGRAM | SOCK_CLOEXEC Unix socket at `path` (under 108 bytes).
  static Result<NotifyListener> Bind(const std::string& path);

  const std::string& path() const { return path_; }

  // Reads every datagram that has arrived, without waiting, into messages().
  void Drain();
  // Every datagram received so far, in order, each as sent (fields separated by '\n').
  const std::vector<std::string>& messages() const { return messages_; }

  // Waits (polling Drain, deadline `timeout`) until a received datagram satisfies `match`;
  // returns the first that does, or nullopt.
  std::optional<std::string> WaitFor(const std::function<bool(const std::string&)>& match,
                                     std::chrono::milliseconds timeout = kDefaultTimeout);
  // WaitFor a datagram that holds the line `field` ("READY=1") or, if `field` ends in '=', a line
  // starting with it ("STATUS=").
  std::optional<std::string> WaitForField(const std::string& field,
                                          std::chrono::milliseconds timeout = kDefaultTimeout);
  // The datagram holds `field` as WaitForField means it.
  static bool HasField(const std::string& message, const std::string& field);

 private:
  NotifyListener(std::string path, UniqueFd fd) : path_(std::move(path)), fd_(std::move(fd)) {}

  std::string path_;
  UniqueFd fd_;
  std::vector<std::string> messages_;
};

}  // namespace bulkhead::testing
