// SPDX-License-Identifier: MIT
// FrontConnection: one client connected to one of a cell's front sockets, a Unix stream socket
// (uv_pipe_t) or a TCP connection (uv_tcp_t, TCP_NODELAY). Decodes REQUEST frames, hands
// each to its Owner (the cell's data path) for admission, and writes the replies (several per
// writev when pipelined). A malformed or oversized frame gets a BAD_REQUEST reply and the
// connection is closed after it is written. Owns itself: created by Accept(), deleted in its
// handle's close callback. REQUIRES: loop thread only.
#pragma once

#include <sys/socket.h>
#include <uv.h>

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>

#include "ipc/frame.h"
#include "loop/stream_writer.h"

namespace bulkhead::proxy {

struct Request;

class FrontConnection {
 public:
  // What a client connection tells its cell's data path (proxy::CellDataPath), on the loop thread.
  class Owner {
   public:
    virtual ~Owner() = default;
    // The cell's name, for log lines.
    virtual const std::string& name() const = 0;
    virtual void OnClientConnected(FrontConnection* conn) = 0;
    virtual void OnClientDisconnected(FrontConnection* conn) = 0;
    // A well-formed REQUEST frame; `frame` is valid during the call only.
    virtual void OnRequest(FrontConnection* conn, const ipc::FrameView& frame) = 0;
    // `request`, linked to this client, lost its client (the connection is closing).
    virtual void OnClientGone(Request* request) = 0;
    // A malformed frame was answered BAD_REQUEST; the connection closes once that is written.
    virtual void OnBadRequest(const std::string& why) = 0;
    // `conn` holds unsent reply bytes: watched for client_write_timeout, and the cell's clients
    // are kept within max_unsent_bytes (the slowest closed first; `conn` may be one of them).
    virtual void OnRepliesWaiting(FrontConnection* conn) = 0;
    // A reply was written whole to its client: `outcome` (a counter of the cell's CellCounters)
    // counts it.
    virtual void CountDelivered(uint64_t* outcome) = 0;
    // `replies` answered requests whose client closed before their reply was written whole.
    virtual void CountUndelivered(uint64_t replies) = 0;
  };

  // Accepts one pending connection on `server` (a listening uv_pipe_t or uv_tcp_t) for `owner`.
  // Errors are logged; nothing to return.
  static void Accept(Owner* owner, uv_stream_t* server, uint32_t max_payload);

  // Refuses one pending connection on `server`: accepts it, sends `frame` (one small REPLY, which
  // a fresh socket's send buffer always takes whole) without blocking, and closes it. A client that
  // is already gone is ignored.
  static void Refuse(uv_stream_t* server, std::string_view frame);

  // The TCP client's address and port (sockaddr_in or sockaddr_in6, from getpeername(2) at
  // accept), for X-Forwarded-For and Forwarded; nullptr for a client of the Unix socket.
  // config::ListenAddressFromSockaddr formats it. Valid as long as the connection.
  const sockaddr* peer_address() const {
    return tcp_ ? reinterpret_cast<const sockaddr*>(&peer_) : nullptr;
  }

  // Queues a reply frame to this client; written at once unless a read is being processed, in which
  // case every reply produced by that read goes out in one write. `outcome` is the counter of the
  // reply's outcome in the cell's CellCounters (which outlive every client): it is incremented
  // once the reply is written whole to the socket; a reply still unwritten when the connection
  // closes is counted undelivered instead (Owner::CountDelivered, Owner::CountUndelivered).
  void SendReply(const ipc::FrameHeader& header, std::string_view payload, uint64_t* outcome);

  // Reply bytes held for this client, not yet written to its socket.
  size_t unsent_bytes() const { return writer_.backlog_bytes(); }
  // Loop time (ms) since when the client has accepted no byte while replies wait for it
  // (client_write_timeout); refreshed by CheckProgress.
  uint64_t stalled_since_ms() const { return stalled_since_ms_; }
  // Looks whether the client accepted bytes since the last look: bytes written to its socket, or
  // bytes it consumed from the socket's send queue (SIOCOUTQ, which sees progress even when the
  // supervisor itself was paused). Returns unsent_bytes().
  size_t CheckProgress(uint64_t now_ms);
  // Closes a client that does not read its replies, with a warning naming `why`.
  void CloseUnread(const std::string& why);

  // The client's live requests: linked on admission, unlinked when answered.
  void LinkRequest(Request* request);
  void UnlinkRequest(Request* request);

  // Closes the connection: queued requests are cancelled, running ones lose their client.
  void Close();

 private:
  FrontConnection(Owner* owner, uint32_t max_payload);
  ~FrontConnection() = default;

  uv_stream_t* stream() { return reinterpret_cast<uv_stream_t*>(&handle_); }
  uv_handle_t* handle() { return reinterpret_cast<uv_handle_t*>(&handle_); }
  static void OnAlloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf);
  static void OnRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);
  static void OnClosed(uv_handle_t* handle);
  void ProcessFrames();
  void OnDrained();
  // After the client's EOF: closes once every request it sent is answered and written.
  void CloseIfDone();
  // Counts the replies written whole since the last call.
  void CountWritten();
  // After a write: a client with reply bytes still unsent is watched (SlowClients), or closed when
  // it holds more than max_backlog_. REQUIRES: not closing.
  void WatchUnsent();
  // Socket send queue bytes not yet consumed by the client (SIOCOUTQ), 0 when unknown.
  uint64_t UnconsumedBytes();

  Owner* owner_;
  // Unsent reply bytes beyond which the client is dropped: room for two full-size replies.
  size_t max_backlog_;
  // A uv_pipe_t for a client of the Unix socket, a uv_tcp_t for a TCP one (`tcp_`).
  union {
    uv_pipe_t pipe;
    uv_tcp_t tcp;
  } handle_{};
  bool tcp_ = false;
  sockaddr_storage peer_{};  // the TCP client's address (peer_address)
  ipc::FrameDecoder decoder_;
  loop::StreamWriter writer_;
  Request* requests_ = nullptr;  // head of the intrusive list
  // Replies not yet written whole, in order: where each ends in the writer's appended bytes, and
  // the counter of its outcome.
  struct UnwrittenReply {
    uint64_t end = 0;
    uint64_t* outcome = nullptr;
  };
  std::deque<UnwrittenReply> unwritten_;
  // Progress of a client with replies waiting (CheckProgress): when it last accepted a byte, and
  // what the last look saw.
  uint64_t stalled_since_ms_ = 0;
  uint64_t seen_written_ = 0;
  uint64_t seen_unconsumed_ = 0;
  bool waiting_ = false;  // replies wait for it: its Owner watches it
  bool in_read_ = false;
  bool closing_ = false;
  bool close_when_drained_ = false;
  bool read_closed_ = false;  // the client sent EOF (shutdown(SHUT_WR))
};

}  // namespace bulkhead::proxy
