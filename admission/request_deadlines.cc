// SPDX-License-Identifier: MIT
#include "admission/request_deadlines.h"

#include <algorithm>

#include "base/check.h"

namespace bulkhead::admission {

void RequestDeadlines::Start(DeadlineEntry* entry, uint64_t now_ms) {
  BH_CHECK(entry->state_ == DeadlineEntry::State::kIdle);
  entry->state_ = DeadlineEntry::State::kWaiting;
  entry->started_at_ms_ = now_ms;
  entry->prev_ = tail_;
  entry->next_ = nullptr;
  if (tail_ != nullptr) {
    tail_->next_ = entry;
  } else {
    head_ = entry;
  }
  tail_ = entry;
}

void RequestDeadlines::Finish(DeadlineEntry* entry) {
  switch (entry->state_) {
    case DeadlineEntry::State::kIdle:
      return;
    case DeadlineEntry::State::kWaiting:
      Unlink(entry);
      break;
    case DeadlineEntry::State::kExpired:
      BH_CHECK(expired_ > 0);
      --expired_;
      break;
  }
  entry->state_ = DeadlineEntry::State::kIdle;
}

void RequestDeadlines::SetTimeout(uint64_t timeout_ms, uint64_t now_ms) {
  if (timeout_ms == timeout_ms_) return;
  timeout_ms_ = timeout_ms;
  counted_from_ms_ = now_ms;
}

uint64_t RequestDeadlines::DeadlineOf(const DeadlineEntry& entry) const {
  return std::max(entry.started_at_ms_, counted_from_ms_) + timeout_ms_;
}

std::optional<uint64_t> RequestDeadlines::NextDeadline() const {
  if (timeout_ms_ == 0 || head_ == nullptr) return std::nullopt;
  return DeadlineOf(*head_);
}

DeadlineEntry* RequestDeadlines::PopExpired(uint64_t now_ms) {
  if (timeout_ms_ == 0 || head_ == nullptr || DeadlineOf(*head_) > now_ms) return nullptr;
  DeadlineEntry* entry = head_;
  Unlink(entry);
  entry->state_ = DeadlineEntry::State::kExpired;
  ++expired_;
  return entry;
}

void RequestDeadlines::Unlink(DeadlineEntry* entry) {
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
}

}  // namespace bulkhead::admission
