// SPDX-License-Identifier: MIT
// FrontConnection: one frame client connected to one of a cell's front sockets (proxy/client.h),
// a Unix stream socket (uv_pipe_t) or a TCP connection (uv_tcp_t, TCP_NODELAY). Decodes REQUEST
// frames, hands each to its Owner (the cell's data path) for admission, and writes each exchange's
// Outcome as a REPLY frame (several per writev when pipelined; docs/protocol.md). A malformed or
// oversized frame gets a BAD_REQUEST reply and the connection is closed after it is written. A
// connection with no request in flight for idle_timeout (ClientSettings) is closed without a word
// (Envoy's idle_timeout): a leaky client pool cannot hold the cell's connections forever. Owns
// itself: created by Accept(), deleted in its handle's close callback. REQUIRES: loop thread only.
#pragma once

#include <sys/socket.h>
#include <uv.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "ipc/frame.h"
#include "proxy/client.h"

namespace bulkhead::proxy {

class FrontConnection final : public Client {
 public:
  using Owner = ClientOwner;

  // Accepts one pending connection on `server` (a listening uv_pipe_t or uv_tcp_t) for `owner`.
  // Errors are logged; nothing to return. (Wire::accept)
  static void Accept(Owner* owner, uv_stream_t* server, const ClientSettings& settings);
  // As Accept, for a connected socket (Unix, or TCP when `tcp`) handed over by a re-exec between
  // two requests; it owns `fd` from here. (Wire::adopt)
  static void Adopt(Owner* owner, uv_loop_t* loop, int fd, bool tcp,
                    const ClientSettings& settings);
  // Appends the REPLY frame, request_id 0, that answers a connection refused at once.
  // (Wire::append_refusal)
  static void AppendRefusal(std::string* out, std::string_view cell, const Outcome& outcome);

  // The TCP client's address and port (sockaddr_in or sockaddr_in6, from getpeername(2) at
  // accept), for X-Forwarded-For and Forwarded; nullptr for a client of the Unix socket.
  // config::ListenAddressFromSockaddr formats it. Valid as long as the connection.
  const sockaddr* peer_address() const {
    return tcp_ ? reinterpret_cast<const sockaddr*>(&peer_) : nullptr;
  }

  // Client: queues the REPLY frame of `outcome`; written at once unless a read is being processed,
  // in which case every reply produced by that read goes out in one write.
  void OnOutcome(Exchange* exchange, const Outcome& outcome, uint64_t* counter) override;

  void Close() override;
  bool HandOver(int* fd, bool* tcp) override;
  void PauseReads(bool paused) override;

 private:
  FrontConnection(Owner* owner, const ClientSettings& settings);
  ~FrontConnection() override = default;
  static void Start(Owner* owner, const ClientSource& source, const ClientSettings& settings);

  uv_stream_t* stream() { return reinterpret_cast<uv_stream_t*>(&handle_); }
  uv_handle_t* handle() { return reinterpret_cast<uv_handle_t*>(&handle_); }
  static void OnAlloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf);
  static void OnRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);
  static void OnClosed(uv_handle_t* handle);
  void ProcessFrames();
  void OnDrained() override;
  // After the client's EOF: closes once every request it sent is answered and written.
  void CloseIfDone();
  // No request of the connection is in flight and every answer is written: idle_timeout counts
  // from then.
  bool Idle() const { return exchanges_ == nullptr && writer_.idle() && !close_when_drained_; }
  void ArmIdleTimer();
  void OnIdleTimer();

  // A uv_pipe_t for a client of the Unix socket, a uv_tcp_t for a TCP one (`tcp_`).
  union {
    uv_pipe_t pipe;
    uv_tcp_t tcp;
  } handle_{};
  bool tcp_ = false;
  sockaddr_storage peer_{};  // the TCP client's address (peer_address)
  ipc::FrameDecoder decoder_;
  bool in_read_ = false;
  bool close_when_drained_ = false;
  bool read_closed_ = false;   // the client sent EOF (shutdown(SHUT_WR))
  bool reads_paused_ = false;  // PauseReads: reading stops at the next frame boundary
  uint64_t idle_timeout_ms_;
  std::unique_ptr<loop::Timer> idle_timer_;  // null without an idle_timeout
  std::string scratch_;                      // a rejection's detail payload, reused
};

}  // namespace bulkhead::proxy
