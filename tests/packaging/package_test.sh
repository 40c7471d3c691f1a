#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# package_test.sh BUILD_DIR: the Debian package, end to end. Builds it with CPack from BUILD_DIR
# (into a temporary directory), checks it with lintian (no error, no warning), then, as root only,
# installs it with dpkg -i, checks what it installed (files, the conffile, man pages, the unit,
# the alerting rules with promtool, `bulkheadd --check-config` on the installed config, bash
# completion, a request served by the installed cell), removes it (dpkg -r: the conffile stays, as
# a conffile must) and purges it.
# Exit: 0 pass, 1 fail, 77 skip (not root, or a bulkhead package is already installed here).
set -euo pipefail
build="$(cd "$1" && pwd)"
tmp="$(mktemp -d /tmp/bulkhead-pkg-XXXXXX)"
installed=0
daemon_pid=""
cleanup() {
  if [ -n "$daemon_pid" ]; then kill -KILL "$daemon_pid" 2>/dev/null || true; fi
  if [ "$installed" -eq 1 ]; then dpkg_locked --purge bulkhead >/dev/null 2>&1 || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}
# dpkg ARGS...: dpkg, waiting (up to 5 min) while another dpkg or apt holds the dpkg lock.
dpkg_locked() {
  local out
  for _ in $(seq 1 600); do
    if out="$(command dpkg "$@" 2>&1)"; then
      printf '%s\n' "$out"
      return 0
    fi
    case "$out" in
      *"dpkg frontend lock"* | *"dpkg status database is locked"*) sleep 0.5 ;;
      *)
        printf '%s\n' "$out"
        return 1
        ;;
    esac
  done
  printf '%s\n' "$out"
  return 1
}

