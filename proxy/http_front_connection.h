// SPDX-License-Identifier: MIT
// HttpFrontConnection: one HTTP/1.1 client of a cell with protocol = "http" (docs/http.md), on the
// cell's front socket (a Unix or TCP stream). Requests are parsed strictly (http::RequestParser)
// and taken one at a time, as HAProxy and Envoy take a connection's pipelined requests: a request
// is handed to the data path (ClientOwner::OnRequest) once its head is complete, and the next one
// is parsed only once its body is read and the answer to it is queued whole, so answers go out in
// order. The request goes to the worker as http/forward.h frames it: whole, in one write, when its
// body came with its head (the common case); else as its head, the body then streamed
// (docs/http.md, "Request bodies"): not read from the client while the request is queued (the
// client's socket buffer holds it), then read as fast as the worker link takes it
// (HttpWorkerLink::SendBody, kBodyBufferBytes), framed as the client sent it (Content-Length, or
// chunks). The worker's response is streamed in by the worker link (AppendResponse), or bulkheadd
// answers itself (SendReply: http/local_reply.h). An answer that comes before the body was read
// whole ends the worker's request (its connection closed); the rest of the body is then read and
// dropped, or the connection closed when the client still waits for "100 Continue". A request
// refused by the parser gets its status (400/413/417/431/501/505) and the connection is closed once
// that is written; a chunked body that grows over max_payload_bytes once streaming began ends the
// worker's request too, and gets 413 unless a byte of the response went out (the connection is then
// closed). `Expect: 100-continue` is answered "100 Continue" when the request is sent to the
// worker. header_timeout bounds the time from the connection's start, or the end of the previous
// answer, until a request's head is complete (slowloris; an idle keep-alive connection is closed
// after it as well), and the silence of a running request's client between two reads of its body
// (408, the request cut: nginx's client_body_timeout); request_timeout bounds a running request's
// body as the rest of its exchange.
// Owns itself. REQUIRES: loop thread only.
#pragma once

#include <uv.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "http/request_parser.h"
#include "ipc/frame.h"
#include "proxy/client.h"

namespace bulkhead::proxy {

class HttpWorkerLink;

class HttpFrontConnection final : public Client {
 public:
  struct Settings {
    http::Limits limits;
    uint64_t header_timeout_ms = 10'000;  // 0: none
  };

  // Accepts one pending connection on `server` (a uv_pipe_t or uv_tcp_t) for `owner`. Errors are
  // logged; nothing to return.
  static void Accept(ClientOwner* owner, uv_stream_t* server, const Settings& settings);

  // Client: a local reply for REJECTED/FAILED (or, when part of the worker's response was sent
  // already, the connection closed once that part is written); OK: the worker's response is whole.
  void SendReply(const ipc::FrameHeader& header, std::string_view payload,
                 uint64_t* outcome) override;
  void Close() override;
  HttpFrontConnection* AsHttp() override { return this; }

  // For the worker link relaying the response to this client's current request
  // (http::ResponseRelay::Begin): the connection stays open after it, the client speaks HTTP/1.1.
  bool keep_alive() const { return keep_alive_; }
  bool http11() const { return http11_; }
  // The worker connection that carries the current request must carry nothing after it: a GET (or
  // other method without body semantics) came with a body (http::RequestHead::
  // body_on_bodiless_method), which a worker that never reads it takes as its next request.
  bool close_worker_after() const { return close_worker_after_; }
  // Appends bytes of the worker's response. Returns true when the link is to stop reading from the
  // worker until Link::ResumeReading (the client holds more than kResponseBufferBytes unsent).
  bool AppendResponse(std::string_view bytes);
  // The response relayed now must end the connection (a close-delimited body).
  void CloseAfterResponse() { keep_alive_ = false; }

