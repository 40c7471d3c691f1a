#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# systemd_test.sh BUILD_DIR TEST_WORKER: vm.systemd (docs/vm-tests.md, "vm.systemd"). Builds the
# bulkhead .deb from BUILD_DIR with CPack, gets the Debian 12 systemd image with the package's
# runtime Depends (build-image.sh: built once per machine, then cached), and boots it with a
# payload disk holding the .deb, the same .deb repacked with a higher version (upgrade/: what an
# upgrade installs, without a second build), TEST_WORKER, the configs in conf/ and
# scenarios/systemd.sh as run.sh, which installs the package and checks it under systemd 252 as PID 1.
# Exit: 0 pass, 1 fail, 77 skip (a VM tool missing, not root for the first image build, or
# Debian's archive unreachable for it; the message says which).
set -euo pipefail
build="$(cd "$1" && pwd)"
worker="$2"
here="$(cd "$(dirname "$0")" && pwd)"
vm_dir="$(dirname "$here")"
tmp="$(mktemp -d /tmp/bulkhead-vm-systemd-XXXXXX)"
trap 'rm -rf "$tmp"' EXIT

start_s=$SECONDS
(cd "$tmp" && cpack -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/out" >"$tmp/cpack.log" 2>&1) ||
  { cat "$tmp/cpack.log"; echo "FAIL: cpack"; exit 1; }
deb="$(ls "$tmp"/out/bulkhead_*.deb)"
# "libc6 (>= 2.34), libstdc++6 (>= 12), a | b" -> "libc6,libstdc++6,a": the image must satisfy
# dpkg -i without apt.
depends="$(dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed -e 's/|.*//' -e 's/(.*)//' -e 's/ //g' |
  sed '/^$/d' | paste -sd, -)"
echo "systemd_test: $(basename "$deb") (Depends: $depends) in $((SECONDS - start_s)) s"
# The upgrade: the same files and maintainer scripts under a higher version ("+vm1" sorts after
# any version without it), so dpkg -i runs the upgrade path (postinst configure OLD-VERSION).
version="$(dpkg-deb -f "$deb" Version)"
mkdir -p "$tmp/upgrade" "$tmp/upgrade-out"
dpkg-deb -R "$deb" "$tmp/upgrade/tree"
sed -i "s/^Version: .*/Version: $version+vm1/" "$tmp/upgrade/tree/DEBIAN/control"
dpkg-deb --root-owner-group -b "$tmp/upgrade/tree" "$tmp/upgrade-out" >/dev/null
upgrade_deb="$(ls "$tmp"/upgrade-out/bulkhead_*.deb)"
dpkg --compare-versions "$(dpkg-deb -f "$upgrade_deb" Version)" gt "$version" ||
  { echo "FAIL: $upgrade_deb does not sort after $version"; exit 1; }

rc=0
image="$("$here/build-image.sh" --extra-packages "$depends")" || rc=$?
[ "$rc" -eq 0 ] || exit "$rc"  # 77 (SKIP) or 1, with build-image.sh's message on stderr
echo "systemd_test: image $image ready after $((SECONDS - start_s)) s"

payload="$tmp/payload"
mkdir -p "$payload/conf" "$payload/upgrade"
cp "$deb" "$payload/"
cp "$upgrade_deb" "$payload/upgrade/"
cp "$here"/conf/*.toml "$payload/conf/"
cp "$worker" "$payload/bulkhead-test-worker"
strip --strip-debug "$payload/bulkhead-test-worker" 2>/dev/null || true
install -m 0755 "$vm_dir/scenarios/systemd.sh" "$payload/run.sh"
install -m 0644 "$vm_dir/scenarios/checks.sh" "$payload/checks.sh"

exec bash "$vm_dir/run-vm.sh" --root-image "$image" --payload "$payload" \
  --timeout "${BULKHEAD_VM_SYSTEMD_TIMEOUT:-600}" --log "$build/tests/vm/systemd.console.log"
