// SPDX-License-Identifier: MIT
#include "supervisor/container.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace bulkhead::supervisor {

ContainerSigns ReadContainerSigns() {
  ContainerSigns signs;
  if (const char* value = std::getenv("container"); value != nullptr) signs.container_env = value;
  signs.containerenv_file = ::access("/run/.containerenv", F_OK) == 0;
  signs.dockerenv_file = ::access("/.dockerenv", F_OK) == 0;
  return signs;
}

std::string DetectContainer(const ContainerSigns& signs) {
  if (!signs.container_env.empty() && signs.container_env != "oci") return signs.container_env;
  if (signs.containerenv_file) return "podman";
  if (signs.dockerenv_file) return "docker";
  return signs.container_env;  // "oci" or ""
}

std::string CgroupSetupHint(const Status& failure, std::string_view container, uid_t euid) {
  const int err = failure.error_number();
  const bool in_container = !container.empty();
  if ((err == EACCES || err == EPERM) && euid != 0) {
    return in_container
               ? "bulkheadd runs as uid " + std::to_string(euid) +
                     ": it must run as root inside the container to build the cells' cgroups "
                     "(drop --user / runAsUser; no capability is needed)"
               : "bulkheadd runs as uid " + std::to_string(euid) +
                     ": run it as root, or under a systemd unit with Delegate=yes that gives "
                     "this user its cgroup";
  }
  if (err == EROFS) {
    return in_container
               ? "the container's cgroup mount is read-only: start it with a private cgroup "
                 "namespace and a writable mount (podman run --cgroupns=private --security-opt "
                 "unmask=/sys/fs/cgroup, or --systemd=always; docker run --cgroupns=private "
                 "--privileged; Kubernetes: privileged: true), see docs/containers.md"
               : "the cgroup mount is read-only: remount it read-write, or run bulkheadd where "
                 "its cgroup is delegated (a systemd unit with Delegate=yes)";
  }
  if (err == EBUSY && in_container) {
    return "another process shares bulkheadd's cgroup (an init added by --init, such as "
           "catatonit or tini, or a shared process namespace): make bulkheadd the container's "
           "entrypoint, PID 1 of its own cgroup namespace (podman/docker run without --init)";
  }
  return {};
}

}  // namespace bulkhead::supervisor
