// SPDX-License-Identifier: MIT
#include "lifecycle/worker_environment.h"

#include <signal.h>
#include <sys/types.h>

#include "cell/worker.h"
#include "lifecycle/worker_privileges.h"

namespace bulkhead::lifecycle {

cell::SpawnOptions BuildWorkerEnvironment(const config::CellConfig& config,
                                          const std::string& notify_socket, uint32_t max_payload,
                                          int listen_fd) {
  cell::SpawnOptions options;
  options.argv = config.command;
  bool has_path = false;
  for (const auto& [key, value] : config.environment) {
    if (key == "NOTIFY_SOCKET" || key == "WATCHDOG_USEC" || key == "WATCHDOG_PID" ||
        key == cell::kMaxPayloadEnv || key == cell::kWorkerConnectionsEnv) {
      continue;
    }
    options.environment.push_back(key + "=" + value);
    if (key == "PATH") has_path = true;
  }
  if (!has_path) options.environment.push_back(std::string("PATH=") + config::kDefaultWorkerPath);
  options.environment.push_back("NOTIFY_SOCKET=" + notify_socket);
  // The worker SDK reads its payload limit here (cell/worker.h MaxPayloadFromEnv).
  options.environment.push_back(std::string(cell::kMaxPayloadEnv) + "=" +
                                std::to_string(max_payload));
  // Set only for the multiplexed mode, so a worker written before it sees the environment it knew
  // (docs/protocol.md, "Multiplexed worker connections").
  if (config.worker_connections == config::WorkerConnections::kMultiplex) {
    options.environment.push_back(std::string(cell::kWorkerConnectionsEnv) + "=" +
                                  cell::kWorkerConnectionsMultiplex);
  }
  if (config.watchdog.count() > 0) {
    options.environment.push_back("WATCHDOG_USEC=" +
                                  std::to_string(config.watchdog.count() * 1000));
  }
  AppendUserEnvironment(config, &options.environment);
  options.credentials = WorkerCredentials(config);
  options.umask = static_cast<mode_t>(config.umask);
  options.no_new_privileges = config.no_new_privileges;
  // Set in the child, so the worker never inherits bulkheadd's own oom_score_adj.
  options.oom_score_adj = config.oom_score_adjust;
  options.working_directory = config.working_directory;
  options.listen_fd = listen_fd;
  options.listen_fd_name = config.name;
  // A supervisor that dies without stopping its cells (SIGKILL, a failed check) takes the workers
  // with it: none keeps running unnoticed, holding an old generation's socket.
  options.parent_death_signal = SIGKILL;
  return options;
}

}  // namespace bulkhead::lifecycle
