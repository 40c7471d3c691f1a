#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs every Debian package that building, testing and demoing bulkhead needs, the VM tests'
# included (scripts/install-vm-deps.sh). Idempotent.
set -euo pipefail
here="$(dirname "$0")"

bash "$here/apt-ensure.sh" \
  build-essential cmake pkg-config \
  libuv1-dev libtomlplusplus-dev nlohmann-json3-dev libcli11-dev \
  libgtest-dev libgmock-dev

# The asan-ubsan build and its libFuzzer targets (clang, compiler-rt), and `make lint`
# (clang-tidy; scripts/lint.sh reads compile_commands.json with python3).
bash "$here/apt-ensure.sh" \
  clang libclang-rt-14-dev clang-tidy python3

bash "$here/install-vm-deps.sh"
