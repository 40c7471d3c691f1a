#!/bin/sh
# SPDX-License-Identifier: MIT
# VM scenario (busybox sh, run by the VM's /init as root; see tests/vm/run-vm.sh): bulkheadd with
# five cells in their cgroups, driven by tests/vm/supervisor_compartments.cc. Its exit status is
# the scenario's result.
exec /bin/supervisor_compartments
