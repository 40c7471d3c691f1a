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
  if (open_ && running_ < limits_.max_concurrent && head_ == nullptr) {
    entry->state_ = State::kRunning;
    ++running_;
    return Decision::kRun;
  }
  if (queued_ < limits_.max_queue) {
    entry->state_ = State::kQueued;
    entry->queued_at_ms_ = now_ms;
    entry->prev_ = tail_;
    entry->next_ = nullptr;
    if (tail_ != nullptr) {
      tail_->next_ = entry;
    } else {
      head_ = entry;
    }
    tail_ = entry;
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
  if (!open_ || running_ >= limits_.max_concurrent || head_ == nullptr) return nullptr;
  AdmissionEntry* entry = head_;
  Unlink(entry);
  entry->state_ = State::kRunning;
  ++running_;
  return entry;
}

AdmissionEntry* Bulkhead::PopExpired(uint64_t now_ms) {
  if (head_ == nullptr || head_->queued_at_ms_ + limits_.queue_timeout_ms > now_ms) return nullptr;
  AdmissionEntry* entry = head_;
  Unlink(entry);
  return entry;
}

std::optional<uint64_t> Bulkhead::NextDeadline() const {
  if (head_ == nullptr) return std::nullopt;
  return head_->queued_at_ms_ + limits_.queue_timeout_ms;
}

void Bulkhead::SetLimits(Limits limits) {
  BH_CHECK(limits.max_concurrent >= 1);
  limits_ = limits;
}

void Bulkhead::Unlink(AdmissionEntry* entry) {
  BH_CHECK(queued_ > 0);
  if (entry->prev_ != nullptr) {
    entry->prev_->next_ = entry->next_;
  } else {
    head_ = entry->next_;
  }
  if (entry->next_ != nullptr) {
    entry->next_->prev_ = entry->prev_;
  } else {
    tail_ = entry->prev_;
  }
  entry->prev_ = entry->next_ = nullptr;
  entry->state_ = State::kIdle;
  --queued_;
}

}  // namespace bulkhead::admission
