// SPDX-License-Identifier: MIT
// ServiceNotifier: bulkheadd's own messages to the service manager that started it (systemd with
// Type=notify), over $NOTIFY_SOCKET as sd_notify(3) describes: READY=1, RELOADING=1, STOPPING=1
// and STATUS=. Sent through libsystemd's sd_notify. Without $NOTIFY_SOCKET (not under systemd, or
// Type=simple) every call does nothing and nothing breaks. REQUIRES: loop thread only.
//
// What bulkheadd sends, and when (docs/architecture.md, "Under systemd"):
//   READY=1     once at boot, when every cell has left `starting` (it is running, or its first
//               start failed: backoff, failed, or stopped by an operator); at once with no cell.
//               After a reload, again once the reload is done (sd_notify(3): RELOADING=1 must be
//               followed by READY=1).
//   RELOADING=1 with MONOTONIC_USEC= (CLOCK_MONOTONIC, μs) when a reload begins, as sd_notify(3)
//               requires for Type=notify-reload (systemd 253 on; older managers ignore the field).
//   STOPPING=1  when SIGTERM/SIGINT begins the shutdown.
//   STATUS=     a one-line summary of the cells' states, sent whenever it changes:
//               "3 cells: 2 running, 1 backoff" (DescribeCellStates).
//
// The supervisor's $NOTIFY_SOCKET never reaches a worker: a worker's environment is built from the
// config alone (cell/process.h: nothing is inherited) and its NOTIFY_SOCKET is the cell's own.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "lifecycle/lifecycle.h"

namespace bulkhead::supervisor {

// "3 cells: 2 running, 1 backoff": the number of cells, then how many are in each state, in the
// order of Lifecycle::State, states with no cell left out; "1 cell: 1 running"; "0 cells".
std::string DescribeCellStates(const std::vector<lifecycle::Lifecycle::State>& states);

class ServiceNotifier {
 public:
  // Reads $NOTIFY_SOCKET now (it stays in the environment, see above).
  ServiceNotifier();

  // A service manager listens ($NOTIFY_SOCKET is set and not empty).
  bool enabled() const { return enabled_; }

  // READY=1. The caller decides when (see above); each call sends.
  void Ready();
  // RELOADING=1 and MONOTONIC_USEC=<now>. The caller must send Ready() when the reload is done.
  void Reloading();
  // STOPPING=1.
  void Stopping();
  // STATUS=<text>, unless `text` is what the last Status() sent. `text` is one line: a newline in
  // it is replaced by a space (sd_notify(3) separates fields by newlines).
  void Status(std::string_view text);

  // How many messages were handed to the service manager so far.
  uint64_t sent() const { return sent_; }

 private:
  // Sends one datagram; a failure is logged once (a service manager that went away must not flood
  // the log) and otherwise ignored, as sd_notify(3) recommends.
  void Send(const std::string& message);

  bool enabled_ = false;
  bool warned_ = false;
  uint64_t sent_ = 0;
  std::string last_status_;
};

}  // namespace bulkhead::supervisor
