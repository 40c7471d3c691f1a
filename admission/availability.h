// SPDX-License-Identifier: MIT
// Availability: whether a cell's new requests may wait for a worker, and when its next worker
// starts, as the cell's lifecycle says. The lifecycle's side pushes it on every change
// (lifecycle::Lifecycle::Availability, through lifecycle::DataPathControl::SetAvailability); the
// data path reads it on every admission and every REJECTED unavailable, with no call back up
// (issue 23: admission no longer climbs proxy -> supervisor -> lifecycle and back). Pure value.
#pragma once

#include <algorithm>
#include <cstdint>

namespace bulkhead::admission {

struct Availability {
  // What is known of the next worker's start, for the rejected caller (Retry-After, the reject
  // detail's retry_after_ms; docs/protocol.md, docs/http.md).
  enum class NextStart : uint8_t {
    kUnknown,  // a worker serves, or one is due (starting, restarting, waiting for the cells it
               // needs) at a time not known: a client may retry soon
    kAt,       // a backoff: the next worker starts at next_start_at_ms
    kNone,     // stopped, failed, or stopping for a stop: no worker until an operator starts one
  };
  // Refusing until the availability changes (stopped, failed, stopping for a stop).
  static constexpr uint64_t kUntilChanged = UINT64_MAX;

  // New requests arriving before this (Clock ms) are REJECTED unavailable at once rather than
  // admitted: 0 admits (they run, or wait in the queue for the worker that comes);
  // kUntilChanged refuses until the next push; a backoff's next start less queue_timeout.
  uint64_t refuse_until_ms = 0;
  NextStart next_start = NextStart::kUnknown;
  uint64_t next_start_at_ms = 0;  // kAt only: Clock ms

  // Stopped, failed, or stopping for a stop: refused until changed, no start due. A cell's
  // lifecycle begins stopped, so the data path and the cell begin with this.
  static constexpr Availability NoneDue() {
    return Availability{kUntilChanged, NextStart::kNone, 0};
  }

  bool Refuses(uint64_t now_ms) const { return now_ms < refuse_until_ms; }
  // The retry-after hint in ms: the time to the next start for kAt (at least 1), else 0
  // (unknown, or no start due: next_start says which).
  uint32_t RetryAfterMs(uint64_t now_ms) const {
    if (next_start != NextStart::kAt) return 0;
    const uint64_t left = next_start_at_ms > now_ms ? next_start_at_ms - now_ms : 1;
    return static_cast<uint32_t>(std::clamp<uint64_t>(left, 1, UINT32_MAX));
  }
  bool operator==(const Availability&) const = default;
};

}  // namespace bulkhead::admission
