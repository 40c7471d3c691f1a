// SPDX-License-Identifier: MIT
#include "proxy/slow_clients.h"

#include <algorithm>
#include <string>
#include <vector>

#include "base/check.h"
#include "proxy/client.h"

namespace bulkhead::proxy {

SlowClients::SlowClients(loop::TimeSource* time)
    : time_(time), write_timer_(time->CreateTimer([this] { OnWriteTimer(); })) {}

void SlowClients::SetLimits(uint64_t max_unsent_bytes, uint64_t write_timeout_ms) {
  max_unsent_bytes_ = max_unsent_bytes;
  write_timeout_ms_ = write_timeout_ms;
}

uint64_t SlowClients::UnsentBytes() const {
  uint64_t total = 0;
  for (const Client* conn : waiting_) total += conn->unsent_bytes();
  return total;
}

void SlowClients::Waiting(Client* conn) {
  waiting_.insert(conn);
  if (write_timeout_ms_ > 0 && !write_timer_->armed()) ArmTick();
  uint64_t total = UnsentBytes();
  if (total <= max_unsent_bytes_) return;
  // Over the budget: the clients that have accepted nothing for the longest go first, until the
  // rest fits (the one just answered too, when it is the slowest).
  const uint64_t now = time_->NowMs();
  std::vector<Client*> by_stall(waiting_.begin(), waiting_.end());
  for (Client* waiting : by_stall) waiting->CheckProgress(now);
  std::sort(by_stall.begin(), by_stall.end(), [](Client* a, Client* b) {
    if (a->stalled_since_ms() != b->stalled_since_ms()) {
      return a->stalled_since_ms() < b->stalled_since_ms();
    }
    return a->unsent_bytes() > b->unsent_bytes();
  });
  for (Client* slowest : by_stall) {
    if (total <= max_unsent_bytes_) break;
    const size_t unsent = slowest->unsent_bytes();
    if (unsent == 0) continue;
    total -= unsent;
    slowest->CloseUnread("the cell's max_unsent_bytes of " + std::to_string(max_unsent_bytes_) +
                         " is used up and it accepted nothing for the longest");
  }
}

void SlowClients::ArmTick() {
  write_timer_->Start(std::clamp<uint64_t>(write_timeout_ms_ / 4, 100, 1000));
}

void SlowClients::OnWriteTimer() {
  const uint64_t now = time_->NowMs();
  const uint64_t timeout = write_timeout_ms_;
  std::vector<Client*> waiting(waiting_.begin(), waiting_.end());
  for (Client* conn : waiting) {
    if (conn->CheckProgress(now) == 0) {
      waiting_.erase(conn);
    } else if (timeout > 0 && now - conn->stalled_since_ms() >= timeout) {
      conn->CloseUnread("accepted no byte for " + std::to_string(now - conn->stalled_since_ms()) +
                        " ms, client_write_timeout is " + std::to_string(timeout) + " ms");
    }
  }
  if (!waiting_.empty() && timeout > 0) ArmTick();
}

}  // namespace bulkhead::proxy
