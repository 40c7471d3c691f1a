// SPDX-License-Identifier: MIT
// Link: one connection from the supervisor to its cell's worker, carrying at most one request at
// a time, as the cell's data path sees it whatever the cell speaks (WorkerLink: frames;
// HttpWorkerLink: HTTP/1.1). Connected to the listening socket the supervisor created and passed
// to the worker as fd 3. Owns itself: deleted in its handle's close callback. REQUIRES: loop
// thread only.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "base/status.h"
#include "base/unique_fd.h"

namespace bulkhead::proxy {

struct Request;
class Link;

// What every kind of link tells its cell's data path, on the loop thread.
class LinkOwner {
 public:
  virtual ~LinkOwner() = default;
  // The connection failed or closed (`why`); the in-flight request, if any, is still on the
  // link. `worker_at_fault`: the worker broke the protocol; its request fails at once.
  virtual void OnLinkBroken(Link* link, const std::string& why, bool worker_at_fault) = 0;
};

class Link {
 public:
  virtual ~Link() = default;

  // REQUIRES: !busy(). Sends `request` with `payload` to the worker; the link carries it until the
  // worker answers or the link breaks.
  virtual void Send(Request* request, std::string_view payload) = 0;
  virtual bool busy() const = 0;
  virtual Request* inflight() const = 0;
  // The in-flight request cannot have reached the worker whole (or the worker dropped it unread),
  // so it is safe to send again on a new connection, once.
  virtual bool inflight_unread() const = 0;
  // The in-flight request's payload, kept until the first byte of its answer (for a resend). Valid
  // until the link's close callback runs.
  virtual std::string_view inflight_payload() const = 0;
  // Detaches and returns the in-flight request (or nullptr), e.g. to fail it.
  virtual Request* TakeInflight() = 0;
  // Closes the connection. REQUIRES: nothing in flight (take it first).
  virtual void Close() = 0;
  // The client has room again for answer bytes this link had to stop reading for (HTTP
  // backpressure); a frame link never stops.
  virtual void ResumeReading() {}

  // The link's position in its owner's list of busy links, kept by the owner so that an answer
  // finds its link in O(1).
  size_t busy_index = 0;
};

// A non-blocking connection to the worker socket at `path` (a Unix stream socket). Fails when the
// socket is missing or its backlog is full (EAGAIN).
Result<UniqueFd> ConnectWorkerSocket(const std::string& path);

}  // namespace bulkhead::proxy
