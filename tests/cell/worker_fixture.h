// SPDX-License-Identifier: MIT
// Starts a worker binary the way bulkheadd does (cell::Spawn with a listening Unix socket as
// fd 3) and connects ipc::Clients to it. The worker is killed and reaped by pid in the
// destructor (ChildGuard). Test-thread only.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "cell/process.h"
#include "ipc/client.h"
#include "tests/helpers/test_support.h"

namespace bulkhead::testing {

// Bound on every blocking client read or write in these tests, so a broken worker fails the test
// instead of hanging it.
inline constexpr std::chrono::milliseconds kClientTimeout{10000};

class RunningWorker {
 public:
  // Spawns `argv` with a listening socket at <temp dir>/worker.sock. Check ok() with ASSERT.
  explicit RunningWorker(std::vector<std::string> argv,
                         std::vector<std::string> environment = {"PATH=/usr/bin:/bin"})
      : RunningWorker(Options(std::move(argv), std::move(environment))) {}

  // As above with every other SpawnOptions field from `options` (listen_fd and its name are set
  // here).
  explicit RunningWorker(cell::SpawnOptions options) {
    socket_path_ = dir_.Join("worker.sock");
    Result<UniqueFd> listener = ListenUnix(socket_path_);
    if (!listener.ok()) {
      error_ = listener.status().message();
      return;
    }
    listener_ = std::move(listener).value();
    options.listen_fd = listener_.get();
    options.listen_fd_name = "worker";
    Result<pid_t> pid = cell::Spawn(options);
    if (!pid.ok()) {
      error_ = pid.status().message();
      return;
    }
    child_.Reset(*pid);
  }

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  pid_t pid() const { return child_.pid(); }
  ChildGuard& child() { return child_; }
  const TempDir& dir() const { return dir_; }
  const std::string& socket_path() const { return socket_path_; }

  // A client connected to the worker's socket, with kClientTimeout set.
  ipc::Client Connect() const {
    Result<ipc::Client> client = ipc::Client::Connect(socket_path_);
    EXPECT_TRUE(client.ok()) << client.status().message();
    ipc::Client connected = std::move(client).value();
    EXPECT_TRUE(connected.SetTimeout(kClientTimeout).ok());
    return connected;
  }

 private:
  static cell::SpawnOptions Options(std::vector<std::string> argv,
                                    std::vector<std::string> environment) {
    cell::SpawnOptions options;
    options.argv = std::move(argv);
    options.environment = std::move(environment);
    return options;
  }

  TempDir dir_;
  std::string socket_path_;
  UniqueFd listener_;
  ChildGuard child_;
  std::string error_;
};

}  // namespace bulkhead::testing
