// SPDX-License-Identifier: MIT
// Client: one client connection of a cell, whatever it speaks (FrontConnection: frames;
// HttpFrontConnection: HTTP/1.1), as the cell's data path and its exchanges see it (the exchange's
// client end, proxy/exchange.h): the exchanges it has in flight,
// the answers queued for it and their accounting (an answer counts once written whole, else
// undelivered), and how far it is behind in reading them (client_write_timeout,
// max_unsent_bytes). The reading side, and how an answer is spelled, belong to the subclass.
// Owns itself: deleted in its handle's close callback. REQUIRES: loop thread only.
#pragma once

#include <unistd.h>
#include <uv.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "loop/stream_writer.h"
#include "loop/time_source.h"
#include "loop/write_batch.h"
#include "proxy/exchange.h"
#include "proxy/stream_peer.h"

namespace bulkhead::proxy {

class Client;

// What a client connection of the cell is given when accepted.
struct ClientSettings {
  // max_payload_bytes: a frame's payload, an HTTP request's body (bytes).
  uint32_t max_payload = ipc::kDefaultMaxPayload;
  // header_timeout (HTTP, ms; 0: none): docs/http.md.
  uint64_t header_timeout_ms = 0;
  // idle_timeout (ms; 0: none): docs/config.md.
  uint64_t idle_timeout_ms = 0;
};

// What a client connection tells its cell's data path (proxy::CellDataPath), on the loop thread.
class ClientOwner {
 public:
  virtual ~ClientOwner() = default;
  // The cell's name, for log lines and local answers.
  virtual const std::string& name() const = 0;
  // The clock and timers of the loop (header_timeout, client_write_timeout).
  virtual loop::TimeSource* time() = 0;
  // Where the client's answers are sent together with the loop iteration's other writes
  // (loop/write_batch.h; an HTTP cell's worker links use it too); nullptr: each is written at once.
  virtual loop::WriteBatch* write_batch() { return nullptr; }
  virtual void OnClientConnected(Client* conn) = 0;
  virtual void OnClientDisconnected(Client* conn) = 0;
  // A well-formed request: `info` says what it is, `payload` what the worker gets (a frame's
  // payload; for HTTP the request as http/forward.h frames it, whole or its head). Both valid
  // during the call only. The data path makes an Exchange of it (attached to `conn`, Attach) and
  // answers it through Client::OnOutcome, possibly before this returns.
  virtual void OnRequest(Client* conn, const RequestInfo& info, std::string_view payload) = 0;
  // `exchange`, attached to this client, lost its client (the connection is closing, or the
  // client gave the request up).
  virtual void OnClientGone(Exchange* exchange) = 0;
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
  // A connection is closed for idle_timeout.
  virtual void CountIdleClosed() = 0;
};

class Client {
 public:
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // --- The exchange's client end (proxy/exchange.h). ---

  // The answer to `exchange`, a request of this client, rendered in this front end's wire format
  // (a REPLY frame; an HTTP local reply, or for Ok the end of the response streamed already).
  // `outcome` is the counter of the answer's outcome in the cell's CellCounters (which outlive
  // every client): incremented once the answer is written whole to the socket; an answer still
  // unwritten when the connection closes is counted undelivered instead. REQUIRES: `exchange` was
  // detached from this client (Detach) just before.
  virtual void OnOutcome(Exchange* exchange, const Outcome& outcome, uint64_t* counter) = 0;
  // Bytes of the response to `exchange` (Exchange::SendResponse). Returns the bytes held unwritten
  // for this client afterwards (0 once the connection closes). Only a front end that streams
  // responses overrides it.
  virtual size_t OnResponseBytes(Exchange* exchange, std::string_view bytes, bool must_close);
  // `exchange`'s body pipe changed (Exchange::WantBody, DropBody): read its body while it is
  // kFlowing. Only a front end that streams request bodies overrides it.
  virtual void OnBodyFlow(Exchange* exchange);

  // Closes the connection: queued requests are cancelled, running ones lose their client.
  virtual void Close() = 0;

