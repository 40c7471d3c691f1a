#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs what `make bench` runs beside bulkheadd (docs/benchmarks.md): HAProxy, the peer the bench
# measures bulkheadd against (Debian 12 packages 2.6), nginx (1.22), the second peer of the HTTP
# run's wrk stages, and wrk, the independent HTTP load generator that drives them. Idempotent; not
# needed by `make test`. (liburing-dev, for the bench's io_uring echo worker, is a build
# dependency: scripts/install-build-deps.sh.)
#
# The bench runs its own nginx, on 127.0.0.1 with its own configuration; Debian's package also
# enables and starts a service on port 80 of every address. When this script is what installed
# nginx, on a host run by systemd, that service is stopped and disabled again (an nginx installed
# before is left as it was).
set -euo pipefail
here="$(dirname "$0")"

had_nginx=yes
dpkg-query -W -f='${Status}' nginx 2>/dev/null | grep -q "install ok installed" || had_nginx=no

bash "$here/apt-ensure.sh" haproxy nginx wrk

if [ "$had_nginx" = no ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo systemctl disable --now nginx.service
fi
