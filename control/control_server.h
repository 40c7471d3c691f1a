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
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"
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
  // The heap a control answer freed (a status of every cell: ~25 KiB per cell) goes back to the
  // kernel (malloc_trim(3)) this long after the first answer since the last release: one release
  // covers every answer within that time, so it runs once a second at most, and never while no
  // command comes. A memory reading taken this long after a control answer sees it released
  // (bench/idle_rss.cc waits so: its kHeapReleaseWait follows this).
  static constexpr uint64_t kReleaseHeapDelayMs = 1'000;

  // The idle timeout and the heap release run on `time` (outlives the server). `idle_timeout_ms`
  // is kIdleTimeoutMs but in tests. `release_heap` returns the freed heap to the kernel; empty:
  // malloc_trim(0) (glibc; nothing elsewhere). Tests count its calls.
  ControlServer(uv_loop_t* loop, loop::TimeSource* time, Handler handler,
                uint64_t idle_timeout_ms = kIdleTimeoutMs, std::function<void()> release_heap = {});
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  // Claims `path` (refusing a live instance's socket), gives the file `access` (mode, group)
  // before it listens, and starts accepting. Errors name the path.
  Status Listen(const std::string& path,
                const std::optional<ipc::SocketAccess>& access = std::nullopt);
  // A re-exec (docs/reexec.md): the listening socket's fd (owned here), and, in the new image
  // instead of Listen, the socket taken back, bound at `path`. Errors name the path.
  int listen_fd() const { return server_.listen_fd(); }
  Status Adopt(UniqueFd fd, const std::string& path);
  // The connections handed over and taken back at a re-exec (StreamServer's methods of the same
  // names).
  std::vector<UniqueFd> HandOver() { return server_.HandOver(); }
  void AdoptConnection(UniqueFd fd) { server_.AdoptConnection(std::move(fd)); }
  // Closes the listener and every connection; `on_closed` runs after the last close callback.
  void Close(std::function<void()> on_closed);

  // Connections open now.
  size_t connections() const { return server_.connections(); }

 private:
  // Arms release_timer_ unless it is armed already (kReleaseHeapDelayMs).
  void ReleaseHeapSoon();

  Handler handler_;  // the caller's handler, calling ReleaseHeapSoon before it answers
  std::function<void()> release_heap_;
  std::unique_ptr<loop::Timer> release_timer_;  // null once Close was called
  StreamServer server_;
};

}  // namespace bulkhead::control
