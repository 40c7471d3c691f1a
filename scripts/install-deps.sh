#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs every Debian package that building, testing and demoing bulkhead needs, the VM tests'
# included (scripts/install-vm-deps.sh). Idempotent.
set -euo pipefail
here="$(dirname "$0")"

bash "$here/apt-ensure.sh" \
  build-essential cmake pkg-config \
  libuv1-dev libtomlplusplus-dev nlohmann-json3-dev libcli11-dev \
  libgtest-dev libgmock-dev \
  libhttp-parser-dev curl prometheus

bash "$here/install-vm-deps.sh"
