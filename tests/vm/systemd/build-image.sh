#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds (once per machine, then cached) a minimal Debian 12 (bookworm) ext4 root filesystem image
# with systemd as init, for VM tests that need a real service manager (vm.systemd; docs/vm-tests.md,
# "The systemd image"). run-vm.sh --root-image boots it with the cloud kernel; the guest then mounts
# the payload disk (run-vm.sh --payload DIR) at /payload, runs /payload/run.sh as root once
# multi-user.target is reached, prints the BULKHEAD-VM-* markers on the serial console and powers off.
#
# Usage: build-image.sh [--extra-packages PKG[,PKG]...]... [--cache-dir DIR] [--size MIB]
#   --extra-packages  Debian packages to install besides systemd, systemd-sysv and dbus (e.g. the
#                     runtime Depends of the package under test); repeatable, comma-separated.
#   --cache-dir DIR   where images are kept (default $BULKHEAD_VM_CACHE, else /var/cache/bulkhead-vm).
#   --size MIB        the ext4 file system's size (default 1024); the image is a sparse file.
# Prints the image's path as the last line on stdout (progress goes to stderr). The image is named
# after a hash of its inputs: the package list, the suite, the apt sources (the host's
# /etc/apt/sources.list.d/debian.sources, or $BULKHEAD_VM_SOURCES), this script, guest/ and the
# size. Same inputs, same path: a second call returns at once. A build happens under a lock, into
# a temporary file renamed into place, so concurrent callers build it once and never see half an
# image. Callers must not write to it: boot it as a snapshot (run-vm.sh does).
# Exit: 0 image ready, 1 failure, 77 SKIP (mmdebstrap or mkfs.ext4 not installed, not root, or
# Debian's archive unreachable: the message says which).
set -euo pipefail

readonly kSkip=77
readonly kSuite=bookworm
here="$(cd "$(dirname "$0")" && pwd)"
packages=(systemd systemd-sysv dbus)
cache_dir="${BULKHEAD_VM_CACHE:-/var/cache/bulkhead-vm}"
sources="${BULKHEAD_VM_SOURCES:-/etc/apt/sources.list.d/debian.sources}"
size_mib=1024
while [ $# -gt 0 ]; do
  case "$1" in
    --extra-packages)
      IFS=', ' read -r -a extra <<<"$2"
      packages+=("${extra[@]}")
      shift 2
      ;;
    --cache-dir) cache_dir="$2"; shift 2 ;;
    --size) size_mib="$2"; shift 2 ;;
    *) echo "build-image.sh: unknown argument: $1" >&2; exit 2 ;;
  esac
done

install_hint="install them with: sudo bash scripts/install-vm-deps.sh (Debian packages mmdebstrap, e2fsprogs)"
for tool in mmdebstrap mkfs.ext4 flock sha256sum; do
  if ! command -v "$tool" >/dev/null && ! [ -x "/usr/sbin/$tool" ] && ! [ -x "/sbin/$tool" ]; then
    echo "SKIP: $tool not found; $install_hint" >&2
    exit $kSkip
  fi
done
PATH="$PATH:/usr/sbin:/sbin"
# mmdebstrap's root mode: the files must belong to root in the image, and mkfs.ext4 -d copies the
# owners it sees. (Its unshare mode would need user namespaces and subordinate ids.)
if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: building the systemd image needs root (mmdebstrap --mode=root); run as root once, later runs use the cache in $cache_dir" >&2
  exit $kSkip
fi
[ -r "$sources" ] || { echo "FAIL: cannot read the apt sources $sources" >&2; exit 1; }

# Sorted and unique, so the order of --extra-packages does not change the key.
mapfile -t packages < <(printf '%s\n' "${packages[@]}" | sed '/^$/d' | sort -u)
key="$({
  echo "suite=$kSuite size=$size_mib packages=${packages[*]}"
  cat "$sources" "$0"
  find "$here/guest" -type f | sort | xargs cat
} | sha256sum | cut -c1-16)"
image="$cache_dir/bookworm-systemd-$key.ext4"
if [ -s "$image" ]; then
  echo "build-image.sh: cached $image" >&2
  echo "$image"
  exit 0
fi

mkdir -p "$cache_dir"
exec 9>"$cache_dir/.lock"
flock 9
if [ -s "$image" ]; then  # another caller built it while we waited for the lock
  echo "$image"
  exit 0
fi

tmp="$(mktemp -d "$cache_dir/.build-XXXXXX")"
# --one-file-system: never into a /proc or /dev that an interrupted mmdebstrap left mounted.
trap 'rm -rf --one-file-system "$tmp"' EXIT
start_s=$SECONDS
echo "build-image.sh: building $image (${packages[*]}) from $sources" >&2
# --variant=essential: Essential: yes packages plus what --include pulls in (no apt, no man-db);
# the path-excludes drop documentation and translations nobody reads in a test VM. The archive is
# a snapshot on some hosts, so Valid-Until is not checked (as the host's apt does there).
# The customize hook runs after every package is configured: the guest's settings. The ext4 image
# is made from the finished tree after mmdebstrap has unmounted /proc, /sys and /dev from it.
set +e
mmdebstrap --mode=root --format=directory --variant=essential \
  --include="$(IFS=,; echo "${packages[*]}")" \
  --aptopt='Acquire::Check-Valid-Until "false"' \
  --aptopt='Acquire::Retries "3"' \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --customize-hook="bash '$here/guest/customize.sh' \"\$1\" '$key'" \
  "$kSuite" "$tmp/root" "$sources" >"$tmp/mmdebstrap.log" 2>&1
rc=$?
set -e
if [ "$rc" -ne 0 ]; then
  # apt's words for a mirror it cannot reach (DNS, connection, HTTP errors on the index files).
  if grep -qE "Temporary failure resolving|Could not resolve|Failed to fetch|Could not connect|Unable to connect|Connection failed|Network is unreachable|apt-get update failed" "$tmp/mmdebstrap.log"; then
    tail -n 20 "$tmp/mmdebstrap.log" >&2
    echo "SKIP: Debian's archive is unreachable from here (sources: $sources); the systemd image cannot be built" >&2
    exit $kSkip
  fi
  cat "$tmp/mmdebstrap.log" >&2
  echo "FAIL: mmdebstrap exited with status $rc (log above)" >&2
  exit 1
fi
mkfs.ext4 -q -F -L bulkhead-root -d "$tmp/root" "$tmp/image.ext4" "${size_mib}M" >/dev/null ||
  { echo "FAIL: mkfs.ext4 -d $tmp/root" >&2; exit 1; }
mv "$tmp/image.ext4" "$image"
echo "build-image.sh: built $image in $((SECONDS - start_s)) s ($(du -k "$image" | cut -f1) KiB used)" >&2
echo "$image"
