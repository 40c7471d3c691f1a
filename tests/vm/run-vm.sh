#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Boots a throwaway VM (qemu TCG, Debian cloud kernel, busybox initramfs) that mounts cgroup v2
# with cpu, memory, pids and io at /sys/fs/cgroup, runs one scenario script as root and powers off.
# Never touches the host's cgroups. Exit: 0 = PASS marker seen, 1 = FAIL (including no boot or
# timeout), 77 = SKIP (qemu, kernel image or busybox-static not installed). See docs/vm-tests.md.
#
# Usage: run-vm.sh (--scenario FILE | --init-config FILE | --root-image IMAGE --payload DIR)
#                  [--bin FILE]... [--expect TEXT]... [--timeout SECONDS] [--log FILE] [--keep]
#   --scenario FILE  shell script run by busybox sh inside the VM (cwd /, PATH has /bin); its exit
#                    status decides PASS (0) or FAIL. Binaries given with --bin sit in /bin.
#   --init-config FILE
#                    init mode: the kernel starts /bin/bulkheadd as PID 1 (rdinit=, so --bin it)
#                    with FILE as /etc/bulkhead/bulkhead.toml; nothing else runs first. A cell
#                    prints the BOOTED and result markers itself. Needs no --scenario (one given is
#                    copied to /scenario.sh for the cells).
#   --root-image IMAGE
#                    root-image mode: boots IMAGE (an ext4 file system with its own /sbin/init, made
#                    by systemd/build-image.sh) as /dev/vda, as a snapshot (IMAGE is never written).
#                    The initramfs only loads the virtio modules of the kernel
#                    (/lib/modules/<version>), mounts /dev/vda and switch_roots to /sbin/init. The
#                    image prints the BOOTED and result markers itself.
#   --payload DIR    root-image mode: DIR's files become a read-only ext4 disk, /dev/vdb in the
#                    guest; the image mounts it at /payload and runs /payload/run.sh.
#   --expect TEXT    the console log must also contain a line with TEXT, else FAIL (repeatable),
#                    e.g. the kernel's "reboot: Power down" after a clean power-off.
#   --bin FILE       executable to copy into the VM's /bin (debug info stripped), with every shared
#                    library ldd lists. Repeat it for each binary the scenario needs.
#   --timeout SEC    hard limit for the whole VM run, boot included (default 240).
#   --log FILE       where to keep the serial console log (default: a temporary file).
#   --keep           keep the staging directory and initramfs (its path is printed).
# Environment: BULKHEAD_VM_KERNEL overrides the kernel image (default: newest
# /boot/vmlinuz-*-cloud-amd64); BULKHEAD_VM_QEMU overrides qemu-system-x86_64.
set -euo pipefail

readonly kSkip=77
readonly kPassMarker='BULKHEAD-VM-RESULT: PASS'
readonly kFailMarker='BULKHEAD-VM-RESULT: FAIL'
readonly kBootMarker='BULKHEAD-VM-BOOTED'

scenario=""
bins=()
init_config=""
root_image=""
payload=""
disk_args=()
expects=()
timeout_s=240
log=""
keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --scenario) scenario="$2"; shift 2 ;;
    --bin) bins+=("$2"); shift 2 ;;
    --init-config) init_config="$2"; shift 2 ;;
    --root-image) root_image="$2"; shift 2 ;;
    --payload) payload="$2"; shift 2 ;;
    --expect) expects+=("$2"); shift 2 ;;
    --timeout) timeout_s="$2"; shift 2 ;;
    --log) log="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    *) echo "run-vm.sh: unknown argument: $1" >&2; exit 2 ;;
  esac
done
[ -n "$scenario" ] || [ -n "$init_config" ] || [ -n "$root_image" ] || {
  echo "run-vm.sh: --scenario FILE, --init-config FILE or --root-image IMAGE is required" >&2; exit 2; }
[ -z "$root_image" ] || { [ -r "$root_image" ] && [ -d "$payload" ]; } || {
  echo "run-vm.sh: --root-image needs a readable IMAGE and --payload DIR" >&2; exit 2; }
[ -z "$scenario" ] || [ -r "$scenario" ] || {
  echo "run-vm.sh: cannot read scenario $scenario" >&2; exit 2; }
[ -z "$init_config" ] || [ -r "$init_config" ] || {
  echo "run-vm.sh: cannot read init config $init_config" >&2; exit 2; }

