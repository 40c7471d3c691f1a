# SPDX-License-Identifier: MIT
# Check helpers of the root-image scenarios (systemd.sh, containers.sh), sourced from the payload
# as /payload/checks.sh. Each check prints "PASS|FAIL <check> <evidence>" and counts failures in
# $failures; nothing sleeps for synchronisation, every wait polls with a deadline.
failures=0

pass() { echo "PASS $1 $2"; }
fail() { echo "FAIL $1 $2"; failures=$((failures + 1)); }
# check NAME EVIDENCE COMMAND...: PASS when COMMAND succeeds.
check() {
  local name="$1" evidence="$2"
  shift 2
  if "$@"; then pass "$name" "$evidence"; else fail "$name" "$evidence"; fi
}
# wait_for SECONDS COMMAND...: polls COMMAND every 50 ms until it succeeds; 1 at the deadline.
wait_for() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.05
  done
}
