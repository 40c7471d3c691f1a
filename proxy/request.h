// SPDX-License-Identifier: MIT
// Request: one client request from admission until its reply is written (or its client is gone and
// its worker answered). RequestPool recycles them, payload capacity included, so the request path
// does not allocate once warm. REQUIRES: loop thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "admission/bulkhead.h"
#include "admission/request_deadlines.h"

namespace bulkhead::proxy {

class Client;
class Link;

// AdmissionEntry: its place in the cell's Bulkhead; DeadlineEntry: its request_timeout while it
// runs (RequestDeadlines).
struct Request : admission::AdmissionEntry, admission::DeadlineEntry {
  Client* client = nullptr;  // null once the client disconnected
  uint64_t client_request_id = 0;
  uint64_t admitted_at_ms = 0;
  // uv_hrtime() at admission and at dispatch to the worker (0: not dispatched), for the latency
  // histograms (admission/latency_histogram.h).
  uint64_t admitted_at_ns = 0;
  uint64_t dispatched_at_ns = 0;
  std::string payload;  // filled only while the request waits in the queue
  // The client's list of its live requests (intrusive, so a disconnect finds them in O(own)).
  Request* client_prev = nullptr;
  Request* client_next = nullptr;
  Link* link = nullptr;  // the worker connection carrying it while it runs
  // The client has its reply (request_timeout passed) though the worker still holds the slot.
  bool answered = false;
  // Sent again on a fresh worker connection once already (docs/protocol.md: a request the worker
  // cannot have read is resent once).
  bool resent = false;
};

class RequestPool {
 public:
  RequestPool() = default;
  RequestPool(const RequestPool&) = delete;
  RequestPool& operator=(const RequestPool&) = delete;

  Request* Acquire();
  // REQUIRES: the request is idle in its Bulkhead and unlinked from its client and link.
  void Release(Request* request);

  size_t live() const { return live_; }

 private:
  // A payload buffer larger than this is freed on release rather than kept for reuse.
  static constexpr size_t kMaxRetainedPayload = size_t{64} * 1024;

  std::vector<std::unique_ptr<Request>> free_;
  size_t live_ = 0;
};

}  // namespace bulkhead::proxy