  // For the worker link of the current request. The request's body was not whole with its head:
  // the link makes it the body's source (OnBodyLink) when it sends the request.
  bool body_streaming() const { return body_streaming_ && body_link_ == nullptr; }
  // `link` sent the request's head: the body goes there as it is read ("100 Continue" first when
  // the client waits for it).
  void OnBodyLink(HttpWorkerLink* link);
  // The body link's write queue drained: reading the body resumes.
  void OnBodyDrained();
  // The request left the body link (answered, or failed): no more body is read for it until its
  // answer comes (the rest is then dropped).
  void BodyLinkGone();

  // Response bytes held for a client before its worker link stops reading: a large body streams
  // through this much memory, not more.
  static constexpr size_t kResponseBufferBytes = size_t{256} * 1024;

 private:
  HttpFrontConnection(ClientOwner* owner, const Settings& settings);
  ~HttpFrontConnection() override = default;

  static void OnAlloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf);
  static void OnRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);
  static void OnHeaderTimer(uv_timer_t* timer);
  static void OnClosed(uv_handle_t* handle);
  void OnDrained() override;

  // Parses what was read, up to the next complete request.
  void ProcessInput();
  // Hands the request to the data path: whole, or (`streaming`) its head and the body so far.
  void StartExchange(bool streaming);
  // Body bytes the parser decoded for a request handed on at its head: to its worker link, or
  // dropped once it was answered. `last`: the body is whole.
  void PassBody(bool last);
  // The body of the request handed on grew over max_payload_bytes (`error`, 413) or broke: the
  // worker's request ends; the client gets `error` unless part of an answer went out.
  void CutBody(const http::Error& error);
  // Starts or stops reading the client as the state asks.
  void UpdateReading();
  // The current request's answer is queued whole: closes (after writing it) when it must, else
  // waits for the next request.
  void EndExchange(bool close);
  // Queues `bytes` as an answer (counted in `outcome`) that ends the exchange.
  void Answer(const std::string& bytes, uint64_t* outcome, bool close);
  void RefuseRequest(const http::Error& error);
  // Closes once everything queued is written (no more requests are read).
  void CloseWhenDrained();
  // After the client's EOF: closes once every request it sent is answered and written.
  void CloseIfDone();
  void ArmHeaderTimer();

  union Handle {
    uv_handle_t handle;
    uv_stream_t stream;
    uv_pipe_t pipe;
    uv_tcp_t tcp;
  };
  Handle handle_{};
  uv_timer_t header_timer_{};
  int open_handles_ = 0;
  Settings settings_;
  http::RequestParser parser_;
  // The client's IP address for a TCP client (X-Forwarded-For, Forwarded), empty on a Unix socket.
  std::string client_address_;
  std::string in_;     // bytes read, from in_pos_ on not parsed yet
  size_t in_pos_ = 0;  // parsed up to here
  std::string scratch_;
  // The current exchange: a request handed to the data path whose answer is not queued whole.
  bool busy_ = false;
  bool keep_alive_ = true;
  bool http11_ = true;
  bool close_worker_after_ = false;
  bool head_request_ = false;      // the current request is a HEAD: local replies carry no body
  bool response_started_ = false;  // bytes of the worker's response were queued
  bool processing_ = false;        // inside ProcessInput
  bool close_when_drained_ = false;
  bool read_closed_ = false;  // the client sent EOF (shutdown(SHUT_WR))
  bool reading_ = false;
  // Request bodies streamed (not whole with the head).
  bool head_ready_ = false;      // the parser gave a head not yet handed on
  bool body_streaming_ = false;  // the current request was handed on and its body is not read whole
  bool body_chunked_ = false;    // that body goes to the worker as chunks
  bool body_paused_ = false;     // its link's write queue is full: the client is not read
  bool continue_pending_ = false;        // the client waits for "100 Continue" before sending it
  HttpWorkerLink* body_link_ = nullptr;  // the link writing it, once the request was sent
};

}  // namespace bulkhead::proxy
