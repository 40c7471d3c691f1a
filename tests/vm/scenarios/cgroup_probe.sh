#!/bin/sh
# SPDX-License-Identifier: MIT
# VM scenario (busybox sh, run by the VM's /init as root; see tests/vm/run-vm.sh): the cgroup v2
# probe of cell/cgroup.h. Its exit status is the scenario's result.
exec /bin/cgroup_probe