# --- Prerequisites: missing packages skip, anything else broken fails. ---------------------------
install_hint="install them with: sudo bash scripts/install-vm-deps.sh (Debian packages qemu-system-x86, linux-image-cloud-amd64, busybox-static, cpio, e2fsprogs)"
qemu="${BULKHEAD_VM_QEMU:-$(command -v qemu-system-x86_64 || true)}"
if [ -z "$qemu" ]; then
  echo "SKIP: qemu-system-x86_64 not found; $install_hint"
  exit $kSkip
fi
kernel="${BULKHEAD_VM_KERNEL:-$(ls /boot/vmlinuz-*-cloud-amd64 2>/dev/null | sort -V | tail -n 1 || true)}"
if [ -z "$kernel" ] || [ ! -e "$kernel" ]; then
  echo "SKIP: no kernel image /boot/vmlinuz-*-cloud-amd64; $install_hint"
  exit $kSkip
fi
busybox=""
for candidate in /bin/busybox /usr/bin/busybox; do
  # Only the static build runs in an initramfs without its libraries.
  if [ -x "$candidate" ] && ! ldd "$candidate" >/dev/null 2>&1; then busybox="$candidate"; break; fi
done
if [ -z "$busybox" ]; then
  echo "SKIP: no statically linked busybox; $install_hint"
  exit $kSkip
fi
if ! command -v cpio >/dev/null; then
  echo "SKIP: cpio not found; $install_hint"
  exit $kSkip
fi
# Root-image mode loads the kernel's own virtio modules (virtio_blk is not built in).
modules_dir=""
if [ -n "$root_image" ]; then
  kernel_version="$(basename "$kernel")"
  kernel_version="${kernel_version#vmlinuz-}"
  modules_dir="/lib/modules/$kernel_version"
  if [ ! -r "$modules_dir/modules.dep" ]; then
    echo "SKIP: no modules for kernel $kernel_version ($modules_dir/modules.dep); $install_hint"
    exit $kSkip
  fi
  mkfs_ext4="$(PATH="$PATH:/usr/sbin:/sbin" command -v mkfs.ext4 || true)"
  if [ -z "$mkfs_ext4" ]; then
    echo "SKIP: mkfs.ext4 not found (Debian package e2fsprogs); $install_hint"
    exit $kSkip
  fi
fi
if [ ! -r "$kernel" ]; then
  echo "FAIL: kernel image $kernel is installed but not readable by uid $(id -u) (Debian installs it mode 0600 on some releases): run as root or chmod a+r it"
  exit 1
fi

# --- Stage the initramfs tree. -------------------------------------------------------------------
stage="$(mktemp -d "${TMPDIR:-/tmp}/bulkhead-vm.XXXXXX")"
cleanup() {
  if [ "$keep" -eq 1 ]; then echo "run-vm.sh: kept $stage"; else rm -rf "$stage"; fi
}
trap cleanup EXIT
root="$stage/root"
mkdir -p "$root"/{bin,dev,proc,sys,tmp,lib,lib64}

cp "$busybox" "$root/bin/busybox"
for applet in $("$busybox" --list); do
  [ "$applet" = busybox ] || ln -sf busybox "$root/bin/$applet"
done

# Copies a shared library (or the dynamic loader) to the same absolute path inside the VM.
copy_lib() {
  local lib="$1"
  mkdir -p "$root$(dirname "$lib")"
  [ -e "$root$lib" ] || cp -L "$lib" "$root$lib"
}
for bin in "${bins[@]}"; do
  [ -x "$bin" ] || { echo "FAIL: --bin $bin is not an executable file"; exit 1; }
  cp -L "$bin" "$root/bin/$(basename "$bin")"
  # Debug info is of no use in the VM and would make up most of the initramfs (a RelWithDebInfo
  # bulkheadd is 17 MB with it, about 1 MB without); gzip and the TCG guest's unpacking pay for it.
  if command -v strip >/dev/null; then
    strip --strip-debug "$root/bin/$(basename "$bin")" 2>/dev/null || true
  fi
  # ldd lines: "libc.so.6 => /lib/.../libc.so.6 (0x...)", "/lib64/ld-linux-x86-64.so.2 (0x...)",
  # "linux-vdso.so.1 (0x...)" (in the kernel, nothing to copy); static binaries make ldd fail.
  if libs="$(ldd "$bin" 2>/dev/null)"; then
    if grep -q "not found" <<<"$libs"; then
      echo "FAIL: ldd $bin: a library is missing:"; echo "$libs"; exit 1
    fi
    for lib in $(awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i }' <<<"$libs"); do
      copy_lib "$lib"
    done
  fi
