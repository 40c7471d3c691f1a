#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# customize.sh ROOT KEY: mmdebstrap's customize hook for build-image.sh. Turns the bookworm tree at
# ROOT into a test guest: the root file system from /dev/vda, no login prompts or first-boot
# questions, and bulkhead-vm-payload.service, which runs the payload disk's /payload/run.sh once
# the system is up (guest/bulkhead-vm-payload). KEY (the image's input hash) seeds the machine id.
set -euo pipefail
root="$1"
key="$2"
here="$(cd "$(dirname "$0")" && pwd)"

echo bulkhead-vm >"$root/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 bulkhead-vm\n' >"$root/etc/hosts"
# The snapshot is writable; no fsck pass (it is fresh every boot).
printf '/dev/vda / ext4 rw,relatime 0 0\n' >"$root/etc/fstab"
# A machine id makes every boot a normal one: an empty /etc/machine-id means "first boot", when
# systemd-firstboot may wait on the console for answers.
printf '%s\n' "$(printf '%s' "$key" | sha256sum | cut -c1-32)" >"$root/etc/machine-id"
# The payload runner owns the serial console: no getty on it, none on tty1.
for unit in serial-getty@ttyS0.service getty@tty1.service getty.target \
  systemd-timesyncd.service e2scrub_all.timer e2scrub_reap.service apt-daily.timer \
  apt-daily-upgrade.timer fstrim.timer proc-sys-fs-binfmt_misc.automount; do
  ln -sf /dev/null "$root/etc/systemd/system/$unit"
done

install -m 0755 "$here/bulkhead-vm-payload" "$root/usr/local/sbin/bulkhead-vm-payload"
install -m 0644 "$here/bulkhead-vm-payload.service" \
  "$root/etc/systemd/system/bulkhead-vm-payload.service"
mkdir -p "$root/etc/systemd/system/multi-user.target.wants" "$root/payload"
ln -sf /etc/systemd/system/bulkhead-vm-payload.service \
  "$root/etc/systemd/system/multi-user.target.wants/bulkhead-vm-payload.service"
