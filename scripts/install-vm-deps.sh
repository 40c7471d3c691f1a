#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs the Debian packages the VM tests (tests/vm/) need: qemu to boot a VM, a Debian cloud
# kernel (cgroup v2 with cpu, memory, pids built in) and a static busybox for the initramfs;
# mmdebstrap and e2fsprogs for vm.systemd's Debian image.
# Idempotent: skips apt entirely when everything is already installed. Works as root or via sudo.
set -euo pipefail

packages=(
  qemu-system-x86         # qemu-system-x86_64, run with -accel tcg (no KVM needed)
  linux-image-cloud-amd64 # /boot/vmlinuz-*-cloud-amd64
  busybox-static          # /bin/busybox, statically linked: the VM's shell and tools
  cpio                    # packs the initramfs (newc format)
  mmdebstrap              # vm.systemd: builds the Debian 12 root file system (tests/vm/systemd/)
  e2fsprogs               # mkfs.ext4 -d: the systemd image and the payload disk
)

bash "$(dirname "$0")/apt-ensure.sh" "${packages[@]}"
