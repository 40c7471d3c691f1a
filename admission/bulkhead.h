// SPDX-License-Identifier: MIT
// Bulkhead: the admission policy of one cell. At most max_concurrent entries run, at most max_queue
// wait in FIFO order, each waiting entry expires queue_timeout after it was queued, and anything
// beyond is rejected at once. Pure: no I/O, no clock of its own (callers pass `now_ms`), O(1) per
// operation. Entries are intrusive (owned by the caller); every state change is checked, so a slot
// or queue place can never leak or be released twice. Not thread-safe: the loop thread owns it.
#pragma once

#include <cstdint>
#include <optional>

#include "admission/intrusive_fifo.h"

namespace bulkhead::admission {

// One request's place in a Bulkhead. Embed it in the request; the Bulkhead links it, never owns it.
class AdmissionEntry : public FifoLink<AdmissionEntry> {
 public:
  enum class State : uint8_t { kIdle, kQueued, kRunning };

  AdmissionEntry() = default;
  AdmissionEntry(const AdmissionEntry&) = delete;
  AdmissionEntry& operator=(const AdmissionEntry&) = delete;

  State admission_state() const { return state_; }
  // When the entry entered the queue (monotonic ms); meaningful once it has been queued.
  uint64_t queued_at_ms() const { return queued_at_ms_; }

 private:
  friend class Bulkhead;
  State state_ = State::kIdle;
  uint64_t queued_at_ms_ = 0;
};

class Bulkhead {
 public:
  struct Limits {
    uint32_t max_concurrent = 1;  // >= 1
    uint32_t max_queue = 0;       // 0: reject as soon as every slot is taken
    uint64_t queue_timeout_ms = 1000;
  };

  enum class Decision {
    kRun,                  // a slot was taken: dispatch now
    kQueued,               // waiting in the queue
    kRejectedFull,         // every slot and queue place is taken
    kRejectedUnavailable,  // closed (no worker to run it) and no queue place left
  };

  explicit Bulkhead(Limits limits);
  ~Bulkhead();
  Bulkhead(const Bulkhead&) = delete;
  Bulkhead& operator=(const Bulkhead&) = delete;

  // REQUIRES: entry idle. Runs the entry if open, a slot is free and nobody waits ahead of it
  // (FIFO); else queues it if a place is free; else rejects it (the entry stays idle).
  Decision Admit(AdmissionEntry* entry, uint64_t now_ms);

  // REQUIRES: entry running. Frees its slot (answered, failed or its worker died). The caller then
  // calls StartNext() to fill the slot.
  void Finish(AdmissionEntry* entry);

  // REQUIRES: entry queued. Removes it (its client went away). The entry becomes idle.
  void Cancel(AdmissionEntry* entry);

  // If open, a slot is free and the queue is not empty: takes the queue's head, marks it running
  // and returns it. Otherwise nullptr. Call in a loop until nullptr.
  AdmissionEntry* StartNext();

  // If the queue's head has waited queue_timeout_ms by `now_ms`: removes it (idle) and returns it.
  // Otherwise nullptr. Call in a loop; the queue is in deadline order because it is FIFO.
  AdmissionEntry* PopExpired(uint64_t now_ms);

  // When the queue's head expires (monotonic ms), or nullopt when the queue is empty.
  std::optional<uint64_t> NextDeadline() const;

  // Open: a worker can take requests. Closed: admitted entries wait in the queue and nothing
  // starts; running entries are unaffected. Starts closed.
  void SetOpen(bool open) { open_ = open; }
  bool is_open() const { return open_; }

  // New limits apply at once: running entries above a lowered cap finish normally; queued entries
  // are kept even above a lowered max_queue (no new ones are admitted until below it).
  void SetLimits(Limits limits);
  const Limits& limits() const { return limits_; }
  // Changes max_concurrent alone, as the adaptive mode does after each AdaptiveLimit change (O(1),
  // no allocation); max_queue and queue_timeout_ms stay. A lowered value stops new starts and
  // never touches running entries (they finish normally); a raised one does not start queued
  // entries by itself: the caller then calls StartNext() until nullptr. REQUIRES: >= 1.
  void SetMaxConcurrent(uint32_t max_concurrent);

  uint32_t running() const { return running_; }
  uint32_t queued() const { return queued_; }

 private:
  void Unlink(AdmissionEntry* entry);

  Limits limits_;
  bool open_ = false;
  uint32_t running_ = 0;
  uint32_t queued_ = 0;
  IntrusiveFifo<AdmissionEntry> queue_;
};

}  // namespace bulkhead::admission
