#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs what `make bench` runs beside bulkheadd (docs/benchmarks.md): HAProxy, the peer the bench
# measures bulkheadd against (Debian 12 packages 2.6), and wrk, the HTTP load generator used as a
# cross-check of the bench's own; liburing-dev, with which the bench's echo worker gets its io_uring
# mode (the `uring` target: what the client hop costs without a system call per read and write).
# Idempotent. `make test` installs only liburing-dev of these (scripts/install-deps.sh), for
# bench_smoke.
set -euo pipefail
here="$(dirname "$0")"

bash "$here/apt-ensure.sh" haproxy wrk liburing-dev
