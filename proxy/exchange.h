// SPDX-License-Identifier: MIT
// Exchange: one request of a cell from admission until its answer is written (or its client is
// gone and its worker answered), the one typed thing that both front ends (FrontConnection:
// frames; HttpFrontConnection: HTTP/1.1), the data path (CellDataPath) and both kinds of worker
// link (WorkerLink, HttpWorkerLink) speak, as Envoy's filter manager is between its codecs and its
// router. It says what the request is (RequestInfo), carries a byte pipe each way with a high
// watermark (the request body, client -> worker; the response, worker -> client), and ends with an
// Outcome that each front end renders in its own wire format. A front end and a link never call
// each other: each calls the exchange, which calls the other end through Client's and Link's
// exchange callbacks. ExchangePool recycles exchanges, payload capacity included, so the request
// path does not allocate once warm. REQUIRES: loop thread only.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "admission/availability.h"
#include "admission/bulkhead.h"
#include "admission/request_deadlines.h"
#include "ipc/frame.h"

namespace bulkhead::proxy {

class Client;
class Link;

// What a request is, as its front end read it: everything the data path and the worker link need
// to know of it without reading its bytes again.
struct RequestInfo {
  // How the request's body reaches the worker.
  enum class Body : uint8_t {
    // With the rest of the request, in the payload handed to ClientOwner::OnRequest (a frame's
    // payload; an HTTP request whose body came with its head, or that has none).
    kWhole,
    // The payload holds the head and the body's first bytes; the rest follows through
    // Exchange::SendBody as the client sends it (HTTP, docs/http.md "Request bodies"). Such a
    // request goes out on a fresh worker connection and is never sent twice.
    kStreamed,
  };

  // The client's id for it, echoed in the answer (a frame's request_id; 0 for HTTP, which answers
  // in order).
  uint64_t client_request_id = 0;
  Body body = Body::kWhole;
  // HTTP: a HEAD request; its response ends at the empty line whatever its fields say (RFC 9112
  // section 6.3), and a local answer to it has no body.
  bool head = false;
  // HTTP: GET, HEAD, OPTIONS, TRACE, PUT or DELETE (RFC 9110 section 9.2.2): the only methods a
  // proxy may send again on its own when the worker may have read the request.
  bool idempotent = false;
  // HTTP: the client's connection stays open after the answer, and the client speaks HTTP/1.1
  // (takes a chunked body; HTTP/1.0 gets a close-delimited one).
  bool keep_alive = true;
  bool http11 = true;
  // The worker connection must carry no request after this one, whatever the worker says: a
  // request whose method has no body by usage carried one (docs/http.md), which a worker that never
  // reads such bodies would take as the next request.
  bool close_link_after = false;
  // HTTP, for the access log (proxy/access_log.h): the request's method, request-target as sent,
  // and X-Request-Id (the client's, else the one bulkheadd added). Valid during
  // ClientOwner::OnRequest only: the data path copies what it logs and clears them.
  std::string_view method;
  std::string_view target;
  std::string_view request_id;
};

// How an exchange ends (docs/protocol.md, "Outcomes"): the worker's answer, or bulkheadd's own
// rejection or failure. Each front end renders it in its wire format (a REPLY frame; an HTTP local
// reply, http/local_reply.h). Views are valid during the call that hands it over only.
struct Outcome {
  enum class Kind : uint8_t { kOk, kRejected, kFailed };

  // The worker answered: frames, `text` is the reply's payload; HTTP, its response went to the
  // client already through Exchange::SendResponse, and `text` is empty.
  static Outcome Ok(std::string_view body) { return Outcome{Kind::kOk, ipc::Reason::kNone, body}; }
  // A local decision (full, queue_timeout, unavailable): the worker never saw the request.
  // `running` and `queued` are the cell's figures at the decision; for unavailable, what is known
  // of the next start: `retry_after_ms` (0: not known, or none) and `next_start`.
  using NextStart = admission::Availability::NextStart;
  static Outcome Rejected(ipc::Reason reason, uint32_t running, uint32_t queued,
                          uint32_t retry_after_ms = 0,
                          NextStart next_start = NextStart::kUnknown) {
    Outcome outcome{Kind::kRejected, reason, {}};
    outcome.running = running;
    outcome.queued = queued;
    outcome.retry_after_ms = retry_after_ms;
    outcome.next_start = next_start;
    return outcome;
  }
  // The request was admitted and failed at or because of the worker (worker_error, worker_died,
  // oom_killed, stalled, timeout); `message` says how ("exit 3", "request_timeout of 1000 ms
  // passed").
  static Outcome Failed(ipc::Reason reason, std::string_view message) {
    return Outcome{Kind::kFailed, reason, message};
  }

  Kind kind = Kind::kOk;
  ipc::Reason reason = ipc::Reason::kNone;
  std::string_view text;
  uint32_t running = 0;
  uint32_t queued = 0;
  // Rejected unavailable: when to try again (ms; 0: unknown or none), and whether a start is
  // due at all (admission::Availability): kNone says no worker comes until an operator starts one.
  uint32_t retry_after_ms = 0;
  NextStart next_start = NextStart::kUnknown;
};

// AdmissionEntry: its place in the cell's Bulkhead; DeadlineEntry: its request_timeout while it
// runs (RequestDeadlines). Fields are the data path's unless said otherwise.
struct Exchange : admission::AdmissionEntry, admission::DeadlineEntry {
  // The request body's way from the client end to the worker end (RequestInfo::kStreamed). The
  // client end reads the body only in kFlowing.
  enum class BodyPipe : uint8_t {
    kClosed,   // no streamed body, or it is whole, cut, or its worker end left: nothing more flows
    kWaiting,  // the body follows, and no worker end takes it yet (queued, or being dispatched)
    kFlowing,  // the worker end takes it: the client end reads and passes it (SendBody)
    kFull,     // the worker end holds more than kHighWatermark unwritten: the client end waits
  };

