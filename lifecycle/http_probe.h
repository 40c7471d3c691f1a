// SPDX-License-Identifier: MIT
// HttpProbe: one GET of a cell's health path on a fresh connection to its worker socket (ready =
// "http:/PATH", docs/config.md): connect, send http::ProbeRequest, read the answer to its end
// (http::ProbeResponse: Content-Length, chunked or the worker's close; at most
// http::kProbeMaxBodyBytes of body), close. Closing only then spares the worker an EPIPE on a body
// it was still writing. The WorkerRunner bounds an attempt's time (kProbeAttemptTimeoutMs). Off the
// request queue: it takes no slot and no link of the data path. One attempt at a time; its outcome
// goes to the callback, never after Cancel. The WorkerRunner decides when to probe and what an
// outcome means (readiness, liveness). REQUIRES: loop thread only.
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
  // The status code of the attempt in progress once the head of its answer is in, else 0 (for the
  // message when it times out reading the body).
  int status_code() const;
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
