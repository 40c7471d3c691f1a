// SPDX-License-Identifier: MIT
#include "admission/request_deadlines.h"

#include <algorithm>

#include "base/check.h"

namespace bulkhead::admission {

void RequestDeadlines::Start(DeadlineEntry* entry, uint64_t now_ms) {
  BH_CHECK(entry->state_ == DeadlineEntry::State::kIdle);
  entry->state_ = DeadlineEntry::State::kWaiting;
  entry->started_at_ms_ = now_ms;
  waiting_.PushBack(entry);
}

void RequestDeadlines::Finish(DeadlineEntry* entry) {
  switch (entry->state_) {
    case DeadlineEntry::State::kIdle:
      return;
    case DeadlineEntry::State::kWaiting:
      waiting_.Remove(entry);
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
  if (timeout_ms_ == 0 || waiting_.empty()) return std::nullopt;
  return DeadlineOf(*waiting_.front());
}

DeadlineEntry* RequestDeadlines::PopExpired(uint64_t now_ms) {
  if (timeout_ms_ == 0 || waiting_.empty() || DeadlineOf(*waiting_.front()) > now_ms)
    return nullptr;
  DeadlineEntry* entry = waiting_.front();
  waiting_.Remove(entry);
  entry->state_ = DeadlineEntry::State::kExpired;
  ++expired_;
  return entry;
}

}  // namespace bulkhead::admission
