// SPDX-License-Identifier: MIT
// Client: one client connection of a cell, whatever it speaks (FrontConnection: frames;
// HttpFrontConnection: HTTP/1.1), as the cell's data path sees it: the requests it has in flight,
// the answers queued for it and their accounting (an answer counts once written whole, else
// undelivered), and how far it is behind in reading them (client_write_timeout,
// max_unsent_bytes). The reading side, and how an answer is spelled, belong to the subclass.
// Owns itself: deleted in its handle's close callback. REQUIRES: loop thread only.
#pragma once

#include <uv.h>

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>

#include "ipc/frame.h"
#include "loop/stream_writer.h"
#include "loop/write_batch.h"

namespace bulkhead::proxy {

struct Request;
class Client;
class HttpFrontConnection;

// What a client connection tells its cell's data path (proxy::CellDataPath), on the loop thread.
class ClientOwner {
 public:
  virtual ~ClientOwner() = default;
  // The cell's name, for log lines.
  virtual const std::string& name() const = 0;
  // Where the client's answers are sent together with the loop iteration's others
  // (loop/write_batch.h); nullptr: each is written at once.
  virtual loop::WriteBatch* write_batch() { return nullptr; }
  virtual void OnClientConnected(Client* conn) = 0;
  virtual void OnClientDisconnected(Client* conn) = 0;
  // A well-formed request: `request_id` is the client's id for it (a frame's request_id; 0 for
  // HTTP, which answers in order), `payload` what the worker gets (a frame's payload; for HTTP the
  // whole request as http/forward.h frames it). Both valid during the call only. The answer comes
  // back through Client::SendReply, possibly before this returns.
  virtual void OnRequest(Client* conn, uint64_t request_id, std::string_view payload) = 0;
  // `request`, linked to this client, lost its client (the connection is closing).
  virtual void OnClientGone(Request* request) = 0;
  // A malformed request was answered (BAD_REQUEST, or HTTP 400/413/431/501); the connection
  // closes once that is written.
  virtual void OnBadRequest(const std::string& why) = 0;
  // `conn` holds unsent answer bytes: watched for client_write_timeout, and the cell's clients
  // are kept within max_unsent_bytes (the slowest closed first; `conn` may be one of them).
  virtual void OnRepliesWaiting(Client* conn) = 0;
  // An answer was written whole to its client: `outcome` (a counter of the cell's CellCounters)
  // counts it.
  virtual void CountDelivered(uint64_t* outcome) = 0;
  // `replies` answered requests whose client closed before their answer was written whole.
  virtual void CountUndelivered(uint64_t replies) = 0;
};

class Client {
 public:
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // The answer to a request of this client, with the outcome taxonomy of docs/protocol.md: a
  // frame client gets it as a REPLY frame; an HTTP client as a local reply (http/local_reply.h)
  // for REJECTED/FAILED, while OK says the worker's response, streamed to it already, is whole.
  // `outcome` is the counter of the answer's outcome in the cell's CellCounters (which outlive
  // every client): incremented once the answer is written whole to the socket; an answer still
  // unwritten when the connection closes is counted undelivered instead.
  virtual void SendReply(const ipc::FrameHeader& header, std::string_view payload,
                         uint64_t* outcome) = 0;
  // Closes the connection: queued requests are cancelled, running ones lose their client.
  virtual void Close() = 0;
  // This connection as an HTTP one, or nullptr (a frame client).
  virtual HttpFrontConnection* AsHttp() { return nullptr; }

  // Answer bytes held for this client, not yet written to its socket.
  size_t unsent_bytes() const { return writer_.backlog_bytes(); }
  // Loop time (ms) since when the client has accepted no byte while answers wait for it
  // (client_write_timeout); refreshed by CheckProgress.
  uint64_t stalled_since_ms() const { return stalled_since_ms_; }
  // Looks whether the client accepted bytes since the last look: bytes written to its socket, or
  // bytes it consumed from the socket's send queue (SIOCOUTQ, which sees progress even when the
  // supervisor itself was paused). Returns unsent_bytes().
  size_t CheckProgress(uint64_t now_ms);
  // Closes a client that does not read its answers, with a warning naming `why`.
  void CloseUnread(const std::string& why);

