#!/bin/bash
# SPDX-License-Identifier: MIT
# vm.containers' checks, run as /payload/run.sh in the Debian 12 guest (systemd 252, podman and
# crun from Debian) booted by run-vm.sh --root-image (docs/vm-tests.md, "vm.containers"). The
# payload holds rootfs.tar: bulkheadd, bulkheadctl, bulkhead-test-worker and an
# /etc/bulkhead/bulkhead.toml with cgroup = "required", a 64M cell `hog` and a cell `steady`.
# bulkheadd is the container's entrypoint with the options docs/containers.md documents, then in
# the Pod and the DaemonSet of packaging/kubernetes/ (/payload/kube/), played by podman kube play.
# Each check prints "PASS|FAIL <check> <evidence>"; the script exits 1 if any failed. Waits poll
# with a deadline; nothing sleeps for synchronisation.
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

# --- The dashboard's and the rules' metric names, cgroup families included, in this bulkheadd. --
# (packaging.dashboard_queries checks every query against a real Prometheus on the host, where no
# cell has a cgroup; here every family is present: the names come from the payload, made from
# packaging/grafana/bulkhead.json and packaging/prometheus/bulkhead-alerts.yml.)
exposition="$(ctl plain metrics 2>&1)"
missing=""
while read -r name; do
  grep -qE "^(# TYPE )?${name}[{ ]" <<<"$exposition" || missing+=" $name"
done </payload/metric_names.txt
check metrics.dashboard_names "$(wc -l </payload/metric_names.txt) names queried, missing:${missing:- none}" \
  test -z "$missing"

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

# --- packaging/kubernetes/ played by podman kube play; then podman kube down. -------------------
# The manifests name registry.example/bulkhead:0.1.0; the image imported above takes that name (no
# registry: IfNotPresent finds it). The ConfigMap bulkhead-config is this test's bulkhead.toml.
# podman 4.3 refuses `ports` without a network ("PortMappings can only be used with Bridge or
# slirp4netns networking"), and this VM has none (--network none): the manifests are played
# without their `ports` lists.
podman tag "$image" registry.example/bulkhead:0.1.0
kube_play() {  # kube_play FILE: plays FILE without its ports lists
  sed -e '/^ *ports:$/d' -e '/containerPort:/d' "$1" >"/tmp/play-$(basename "$1")"
  podman kube play --network none --configmap /payload/kube/configmap.yaml "/tmp/play-$(basename "$1")"
}
# kube_down NAME FILE CONTAINER: bulkheadd must end by its orderly shutdown (exit 0, and its log
# says so), not by SIGKILL (137). podman 4.3's `kube down` SIGKILLs a pod's containers at
# once, whatever their stop signal and timeout (podman issues 19135, 21767 and 22397; fixed in a
# later podman), and it ignores terminationGracePeriodSeconds (the stop timeout stays 10 s): so,
# as those issues advise, `podman pod stop -t <the manifest's grace period>` first, then `kube down`.
kube_down() {
  local name="$1" file="$2" ctr="$3" pod grace t0 t1 rc state left
  pod="$(podman pod inspect -f '{{.Name}}' "$(podman inspect -f '{{.Pod}}' "$ctr" 2>/dev/null)" 2>/dev/null)"
  grace="$(grep -m 1 -oE 'terminationGracePeriodSeconds: [0-9]+' "$file" | grep -oE '[0-9]+$')"
  t0=$(date +%s%N)
  podman pod stop -t "${grace:-10}" "$pod" >"/tmp/kube-$name.down" 2>&1
  rc=$?
  t1=$(date +%s%N)
  # Stopped, not yet removed: its state, exit code and log are still there.
  state="$(podman inspect -f '{{.State.Status}} {{.State.ExitCode}}' "$ctr" 2>&1)"
  podman logs "$ctr" >"/tmp/kube-$name.log" 2>&1
  check "kube.$name.stop" "podman pod stop -t ${grace:-10} $pod: exit=$rc; $ctr: $state, $(((t1 - t0) / 1000000)) ms" \
    test "$rc" = 0 -a "$state" = "exited 0"
  check "kube.$name.stop_log" "$(grep -E "received|every cell stopped" "/tmp/kube-$name.log" | tr '\n' ' ')" \
    grep -q "every cell stopped; exiting" "/tmp/kube-$name.log"
  [ "$state" = "exited 0" ] || { tail -n 20 "/tmp/kube-$name.log"; cat "/tmp/kube-$name.down"; }
  podman kube down "$file" >>"/tmp/kube-$name.down" 2>&1
  rc=$?
  left="$(podman ps -a --format '{{.Names}}' | grep -c -- "^$pod-")"
  check "kube.$name.down" "podman kube down exit=$rc; containers of $pod left: $left" test "$rc" = 0 -a "$left" = 0
}
kube_limits() {  # kube_limits NAME CONTAINER: the cell hog's limits from inside, in one exec
  local out
  out="$(podman exec "$2" /bin/cat /sys/fs/cgroup/cells/hog/memory.max \
    /sys/fs/cgroup/cells/hog/pids.max /sys/fs/cgroup/memory.max /proc/1/comm /proc/1/cgroup 2>&1)"
  check "kube.$1.limits" "inside: cells/hog/memory.max and pids.max: $(head -n 2 <<<"$out" | tr '\n' ' ')" \
    test "$(head -n 2 <<<"$out" | tr '\n' ' ')" = "67108864 32 "
  # What podman made of the other fields (docs/containers.md), as evidence.
  echo "kube.$1: the container's memory.max, PID 1 and its cgroup: $(tail -n +3 <<<"$out" | tr '\n' ' '); $(podman inspect -f 'stop signal {{.Config.StopSignal}}, stop timeout {{.Config.StopTimeout}} s, privileged {{.HostConfig.Privileged}}, cgroupns {{.HostConfig.CgroupMode}}, pidns {{.HostConfig.PidMode}}, memory {{.HostConfig.Memory}}, memory reservation {{.HostConfig.MemoryReservation}}, cpu shares {{.HostConfig.CpuShares}}, nano cpus {{.HostConfig.NanoCpus}}, healthcheck {{.Config.Healthcheck}}' "$2" 2>&1)"
}

