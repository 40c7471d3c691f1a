#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs what `make bench` runs beside bulkheadd (docs/benchmarks.md): HAProxy, the peer the bench
# measures bulkheadd against (Debian 12 packages 2.6), and wrk, the HTTP load generator used as a
# cross-check of the bench's own. Idempotent; not needed by `make test`. (liburing-dev, for the
# bench's io_uring echo worker, is a build dependency: scripts/install-build-deps.sh.)
set -euo pipefail
here="$(dirname "$0")"

bash "$here/apt-ensure.sh" haproxy wrk
