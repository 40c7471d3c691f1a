// SPDX-License-Identifier: MIT
// HttpProbe: one GET of a cell's health path on a fresh connection to its worker socket (ready =
// "http:/PATH", docs/config.md): connect, send http::ProbeRequest, read until the head of the
// answer is in (http::ProbeResponse), close. Off the request queue: it takes no slot and no link
// of the data path. One attempt at a time; its outcome goes to the callback, never after Cancel.
// The WorkerRunner decides when to probe and what an outcome means (readiness, liveness).
// REQUIRES: loop thread only.
#pragma once

#include <uv.h>

#include <functional>
#include <string>

namespace bulkhead::lifecycle {

class HttpProbe {
 public:
  struct Outcome {
    bool healthy = false;  // the worker answered 2xx (http::ProbeHealthy)
    // What the worker answered, for log lines and stall messages: "200", "503", "connect:
    // Connection refused", "connection closed before the status line", "not an HTTP/1.x
    // response: ...".
    std::string what;
  };

  explicit HttpProbe(uv_loop_t* loop) : loop_(loop) {}
  // REQUIRES: !busy() (Cancel first): an attempt's handle must close on the loop.
  ~HttpProbe();
  HttpProbe(const HttpProbe&) = delete;
  HttpProbe& operator=(const HttpProbe&) = delete;

  // Starts one attempt: GET `path` on a new connection to the Unix socket `socket_path`; `done`
  // runs once with the outcome, from a libuv callback. REQUIRES: !busy().
  void Start(const std::string& socket_path, const std::string& path,
             std::function<void(const Outcome&)> done);
  bool busy() const { return attempt_ != nullptr; }
  // Abandons the attempt in progress, if any: its connection is closed and its `done` never runs.
  void Cancel();

 private:
  // One attempt: owns its uv_pipe_t, and deletes itself in the handle's close callback (which may
  // come after the HttpProbe that started it is gone).
  struct Attempt;
  void Finish(Attempt* attempt, const Outcome& outcome);

  uv_loop_t* loop_;
  Attempt* attempt_ = nullptr;
};

}  // namespace bulkhead::lifecycle
