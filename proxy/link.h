// SPDX-License-Identifier: MIT
// Link: one connection from the supervisor to its cell's worker, carrying one request at a time
// (a multiplexed frame link: many, each tagged with its request_id), as the cell's data path sees
// it whatever the cell speaks (WorkerLink: frames; HttpWorkerLink: HTTP/1.1). Connected to the
// listening socket the supervisor created and passed to the worker as fd 3. Owns itself: deleted in
// its handle's close callback. REQUIRES: loop thread only.
#pragma once

#include <uv.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "base/status.h"

namespace bulkhead::proxy {

struct Request;
class Link;

// What every kind of link tells its cell's data path, on the loop thread.
class LinkOwner {
 public:
  virtual ~LinkOwner() = default;
  // The connection failed or closed (`why`); the requests in flight, if any, are still on the
  // link (TakeInflight). `worker_at_fault`: the worker broke the protocol; they fail at once.
  virtual void OnLinkBroken(Link* link, const std::string& why, bool worker_at_fault) = 0;
};

class Link {
 public:
  virtual ~Link() = default;

  // Sends `request` with `payload` to the worker; the link carries it until the worker answers or
  // the link breaks. REQUIRES: !busy(), except on a multiplexed frame link (WorkerLink), which
  // carries any number and writes them at its next Flush().
  virtual void Send(Request* request, std::string_view payload) = 0;
  // A request is in flight on the link.
  virtual bool busy() const = 0;
  // Detaches one request in flight and returns it (nullptr when none is left), e.g. to fail it;
  // call until nullptr to take them all. When `unread` is given, it tells whether the worker cannot
  // have read that request (or dropped it unread), so that it is safe to send again on a new
  // connection, once; `payload` then views its payload, valid until the link's close callback runs.
  virtual Request* TakeInflight(bool* unread, std::string_view* payload) = 0;
  Request* TakeInflight() { return TakeInflight(nullptr, nullptr); }
  // Closes the connection. REQUIRES: nothing in flight (take it first).
  virtual void Close() = 0;
  // The client has room again for answer bytes this link had to stop reading for (HTTP
  // backpressure); a frame link never stops.
  virtual void ResumeReading() {}

  // The link's position in its owner's list of busy links, kept by the owner so that an answer
  // finds its link in O(1).
  size_t busy_index = 0;

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
