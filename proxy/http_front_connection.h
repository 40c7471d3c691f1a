// SPDX-License-Identifier: MIT
// HttpFrontConnection: one HTTP/1.1 client of a cell with protocol = "http" (docs/http.md), on the
// cell's front socket (a Unix or TCP stream). Requests are parsed strictly (http::RequestParser)
// and taken one at a time, as HAProxy and Envoy take a connection's pipelined requests: a request
// is handed to the data path (ClientOwner::OnRequest) whole, body included, and the next one is
// parsed only once the answer to it is queued whole, so answers go out in order. The request goes
// to the worker as http/forward.h frames it; the worker's response is streamed in by the worker
// link (AppendResponse), or bulkheadd answers itself (SendReply: http/local_reply.h).
// A request refused by the parser gets its status (400/413/417/431/501/505) and the connection is
// closed once that is written. `Expect: 100-continue` is answered "100 Continue" at once (the
// request is admitted once its body is in). header_timeout bounds the time from the connection's
// start, or the end of the previous answer, until a request's head is complete (slowloris; an idle
// keep-alive connection is closed after it as well). Owns itself. REQUIRES: loop thread only.
#pragma once

#include <uv.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "http/request_parser.h"
#include "ipc/frame.h"
#include "proxy/client.h"

namespace bulkhead::proxy {

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
  // Appends bytes of the worker's response. Returns true when the link is to stop reading from the
  // worker until Link::ResumeReading (the client holds more than kResponseBufferBytes unsent).
  bool AppendResponse(std::string_view bytes);
  // The response relayed now must end the connection (a close-delimited body).
  void CloseAfterResponse() { keep_alive_ = false; }

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
  // Hands the complete request to the data path.
  void StartExchange();
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
  bool head_request_ = false;      // the current request is a HEAD: local replies carry no body
  bool response_started_ = false;  // bytes of the worker's response were queued
  bool processing_ = false;        // inside ProcessInput
  bool close_when_drained_ = false;
  bool read_closed_ = false;  // the client sent EOF (shutdown(SHUT_WR))
  bool reading_ = false;
};

}  // namespace bulkhead::proxy
