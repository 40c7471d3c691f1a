// SPDX-License-Identifier: MIT
// HttpWorkerLink: one keep-alive HTTP/1.1 connection from the supervisor to the worker of a cell
// with protocol = "http" (docs/http.md), carrying one request at a time. The request goes out as
// the client connection framed it (http/forward.h); the response is parsed as it arrives
// (http::ResponseRelay) and streamed to the request's client with backpressure: while the client
// holds more than HttpFrontConnection::kResponseBufferBytes unsent, the link stops reading the
// worker, so a large body never sits whole in memory. A client that is gone gets nothing; the
// response is still read to its end, so the slot is freed when the worker finishes.
//
// A worker that answers `Connection: close` (gunicorn's sync workers), or that closes an idle
// connection, is not reused: the data path opens a fresh connection for the next request; nor is a
// connection whose request carried a body its method gives no meaning to (a GET with a body), nor
// one whose response had no body and announced one (http::ResponseRelay::worker_keep_alive). An
// idle link watches for EOF; a request whose write failed, or whose connection ended before any
// byte of a response came, is one the worker did not answer, and is resent once on a fresh
// connection (TakeInflight tells it unread).
//
// A request whose body was not whole with its head goes out as its head (and the body bytes that
// came with it); the client then streams the rest through SendBody as it reads it, and the link
// tells it when its write queue drained (HttpFrontConnection::OnBodyDrained), so a large upload
// never sits whole in memory either. Such a request is never resent, and its connection is not
// reused when the worker answered before the body was whole. Owns itself: deleted in its handle's
// close callback. REQUIRES: loop thread.
#pragma once

#include <uv.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "http/response_relay.h"
#include "loop/stream_writer.h"
#include "proxy/link.h"

namespace bulkhead::proxy {

class HttpFrontConnection;

class HttpWorkerLink final : public Link {
 public:
  // What an HTTP link tells its cell's data path (proxy::CellDataPath), on the loop thread.
  class Owner : public virtual LinkOwner {
   public:
    // The worker's response to `request` (already taken off the link) is whole and streamed to its
    // client. `reusable`: the worker keeps the connection open for another request; if not, the
    // owner closes it. The owner may send the next request on a reusable `link`.
    virtual void OnHttpResponse(HttpWorkerLink* link, Request* request, bool reusable) = 0;
    // Bytes of a response came: the worker is making progress (stall_timeout).
    virtual void OnWorkerProgress() = 0;
    // The in-flight request's body will never be whole (AbortBody: `why`): the owner takes the
    // request and closes the link, so the worker sees the connection end, not a whole request.
    virtual void OnRequestAborted(HttpWorkerLink* link, const std::string& why) = 0;
  };

  // Connects (non-blocking) to the worker socket at `path`. Fails when the socket is missing or its
  // backlog is full (EAGAIN).
  static Result<HttpWorkerLink*> Connect(Owner* owner, uv_loop_t* loop, const std::string& path);

  // Link. `payload` is the whole request as the worker gets it (http/forward.h).
  void Send(Request* request, std::string_view payload) override;
  bool busy() const override { return inflight_ != nullptr; }
  // Link. Unread: no byte of a response came, the request went out on a connection that had
  // carried an earlier request (idle, reused; a fresh connection cannot have been closed by a
  // keep-alive timeout), its body came whole with its head, and either the worker cannot have read
  // it whole (its write failed; or the worker ended the connection with bytes of it unread:
  // ECONNRESET, or at EOF still in the worker's receive queue, InflightUnread), or it is idempotent
  // (http::IsIdempotentRequest) and the worker closed the connection. A POST the worker read and
  // then closed on (a worker killed with it in hand) is never unread: it may have acted on it, and
  // RFC 9110 section 9.2.2 forbids a proxy to repeat it on its own. Go's net/http client resends
  // on the same grounds (nothing written, or an idempotent request on a reused connection).
  Request* TakeInflight(bool* unread, std::string_view* payload) override;
  using Link::TakeInflight;
  void Close() override;
  void ResumeReading() override;

  // The streamed body of the in-flight request (the client's HttpFrontConnection, whose
  // body_streaming() was true when Send ran, is its source). Writes `bytes` of it, framed by the
  // client (http/forward.h). Returns true when the client is to stop reading its body until
  // OnBodyDrained: more than kBodyBufferBytes wait to be written to the worker.
  bool SendBody(std::string_view bytes);
  // The body is whole (its last bytes were sent): the client is no longer its source.
  void EndBody() { body_source_ = nullptr; }
  // The body will never be whole (`why`): the request ends (Owner::OnRequestAborted) and the
  // connection is closed.
  void AbortBody(const std::string& why);

  // Request body bytes held for a worker before its client stops reading the body.
  static constexpr size_t kBodyBufferBytes = size_t{256} * 1024;

 private:
  explicit HttpWorkerLink(Owner* owner);
  ~HttpWorkerLink() override = default;

  static void OnAlloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf);
  static void OnRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);
  static void OnClosed(uv_handle_t* handle);
  // Relays `data` of the in-flight response; on its end, hands the request back to the owner.
  // The worker has not read the in-flight request whole, as far as this end can tell when the
  // connection ends: part of it was never written, it is still in the worker's receive queue, or
  // the worker closed with it there (ECONNRESET). False once a byte of the response came.
  bool InflightUnread();
  void Relay(std::string_view data);
  // The worker closed the connection (`why`): ends a close-delimited response, else breaks.
  void WorkerClosed(const std::string& why);
  // The response is whole: back to the owner. `reusable` as Owner::OnHttpResponse.
  void Finish(bool reusable);
  void Broken(const std::string& why, bool worker_at_fault = false);
  // Where relayed bytes go: the request's client, or nowhere once it is gone.
  void Deliver();

  Owner* owner_;
  loop::StreamWriter writer_;
  http::ResponseRelay relay_;
  std::string read_buffer_;
  std::string out_;  // relayed bytes for the client, reused
  Request* inflight_ = nullptr;
  std::string payload_;            // of the in-flight request, until its response starts
  bool response_started_ = false;  // a byte of the in-flight request's response came
  bool write_failed_ = false;
  bool inflight_on_reused_ = false;   // sent after an earlier request on this connection
  bool inflight_idempotent_ = false;  // http::IsIdempotentRequest
  bool carried_request_ = false;      // a request was sent on this connection before
  bool ended_ = false;                // the worker closed the connection (EOF or reset)
  bool left_unread_ = false;          // ... with bytes of the in-flight request unread
  std::string write_error_;           // why the write failed (write_failed_)
  bool paused_ = false;               // reading stopped: the client is behind
  // The client streaming the in-flight request's body, until it is whole (EndBody), cut (AbortBody)
  // or the request leaves the link (TakeInflight tells the client: BodyLinkGone).
  HttpFrontConnection* body_source_ = nullptr;
  bool body_streamed_ = false;  // the in-flight request's body was not whole with its head
  // The in-flight request must be the connection's last (HttpFrontConnection::close_worker_after).
  bool close_after_ = false;
};

}  // namespace bulkhead::proxy
