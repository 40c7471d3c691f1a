#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs every Debian package that building, testing and demoing bulkhead needs, the VM tests'
# included (scripts/install-vm-deps.sh): what `make test` needs. `make demo` installs only the
# first group (scripts/install-build-deps.sh). Idempotent.
set -euo pipefail
here="$(dirname "$0")"

# Building bulkheadd, bulkheadctl, the examples and the demo.
bash "$here/install-build-deps.sh"

# The tests: GoogleTest, the metrics tests' scrapers (curl, prometheus's promtool), and the HTTP
# cells' client and worker (curl; python3's http.server, tests/e2e/http_worker.py).
bash "$here/apt-ensure.sh" \
  libgtest-dev libgmock-dev curl prometheus python3

# The HTTP cells' tests (docs/http.md) run real HTTP servers as workers on fd 3 (tests/fixtures/http/):
# gunicorn serving a Flask app, Node's http module, Python's http.server; and real clients: curl,
# Python's http.client and ab (apache2-utils).
bash "$here/apt-ensure.sh" \
  gunicorn python3-flask nodejs apache2-utils

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
