#!/bin/bash
# SPDX-License-Identifier: MIT
# vm.containers' checks, run as /payload/run.sh in the Debian 12 guest (systemd 252, podman and
# crun from Debian) booted by run-vm.sh --root-image (docs/vm-tests.md, "vm.containers"). The
# payload holds rootfs.tar: bulkheadd, bulkheadctl, bulkhead-test-worker and an
# /etc/bulkhead/bulkhead.toml with cgroup = "required", a 64M cell `hog` and a cell `steady`.
# bulkheadd is the container's entrypoint with the options docs/containers.md documents. Each check
# prints "PASS|FAIL <check> <evidence>"; the script exits 1 if any failed. Waits poll with a
# deadline; nothing sleeps for synchronisation.
set -uo pipefail
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
readonly image=localhost/bulkhead-vm:test
# No registry, no network: vfs needs no overlay module, --network=none no netavark. A store of its
# own: the image's podman units have already opened the default one at boot, with another driver.
podman() {
  command podman --root /var/lib/bulkhead-vm-containers --runroot /run/bulkhead-vm-containers \
    --storage-driver vfs "$@"
}
readonly run_opts=(--network=none --cgroupns=private)
readonly writable=(--security-opt unmask=/sys/fs/cgroup)
# pass, fail, check, wait_for and $failures.
source /payload/checks.sh
ctl() { podman exec "$1" /usr/bin/bulkheadctl "${@:2}"; }
answers() { ctl "$1" call steady --data "echo up" >/dev/null 2>&1; }
running() { [ "$(podman inspect -f '{{.State.Running}}' "$1" 2>/dev/null)" = true ]; }
exited() { [ "$(podman inspect -f '{{.State.Status}}' "$1" 2>/dev/null)" = exited ]; }
exit_code() { podman inspect -f '{{.State.ExitCode}}' "$1"; }
# stop_in_order NAME MODE: podman stop must end bulkheadd by its own orderly shutdown (exit 0), not
# by podman's SIGKILL after its 10 s timeout (exit 137). The time is evidence, not a criterion.
stop_in_order() {
  local name="$1" mode="$2" t0 t1 rc code
  t0=$(date +%s%N)
  podman stop "$name" >/dev/null 2>&1
  rc=$?
  t1=$(date +%s%N)
  code="$(exit_code "$name")"
  check "stop.$mode" "podman stop exit=$rc container exit=$code in $(((t1 - t0) / 1000000)) ms ($(podman inspect -f '{{.Config.StopSignal}}' "$name" 2>/dev/null))" \
    test "$rc" = 0 -a "$code" = 0
  podman logs "$name" 2>&1 | grep -E "received|stopped" | tail -n 3
}

echo "containers-vm: $(command podman --version); $(crun --version | head -n 1); $(uname -r)"
podman import --change 'ENTRYPOINT ["/usr/sbin/bulkheadd", "--config", "/etc/bulkhead/bulkhead.toml"]' \
  /payload/rootfs.tar "$image" >/dev/null || { echo "FAIL import podman import"; exit 1; }

# --- Plain mode, writable cgroup mount: every limit enforced inside the container. -------------
podman run -d --name plain "${run_opts[@]}" "${writable[@]}" --memory=512m "$image" >/dev/null ||
  fail run.plain "podman run exited non-zero"
if wait_for 90 answers plain; then
  pass run.plain "steady answered; $(ctl plain status 2>&1 | head -n 3 | tr '\n' ' ')"
else
  fail run.plain "no answer within 90 s; logs: $(podman logs plain 2>&1 | tail -n 5 | tr '\n' ' ')"
fi
memory_max="$(podman exec plain cat /sys/fs/cgroup/cells/hog/memory.max 2>&1)"
check limits.memory_max "cells/hog/memory.max=$memory_max inside the container" \
  test "$memory_max" = 67108864
pids_max="$(podman exec plain cat /sys/fs/cgroup/cells/hog/pids.max 2>&1)"
check limits.pids_max "cells/hog/pids.max=$pids_max" test "$pids_max" = 32

# --- An OOM kill inside one cell: the cell fails its request, the container lives on. ---------
out="$(ctl plain call hog --data "alloc 200" 2>&1)"
rc=$?
oom="$(podman exec plain grep -E '^oom_kill ' /sys/fs/cgroup/cells/hog/memory.events 2>&1)"
check oom.cell_failed "call hog 'alloc 200' exit=$rc ($out); $oom" test "$rc" = 5
check oom.container_lives "running=$(podman inspect -f '{{.State.Running}}' plain)" running plain
check oom.neighbour_answers "steady: $(ctl plain call steady --data 'echo still here' 2>&1)" answers plain
stop_in_order plain plain

# --- systemd mode: podman stops it with SIGRTMIN+3. ---------------------------------------------
podman run -d --name sysmode "${run_opts[@]}" --systemd=always "$image" >/dev/null ||
  fail run.systemd_mode "podman run --systemd=always exited non-zero"
if wait_for 90 answers sysmode; then
  pass run.systemd_mode "steady answered; memory.max of hog $(podman exec sysmode cat /sys/fs/cgroup/cells/hog/memory.max 2>&1)"
else
  fail run.systemd_mode "no answer within 90 s; logs: $(podman logs sysmode 2>&1 | tail -n 5 | tr '\n' ' ')"
fi
stop_in_order sysmode systemd

# --- The runtime's default, a read-only cgroup mount, is refused loudly under "required". -------
podman run -d --name readonly "${run_opts[@]}" "$image" >/dev/null
wait_for 60 exited readonly
code="$(exit_code readonly)"
why="$(podman logs readonly 2>&1 | grep -m 1 "cannot be enforced")"
echo "$why"
check readonly.refused "exit=$code" test "$code" != 0 -a -n "$why"
check readonly.hint "the error names the fix" grep -q -- "--security-opt unmask=/sys/fs/cgroup" <<<"$why"

echo "containers-vm: $failures check(s) failed"
[ "$failures" -eq 0 ]