  // The client's live requests: linked on admission, unlinked when answered.
  void LinkRequest(Request* request);
  void UnlinkRequest(Request* request);

 protected:
  // `stream` is the subclass's handle (initialised later, used only once it is). `max_backlog`:
  // unsent bytes beyond which the client is dropped. `on_drained` runs when every byte appended
  // so far is written; a write error closes the connection.
  Client(ClientOwner* owner, uv_stream_t* stream, size_t max_backlog);
  virtual ~Client() = default;

  // Every byte appended so far is written.
  virtual void OnDrained() = 0;
  // The bytes of an answer were appended to writer_: counts `outcome` once they are written
  // whole; unless `defer_flush`, writes now and watches a client that falls behind (deferred, the
  // caller flushes and calls WatchBacklog after).
  void QueueAnswer(uint64_t* outcome, bool defer_flush);
  // After bytes were appended and flushed: a client that holds unsent bytes is watched (and
  // dropped when it holds too many).
  void WatchBacklog();
  // The part of closing common to every client: the unwritten answers are counted undelivered,
  // the writer abandoned, the live requests handed back to the owner (OnClientGone).
  void CloseAnswers();
  // Counts the answers written whole since the last call.
  void CountWritten();

  ClientOwner* owner_;
  uv_stream_t* stream_;
  loop::StreamWriter writer_;
  Request* requests_ = nullptr;  // head of the intrusive list
  bool closing_ = false;

 private:
  size_t max_backlog_;
  // Answers not yet written whole, in order: where each ends in the writer's appended bytes, and
  // the counter of its outcome.
  struct UnwrittenReply {
    uint64_t end = 0;
    uint64_t* outcome = nullptr;
  };
  std::deque<UnwrittenReply> unwritten_;
  // Progress of a client with answers waiting (CheckProgress): when it last accepted a byte, and
  // what the last look saw.
  uint64_t stalled_since_ms_ = 0;
  uint64_t seen_written_ = 0;
  uint64_t seen_unconsumed_ = 0;
  bool waiting_ = false;  // answers wait for it: its owner watches it
};

// True when the peer closed its socket rather than only shutting down its writing side: a Unix
// stream socket then reports POLLHUP (both directions shut down), a half-close only POLLRDHUP.
// TCP sends the same FIN for close(2) and shutdown(SHUT_WR), so a TCP client's EOF reads as a
// half-close (HAProxy without `option abortonclose` does likewise): a frame cell answers what it
// sent, and a client that is really gone shows once a reply meets its RST (the write fails, the
// connection closes), unless it reset the connection at once (POLLHUP | POLLERR here). An HTTP
// cell takes the EOF of a client waiting for an answer as the client leaving (docs/http.md).
bool PeerClosedBothWays(uv_stream_t* stream);

// Bytes this end sent on `stream` (a Unix or TCP stream socket) that its peer has not read yet
// (SIOCOUTQ), 0 when unknown.
uint64_t BytesUnreadByPeer(uv_stream_t* stream);

// Initialises `client` (a union with `pipe` and `tcp` members) as the handle type that accepts
// from `server`: a uv_tcp_t for a TCP listener, else a uv_pipe_t. Returns whether it is TCP.
// Without flags the inits only fill in the handle: they cannot fail.
template <typename Handle>
bool InitLike(uv_stream_t* server, Handle* client) {
  if (server->type == UV_TCP) {
    uv_tcp_init(server->loop, &client->tcp);
    return true;
  }
  uv_pipe_init(server->loop, &client->pipe, 0);
  return false;
}

}  // namespace bulkhead::proxy
