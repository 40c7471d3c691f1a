#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# postinst_test.sh POSTINST: runs packaging/maintscripts/postinst as dpkg does at an upgrade
# (`configure 0.0.9`) against fake systemctl, deb-systemd-helper, deb-systemd-invoke and
# bulkheadctl (first on PATH; bulkheadctl and /run/systemd/system through the script's test seams,
# BULKHEAD_TEST_POSTINST_CTL and BULKHEAD_TEST_POSTINST_SYSTEMD), and checks for each outcome of
# `bulkheadctl reexec` whether bulkheadd.service is restarted: never while a re-exec is under way
# (exit 75, docs/reexec.md "The Debian package"). The fakes answer at once: nothing waits.
# Exit: 0 pass, 1 fail.
set -euo pipefail
postinst="$1"

tmp="$(mktemp -d /tmp/bulkhead-postinst-XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/bin" "$tmp/systemd"

# systemctl: is-active answers $tmp/active's exit code (0: active); every call is logged.
cat >"$tmp/bin/systemctl" <<'EOF'
#!/bin/sh
echo "systemctl $*" >>"$FAKE_DIR/calls"
case " $* " in
*" is-active "*) exit "$(cat "$FAKE_DIR/active")" ;;
esac
exit 0
EOF
cat >"$tmp/bin/deb-systemd-helper" <<'EOF'
#!/bin/sh
echo "${0##*/} $*" >>"$FAKE_DIR/calls"
EOF
cp "$tmp/bin/deb-systemd-helper" "$tmp/bin/deb-systemd-invoke"
# bulkheadctl: the Nth call exits with the Nth line of $tmp/ctl-exits (and says so on stderr, as
# the real one does for 1 and 75), logging its arguments and the socket it was pointed at.
cat >"$tmp/bin/bulkheadctl" <<'EOF'
#!/bin/sh
echo "bulkheadctl $* (BULKHEAD_SOCKET='$BULKHEAD_SOCKET' RUNTIME_DIRECTORY=$RUNTIME_DIRECTORY)" >>"$FAKE_DIR/calls"
n=$(grep -c '^bulkheadctl ' "$FAKE_DIR/calls")
code=$(sed -n "${n}p" "$FAKE_DIR/ctl-exits")
case "$code" in
0) echo "re-executed: bulkheadd 0.1.0, pid 4242, re-exec 1" ;;
75) echo "bulkheadctl: reexec: still under way when the wait ended (draining); bulkheadd goes on with it" >&2 ;;
"") echo "fake bulkheadctl: call $n not expected" >&2; code=99 ;;
*) echo "bulkheadctl: reexec failed, bulkheadd goes on as it was: execve: Exec format error" >&2 ;;
esac
exit "$code"
EOF
chmod +x "$tmp/bin/"*

failures=0
fail() {
  echo "FAIL: $1"
  sed 's/^/  /' "$tmp/calls" "$tmp/stderr" 2>/dev/null || true
  failures=$((failures + 1))
}

# run ACTIVE CTL_EXITS... : one postinst configure 0.0.9 with the service's is-active exit code
# and bulkheadctl's exit codes in order; its calls in $tmp/calls, its stderr in $tmp/stderr.
run() {
  echo "$1" >"$tmp/active"
  shift
  printf '%s\n' "$@" >"$tmp/ctl-exits"
  : >"$tmp/calls"
  local rc=0
  env PATH="$tmp/bin:$PATH" FAKE_DIR="$tmp" BULKHEAD_SOCKET=/elsewhere/control.sock \
    BULKHEAD_TEST_POSTINST_CTL="$tmp/bin/bulkheadctl" BULKHEAD_TEST_POSTINST_SYSTEMD="$tmp/systemd" \
    sh "$postinst" configure 0.0.9 >/dev/null 2>"$tmp/stderr" || rc=$?
  [ "$rc" -eq 0 ] || fail "postinst exited $rc (bulkheadctl exits: $*)"
}
restarted() { grep -qxF "deb-systemd-invoke restart bulkheadd.service" "$tmp/calls"; }
ctl_calls() { grep '^bulkheadctl ' "$tmp/calls" | sed 's/ (.*//' | paste -sd, -; }

# The re-exec went ahead: no restart.
run 0 0
restarted && fail "restarted after a re-exec that went ahead"
[ "$(ctl_calls)" = "bulkheadctl reexec" ] || fail "bulkheadctl calls: $(ctl_calls)"
grep -qxF "bulkheadctl reexec (BULKHEAD_SOCKET='' RUNTIME_DIRECTORY=/run/bulkhead)" "$tmp/calls" ||
  fail "bulkheadctl was not pointed at the unit's RuntimeDirectory= only"

# Refused or failed: restarted, saying so on stderr.
run 0 1
restarted || fail "not restarted after a re-exec that failed"
grep -qF "bulkhead: bulkheadd did not re-execute its new binary (above): restarting" "$tmp/stderr" ||
  fail "no word on stderr of the restart"

# Still under way when bulkheadctl's wait ended, then done: waited for, not restarted.
run 0 75 0
restarted && fail "restarted while a re-exec was under way (it went ahead)"
[ "$(ctl_calls)" = "bulkheadctl reexec,bulkheadctl reexec --join" ] ||
  fail "bulkheadctl calls after 75: $(ctl_calls) (expected reexec, then reexec --join)"

# Still under way past bulkheadd's own bound: left alone, said on stderr.
run 0 75 75
restarted && fail "restarted while a re-exec was still under way past its bound"
grep -qF "bulkhead: bulkheadd's re-exec is still under way" "$tmp/stderr" ||
  fail "no word on stderr of the re-exec left under way"

# Under way, then refused (a cell still starting past the settling's bound): restarted.
run 0 75 1
restarted || fail "not restarted after a re-exec under way was refused"
grep -qF "restarting bulkheadd.service instead" "$tmp/stderr" || fail "no word of the restart"

# A service that is not active: restarted as dh does, no re-exec asked.
run 3
restarted || fail "an inactive service was not handed to deb-systemd-invoke restart"
[ -z "$(ctl_calls)" ] || fail "bulkheadctl called for an inactive service: $(ctl_calls)"

# No systemd running (a chroot, a container build): nothing is re-executed or restarted.
rmdir "$tmp/systemd"
run 0 0
{ restarted || [ -n "$(ctl_calls)" ]; } && fail "acted without systemd running"

if [ "$failures" -ne 0 ]; then
  echo "FAIL: $failures check(s) of $postinst failed"
  exit 1
fi
echo "PASS: $postinst restarts bulkheadd only when its re-exec failed, never while one is under way"