done
[ -z "$scenario" ] || cp "$scenario" "$root/scenario.sh"
# no_timer_check: on a loaded host the TCG guest's early IO-APIC timer check can fail and panic the
# kernel ("IO-APIC + timer doesn't work!"; seen in vm.systemd and vm.supervisor_compartments under
# a load average of 20): the check measures the emulator's speed, not the VM's timer, so every VM
# boots without it.
append="console=ttyS0 panic=-1 quiet no_timer_check"
if [ -n "$init_config" ]; then
  [ -x "$root/bin/bulkheadd" ] || { echo "FAIL: --init-config needs --bin .../bulkheadd"; exit 1; }
  mkdir -p "$root/etc/bulkhead"
  cp "$init_config" "$root/etc/bulkhead/bulkhead.toml"
  # bulkheadd mounts /proc, /dev, /sys, cgroup2 and /run itself and attaches stdio to the console.
  append="$append rdinit=/bin/bulkheadd"
fi

if [ -n "$root_image" ]; then
  # The modules that make /dev/vda appear, each after what it needs (modules.dep lists a module's
  # dependencies so that the last one is loaded first, as modprobe does). ext4 is built in.
  declare -A staged=()
  module_order=()
  stage_module() {  # stage_module RELATIVE_PATH (as in modules.dep)
    local rel="$1" dep deps
    [ -z "${staged[$rel]:-}" ] || return 0
    staged[$rel]=1
    deps="$(awk -v m="$rel:" '$1 == m { for (i = NF; i > 1; i--) print $i }' "$modules_dir/modules.dep")"
    for dep in $deps; do stage_module "$dep"; done
    mkdir -p "$root/lib/modules"
    local name
    name="$(basename "$rel")"
    case "$name" in
      *.ko) cp "$modules_dir/$rel" "$root/lib/modules/$name" ;;
      *.ko.xz) xz -dc "$modules_dir/$rel" >"$root/lib/modules/${name%.xz}"; name="${name%.xz}" ;;
      *.ko.zst) zstd -qdc "$modules_dir/$rel" >"$root/lib/modules/${name%.zst}"; name="${name%.zst}" ;;
      *) echo "FAIL: cannot load module $rel"; exit 1 ;;
    esac
    module_order+=("$name")
  }
  for module in virtio_pci virtio_blk; do
    rel="$(awk -F: -v m="$module" '{ n = $1; sub(/.*\//, "", n); sub(/\.ko.*/, "", n) } n == m { print $1; exit }' "$modules_dir/modules.dep")"
    if [ -n "$rel" ]; then
      stage_module "$rel"
    elif ! grep -q "/$module.ko" "$modules_dir/modules.builtin"; then
      echo "FAIL: kernel $kernel_version has no module $module, built in or loadable"
      exit 1
    fi
  done
  printf '%s\n' "${module_order[@]}" >"$root/modules"
  # PID 1 of the initramfs, only until switch_root: on any failure it prints the FAIL marker and
  # powers off, so a broken image fails at once instead of at the timeout.
  cat >"$root/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox mount -t devtmpfs devtmpfs /dev
exec </dev/console >/dev/console 2>&1
export PATH=/bin
fail() {
  echo "BULKHEAD-VM-RESULT: FAIL initramfs: $*"
  poweroff -f
}
mount -t proc proc /proc
mount -t sysfs sysfs /sys
while read -r module; do
  insmod "/lib/modules/$module" || fail "insmod $module"
done </modules
# virtio_blk probes asynchronously: wait for the disk (10 s is 100 times what it takes).
tries=0
while [ ! -b /dev/vda ]; do
  tries=$((tries + 1))
  [ "$tries" -le 1000 ] || fail "no /dev/vda"
  usleep 10000
done
mkdir -p /newroot
mount -t ext4 /dev/vda /newroot || fail "cannot mount /dev/vda"
# An absolute symlink (/sbin/init -> /lib/systemd/systemd) only resolves after switch_root.
[ -L /newroot/sbin/init ] || [ -x /newroot/sbin/init ] || fail "the image has no /sbin/init"
umount /proc /sys
mount --move /dev /newroot/dev
exec switch_root /newroot /sbin/init
INIT
  chmod 755 "$root/init"
  # The payload disk: ext4 made from DIR (mkfs.ext4 -d needs no root), 32 MiB above its size.
  payload_kib=$(($(du -sk "$payload" | cut -f1) + 32768))
  "$mkfs_ext4" -q -F -L bulkhead-payload -d "$payload" "$stage/payload.ext4" "${payload_kib}K" \
    >/dev/null ||
    { echo "FAIL: mkfs.ext4 -d $payload"; exit 1; }
  disk_args=(-drive "file=$root_image,format=raw,if=virtio,snapshot=on"
             -drive "file=$stage/payload.ext4,format=raw,if=virtio,readonly=on")
