// SPDX-License-Identifier: MIT
// HaproxyProcess: HAProxy run as the bench's peer (docs/benchmarks.md): one process, one thread
// (`nbthread 1`), in the foreground (`-db`), between a front socket (a Unix socket, or for the wrk
// run a TCP port of 127.0.0.1) and one worker's Unix socket, with the same limits as the bulkheadd
// cell it is compared with: `server ... maxconn N` (bulkheadd's max_concurrent) and, in mode http,
// `maxqueue M` and `timeout queue` (max_queue and queue_timeout). Configuration keywords as in the
// HAProxy 2.6 configuration manual. Threading: Start and Stop on the thread that constructed the
// object (ChildProcess).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "base/status.h"
#include "proc/child_process.h"

namespace bulkhead::bench {

struct HaproxyOptions {
  std::string binary = {};         // path of haproxy
  std::string dir = {};            // where its config and log go
  std::string front_socket = {};   // bound by HAProxy (`bind unix@...`), unless front_port is set
  uint16_t front_port = 0;         // when set, HAProxy binds 127.0.0.1:front_port instead
  std::string worker_socket = {};  // the server (`server worker unix@...`)
  bool http = false;               // mode http (keep-alive both sides); else mode tcp
  uint32_t maxconn = 1;   // server maxconn: requests (http) or connections (tcp) at the worker
  uint32_t maxqueue = 0;  // server maxqueue, mode http; 0 leaves it out (unlimited)
  std::chrono::milliseconds queue_timeout{10000};
};

class HaproxyProcess {
 public:
  // The configuration Start writes, for the docs and the log.
  static std::string Config(const HaproxyOptions& options);

  // Writes the configuration, starts `haproxy -db -f FILE` (stdout and stderr in DIR/haproxy.log)
  // and waits, up to `timeout`, until its front socket accepts connections. Errors name the step,
  // with the log when HAProxy exited.
  Status Start(const HaproxyOptions& options, std::chrono::milliseconds timeout);
  // SIGTERM (HAProxy's hard stop), then SIGKILL after `grace`; an error if it ended otherwise
  // than through the signal or with exit 0.
  Status Stop(std::chrono::milliseconds grace);
  pid_t pid() const { return process_.pid(); }
  std::string Log() const;

 private:
  proc::ChildProcess process_;
  std::string log_path_;
};

}  // namespace bulkhead::bench
