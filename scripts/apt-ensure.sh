#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# apt-ensure.sh PACKAGE...: installs the Debian packages that are not installed yet. Idempotent:
# runs no apt at all when every package is present. Works as root, or through sudo.
set -euo pipefail

missing=()
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
# Wait for another apt or dpkg run (a parallel build step, unattended-upgrades) instead of failing.
lock=(-o DPkg::Lock::Timeout=900)
# A dpkg run that was interrupted (a machine stopped mid-install) leaves packages half configured,
# and apt refuses every install until they are finished: finish them first.
if [ -n "$($sudo dpkg --audit 2>/dev/null)" ]; then
  $sudo dpkg --configure -a
fi
$sudo apt-get "${lock[@]}" update -qq
$sudo apt-get "${lock[@]}" install -y -qq --no-install-recommends "${missing[@]}"