fi

# PID 1. The kernel starts it without stdin/stdout (the initramfs has no /dev/console node, so
# that building it needs no root), hence the redirect once devtmpfs is mounted.
[ -n "$root_image" ] || cat >"$root/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox mount -t devtmpfs devtmpfs /dev
exec </dev/console >/dev/console 2>&1
export PATH=/bin HOME=/ BULKHEAD_IN_VM=1
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t tmpfs tmpfs /tmp
mount -t cgroup2 -o nsdelegate cgroup2 /sys/fs/cgroup || echo "init: mounting cgroup2 failed"
read -r uptime _ </proc/uptime
echo  # ends whatever the firmware left on the console line, so the marker starts a line
echo "BULKHEAD-VM-BOOTED uptime_s=$uptime kernel=$(uname -r) cpus=$(nproc) controllers=$(cat /sys/fs/cgroup/cgroup.controllers)"
sh /scenario.sh
rc=$?
read -r uptime _ </proc/uptime
if [ "$rc" -eq 0 ]; then
  echo "BULKHEAD-VM-RESULT: PASS uptime_s=$uptime"
else
  echo "BULKHEAD-VM-RESULT: FAIL scenario exited with status $rc uptime_s=$uptime"
fi
poweroff -f
INIT
chmod 755 "$root/init"

initrd="$stage/initramfs.cpio.gz"
(cd "$root" && find . -print0 | cpio --null --create --format=newc --owner=0:0 --quiet) \
  | gzip -1 >"$initrd"

# --- Boot. ---------------------------------------------------------------------------------------
log_note="console output above"
if [ -n "$log" ]; then log_note="log: $log"; else log="$stage/console.log"; fi
mkdir -p "$(dirname "$log")"
: >"$log"
echo "run-vm.sh: kernel $kernel, initramfs $(du -k "$initrd" | cut -f1) KiB, timeout ${timeout_s}s"
start_ns=$(date +%s%N)
boot_ms=""
# KVM is deliberately not used (-accel tcg): it is not available on every machine that runs this.
# -nic none: no network card, so no iPXE option ROM either.
set +e
timeout --kill-after=5 "$timeout_s" "$qemu" \
  -accel tcg -cpu max -m 1024 -smp 2 -nographic -no-reboot -nic none \
  -kernel "$kernel" -initrd "$initrd" "${disk_args[@]}" \
  -append "$append" </dev/null 2>&1 |
  while IFS= read -r line; do
    # Drop the carriage returns and the terminal escapes (screen clears, resets) that SeaBIOS
    # and the kernel send, so markers start lines and the log reads as text.
    line="$(sed -e 's/\x1b\[[0-9;?]*[A-Za-z]//g' -e 's/\x1b[c78]//g' -e 's/\r$//' <<<"$line")"
    printf '%s\n' "$line" | tee -a "$log"
    if [ -z "$boot_ms" ] && [[ "$line" == "$kBootMarker"* ]]; then
      boot_ms=$((($(date +%s%N) - start_ns) / 1000000))
      echo "run-vm.sh: booted after ${boot_ms} ms (host wall clock)" | tee -a "$log"
    fi
  done
qemu_status=${PIPESTATUS[0]}
set -e
total_ms=$((($(date +%s%N) - start_ns) / 1000000))
echo "run-vm.sh: qemu exited with status $qemu_status after ${total_ms} ms" | tee -a "$log"

if [ "$qemu_status" -eq 124 ] || [ "$qemu_status" -eq 137 ]; then
  echo "FAIL: VM did not finish within ${timeout_s}s ($log_note)"
  exit 1
fi
if ! grep -q "^$kBootMarker" "$log"; then
  echo "FAIL: VM did not boot to /init (no $kBootMarker line; $log_note)"
  exit 1
fi
if grep -q "^$kFailMarker" "$log"; then
  echo "FAIL: $(grep "^$kFailMarker" "$log" | head -n 1)"
  exit 1
fi
for text in "${expects[@]}"; do
  if ! grep -qF -- "$text" "$log"; then
    echo "FAIL: the console log has no line with \"$text\" ($log_note)"
    exit 1
  fi
done
if grep -q "^$kPassMarker" "$log"; then
  echo "PASS (${total_ms} ms total)"
  exit 0
fi
echo "FAIL: no result marker (scenario crashed the VM or poweroff happened early; $log_note)"
exit 1
