// SPDX-License-Identifier: MIT
#include "lifecycle/worker_launcher.h"

#include <signal.h>

namespace bulkhead::lifecycle {

namespace {

class SystemLauncher final : public WorkerLauncher {
 public:
  Result<pid_t> Spawn(const cell::SpawnOptions& options) override { return cell::Spawn(options); }
  Result<cell::StartedChild> SpawnStarted(const cell::SpawnOptions& options) override {
    return cell::SpawnStarted(options);
  }
  void Kill(pid_t pid, int signal) override { ::kill(pid, signal); }
};

}  // namespace

WorkerLauncher& SystemWorkerLauncher() {
  static SystemLauncher launcher;
  return launcher;
}

}  // namespace bulkhead::lifecycle