  // Bytes one end may hold for the other before the producer is paused: the request body's bytes
  // unwritten to the worker, the response's bytes unwritten to the client. A paused producer goes
  // on once the consumer has written everything (the low watermark is 0), so a large body streams
  // through this much memory and never sits whole in it.
  static constexpr size_t kHighWatermark = size_t{256} * 1024;

  // --- Called by the client end (the front connection that owns `client`). ---

  // Passes `bytes` of the streamed body to the worker end; `last`: the body is whole. Returns true
  // while the client end may go on reading it (kFlowing); false when it must wait for
  // Client::OnBodyFlow (kFull, or the worker end left and the bytes were dropped).
  bool SendBody(std::string_view bytes, bool last);
  // The body will never be whole (`why`): the worker end ends the request (its connection closed,
  // so the worker never takes the part it got for a whole request).
  void AbortBody(const std::string& why);
  // The client wrote every response byte it held: a worker end paused by SendResponse reads on.
  void ResponseDrained();

  // --- Called by the worker end (the link in `link`). ---

  // The worker end takes the body: the head went out (kWaiting -> kFlowing), or its buffer
  // drained (kFull -> kFlowing). Tells the client end (Client::OnBodyFlow).
  void WantBody();
  // The request left the worker end with its body not whole: nothing more flows (kClosed); the
  // client end stops reading it (Client::OnBodyFlow).
  void DropBody();
  // Bytes of the response, framed for the client already (http::ResponseRelay). `must_close`: the
  // client's connection closes after this response (a close-delimited body). Returns false when the
  // client holds more than kHighWatermark unwritten: the worker end stops reading until
  // Link::ResumeReading. Without a client the bytes are dropped (true).
  bool SendResponse(std::string_view bytes, bool must_close);

  // The body still flows or waits to flow (kWaiting, kFlowing, kFull).
  bool body_open() const { return body_pipe != BodyPipe::kClosed; }

  RequestInfo info;
  Client* client = nullptr;  // the client end; null once the client is gone
  Link* link = nullptr;      // the worker end, while a worker connection carries it
  BodyPipe body_pipe = BodyPipe::kClosed;
  uint64_t admitted_at_ms = 0;
  // TimeSource::NowNs() at admission and at dispatch to the worker (0: not dispatched), for the
  // latency histograms (admission/latency_histogram.h).
  uint64_t admitted_at_ns = 0;
  uint64_t dispatched_at_ns = 0;
  // Of the time since dispatch, ns the worker end stopped reading the response because its client
  // held kHighWatermark unwritten: the client's time, not the worker's (the adaptive limit's
  // service time leaves it out).
  uint64_t client_paused_ns = 0;
  // TimeSource::NowNs() when the last byte of a streamed body (RequestInfo::kStreamed) went to the
  // worker end; 0 while it flows, and for a request that came whole. Until then the worker waited
  // for the client's upload: the client's time too.
  uint64_t body_whole_at_ns = 0;
  // The worker's own time on this exchange at `now_ns`, for the adaptive limit's service time:
  // since it was dispatched, or since its streamed body was whole if later, less client_paused_ns.
  // 0 when not dispatched.
  uint64_t ServiceNs(uint64_t now_ns) const;
  std::string payload;  // filled only while the exchange waits in the queue
  // The client's list of its live exchanges (intrusive, so a disconnect finds them in O(own)).
  Exchange* client_prev = nullptr;
  Exchange* client_next = nullptr;
  // For the access log: request bytes passed towards the worker (the payload, then the streamed
  // body), response bytes passed towards the client (SendResponse); the worker's HTTP status once
  // its response head was relayed (0: none); the worker it was dispatched to (0: none); the
  // request's logfmt fields (AppendRequestFields), kept only while an access log is open.
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
  int http_status = 0;
  pid_t worker_pid = 0;
  std::string access_fields;
  // The client has its answer (request_timeout passed) though the worker still holds the slot.
  bool answered = false;
  // Sent again on a fresh worker connection once already (docs/protocol.md: a request the worker
  // cannot have read is resent once).
  bool resent = false;
};

class ExchangePool {
 public:
  ExchangePool() = default;
  ExchangePool(const ExchangePool&) = delete;
  ExchangePool& operator=(const ExchangePool&) = delete;

  Exchange* Acquire();
  // REQUIRES: the exchange is idle in its Bulkhead and unlinked from its client and link.
  void Release(Exchange* exchange);

  size_t live() const { return live_; }

 private:
  // A payload buffer larger than this is freed on release rather than kept for reuse.
  static constexpr size_t kMaxRetainedPayload = size_t{64} * 1024;

  std::vector<std::unique_ptr<Exchange>> free_;
  size_t live_ = 0;
};

}  // namespace bulkhead::proxy