  // A re-exec (docs/reexec.md): when the connection sits between two requests (no live exchange,
  // no answer unsent, nothing of a next request read, no EOF), it hands its socket over: a
  // descriptor of its own (FD_CLOEXEC) goes to `*fd`, `*tcp` says whether it is TCP, and the
  // connection closes here without a word or a count (what the client sends next waits in the
  // socket for whoever serves it). Returns false, doing nothing, otherwise.
  virtual bool HandOver(int* fd, bool* tcp) = 0;
  // A re-exec's drain (docs/reexec.md): while `paused`, the connection reads only to complete a
  // request it has begun; at a request boundary it stops reading, and what the client sends next
  // waits in its socket (HandOver then hands it over). Unpaused, it reads as before.
  virtual void PauseReads(bool paused) = 0;

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

  // Who the client is, for the access log: the peer's address or credentials (PeerLabel in
  // proxy/stream_peer.h), read once by LabelPeer; empty before.
  void LabelPeer();
  std::string_view peer_label() const { return {peer_label_, peer_label_size_}; }

  // The client's live exchanges: attached on admission, detached when answered or gone.
  void Attach(Exchange* exchange);
  void Detach(Exchange* exchange);

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
  // the writer abandoned, the live exchanges handed back to the owner (OnClientGone).
  void CloseAnswers();
  // Counts the answers written whole since the last call.
  void CountWritten();
  // HandOver's common part: a descriptor of its own for the stream's socket, or -1.
  int DuplicateSocket() const;

  ClientOwner* owner_;
  uv_stream_t* stream_;
  loop::StreamWriter writer_;
  Exchange* exchanges_ = nullptr;  // head of the intrusive list
  bool closing_ = false;

 private:
  size_t max_backlog_;
  // Answers not yet written whole, in order: where each ends in the writer's appended bytes, and
  // the counter of its outcome; those before unwritten_head_ are counted already. A vector emptied
  // (its capacity kept) whenever every answer is written, so a warm connection does not allocate.
  struct UnwrittenReply {
    uint64_t end = 0;
    uint64_t* outcome = nullptr;
  };
  std::vector<UnwrittenReply> unwritten_;
  size_t unwritten_head_ = 0;
  // Progress of a client with answers waiting (CheckProgress): when it last accepted a byte, and
  // what the last look saw.
  uint64_t stalled_since_ms_ = 0;
  uint64_t seen_written_ = 0;
  uint64_t seen_unconsumed_ = 0;
  bool waiting_ = false;  // answers wait for it: its owner watches it
  uint8_t peer_label_size_ = 0;
  char peer_label_[56] = {};
};

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

// Where a client connection comes from: a pending connection on a listening socket (`server`),
// or a connected socket `fd` handed over by a re-exec (docs/reexec.md), a TCP one when `tcp`.
struct ClientSource {
  uv_stream_t* server = nullptr;
  uv_loop_t* loop = nullptr;  // with `fd`
  int fd = -1;
  bool tcp = false;

  static ClientSource Pending(uv_stream_t* listener) { return {.server = listener}; }
  static ClientSource HandedOver(uv_loop_t* on, int socket, bool is_tcp) {
    return {.loop = on, .fd = socket, .tcp = is_tcp};
  }
  bool is_tcp() const { return server != nullptr ? server->type == UV_TCP : tcp; }
};

// Initialises `client` (a union with `pipe`, `tcp` and `stream` members) for `source` and accepts
// the pending connection, or opens the fd (the handle owns it then, also on failure: closing the
// handle closes it; one it could not open is closed here). Returns libuv's error code, 0 on
// success.
template <typename Handle>
int AttachClient(const ClientSource& source, Handle* client) {
  if (source.server != nullptr) {
    InitLike(source.server, client);
    return uv_accept(source.server, reinterpret_cast<uv_stream_t*>(client));
  }
  int rc = 0;
  if (source.tcp) {
    uv_tcp_init(source.loop, &client->tcp);
    rc = uv_tcp_open(&client->tcp, source.fd);
  } else {
    uv_pipe_init(source.loop, &client->pipe, 0);
    rc = uv_pipe_open(&client->pipe, source.fd);
  }
  if (rc != 0) ::close(source.fd);  // the handle did not take it
  return rc;
}

}  // namespace bulkhead::proxy
