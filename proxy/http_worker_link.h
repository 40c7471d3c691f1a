// SPDX-License-Identifier: MIT
// HttpWorkerLink: one keep-alive HTTP/1.1 connection from the supervisor to the worker of a cell
// with protocol = "http" (docs/http.md), carrying one exchange at a time: its worker end
// (proxy/exchange.h). The request goes out as the client connection framed it (http/forward.h);
// the response is parsed as it arrives (http::ResponseRelay, told by the exchange's RequestInfo
// whether it answers a HEAD and how the client takes a body) and streamed to the exchange's client
// through Exchange::SendResponse with backpressure: while the client holds more than the exchange's
// high watermark unwritten, the link stops reading the worker, so a large body never sits whole
// in memory. A client that is gone gets nothing; the response is still read to its end, so the
// slot is freed when the worker finishes.
//
// A worker that answers `Connection: close` (gunicorn's sync workers), or that closes an idle
// connection, is not reused: the data path opens a fresh connection for the next exchange. Nor is
// a connection whose exchange said so (RequestInfo::close_link_after: a GET with a body), nor one
// whose response had no body yet announced one (http::ResponseRelay::worker_keep_alive). An idle
// link watches for EOF; a request whose write failed, or whose connection ended before any byte
// of a response came, is one the worker did not answer, and is resent once on a fresh connection
// (TakeInflight tells it unread).
//
// A request whose body was not whole with its head (RequestInfo::kStreamed) goes out as its head
// (and the body bytes that came with it); the link then asks the exchange for the body
// (Exchange::WantBody), writes what the client sends through it (OnBodyBytes), and asks again
// once its write queue drained, so a large upload never sits whole in memory either. Such a
// request is never resent, and its connection is not reused when the worker answered before the
// body was whole. Owns itself: deleted in its handle's close callback. REQUIRES: loop thread.
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

class HttpWorkerLink final : public Link {
 public:
  using Owner = LinkOwner;

  // Connects (non-blocking) to the worker socket at `path`. Fails when the socket is missing or its
  // backlog is full (EAGAIN). With `write_batch` (enabled), what Send and OnBodyBytes write waits
  // for the loop iteration's batch (loop/write_batch.h), so the requests of one iteration and its
  // client answers reach the kernel in one io_uring_enter; nullptr: each is written at once.
  static Result<HttpWorkerLink*> Connect(Owner* owner, uv_loop_t* loop, const std::string& path,
                                         loop::WriteBatch* write_batch = nullptr);

  // Link. `payload` is the request as the worker gets it (http/forward.h): whole, or its head and
  // the first bytes of a streamed body. When the response is whole: LinkOwner::OnWorkerAnswer with
  // Outcome::Ok, the response streamed already; the connection is reusable only if the worker
  // also took the whole request before (a response that completes while bytes of the request are
  // unwritten answered something the worker did not read: what is left of the request would be
  // read as the next one).
  void Send(Exchange* exchange, std::string_view payload) override;
  bool busy() const override { return inflight_ != nullptr; }
  // Link. Unread: no byte of a response came, the request went out on a connection that had
  // carried an earlier request (idle, reused; a fresh connection cannot have been closed by a
  // keep-alive timeout), its body came whole with its head, and either the worker cannot have read
  // it whole (its write failed; or the worker ended the connection with bytes of it unread:
  // ECONNRESET, or at EOF still in the worker's receive queue, InflightUnread), or it is idempotent
  // (RequestInfo::idempotent) and the worker closed the connection. A POST the worker read and
  // then closed on (a worker killed with it in hand) is never unread: it may have acted on it, and
  // RFC 9110 section 9.2.2 forbids a proxy to repeat it on its own. Go's net/http client resends
  // on the same grounds (nothing written, or an idempotent request on a reused connection).
  Exchange* TakeInflight(bool* unread, std::string_view* payload) override;
  using Link::TakeInflight;
  void Close() override;
  // Link, the exchange's worker end: body bytes are written as the client framed them
  // (http/forward.h); a cut body ends the exchange (LinkOwner::OnExchangeAborted), and the
  // connection with it.
  size_t OnBodyBytes(Exchange* exchange, std::string_view bytes, bool last) override;
  void OnBodyAborted(Exchange* exchange, const std::string& why) override;
  void ResumeReading() override;

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
  // Hands the relayed bytes in out_ to the exchange's client; stops reading when it is behind.
  void Deliver();

  Owner* owner_;
  loop::StreamWriter writer_;
  http::ResponseRelay relay_;
  std::string read_buffer_;
  std::string out_;  // relayed bytes for the client, reused
  Exchange* inflight_ = nullptr;
  std::string payload_;            // of the in-flight request, until its response starts
  bool response_started_ = false;  // a byte of the in-flight request's response came
  bool write_failed_ = false;
  bool inflight_on_reused_ = false;  // sent after an earlier request on this connection
  bool carried_request_ = false;     // a request was sent on this connection before
  bool ended_ = false;               // the worker closed the connection (EOF or reset)
  bool left_unread_ = false;         // ... with bytes of the in-flight request unread
  std::string write_error_;          // why the write failed (write_failed_)
  // Reading stopped: the in-flight exchange's client is behind. Never while idle (Finish).
  bool paused_ = false;
  // The owner's time()->NowNs() when reading stopped (paused_): the pause is added to the in-flight
  // exchange's client_paused_ns when reading resumes.
  uint64_t paused_at_ns_ = 0;
};

}  // namespace bulkhead::proxy
