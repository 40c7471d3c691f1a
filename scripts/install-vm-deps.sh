#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs the Debian packages the VM tests (tests/vm/) need: qemu to boot a VM, a Debian cloud
# kernel (cgroup v2 with cpu, memory, pids built in) and a static busybox for the initramfs.
# Idempotent: skips apt entirely when everything is already installed. Works as root or via sudo.
set -euo pipefail

packages=(
  qemu-system-x86         # qemu-system-x86_64, run with -accel tcg (no KVM needed)
  linux-image-cloud-amd64 # /boot/vmlinuz-*-cloud-amd64
  busybox-static          # /bin/busybox, statically linked: the VM's shell and tools
  cpio                    # packs the initramfs (newc format)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
