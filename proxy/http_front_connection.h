// SPDX-License-Identifier: MIT
// HttpFrontConnection: one HTTP/1.1 client of a cell with protocol = "http" (docs/http.md), on the
// cell's front socket (a Unix or TCP stream): the client end of its exchanges (proxy/exchange.h).
// Requests are parsed strictly (http::RequestParser) and taken one at a time, as HAProxy and Envoy
// take a connection's pipelined requests: a request is handed to the data path
// (ClientOwner::OnRequest) once its head is complete, and the next one is parsed only once its body
// is read and the answer to it is queued whole, so answers go out in order.
//
// The request goes to the worker as http/forward.h frames it: whole, in one write, when its body
// came with its head (the common case); else as its head, the body then streamed (docs/http.md,
// "Request bodies"): not read from the client while the exchange waits for a worker connection
// (the client's socket buffer holds it), then read as fast as the exchange's worker end takes it
// (Exchange::SendBody and its high watermark), framed as the client sent it (Content-Length, or
// chunks). `Expect: 100-continue` is answered "100 Continue" when the worker end takes the body.
// The worker's response comes through the exchange (OnResponseBytes), or the Outcome is bulkheadd's
// own and is rendered here (http/local_reply.h). An answer that comes before the body was read
// whole ends the worker's request (its connection closed); the rest of the body is then read and
// dropped, or the connection closed when the client still waits for "100 Continue". A request
// refused by the parser gets its status (400/413/417/431/501/505) and the connection closes once
// that is written; a chunked body that grows over max_payload_bytes once streaming began ends the
// worker's request too, and gets 413 unless a byte of the response went out (the connection then
// just closes).
//
// header_timeout bounds the time from the connection's start, or the end of the previous answer,
// until a request's head is complete (slowloris; an idle keep-alive connection is closed after it
// without a word), the silence of a running request's client between two reads of its body (408,
// the request cut: nginx's client_body_timeout), and the reading of the rest of a body answered
// early. request_timeout bounds a running request's body as the rest of its exchange (the data
// path's). The connection's state is one Phase; what is read and when the timer falls due follow
// from it in one place (Update, TimerDeadline), as HAProxy's mux_h1 derives its idle expiration.
// Owns itself: deleted in its handle's close callback. REQUIRES: loop thread only.
#pragma once

#include <uv.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "http/request_parser.h"
#include "loop/time_source.h"
#include "proxy/client.h"

namespace bulkhead::proxy {

class HttpFrontConnection final : public Client {
 public:
  // Where the connection is in its current exchange. Input is parsed only in kHead, kDrainBody and
  // kBody while the body flows; the current exchange (exchanges_, the only one) is set in kBody and
  // kAwaitingAnswer only.
  enum class Phase : uint8_t {
    // No request is with the data path: input is parsed up to the next complete head. Reads while
    // at most max_head_bytes wait unparsed. Timer: header_timeout from phase_since_ms_ (the
    // connection's start, or the end of the previous answer), or idle_timeout when it is lower and
    // nothing of a request came yet: then an idle connection is closed without a word (counted
    // idle_closed), and one with a head begun gets 408.
    kHead,
    // A request was handed on at its head and its body follows through the exchange's body pipe:
    // read only while the pipe is kFlowing (its worker end takes it). Timer, while kFlowing:
    // header_timeout from body_progress_ms_ (the last body bytes read, or the moment the worker
    // end took the body): then the request is cut with 408.
    kBody,
    // The request is with the data path whole (or its body was passed whole) and its answer is not
    // queued whole yet. Reads while at most max_head_bytes wait unparsed (to see the client leave;
    // a pipelined next request waits in in_ unparsed). No timer: request_timeout is the data
    // path's.
    kAwaitingAnswer,
    // The answer was queued before the request's body was read whole: the rest of the body is read
    // and dropped, then kHead. Timer: header_timeout from phase_since_ms_ (the answer): then the
    // connection is closed without a word (its answer went out already).
    kDrainBody,
    // The connection closes once every queued byte is written (a refusal, an answer that ends the
    // connection, the client's EOF): nothing is read or parsed; no timer.
    kClosing,
    // Closed: its handle is closing; nothing runs and nothing is queued.
    kClosed,
  };

  // Accepts one pending connection on `server` (a uv_pipe_t or uv_tcp_t) for `owner`. Errors are
  // logged; nothing to return. (Wire::accept)
  static void Accept(ClientOwner* owner, uv_stream_t* server, const ClientSettings& settings);
  // As Accept, for a connected socket (Unix, or TCP when `tcp`) handed over by a re-exec between
  // two requests; it owns `fd` from here. (Wire::adopt)
  static void Adopt(ClientOwner* owner, uv_loop_t* loop, int fd, bool tcp,
                    const ClientSettings& settings);
  // Appends the 503 (Retry-After, Connection: close) that answers a connection refused at once.
  // (Wire::append_refusal)
  static void AppendRefusal(std::string* out, std::string_view cell, const Outcome& outcome);

