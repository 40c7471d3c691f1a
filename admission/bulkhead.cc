// SPDX-License-Identifier: MIT
#include "admission/bulkhead.h"

#include "base/check.h"

namespace bulkhead::admission {

using State = AdmissionEntry::State;

Bulkhead::Bulkhead(Limits limits) : limits_(limits) { BH_CHECK(limits.max_concurrent >= 1); }

// Entries are owned by callers; a Bulkhead destroyed with entries still linked would leave them
// pointing at freed memory, so the owner must drain it first.
Bulkhead::~Bulkhead() { BH_CHECK(queued_ == 0 && running_ == 0); }

Bulkhead::Decision Bulkhead::Admit(AdmissionEntry* entry, uint64_t now_ms) {
  BH_CHECK(entry->state_ == State::kIdle);
  if (open_ && running_ < limits_.max_concurrent && queue_.empty()) {
    entry->state_ = State::kRunning;
    ++running_;
    return Decision::kRun;
  }
  if (queued_ < limits_.max_queue) {
    entry->state_ = State::kQueued;
    entry->queued_at_ms_ = now_ms;
    queue_.PushBack(entry);
    ++queued_;
    return Decision::kQueued;
  }
  return open_ ? Decision::kRejectedFull : Decision::kRejectedUnavailable;
}

void Bulkhead::Finish(AdmissionEntry* entry) {
  BH_CHECK(entry->state_ == State::kRunning);
  BH_CHECK(running_ > 0);
  entry->state_ = State::kIdle;
  --running_;
}

void Bulkhead::Cancel(AdmissionEntry* entry) {
  BH_CHECK(entry->state_ == State::kQueued);
  Unlink(entry);
}

AdmissionEntry* Bulkhead::StartNext() {
  if (!open_ || running_ >= limits_.max_concurrent || queue_.empty()) return nullptr;
  AdmissionEntry* entry = queue_.front();
  Unlink(entry);
  entry->state_ = State::kRunning;
  ++running_;
  return entry;
}

AdmissionEntry* Bulkhead::PopExpired(uint64_t now_ms) {
  if (queue_.empty() || queue_.front()->queued_at_ms_ + limits_.queue_timeout_ms > now_ms)
    return nullptr;
  AdmissionEntry* entry = queue_.front();
  Unlink(entry);
  return entry;
}

std::optional<uint64_t> Bulkhead::NextDeadline() const {
  if (queue_.empty()) return std::nullopt;
  return queue_.front()->queued_at_ms_ + limits_.queue_timeout_ms;
}

void Bulkhead::SetLimits(Limits limits) {
  BH_CHECK(limits.max_concurrent >= 1);
  limits_ = limits;
}

void Bulkhead::SetMaxConcurrent(uint32_t max_concurrent) {
  BH_CHECK(max_concurrent >= 1);
  limits_.max_concurrent = max_concurrent;
}

void Bulkhead::Unlink(AdmissionEntry* entry) {
  BH_CHECK(queued_ > 0);
  queue_.Remove(entry);
  entry->state_ = State::kIdle;
  --queued_;
}

}  // namespace bulkhead::admission