# --- Build and lint. ---
(cd "$tmp" && cpack -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/out" >"$tmp/cpack.log" 2>&1) ||
  { cat "$tmp/cpack.log"; fail "cpack"; }
deb="$(ls "$tmp"/out/bulkhead_*.deb)"
echo "built $(basename "$deb")"
dpkg-deb --info "$deb"
dpkg-deb --contents "$deb"

if command -v lintian >/dev/null; then
  lintian_args=(--fail-on error,warning --display-info)
  [ "$(id -u)" -eq 0 ] && lintian_args+=(--allow-root)
  lintian "${lintian_args[@]}" "$deb" || fail "lintian reports errors or warnings (above)"
  echo "lintian: no errors, no warnings"
else
  fail "lintian is not installed (scripts/install-deps.sh installs it)"
fi

# --- Install, check, remove: root on a machine without bulkhead installed. ---
if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: dpkg -i needs root (the package was built and linted)"
  exit 77
fi
if dpkg-query -W -f='${Status}' bulkhead 2>/dev/null | grep -q "installed"; then
  echo "SKIP: a bulkhead package is already installed here; not replacing it"
  exit 77
fi
installed=1
dpkg_locked -i "$deb" || fail "dpkg -i"

for f in /usr/sbin/bulkheadd /usr/bin/bulkheadctl /usr/lib/bulkhead/bulkhead-echo; do
  [ -x "$f" ] || fail "$f is not installed or not executable"
done
for f in /etc/bulkhead/bulkhead.toml /lib/systemd/system/bulkheadd.service \
  /usr/share/bash-completion/completions/bulkheadctl /usr/share/doc/bulkhead/copyright \
  /usr/share/doc/bulkhead/changelog.Debian.gz /usr/share/bulkhead/prometheus/bulkhead-alerts.yml \
  /usr/share/bulkhead/grafana/bulkhead.json; do
  [ -f "$f" ] || fail "$f is not installed"
done
# The installed rules load in Prometheus (docs/metrics.md, "Dashboard and alerts").
out="$(promtool check rules /usr/share/bulkhead/prometheus/bulkhead-alerts.yml 2>&1)" ||
  fail "promtool check rules on the installed rules: $out"
dpkg-query -W -f='${Conffiles}\n' bulkhead | grep -q "^ /etc/bulkhead/bulkhead.toml " ||
  fail "/etc/bulkhead/bulkhead.toml is not a conffile"

for page in /usr/share/man/man8/bulkheadd.8.gz /usr/share/man/man1/bulkheadctl.1.gz \
  /usr/share/man/man5/bulkhead.toml.5.gz; do
  [ -f "$page" ] || fail "$page is not installed"
  warnings="$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)" || fail "man -l $page"
  [ -z "$warnings" ] || fail "man -l $page: $warnings"
  MANWIDTH=80 man -l "$page" 2>/dev/null | grep -q "^NAME" || fail "man -l $page: no NAME section"
done

# Like nginx -t: the installed config is valid, a broken one is refused with exit 3.
out="$(/usr/sbin/bulkheadd --check-config --config /etc/bulkhead/bulkhead.toml 2>&1)" ||
  fail "bulkheadd --check-config on the installed config: $out"
[ "$out" = "/etc/bulkhead/bulkhead.toml: ok (1 cell)" ] || fail "unexpected --check-config output: $out"
printf '[cells.x]\nmax_concurrent = 0\n' >"$tmp/bad.toml"
rc=0
/usr/sbin/bulkheadd --check-config --config "$tmp/bad.toml" >"$tmp/bad.out" 2>&1 || rc=$?
[ "$rc" -eq 3 ] || fail "--check-config on a bad config exited $rc, not 3: $(cat "$tmp/bad.out")"
grep -q "bad.toml:2:18: cells.x.max_concurrent" "$tmp/bad.out" || fail "no file:line:col error: $(cat "$tmp/bad.out")"

# The installed unit verifies with its man pages present.
if command -v systemd-analyze >/dev/null; then
  out="$(systemd-analyze verify /lib/systemd/system/bulkheadd.service 2>&1)" ||
    fail "systemd-analyze verify: $out"
  [ -z "$out" ] || fail "systemd-analyze verify: $out"
fi

# The shipped cell serves after install (cgroup off: never touch this host's cgroups here).
mkdir "$tmp/run"
sed 's/^cgroup = "auto"/cgroup = "off"/' /etc/bulkhead/bulkhead.toml >"$tmp/installed.toml"
grep -q '^cgroup = "off"' "$tmp/installed.toml" || fail "the installed config has no cgroup line"
RUNTIME_DIRECTORY="$tmp/run" /usr/sbin/bulkheadd --config "$tmp/installed.toml" >"$tmp/daemon.log" 2>&1 &
daemon_pid=$!
answer=""
for _ in $(seq 1 500); do  # up to ~10 s, on a condition
  answer="$(/usr/bin/bulkheadctl --socket "$tmp/run/control.sock" call echo --data hello 2>/dev/null)" && break
  kill -0 "$daemon_pid" 2>/dev/null || break
  sleep 0.02
done
[ "$answer" = "hello" ] || { cat "$tmp/daemon.log"; fail "the installed echo cell did not answer hello: '$answer'"; }
kill -TERM "$daemon_pid"
rc=0
wait "$daemon_pid" || rc=$?
daemon_pid=""
[ "$rc" -eq 0 ] || { cat "$tmp/daemon.log"; fail "bulkheadd exited $rc after SIGTERM"; }

# Bash completion completes subcommands and cells.
if [ -f /usr/share/bash-completion/bash_completion ]; then
  completions="$(BULKHEAD_SOCKET="$tmp/none.sock" bash -c '
    source /usr/share/bash-completion/bash_completion
    source /usr/share/bash-completion/completions/bulkheadctl
    COMP_WORDS=(bulkheadctl st); COMP_CWORD=1; COMP_LINE="bulkheadctl st"; COMP_POINT=${#COMP_LINE}
    _bulkheadctl; echo "${COMPREPLY[*]}"')"
  [ "$completions" = "status start stop" ] || fail "completion of 'bulkheadctl st': '$completions'"
  completions="$(BULKHEAD_SOCKET="$tmp/none.sock" bash -c '
    source /usr/share/bash-completion/bash_completion
    source /usr/share/bash-completion/completions/bulkheadctl
    COMP_WORDS=(bulkheadctl restart --); COMP_CWORD=2; COMP_LINE="bulkheadctl restart --"
    COMP_POINT=${#COMP_LINE}
    _bulkheadctl; echo "${COMPREPLY[*]}"')"
  [ "$completions" = "--socket --timeout --help --no-block --all" ] ||
    fail "completion of 'bulkheadctl restart --': '$completions'"
fi

# Remove: the conffile stays (dpkg -r); purge removes it.
dpkg_locked -r bulkhead || fail "dpkg -r"
[ ! -e /usr/sbin/bulkheadd ] || fail "dpkg -r left /usr/sbin/bulkheadd"
[ -f /etc/bulkhead/bulkhead.toml ] || fail "dpkg -r removed the conffile"
dpkg_locked --purge bulkhead || fail "dpkg --purge"
installed=0
[ ! -e /etc/bulkhead ] || fail "dpkg --purge left /etc/bulkhead"
echo "PASS: package built, linted, installed, checked and removed"
