// SPDX-License-Identifier: MIT
// RequestDeadlines: a cell's request_timeout over its running requests. Every running request that
// has not timed out has a deadline, whatever order requests start and finish in, and the one to
// arm a timer for is always NextDeadline(). A request_timeout set or changed while requests run (a
// reload) counts from that moment for them, not from their start (the rule systemd adopted for a
// changed watchdog, systemd#9467). Pure: no I/O, no clock of its own (callers pass `now_ms`, loop
// ms), O(1) per operation. Entries are intrusive (owned by the caller). REQUIRES: one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "admission/intrusive_fifo.h"

namespace bulkhead::admission {

// One running request's place in a RequestDeadlines. Embed it in the request.
class DeadlineEntry : public FifoLink<DeadlineEntry> {
 public:
  DeadlineEntry() = default;
  DeadlineEntry(const DeadlineEntry&) = delete;
  DeadlineEntry& operator=(const DeadlineEntry&) = delete;

  // Started and not finished.
  bool started() const { return state_ != State::kIdle; }
  // Its request_timeout passed (PopExpired returned it); it stays running until Finish.
  bool expired() const { return state_ == State::kExpired; }

 private:
  friend class RequestDeadlines;
  enum class State : uint8_t { kIdle, kWaiting, kExpired };
  State state_ = State::kIdle;
  uint64_t started_at_ms_ = 0;
};

class RequestDeadlines {
 public:
  // `timeout_ms`: request_timeout; 0 means none (entries are still tracked, so that a timeout set
  // later applies to them).
  explicit RequestDeadlines(uint64_t timeout_ms) : timeout_ms_(timeout_ms) {}
  RequestDeadlines(const RequestDeadlines&) = delete;
  RequestDeadlines& operator=(const RequestDeadlines&) = delete;

  // REQUIRES: entry idle (new, or finished). The request was dispatched at `now_ms`.
  void Start(DeadlineEntry* entry, uint64_t now_ms);
  // The request left its slot (answered, failed, its worker gone): the entry becomes idle. An idle
  // entry (a request that never started) is left as it is.
  void Finish(DeadlineEntry* entry);

  // request_timeout becomes `timeout_ms` at `now_ms`. If it changed, requests running and not yet
  // expired count the new timeout from `now_ms` (at the earliest); those started later, from their
  // start. Expired entries stay expired.
  void SetTimeout(uint64_t timeout_ms, uint64_t now_ms);
  uint64_t timeout_ms() const { return timeout_ms_; }

  // The earliest deadline (loop ms) of a running entry not yet expired; nullopt when there is none
  // or no timeout.
  std::optional<uint64_t> NextDeadline() const;
  // If an entry's deadline is <= `now_ms`: marks it expired and returns it (the earliest first).
  // Otherwise nullptr. Call in a loop.
  DeadlineEntry* PopExpired(uint64_t now_ms);

  // Running entries whose timeout passed (still running, until Finish).
  size_t expired() const { return expired_; }

 private:
  uint64_t DeadlineOf(const DeadlineEntry& entry) const;

  uint64_t timeout_ms_;
  // When the timeout last changed: no deadline of an entry already waiting then is earlier than
  // this plus the timeout.
  uint64_t counted_from_ms_ = 0;
  // Waiting entries in start order. Deadlines never decrease along the list (one timeout, one
  // counted_from_ms_ for all), so the head's is the earliest.
  IntrusiveFifo<DeadlineEntry> waiting_;
  size_t expired_ = 0;
};

}  // namespace bulkhead::admission
