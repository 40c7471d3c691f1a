#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs every Debian package that building, testing and demoing bulkhead needs.
# Idempotent: skips apt entirely when everything is already installed.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  libuv1-dev libtomlplusplus-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev
)

# The VM tests (tests/vm/) need qemu, a cloud kernel and busybox: their own script.
bash "$(dirname "$0")/install-vm-deps.sh"

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
