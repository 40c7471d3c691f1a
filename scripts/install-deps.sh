#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs every Debian package that building, testing and demoing bulkhead needs, the VM tests'
# included (scripts/install-vm-deps.sh). Idempotent.
set -euo pipefail
here="$(dirname "$0")"

bash "$here/apt-ensure.sh" \
  build-essential cmake pkg-config ccache \
  libuv1-dev libtomlplusplus-dev nlohmann-json3-dev libcli11-dev libsystemd-dev \
  libgtest-dev libgmock-dev \
  libhttp-parser-dev curl prometheus

# The Debian package and the unit (packaging/, tests/packaging/): cpack's dpkg-shlibdeps needs file;
# lintian checks the package; systemd-analyze (systemd) verifies the unit; man-db and
# bash-completion check the man pages and the completion once installed.
bash "$here/apt-ensure.sh" \
  dpkg-dev file lintian systemd man-db bash-completion

# The asan-ubsan build and its libFuzzer targets (clang, compiler-rt), and `make lint`
# (clang-tidy; scripts/lint.sh reads compile_commands.json with python3).
bash "$here/apt-ensure.sh" \
  clang libclang-rt-14-dev clang-tidy python3

bash "$here/install-vm-deps.sh"
