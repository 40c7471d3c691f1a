// SPDX-License-Identifier: MIT
// FakeServer: a listening Unix socket in a temp dir whose one accepted connection is handed to a
// script on its own thread, to play a misbehaving supervisor in ctl/ tests. The destructor joins
// the thread after shutting the listener down. Used from the test's main thread.
#pragma once

#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <string>
#include <thread>

#include "base/unique_fd.h"
#include "tests/helpers/test_support.h"

namespace bulkhead::ctl {

class FakeServer {
 public:
  // `script` runs on the server thread with the accepted connection.
  explicit FakeServer(std::function<void(int fd)> script) : path_(dir_.Join("s.sock")) {
    Result<UniqueFd> listener = testing::ListenUnix(path_);
    if (!listener.ok()) {
      error_ = listener.status().message();
      return;
    }
    listener_ = std::move(listener).value();
    thread_ = std::thread([this, script = std::move(script)] {
      UniqueFd conn(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (conn) script(conn.get());
    });
  }
  ~FakeServer() {
    // Wakes a thread still blocked in accept(2).
    if (listener_) ::shutdown(listener_.get(), SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
  }

  const std::string& path() const { return path_; }
  // Empty unless the listener could not be created.
  const std::string& error() const { return error_; }

  // Helpers for scripts.
  static void Write(int fd, std::string_view bytes) {
    while (!bytes.empty()) {
      ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
  }
  // Reads until `bytes` bytes arrived or the peer closed; returns them.
  static std::string Read(int fd, size_t bytes) {
    std::string data;
    char buffer[4096];
    while (data.size() < bytes) {
      ssize_t n = ::read(fd, buffer, std::min(sizeof buffer, bytes - data.size()));
      if (n <= 0) break;
      data.append(buffer, static_cast<size_t>(n));
    }
    return data;
  }
  // Reads until the peer closes.
  static void ReadToEnd(int fd) {
    char buffer[4096];
    while (::read(fd, buffer, sizeof buffer) > 0) {
    }
  }

 private:
  testing::TempDir dir_;
  std::string path_;
  std::string error_;
  UniqueFd listener_;
  std::thread thread_;
};

}  // namespace bulkhead::ctl
