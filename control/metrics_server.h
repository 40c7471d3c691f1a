// SPDX-License-Identifier: MIT
// MetricsServer: the Prometheus endpoint (`[supervisor] metrics_listen`, docs/metrics.md). A tiny
// HTTP/1.x server on the loop: requests are parsed by http-parser; `GET /metrics` (or HEAD) is
// answered with the text `render` returns, another path with 404, another method with 405, a
// malformed request with 400 and one too large (over kMaxRequestBytes) with 431. One response per
// connection, then the connection closes ("Connection: close"). A connection still open kTimeoutMs
// after its accept and connections above kMaxConnections are closed. REQUIRES: loop thread only.
#pragma once

#include <uv.h>

#include <functional>
#include <string>

#include "base/status.h"
#include "base/unique_fd.h"
#include "config/listen_address.h"
#include "control/stream_server.h"
#include "loop/time_source.h"

namespace bulkhead::control {

class MetricsServer {
 public:
  static constexpr size_t kMaxRequestBytes = size_t{8} * 1024;
  // A connection still open this long after its accept is closed, whether it sent part of a request
  // or has not read all of its answer (docs/metrics.md: "no complete request within 10 s").
  static constexpr uint64_t kTimeoutMs = 10'000;
  static constexpr size_t kMaxConnections = 64;

  // `render` returns the exposition text (control/metrics_text.h), called once per scrape.
  // The timeout runs on `time`, which outlives the server.
  MetricsServer(uv_loop_t* loop, loop::TimeSource* time, std::function<std::string()> render);
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Binds and listens: a TCP address (SO_REUSEADDR, as libuv sets it) or a Unix socket path
  // (claimed like the control socket: a live instance's socket is refused). Errors name the
  // address: "metrics_listen 127.0.0.1:9464: bind: address already in use".
  Status Listen(const config::ListenAddress& address);
  // A re-exec (docs/reexec.md): the listening socket's fd (owned here), and, in the new image
  // instead of Listen, the socket taken back: bound at `bound` (what bound_address() said in the
  // previous image; a path for a Unix socket). Errors name the address.
  int listen_fd() const { return server_.listen_fd(); }
  Status Adopt(UniqueFd fd, const config::ListenAddress& address, const std::string& bound);
  // The address actually bound ("127.0.0.1:40123" when port 0 was asked), "" before Listen.
  const std::string& bound_address() const { return bound_; }
  // Closes the listener and every connection; `on_closed` runs after the last close callback.
  void Close(std::function<void()> on_closed);

 private:
  std::function<std::string()> render_;
  StreamServer server_;
  std::string bound_;
};

}  // namespace bulkhead::control
