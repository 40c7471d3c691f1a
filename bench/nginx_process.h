// SPDX-License-Identifier: MIT
// NginxProcess: nginx (Debian 12's 1.22) run as the bench's second peer in the wrk run
// (docs/benchmarks.md, "HTTP with wrk"): one process that is its own worker (`master_process off`,
// `daemon off`), so its pid is the process that serves every request, listening on 127.0.0.1 only,
// a reverse proxy to one worker's Unix socket with idle upstream connections kept
// (`keepalive`, `proxy_http_version 1.1`, `Connection ""`), as an operator puts nginx in front of
// a keep-alive HTTP server. Every path it writes (pid, logs, temp files) is under DIR.
// Directives as in the nginx 1.22 documentation (ngx_http_upstream_module, ngx_http_proxy_module,
// ngx_http_core_module). Threading: Start and Stop on the thread that constructed the object.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "base/status.h"
#include "proc/child_process.h"

namespace bulkhead::bench {

struct NginxOptions {
  std::string binary = {};         // path of nginx
  std::string dir = {};            // its prefix: config, pid, logs and temp directories go here
  uint16_t port = 0;               // listens on 127.0.0.1:port
  std::string worker_socket = {};  // the upstream server (`server unix:...`)
  // Idle upstream connections kept (`keepalive`): at least the connections the client opens, so
  // that every request finds one.
  uint32_t keepalive = 64;
};

class NginxProcess {
 public:
  // The configuration Start writes, for the docs and the log.
  static std::string Config(const NginxOptions& options);

  // Writes the configuration, starts `nginx -p DIR -c DIR/nginx.conf -e DIR/error.log` (stdout and
  // stderr in DIR/nginx.log) and waits, up to `timeout`, until it accepts connections on its port.
  // Errors name the step, with the log when nginx exited.
  Status Start(const NginxOptions& options, std::chrono::milliseconds timeout);
  // SIGTERM (nginx's fast shutdown), then SIGKILL after `grace`; an error if it ended otherwise
  // than through the signal or with exit 0.
  Status Stop(std::chrono::milliseconds grace);
  pid_t pid() const { return process_.pid(); }
  std::string Log() const;

 private:
  proc::ChildProcess process_;
  std::string dir_;
};

}  // namespace bulkhead::bench
