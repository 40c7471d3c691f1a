#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs the Debian packages that building bulkheadd, bulkheadctl, the examples and the demo
# needs: what `make demo` installs, and nothing more (no test framework, no sanitizer toolchain,
# no VM). scripts/install-deps.sh installs these and the rest, for `make test`. Idempotent.
set -euo pipefail

bash "$(dirname "$0")/apt-ensure.sh" \
  build-essential cmake pkg-config ccache \
  libuv1-dev libtomlplusplus-dev nlohmann-json3-dev libcli11-dev libsystemd-dev \
  libhttp-parser-dev liburing-dev
