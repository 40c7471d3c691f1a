// SPDX-License-Identifier: MIT
// ControlAccess: which caller may run which control command (docs/control.md, "Credentials"),
// entry by entry without a socket; PeerOf on a real socketpair.
#include "control/control_access.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/unique_fd.h"

namespace bulkhead::control {
namespace {

ControlPeer Peer(uid_t uid, gid_t gid, std::vector<gid_t> groups = {}) {
  ControlPeer peer;
  peer.uid = uid;
  peer.gid = gid;
  peer.groups = std::move(groups);
  return peer;
}

TEST(ControlAccess, ReadOnlyCommandsAreOpenToAnyone) {
  ControlAccess access(1000, std::nullopt);
  EXPECT_EQ(access.Check("status", Peer(65534, 65534)), "");
  EXPECT_EQ(access.Check("metrics", Peer(65534, 65534)), "");
}

TEST(ControlAccess, MutatingCommandsNeedRootOrTheSupervisorsUid) {
  ControlAccess access(1000, std::nullopt);
  EXPECT_EQ(access.Check("stop", Peer(0, 0)), "");
  EXPECT_EQ(access.Check("stop", Peer(1000, 1000)), "");
  EXPECT_EQ(access.Check("stop", Peer(65534, 65534)),
            "permission denied: uid 65534 may not stop cells");
  EXPECT_EQ(access.Check("restart", Peer(1001, 0)),
            "permission denied: uid 1001 may not restart cells");
  // Commands added later are refused by default.
  EXPECT_EQ(access.Check("reload", Peer(65534, 65534)),
            "permission denied: uid 65534 may not run \"reload\"");
}

TEST(ControlAccess, ControlGroupByPrimaryOrSupplementaryGroup) {
  ControlAccess access(0, gid_t{4});
  EXPECT_EQ(access.Check("start", Peer(1001, 4)), "");
  EXPECT_EQ(access.Check("start", Peer(1001, 100, {27, 4})), "");
  EXPECT_NE(access.Check("start", Peer(1001, 100, {27})), "");
}

TEST(PeerOf, ReportsTheConnectedProcess) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  UniqueFd a(fds[0]);
  UniqueFd b(fds[1]);
  Result<ControlPeer> peer = PeerOf(a.get());
  ASSERT_TRUE(peer.ok()) << peer.status().message();
  EXPECT_EQ(peer->pid, ::getpid());
  EXPECT_EQ(peer->uid, ::geteuid());
  EXPECT_EQ(peer->gid, ::getegid());
}

}  // namespace
}  // namespace bulkhead::control
