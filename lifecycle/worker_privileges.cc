// SPDX-License-Identifier: MIT
#include "lifecycle/worker_privileges.h"

#include <unistd.h>

#include <algorithm>

namespace bulkhead::lifecycle {

std::optional<cell::Credentials> WorkerCredentials(const config::CellConfig& cell) {
  if (!cell.user && !cell.group && !cell.has_supplementary_groups) return std::nullopt;
  cell::Credentials credentials;
  credentials.uid = cell.user.value_or(::geteuid());
  credentials.gid = cell.group.value_or(::getegid());
  credentials.supplementary_groups = cell.supplementary_groups;
  return credentials;
}

void AppendUserEnvironment(const config::CellConfig& cell, std::vector<std::string>* environment) {
  if (!cell.user || cell.user_name.empty()) return;
  auto has = [environment](const std::string& name) {
    return std::any_of(environment->begin(), environment->end(), [&](const std::string& entry) {
      return entry.size() > name.size() && entry.compare(0, name.size(), name) == 0 &&
             entry[name.size()] == '=';
    });
  };
  const std::pair<std::string, const std::string*> variables[] = {{"USER", &cell.user_name},
                                                                  {"LOGNAME", &cell.user_name},
                                                                  {"HOME", &cell.user_home},
                                                                  {"SHELL", &cell.user_shell}};
  for (const auto& [name, value] : variables) {
    if (!has(name)) environment->push_back(name + "=" + *value);
  }
}

ipc::SocketAccess FrontSocketAccess(const config::CellConfig& cell) {
  ipc::SocketAccess access;
  access.mode = cell.socket_mode;
  access.group = cell.socket_group;
  return access;
}

ipc::SocketAccess WorkerSocketAccess() {
  ipc::SocketAccess access;
  access.mode = 0600;
  return access;
}

ipc::SocketAccess NotifySocketAccess(const config::CellConfig& cell) {
  ipc::SocketAccess access;
  access.mode = 0600;
  access.owner = cell.user;
  access.group = cell.group;
  return access;
}

}  // namespace bulkhead::lifecycle
