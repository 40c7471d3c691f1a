// SPDX-License-Identifier: MIT
// SlowClients: a cell's clients that hold reply bytes they have not read, kept within the cell's
// max_unsent_bytes (the client that accepted nothing for the longest is closed first) and closed
// after client_write_timeout without accepting a byte (docs/config.md). REQUIRES: loop thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_set>

#include "loop/time_source.h"

namespace bulkhead::proxy {

class Client;

class SlowClients {
 public:
  // `time` outlives the watcher.
  explicit SlowClients(loop::TimeSource* time);
  SlowClients(const SlowClients&) = delete;
  SlowClients& operator=(const SlowClients&) = delete;

  // `max_unsent_bytes` (bytes, for all the cell's clients together) and `write_timeout_ms`
  // (client_write_timeout, 0: none) apply from the next reply that waits.
  void SetLimits(uint64_t max_unsent_bytes, uint64_t write_timeout_ms);

  // `conn` holds unsent reply bytes now: watched until it has none, and the cell's clients are
  // brought back within max_unsent_bytes (the slowest closed first; `conn` may be one of them).
  void Waiting(Client* conn);
  // `conn` is closing: no longer watched.
  void Forget(Client* conn) { waiting_.erase(conn); }
  // Reply bytes held for the cell's clients, not yet written to their sockets.
  uint64_t UnsentBytes() const;

  // Stops watching (the cell is closing).
  void Stop() { write_timer_->Stop(); }

 private:
  // Every tick while replies wait (write_timeout / 4, within 100 ms to 1 s): closes clients past
  // client_write_timeout.
  void OnWriteTimer();
  void ArmTick();

  loop::TimeSource* time_;
  uint64_t max_unsent_bytes_ = 0;
  uint64_t write_timeout_ms_ = 0;
  std::unique_ptr<loop::Timer> write_timer_;
  // Clients with reply bytes unsent (or that had at the last look).
  std::unordered_set<Client*> waiting_;
};

}  // namespace bulkhead::proxy