  // Client. Ok: the worker's response, streamed already, is whole. Rejected or Failed: a local
  // reply, or, when part of the worker's response went out already, the connection closed once
  // that part is written.
  void OnOutcome(Exchange* exchange, const Outcome& outcome, uint64_t* counter) override;
  size_t OnResponseBytes(Exchange* exchange, std::string_view bytes, bool must_close) override;
  void OnBodyFlow(Exchange* exchange) override;
  void Close() override;
  bool HandOver(int* fd, bool* tcp) override;
  void PauseReads(bool paused) override;

  Phase phase() const { return phase_; }

 private:
  HttpFrontConnection(ClientOwner* owner, const ClientSettings& settings);
  static void Start(ClientOwner* owner, const ClientSource& source, const ClientSettings& settings);
  ~HttpFrontConnection() override = default;

  static void OnAlloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf);
  static void OnRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);
  static void OnClosed(uv_handle_t* handle);
  void OnDrained() override;

  // Enters `phase`, counting its time from now.
  void Enter(Phase phase);
  // Starts or stops reading the client, and arms or stops the timer, as the phase asks.
  void Update();
  // When the timer falls due in this phase (loop ms), none when it has no timer.
  std::optional<uint64_t> TimerDeadline() const;
  void OnTimer();
  // Input is parsed now: in kHead and kDrainBody, and in kBody while the body flows.
  bool Parsing() const;
  // kHead with nothing of the next request read: idle_timeout applies (with header_timeout).
  bool IdleInHead() const;

  // Parses what was read, up to the next complete request, or passes body bytes on.
  void ProcessInput();
  // Hands the request to the data path: whole, or (`streaming`) its head and the body so far.
  void StartExchange(bool streaming);
  // Body bytes the parser decoded: to the exchange (kBody), or dropped (kDrainBody). `last`: the
  // body is whole.
  void PassBody(bool last);
  // The body of the request being read grew over max_payload_bytes (`error`, 413), broke, or its
  // client fell silent (408): the worker's request ends; the client gets `error` unless part of an
  // answer went out.
  void CutBody(const http::Error& error);
  // The current request's answer is queued whole: closes (after writing it) when `close`, else
  // drains the rest of its body (`body_unread`) or waits for the next request.
  void EndExchange(bool close, bool body_unread);
  void RefuseRequest(const http::Error& error);
  // kClosing: closes once everything queued is written.
  void CloseWhenDrained();
  // Closes a connection that has nothing more to do: kClosing and written, or the client's EOF
  // came in kHead and every answer is written.
  void CloseIfDone();

  union Handle {
    uv_handle_t handle;
    uv_stream_t stream;
    uv_pipe_t pipe;
    uv_tcp_t tcp;
  };
  Handle handle_{};
  ClientSettings settings_;
  http::RequestParser parser_;
  std::unique_ptr<loop::Timer> timer_;
  // The client's IP address for a TCP client (X-Forwarded-For, Forwarded), empty on a Unix socket.
  std::string client_address_;
  // Bytes read: [in_pos_, in_end_) not parsed yet; the rest of in_ is room for the next read.
  std::string in_;
  size_t in_pos_ = 0;  // parsed up to here
  size_t in_end_ = 0;  // read up to here
  std::string scratch_;

  Phase phase_ = Phase::kHead;
  uint64_t phase_since_ms_ = 0;
  uint64_t body_progress_ms_ = 0;   // kBody: the last body bytes read, or the body's first wanting
  uint64_t armed_deadline_ms_ = 0;  // the deadline timer_ is armed for, while armed
  // The flags beside the phase:
  bool reading_ = false;       // uv_read_start is in effect (follows from the phase, Update)
  bool processing_ = false;    // inside ProcessInput: re-entry (an answer during OnRequest) defers
  bool read_closed_ = false;   // the client sent EOF (shutdown(SHUT_WR)): nothing more is read
  bool head_ready_ = false;    // kHead: the parser gave a head not yet handed on
  bool reads_paused_ = false;  // PauseReads: no read in kHead before a next request began
  // The current exchange: the connection closes after its answer (the request said so, or its
  // response is close-delimited); bytes of its response were queued; its body goes to the worker as
  // chunks; the client waits for "100 Continue" before it sends the body.
  bool close_after_answer_ = false;
  bool response_started_ = false;
  bool body_chunked_ = false;
  bool continue_pending_ = false;
};

}  // namespace bulkhead::proxy
