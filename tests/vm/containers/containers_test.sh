#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# containers_test.sh BUILD_DIR: vm.containers (docs/vm-tests.md, "vm.containers";
# docs/containers.md). Stages a minimal container root file system from BUILD_DIR (bulkheadd,
# bulkheadctl and bulkhead-test-worker with the libraries ldd lists, conf/bulkhead.toml, and the
# host's static busybox for sh, cat and grep), gets the
# Debian 12 systemd image with podman, crun and catatonit added (../systemd/build-image.sh: a cached
# variant of vm.systemd's image) and boots it with that tree as a tar on the payload disk, beside
# packaging/kubernetes/'s manifests, a ConfigMap made of conf/bulkhead.toml and the metric names
# the shipped dashboard and rules read; the guest imports the tree with `podman import` (no
# registry, no network) and runs ../scenarios/containers.sh.
# Exit: 0 pass, 1 fail, 77 skip (a VM tool missing, not root for the first image build, or
# Debian's archive unreachable for it; the message says which).
set -euo pipefail
build="$(cd "$1" && pwd)"
here="$(cd "$(dirname "$0")" && pwd)"
vm_dir="$(dirname "$here")"
tmp="$(mktemp -d /tmp/bulkhead-vm-containers-XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
start_s=$SECONDS

rc=0
image="$("$vm_dir/systemd/build-image.sh" --extra-packages podman,crun,conmon,catatonit --size 1536)" || rc=$?
[ "$rc" -eq 0 ] || exit "$rc"  # 77 (SKIP) or 1, with build-image.sh's message on stderr
echo "containers_test: image $image ready after $((SECONDS - start_s)) s"

# The container's root: each binary with every library ldd lists, at the same absolute paths.
root="$tmp/root"
mkdir -p "$root/usr/sbin" "$root/usr/bin" "$root/etc/bulkhead" "$root/run" "$root/tmp" \
  "$root/proc" "$root/sys" "$root/dev"
chmod 1777 "$root/tmp"
install -m 0755 "$build/supervisor/bulkheadd" "$root/usr/sbin/bulkheadd"
install -m 0755 "$build/ctl/bulkheadctl" "$root/usr/bin/bulkheadctl"
install -m 0755 "$build/tests/helpers/bulkhead-test-worker" "$root/usr/bin/bulkhead-test-worker"
for bin in "$root/usr/sbin/bulkheadd" "$root/usr/bin/bulkheadctl" "$root/usr/bin/bulkhead-test-worker"; do
  strip --strip-debug "$bin" 2>/dev/null || true
  ldd "$bin" | grep -oE '/[^ ]+' | while read -r lib; do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
  done
done
# A static busybox for the checks that look from inside (podman exec ... cat, grep).
mkdir -p "$root/bin"
cp /bin/busybox "$root/bin/busybox"
for applet in sh cat grep; do ln -s busybox "$root/bin/$applet"; done
cp "$here/conf/bulkhead.toml" "$root/etc/bulkhead/bulkhead.toml"
echo "root:x:0:0:root:/root:/bin/sh" >"$root/etc/passwd"
echo "root:x:0:" >"$root/etc/group"

payload="$tmp/payload"
mkdir -p "$payload"
tar -C "$root" --numeric-owner --owner=0 --group=0 -cf "$payload/rootfs.tar" .
install -m 0755 "$vm_dir/scenarios/containers.sh" "$payload/run.sh"
install -m 0644 "$vm_dir/scenarios/checks.sh" "$payload/checks.sh"
# packaging/kubernetes/ as shipped, and the ConfigMap bulkhead-config they mount: conf/bulkhead.toml.
mkdir -p "$payload/kube"
install -m 0644 "$here/../../../packaging/kubernetes/pod.yaml" \
  "$here/../../../packaging/kubernetes/daemonset.yaml" "$payload/kube/"
{
  printf 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bulkhead-config\ndata:\n  bulkhead.toml: |\n'
  sed 's/^/    /' "$here/conf/bulkhead.toml"
} >"$payload/kube/configmap.yaml"
# Every metric name the shipped dashboard and alerting rules read, for metrics.dashboard_names.
grep -ohE '\bbulkhead_[a-z_]+' "$here/../../../packaging/grafana/bulkhead.json" \
  "$here/../../../packaging/prometheus/bulkhead-alerts.yml" | sort -u >"$payload/metric_names.txt"
echo "containers_test: container root $(du -sk "$root" | cut -f1) KiB staged after $((SECONDS - start_s)) s"

# Not exec: the EXIT trap removes $tmp (the staged root, about 28 MB) when the VM is done.
rc=0
bash "$vm_dir/run-vm.sh" --root-image "$image" --payload "$payload" \
  --timeout "${BULKHEAD_VM_CONTAINERS_TIMEOUT:-1200}" --log "$build/tests/vm/containers.console.log" ||
  rc=$?
exit "$rc"
