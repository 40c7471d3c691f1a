// SPDX-License-Identifier: MIT
// What bulkheadd knows of the container it may run in (docs/containers.md): whether it is one, and
// what an operator must change when the cgroup tree cannot be delegated there. Pure functions and
// one environment probe; called on the main thread before the loop starts.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

#include "base/status.h"

namespace bulkhead::supervisor {

// The signs a container runtime leaves, as systemd's detect-virt reads them: the `container`
// environment variable (podman, systemd-nspawn, LXC, ... set it for PID 1), /run/.containerenv
// (podman) and /.dockerenv (Docker).
struct ContainerSigns {
  std::string container_env;       // value of $container, "" when unset
  bool containerenv_file = false;  // /run/.containerenv exists
  bool dockerenv_file = false;     // /.dockerenv exists
};

// Reads the signs of the current process: getenv("container"), access(2) on the two files.
ContainerSigns ReadContainerSigns();

// The runtime's name ("podman", "docker", or $container's value, e.g. "systemd-nspawn"), or "" when
// nothing says this is a container. $container wins; "oci" from it is refined by the files.
std::string DetectContainer(const ContainerSigns& signs);

// One sentence on how to make cgroup delegation work where bulkheadd runs, for the error or warning
// that says cell limits are not enforced; "" when there is nothing specific to say. `failure` is
// what cell::CgroupTree::Delegate returned (its errno decides: EROFS, EBUSY, EACCES/EPERM),
// `container` what DetectContainer found, `euid` bulkheadd's effective uid.
std::string CgroupSetupHint(const Status& failure, std::string_view container, uid_t euid);

}  // namespace bulkhead::supervisor
