// SPDX-License-Identifier: MIT
// ControlServer: the supervisor's control socket. Newline-delimited JSON: one request object per
// line, one response object per line (docs/control.md). Each connection's credentials are taken
// from the kernel when it is accepted (SO_PEERCRED) and handed to the handler with every request,
// which decides what that caller may do (ControlAccess). REQUIRES: loop thread only.
#pragma once

#include <uv.h>

#include <functional>
#include <string>
#include <unordered_set>

#include "base/status.h"
#include "control/control_access.h"
#include "ipc/listen_socket.h"

namespace bulkhead::control {

class ControlConnection;

class ControlServer {
 public:
  // `handler` maps one request line, from `peer`, to one response line (without the newline).
  using Handler =
      std::function<std::string(const std::string& request_line, const ControlPeer& peer)>;

  ControlServer(uv_loop_t* loop, Handler handler);
  ~ControlServer();
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  // Claims `path` (refusing a live instance's socket), gives the file `access` (mode, group)
  // before it listens, and starts accepting.
  Status Listen(const std::string& path,
                const std::optional<ipc::SocketAccess>& access = std::nullopt);
  // Closes the listener and every connection; `on_closed` runs after the last close callback.
  void Close(std::function<void()> on_closed);

 private:
  friend class ControlConnection;
  static void OnConnection(uv_stream_t* server, int status);
  static void OnClosed(uv_handle_t* handle);
  void Forget(ControlConnection* conn);
  void HandleClosed();

  uv_loop_t* loop_;
  Handler handler_;
  uv_pipe_t listener_{};
  ipc::SocketFile file_;  // the socket file Listen bound (removed on Close if still ours)
  std::unordered_set<ControlConnection*> connections_;
  int pending_closes_ = 0;
  std::function<void()> on_closed_;
};

}  // namespace bulkhead::control
