// SPDX-License-Identifier: MIT
// CellCounters: what became of a cell's requests, one counter per outcome (docs/control.md,
// "Counters"). Plain data: the data path counts, status and metrics read a copy. A new counter also
// gets its JSON and metric names in control/cell_counter_fields.h (the build fails until it does).
#pragma once

#include <cstdint>

namespace bulkhead::admission {

// Outcome counters since the supervisor started. Every admitted request ends in exactly one of
// ok, rejected_*, failed_*, cancelled (queued when its client disconnected) or dropped (running
// when its client disconnected).
struct CellCounters {
  uint64_t ok = 0;
  uint64_t rejected_full = 0;
  uint64_t rejected_queue_timeout = 0;
  uint64_t rejected_unavailable = 0;
  uint64_t failed_worker_error = 0;
  uint64_t failed_worker_died = 0;
  uint64_t failed_oom_killed = 0;
  uint64_t failed_timeout =
      0;  // request_timeout passed (the slot stays taken until the worker answers)
  uint64_t failed_stalled = 0;  // the worker was declared stalled and replaced
  uint64_t cancelled = 0;
  // Running when their client disconnected: the worker's outcome (answer, failure) was dropped.
  uint64_t dropped = 0;
  // Answered, but the client's connection closed before the reply was written whole to it (it did
  // not read: client_write_timeout, max_unsent_bytes; or it left): never delivered. A reply counts
  // in its outcome (ok, rejected_*, failed_*) only once written whole to the client's socket.
  uint64_t undelivered = 0;
  uint64_t bad_request = 0;  // frames refused before admission (connection closed)
  // Requests that got a slot or a queue place. Every well-formed request is either admitted or
  // rejected at admission (full, or unavailable while the cell refuses requests); a rejection
  // after admission (queue_timeout, unavailable for a queued request when the worker stops) counts
  // in both. At every instant (docs/control.md, "Counters"):
  //   admitted + rejected_at_admission = ok + rejected() + failed() + cancelled + dropped
  //                                      + undelivered
  //                                      + in flight (running requests not yet answered + queued
  //                                                   + replies not yet written whole)
  uint64_t admitted = 0;
  uint64_t rejected_at_admission = 0;
  // Connections refused at accept (REJECTED/too_many_connections): over max_connections, or over
  // the supervisor's descriptor budget. Not requests: they are in no other counter.
  uint64_t refused_connections = 0;
  // Client connections closed for idle_timeout (connections, not requests).
  uint64_t idle_closed = 0;
  uint64_t rejected() const {
    return rejected_full + rejected_queue_timeout + rejected_unavailable;
  }
  uint64_t failed() const {
    return failed_worker_error + failed_worker_died + failed_oom_killed + failed_timeout +
           failed_stalled;
  }
};

}  // namespace bulkhead::admission
