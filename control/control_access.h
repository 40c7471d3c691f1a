// SPDX-License-Identifier: MIT
// ControlAccess: who may run which control command (docs/control.md, "Credentials"). The caller
// is known from the kernel (SO_PEERCRED, SO_PEERGROUPS on the accepted connection), never from
// the request. Read-only commands are open to anyone who can connect (the control socket's mode
// and group decide that); every other command, including ones added later, needs uid 0, the
// supervisor's own uid, or membership of `[supervisor] control_group`. Thread-compatible.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace bulkhead::control {

// The process at the other end of a control connection, as the kernel reported it when it
// connected (unix(7) SO_PEERCRED; SO_PEERGROUPS since Linux 4.13).
struct ControlPeer {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups; empty where SO_PEERGROUPS is missing
};

// The credentials of the connected socket `fd`. Errors carry the getsockopt errno.
Result<ControlPeer> PeerOf(int fd);

// This process, as a peer: what a caller of Supervisor::HandleControl without a connection is.
ControlPeer SelfAsPeer();

class ControlAccess {
 public:
  // `own_uid`: the supervisor's effective uid. `control_group`: its members may run mutating
  // commands too.
  ControlAccess(uid_t own_uid, std::optional<gid_t> control_group)
      : own_uid_(own_uid), control_group_(control_group) {}

  // Commands that change nothing: the rows of control/command_table.h that anyone may call
  // ("status", "metrics"). Anything else mutates, unknown commands included.
  static bool IsReadOnly(std::string_view command);

  // Empty when `peer` may run `command`; else the refusal, e.g. "permission denied: uid 65534 may
  // not stop cells" (start/stop/restart) or "permission denied: uid 65534 may not run \"reload\"".
  std::string Check(std::string_view command, const ControlPeer& peer) const;

 private:
  uid_t own_uid_;
  std::optional<gid_t> control_group_;
};

}  // namespace bulkhead::control
