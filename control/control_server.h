// SPDX-License-Identifier: MIT
// ControlServer: the supervisor's control socket. Newline-delimited JSON: one request object per
// line, one response object per line (docs/control.md). Each connection's credentials are taken
// from the kernel when it is accepted (SO_PEERCRED) and handed to the handler with every request,
// which decides what that caller may do (ControlAccess). A connection that moves no byte for
// kIdleTimeoutMs is closed, and at most kMaxConnections are open at once. REQUIRES: loop thread
// only.
#pragma once

#include <uv.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "base/status.h"
#include "control/control_access.h"
#include "control/stream_server.h"
#include "ipc/listen_socket.h"
#include "loop/time_source.h"

namespace bulkhead::control {

class ControlServer {
 public:
  // `handler` maps one request line, from `peer`, to one response line (without the newline).
  using Handler =
      std::function<std::string(const std::string& request_line, const ControlPeer& peer)>;

  // A connection that reads no byte and writes none for this long is closed (docs/control.md):
  // 10 s, the default of HAProxy's stats socket (`stats timeout`) and the metrics endpoint's. Every
  // command is answered at once (start/stop/restart return when accepted; bulkheadctl waits by
  // asking again on fresh connections), so only a client that holds a connection it does not use
  // meets it, and bulkheadctl's own exchanges are bounded by 10 s too.
  static constexpr uint64_t kIdleTimeoutMs = 10'000;
  // Control connections open at once; one accepted above this is closed at once, so idle or
  // hostile local clients cannot take bulkheadd's descriptors (each connection lives at most
  // kIdleTimeoutMs while it moves nothing). As many as the metrics endpoint's; `status --watch`
  // and waiting `start`s hold one each.
  static constexpr size_t kMaxConnections = 64;

  // The idle timeout runs on `time` (outlives the server). `idle_timeout_ms` is kIdleTimeoutMs but
  // in tests.
  ControlServer(uv_loop_t* loop, loop::TimeSource* time, Handler handler,
                uint64_t idle_timeout_ms = kIdleTimeoutMs);
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  // Claims `path` (refusing a live instance's socket), gives the file `access` (mode, group)
  // before it listens, and starts accepting. Errors name the path.
  Status Listen(const std::string& path,
                const std::optional<ipc::SocketAccess>& access = std::nullopt);
  // Closes the listener and every connection; `on_closed` runs after the last close callback.
  void Close(std::function<void()> on_closed);

  // Connections open now.
  size_t connections() const { return server_.connections(); }

 private:
  Handler handler_;
  StreamServer server_;
};

}  // namespace bulkhead::control
