#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# unit_verify_test.sh UNIT BULKHEADD BULKHEADCTL: `systemd-analyze verify` on
# packaging/bulkheadd.service. verify wants the Exec*= binaries to exist, so it checks a copy whose
# /usr/sbin/bulkheadd and /usr/bin/bulkheadctl are the built ones; man pages are checked by the package test, once installed (--man=no here). verify
# exits 0 on some problems (an unknown key is only a warning), so any output also fails the test,
# and a copy with a known mistake must be caught, or the check itself is broken.
# Exit: 0 pass, 1 fail, 77 skip (no systemd-analyze).
set -euo pipefail
unit="$1"
bulkheadd="$2"
bulkheadctl="$3"

if ! command -v systemd-analyze >/dev/null; then
  echo "SKIP: systemd-analyze not installed (Debian package systemd)"
  exit 77
fi
tmp="$(mktemp -d /tmp/bulkhead-unit-XXXXXX)"
trap 'rm -rf "$tmp"' EXIT

# verify: 0 when systemd-analyze verify exits 0 and prints nothing about UNIT_FILE.
verify() {
  local out rc=0
  out="$(systemd-analyze verify --man=no "$1" 2>&1)" || rc=$?
  if [ "$rc" -ne 0 ] || [ -n "$out" ]; then
    printf 'systemd-analyze verify %s: exit %s\n%s\n' "$1" "$rc" "$out"
    return 1
  fi
}

sed -e "s|/usr/sbin/bulkheadd|$bulkheadd|g" -e "s|/usr/bin/bulkheadctl|$bulkheadctl|g" "$unit" \
  >"$tmp/bulkheadd.service"
grep -q "^ExecStart=$bulkheadd " "$tmp/bulkheadd.service" || {
  echo "FAIL: no ExecStart=/usr/sbin/bulkheadd line in $unit"
  exit 1
}
verify "$tmp/bulkheadd.service" || { echo "FAIL: $unit does not verify"; exit 1; }

# The check can fail: a misspelt key and a missing binary are reported.
mkdir "$tmp/broken"
sed 's/^KillMode=/KilMode=/' "$tmp/bulkheadd.service" >"$tmp/broken/bulkheadd.service"
if verify "$tmp/broken/bulkheadd.service" >/dev/null; then
  echo "FAIL: systemd-analyze verify did not catch a misspelt key (KilMode=)"
  exit 1
fi
sed "s|$bulkheadd|$tmp/no-such-bulkheadd|g" "$tmp/bulkheadd.service" >"$tmp/broken/bulkheadd.service"
if verify "$tmp/broken/bulkheadd.service" >/dev/null; then
  echo "FAIL: systemd-analyze verify did not catch a missing ExecStart binary"
  exit 1
fi

# What the unit promises (issue 6, "Under systemd").
for line in "Type=notify" "Delegate=cpu memory pids" "ExecReload=/usr/bin/bulkheadctl reload" \
  "KillMode=mixed" "RuntimeDirectory=bulkhead" "Restart=on-failure" "RestartPreventExitStatus=3" \
  "LimitNOFILE=65536"; do
  grep -qxF "$line" "$unit" || { echo "FAIL: $unit lacks the line: $line"; exit 1; }
done
echo "PASS: $unit verifies"
