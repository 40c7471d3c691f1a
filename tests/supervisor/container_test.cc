// SPDX-License-Identifier: MIT
// Telling a container from its signs, and the hint an operator gets when the cells' cgroups cannot
// be built there (docs/containers.md).
#include "supervisor/container.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <string>
#include <utility>

namespace bulkhead::supervisor {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

ContainerSigns Signs(std::string env, bool containerenv_file = false, bool dockerenv_file = false) {
  ContainerSigns signs;
  signs.container_env = std::move(env);
  signs.containerenv_file = containerenv_file;
  signs.dockerenv_file = dockerenv_file;
  return signs;
}

TEST(DetectContainer, TheEnvironmentVariableWinsThenTheRuntimesFiles) {
  EXPECT_EQ(DetectContainer(Signs("")), "");
  EXPECT_EQ(DetectContainer(Signs("systemd-nspawn")), "systemd-nspawn");
  EXPECT_EQ(DetectContainer(Signs("podman", false, true)), "podman");
  EXPECT_EQ(DetectContainer(Signs("", true)), "podman");
  EXPECT_EQ(DetectContainer(Signs("", false, true)), "docker");
  // crun/runc set container=oci; the files say which runtime.
  EXPECT_EQ(DetectContainer(Signs("oci", true)), "podman");
  EXPECT_EQ(DetectContainer(Signs("oci")), "oci");
}

TEST(CgroupSetupHint, AReadOnlyMountInAContainerNamesTheRuntimeOptions) {
  const Status failure = Status::FromErrno("mkdir /sys/fs/cgroup/supervisor", EROFS);
  const std::string hint = CgroupSetupHint(failure, "podman", 0);
  EXPECT_THAT(hint, HasSubstr("--security-opt unmask=/sys/fs/cgroup"));
  EXPECT_THAT(hint, HasSubstr("--cgroupns=private"));
  EXPECT_THAT(hint, HasSubstr("privileged: true"));
  EXPECT_THAT(hint, HasSubstr("docs/containers.md"));
  EXPECT_THAT(CgroupSetupHint(failure, "", 0), HasSubstr("read-only"));
  EXPECT_THAT(CgroupSetupHint(failure, "", 0), Not(HasSubstr("podman")));
}

TEST(CgroupSetupHint, BusyInAContainerSaysBulkheaddMustBeTheEntrypoint) {
  const Status failure =
      Status::FromErrno("write \"+cpu\" to /sys/fs/cgroup/cgroup.subtree_control", EBUSY);
  const std::string hint = CgroupSetupHint(failure, "podman", 0);
  EXPECT_THAT(hint, HasSubstr("--init"));
  EXPECT_THAT(hint, HasSubstr("entrypoint"));
  EXPECT_THAT(CgroupSetupHint(failure, "", 0), IsEmpty());
}

TEST(CgroupSetupHint, NotRootSaysToRunAsRoot) {
  const Status failure = Status::FromErrno("mkdir /sys/fs/cgroup/supervisor", EACCES);
  EXPECT_THAT(CgroupSetupHint(failure, "docker", 1000), HasSubstr("must run as root inside"));
  EXPECT_THAT(CgroupSetupHint(failure, "", 1000), HasSubstr("Delegate=yes"));
  // As root, EACCES is not about the user: nothing specific to add.
  EXPECT_THAT(CgroupSetupHint(failure, "docker", 0), IsEmpty());
  EXPECT_THAT(CgroupSetupHint(Status::Error("controller memory not available"), "podman", 0),
              IsEmpty());
}

}  // namespace
}  // namespace bulkhead::supervisor
