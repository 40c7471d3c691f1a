// SPDX-License-Identifier: MIT
#include "control/control_access.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "control/command_table.h"

namespace bulkhead::control {

Result<ControlPeer> PeerOf(int fd) {
  ucred cred{};
  socklen_t length = sizeof cred;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &length) != 0) {
    return Status::FromErrno("getsockopt SO_PEERCRED");
  }
  ControlPeer peer;
  peer.pid = cred.pid;
  peer.uid = cred.uid;
  peer.gid = cred.gid;
  // SO_PEERGROUPS: ERANGE says how much room the list needs.
  std::vector<gid_t> groups(16);
  for (int attempt = 0; attempt < 4; ++attempt) {
    socklen_t bytes = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &bytes) == 0) {
      groups.resize(bytes / sizeof(gid_t));
      peer.groups = std::move(groups);
      break;
    }
    if (errno != ERANGE) break;
    groups.resize(bytes / sizeof(gid_t) + 1);
  }
  return peer;
}

ControlPeer SelfAsPeer() {
  ControlPeer peer;
  peer.pid = ::getpid();
  peer.uid = ::geteuid();
  peer.gid = ::getegid();
  return peer;
}

bool ControlAccess::IsReadOnly(std::string_view command) {
  const CommandRow* row = FindCommand(command);
  return row != nullptr && row->access == CommandAccess::kAnyone;
}

std::string ControlAccess::Check(std::string_view command, const ControlPeer& peer) const {
  if (IsReadOnly(command) || peer.uid == 0 || peer.uid == own_uid_) return "";
  if (control_group_ &&
      (peer.gid == *control_group_ ||
       std::find(peer.groups.begin(), peer.groups.end(), *control_group_) != peer.groups.end())) {
    return "";
  }
  std::string message = "permission denied: uid " + std::to_string(peer.uid) + " may not ";
  if (const CommandRow* row = FindCommand(command);
      row != nullptr && !row->refused_action.empty()) {
    message.append(row->refused_action);
  } else {
    message += "run \"";
    message.append(command);
    message += '"';
  }
  return message;
}

}  // namespace bulkhead::control