# The Pod, as it is.
out="$(kube_play /payload/kube/pod.yaml 2>&1)"
rc=$?
check kube.pod.play "podman kube play pod.yaml exit=$rc: $(tr '\n' ' ' <<<"$out")" test "$rc" = 0
if [ "$rc" = 0 ] && wait_for 90 answers adapters-bulkhead; then
  pass kube.pod.run "steady answered in adapters-bulkhead"
else
  fail kube.pod.run "no answer within 90 s; logs: $(podman logs adapters-bulkhead 2>&1 | tail -n 5 | tr '\n' ' ')"
fi
kube_limits pod adapters-bulkhead
kube_down pod /tmp/play-pod.yaml adapters-bulkhead

# The DaemonSet: podman 4.3 refuses it ("YAML document does not contain any supported kube kind");
# on one node it is the same as a Deployment of one replica, so it is played with that kind.
out="$(kube_play /payload/kube/daemonset.yaml 2>&1)"
rc=$?
echo "kube play daemonset.yaml as it is: exit=$rc: $(tr '\n' ' ' <<<"$out")"
[ "$rc" != 0 ] || podman kube down /tmp/play-daemonset.yaml >/dev/null 2>&1
sed 's/^kind: DaemonSet$/kind: Deployment/' /payload/kube/daemonset.yaml >/tmp/daemonset-as-deployment.yaml
out="$(kube_play /tmp/daemonset-as-deployment.yaml 2>&1)"
rc=$?
check kube.daemonset.play "podman kube play (kind Deployment) exit=$rc: $(tr '\n' ' ' <<<"$out")" test "$rc" = 0
# Its pod is DEPLOYMENT-pod-N; the container POD-bulkhead.
ds="$(podman ps --format '{{.Names}}' | grep -m 1 -E '^bulkhead-pod.*-bulkhead$')"
if [ "$rc" = 0 ] && [ -n "$ds" ] && wait_for 90 answers "$ds"; then
  pass kube.daemonset.run "steady answered in $ds; hostPath /run/bulkhead: $(ls /run/bulkhead | tr '\n' ' ')"
else
  fail kube.daemonset.run "no answer within 90 s; containers: $(podman ps -a --format '{{.Names}}' | tr '\n' ' '); logs: $(podman logs "$ds" 2>&1 | tail -n 5 | tr '\n' ' ')"
fi
kube_limits daemonset "$ds"
# bulkheadd removes its sockets from the hostPath when it stops in order; SIGKILL would leave them.
before="$(ls /run/bulkhead/*.sock 2>/dev/null | tr '\n' ' ')"
kube_down daemonset /tmp/play-daemonset-as-deployment.yaml "$ds"
left="$(ls /run/bulkhead/*.sock 2>/dev/null | tr '\n' ' ')"
check kube.daemonset.sockets_removed "hostPath /run/bulkhead before: ${before:-none}; after: ${left:-none}" \
  test -n "$before" -a -z "$left"

echo "containers-vm: $failures check(s) failed"
[ "$failures" -eq 0 ]
