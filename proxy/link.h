// SPDX-License-Identifier: MIT
// Link: one connection from the supervisor to its cell's worker, carrying one exchange at a time
// (a multiplexed frame link: many, each tagged with its request_id), as the cell's data path and an
// exchange see it whatever the cell speaks (WorkerLink: frames; HttpWorkerLink: HTTP/1.1): the
// exchange's worker end. Connected to the listening socket the supervisor created and passed to
// the worker as fd 3. Owns itself: deleted in its handle's close callback. REQUIRES: loop thread
// only.
#pragma once

#include <uv.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "ipc/frame.h"

namespace bulkhead::loop {
class TimeSource;
class WriteBatch;
}  // namespace bulkhead::loop

namespace bulkhead::proxy {

struct Exchange;
struct Outcome;
class Link;

// What a connection to the worker is made with.
struct LinkSettings {
  uint32_t max_payload = ipc::kDefaultMaxPayload;  // a frame reply's payload (bytes)
  // worker_connections = "multiplex": the link carries many exchanges at once (frames only).
  bool multiplexed = false;
  // Where an HTTP link's writes wait to go out with the loop iteration's other writes
  // (loop/write_batch.h); nullptr: each is written at once. Outlives the link.
  loop::WriteBatch* write_batch = nullptr;
};

// What every kind of link tells its cell's data path, on the loop thread.
class LinkOwner {
 public:
  virtual ~LinkOwner() = default;
  // The worker answered `exchange`, already taken off `link`, with `outcome`: Ok (a frame
  // reply's payload; an HTTP response streamed to the client already), or Failed worker_error
  // (the worker said so, or its answer broke the protocol for this exchange only). `reusable`: the
  // link may carry another exchange once it is not busy; if not, the owner closes it then.
  virtual void OnWorkerAnswer(Link* link, Exchange* exchange, const Outcome& outcome,
                              bool reusable) = 0;
  // Bytes of an answer came: the worker is making progress (stall_timeout).
  virtual void OnWorkerProgress() = 0;
  // The connection failed or closed (`why`); the exchanges in flight, if any, are still on the
  // link (TakeInflight). `worker_at_fault`: the worker broke the protocol; they fail at once.
  virtual void OnLinkBroken(Link* link, const std::string& why, bool worker_at_fault) = 0;
  // The exchange in flight on `link` will never have a whole request (its body was cut: `why`):
  // the owner takes it off and closes the link, so the worker sees the connection end rather than
  // a request it could take as whole.
  virtual void OnExchangeAborted(Link* link, const std::string& why) = 0;
  // The data path's clock, the one its clients read too (ClientOwner::time): a link times what it
  // spends waiting for a slow client (Exchange::client_paused_ns) with its NowNs(). Outlives the
  // link.
  virtual loop::TimeSource* time() = 0;
};

class Link {
 public:
  virtual ~Link() = default;

  // Sends `exchange` with `payload` (what the worker gets: a frame's payload; an HTTP request as
  // http/forward.h frames it) to the worker; the link carries it until the worker answers or the
  // link breaks. REQUIRES: !busy(), except on a multiplexed frame link (WorkerLink), which carries
  // any number and writes them at its next Flush().
  virtual void Send(Exchange* exchange, std::string_view payload) = 0;
  // An exchange is in flight on the link.
  virtual bool busy() const = 0;
  // Detaches one exchange in flight and returns it (nullptr when none is left), e.g. to fail it;
  // call until nullptr to take them all. When `unread` is given, it tells whether the worker cannot
  // have read that request (or dropped it unread), so that it is safe to send again on a new
  // connection, once; `payload` then views its payload, valid until the link's close callback runs.
  virtual Exchange* TakeInflight(bool* unread, std::string_view* payload) = 0;
  Exchange* TakeInflight() { return TakeInflight(nullptr, nullptr); }
  // Closes the connection. REQUIRES: nothing in flight (take it first).
  virtual void Close() = 0;
  // Writes what Send appended and is not written yet: a multiplexed frame link writes the
  // exchanges of one loop iteration together here; every other link wrote each at Send. May
  // report a failed write (LinkOwner::OnLinkBroken) before it returns.
  virtual void Flush() {}

  // --- The exchange's worker end (proxy/exchange.h); only links that stream override them. ---

  // Writes `bytes` of the streamed body of `exchange` (in flight here); `last`: the body is whole.
  // Returns the bytes the link holds unwritten to the worker afterwards.
  virtual size_t OnBodyBytes(Exchange* exchange, std::string_view bytes, bool last);
  // The body of `exchange` will never be whole (`why`): the link ends the exchange
  // (LinkOwner::OnExchangeAborted).
  virtual void OnBodyAborted(Exchange* exchange, const std::string& why);
  // The client has room again for the response bytes this link stopped reading for.
  virtual void ResumeReading() {}

  // The link's position in its owner's list of busy links, kept by the owner so that an answer
  // finds its link in O(1).
  size_t busy_index = 0;
  // The link goes to a worker generation that was replaced (CellDataPath::RetireWorkerLinks): it
  // carries what it has to its end, takes nothing new, and closes once it has nothing in flight.
  bool retiring = false;

 protected:
  // Connects pipe_ (its data set by the constructor) non-blocking to the worker socket at `path` (a
  // Unix stream socket) on `loop` and starts reading with `alloc` and `read`. Fails when the socket
  // is missing or its backlog is full (EAGAIN); the link is then closed with `closed`, which
  // deletes it, and the caller must not touch it again.
  Status Open(uv_loop_t* loop, const std::string& path, uv_alloc_cb alloc, uv_read_cb read,
              uv_close_cb closed);

  uv_pipe_t pipe_{};
  bool closing_ = false;  // Close() was called, or Open() failed
};

}  // namespace bulkhead::proxy
