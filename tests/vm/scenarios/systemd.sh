#!/bin/bash
# SPDX-License-Identifier: MIT
# vm.systemd's checks, run as /payload/run.sh in the Debian 12 guest booted by run-vm.sh
# --root-image (systemd 252 as PID 1; docs/vm-tests.md, "vm.systemd"). The payload disk holds the
# bulkhead .deb built by the suite, bulkhead-test-worker and the configs under conf/. Each check
# prints "PASS|FAIL <check> <evidence>"; the script exits 1 if any failed. Every wait polls with a
# deadline (wait_for); nothing sleeps for synchronisation.
set -uo pipefail
export PATH=/usr/sbin:/usr/bin:/sbin:/bin SYSTEMD_PAGER='' SYSTEMD_COLORS=0
readonly payload=/payload
readonly unit=bulkheadd.service
readonly config=/etc/bulkhead/bulkhead.toml
# pass, fail, check, wait_for and $failures.
source /payload/checks.sh
show() { systemctl show -p "$1" --value "$unit"; }
cgroup_root() { echo "/sys/fs/cgroup$(show ControlGroup)"; }
# The pids in a cell's cgroup and its generation leaves (cells/NAME/gen-N), space-separated.
cell_pids() {
  cat "$(cgroup_root)/cells/$1/cgroup.procs" "$(cgroup_root)/cells/$1"/gen-*/cgroup.procs 2>/dev/null |
    tr '\n' ' ' | sed 's/ $//'
}
# Journal lines of the current (or last) run of the unit at PRIORITY or more urgent.
journal_run() {
  journalctl -q -o cat --no-pager "_SYSTEMD_INVOCATION_ID=$(show InvocationID)" -p "$1"
}
# Journal lines at PRIORITY or more urgent that bulkheadd or bulkheadctl (ExecReload=) wrote to
# stderr since `errors_since` (epoch seconds). Matched by SYSLOG_IDENTIFIER, which the stream
# header carries, not by invocation ID: journald looks that up from the writer's pid, and a process
# that exits at once (a refused config) can be gone before journald reads its stream, leaving the
# lines without _SYSTEMD_INVOCATION_ID (seen once in six runs).
errors_since=0
journal_errors() {
  journalctl -q -o cat --no-pager --since "@$errors_since" -p "$1" \
    SYSLOG_IDENTIFIER=bulkheadd SYSLOG_IDENTIFIER=bulkheadctl
}
# journald reads a unit's stderr asynchronously: poll for broken.toml's error.
config_error_logged() { journal_errors err | grep -q "cells.echo.max_concurrent"; }
use_config() { cp "$payload/conf/$1" "$config"; }
# all_gone PID...: none of these processes exists any more.
all_gone() {
  local pid
  for pid in "$@"; do kill -0 "$pid" 2>/dev/null && return 1; done
  return 0
}
cell_running() { bulkheadctl status "$1" 2>/dev/null | grep -q "^● $1 - running "; }

echo "systemd-vm: $(systemctl --version | head -n 1); $(uname -r)"
deb="$(ls "$payload"/bulkhead_*.deb)"

# --- Install: nothing started, nothing enabled (docs/vm-tests.md: the first install only installs).
out="$(dpkg -i "$deb" 2>&1)" || { echo "$out"; fail install.dpkg "dpkg -i exited non-zero"; exit 1; }
state="$(systemctl is-active "$unit")"
enabled="$(systemctl is-enabled "$unit")"
check install.not_started "is-active=$state is-enabled=$enabled" \
  test "$state" = inactive -a "$enabled" = disabled

# --- The shipped unit with the shipped config: starts, logs no warning (LimitNOFILE=).
systemctl start "$unit"
# bulkheadd logs its descriptor budget before READY=1, and "READY=1 sent" last: once that line is
# in the journal, so is any warning of the start.
ready_logged() { journal_run info | grep -q "READY=1 sent to the service manager"; }
wait_for 20 ready_logged
warnings="$(journal_run warning)"
budget="$(journal_run info | grep -o 'client connection budget: [^"]*' | head -n 1)"
check shipped.no_warning "state=$(show ActiveState) LimitNOFILE=$(show LimitNOFILE) [$budget] warnings=[${warnings}]" \
  bash -c '[ "$1" = active ] && [ -z "$2" ] && [ -n "$3" ]' _ "$(show ActiveState)" "$warnings" "$budget"
systemctl stop "$unit"

# --- READY=1 gates activation: the slow cell's worker sends READY=1 4 s after it starts.
use_config good.toml
start_s=$SECONDS
systemctl start "$unit"
rc=$?
exec_us="$(show ExecMainStartTimestampMonotonic)"
active_us="$(show ActiveEnterTimestampMonotonic)"
gap_ms=$(((active_us - exec_us) / 1000))
slow_line="$(bulkheadctl status slow 2>&1 | head -n 3 | tr '\n' ' ')"
check ready.gates_activation \
  "systemctl start rc=$rc after ~$((SECONDS - start_s)) s; ExecMainStart to ActiveEnter ${gap_ms} ms; slow: $slow_line" \
  test "$rc" -eq 0 -a "$gap_ms" -ge 4000 -a "$(show ActiveState)" = active
check ready.cell_running "$slow_line" cell_running slow

# --- Cells in the unit's delegated subtree, with their limits.
root="$(cgroup_root)"
main_pid="$(show MainPID)"
echo_pids="$(cell_pids echo)"
slow_pids="$(cell_pids slow)"
check cgroup.supervisor_leaf "MainPID $main_pid: $(cat /proc/"$main_pid"/cgroup)" \
  test "$(cat /proc/"$main_pid"/cgroup)" = "0::$(show ControlGroup)/supervisor"
for pid in $echo_pids; do
  check cgroup.echo_worker "pid $pid: $(cat /proc/"$pid"/cgroup)" \
    grep -qx "0::$(show ControlGroup)/cells/echo/gen-[0-9]*" /proc/"$pid"/cgroup
done
check cgroup.one_worker_each "echo=[$echo_pids] slow=[$slow_pids]" \
  test "$(wc -w <<<"$echo_pids")" -eq 1 -a "$(wc -w <<<"$slow_pids")" -eq 1
limits="cpu.max=$(cat "$root/cells/echo/cpu.max") memory.max=$(cat "$root/cells/echo/memory.max") pids.max=$(cat "$root/cells/echo/pids.max")"
check cgroup.limits "$root/cells/echo: $limits" \
  test "$limits" = "cpu.max=20000 100000 memory.max=67108864 pids.max=32"
check cgroup.delegated "Delegate=$(show Delegate) DelegateControllers=$(show DelegateControllers) subtree_control=$(cat "$root/cells/cgroup.subtree_control")" \
  grep -qw memory "$root/cells/cgroup.subtree_control"
echo "bulkheadctl call echo: $(bulkheadctl call echo --data hello 2>&1)"

# --- systemctl reload applies a new limit live (same workers) and waits for the outcome.
use_config reloaded.toml
systemctl reload "$unit"
rc=$?
limits="memory.max=$(cat "$root/cells/echo/memory.max") pids.max=$(cat "$root/cells/echo/pids.max")"
check reload.limits_live "rc=$rc $limits echo=[$(cell_pids echo)] slow=[$(cell_pids slow)] (before: [$echo_pids] [$slow_pids])" \
  test "$rc" -eq 0 -a "$limits" = "memory.max=134217728 pids.max=64" \
  -a "$(cell_pids echo)" = "$echo_pids" -a "$(cell_pids slow)" = "$slow_pids"
# A refused reload fails `systemctl reload`, logs at err, changes nothing.
use_config broken.toml
errors_since=$(date +%s)
systemctl reload "$unit" 2>/dev/null
rc=$?
wait_for 10 config_error_logged
errors="$(journal_errors err | tr '\n' '|')"
check reload.refused_fails "systemctl reload rc=$rc state=$(show ActiveState) pids=[$(cell_pids echo)] err:[$errors]" \
  test "$rc" -ne 0 -a "$(show ActiveState)" = active -a "$(cell_pids echo)" = "$echo_pids"
check reload.refused_logged_at_err "err:[$errors]" grep -q "cells.echo.max_concurrent" <<<"$errors"
check reload.no_nothing_started "err:[$errors]" bash -c "! grep -q 'nothing started' <<<\"\$1\"" _ "$errors"
use_config good.toml

# --- kill -9 of bulkheadd: systemd restarts it; no worker of the old run is left.
old_pids="$main_pid $(cell_pids echo) $(cell_pids slow)"
restarts="$(show NRestarts)"
kill -KILL "$main_pid"
restarted() {
  [ "$(show NRestarts)" -gt "$restarts" ] && [ "$(show ActiveState)" = active ]
}
wait_for 120 restarted
check kill9.restarted "NRestarts $restarts -> $(show NRestarts), MainPID $main_pid -> $(show MainPID), state $(show ActiveState)" restarted
check kill9.old_workers_gone "old pids [$old_pids]; now echo=[$(cell_pids echo)] slow=[$(cell_pids slow)]" \
  all_gone $old_pids
check kill9.one_worker_each "echo=[$(cell_pids echo)] slow=[$(cell_pids slow)]" \
  test "$(wc -w <<<"$(cell_pids echo)")" -eq 1 -a "$(wc -w <<<"$(cell_pids slow)")" -eq 1

# --- Upgrade under load: dpkg -i of a higher version (upgrade/: the same files repacked with the
# version bumped). postinst re-executes bulkheadd on the new binary (bulkheadctl reexec,
# docs/reexec.md) instead of restarting it: while two clients keep calling the slow cell, no
# request fails or is rejected, MainPID and every worker keep their pid, systemd counts no restart,
# the counters continue and the new image sends READY=1 again (after its RELOADING=1).
upgrade_deb="$(ls "$payload"/upgrade/bulkhead_*.deb)"
load_dir=/run/bulkhead-vm-load
mkdir -p "$load_dir"
# load_client N: one bulkheadctl call after another on the slow cell (a "sleep 50" each, so
# requests are in flight when the re-exec drains) until $load_dir/stop exists; after each reply
# "OK FAILED REJECTED OTHER" in $load_dir/N (OTHER: any other exit, or an OK that is not the answer).
load_client() {
  local ok=0 failed=0 rejected=0 other=0 out rc
  while [ ! -e "$load_dir/stop" ]; do
    out="$(bulkheadctl --timeout 60s call slow --data "sleep 50" 2>&1)"
    rc=$?
    case "$rc" in
      0) [ "$out" = "slept 50" ] && ok=$((ok + 1)) || other=$((other + 1)) ;;
      4) rejected=$((rejected + 1)) ;;
      5) failed=$((failed + 1)) ;;
      *) other=$((other + 1)) ;;
    esac
    if [ "$rc:$out" != "0:slept 50" ] && [ ! -e "$load_dir/first.$1" ]; then
      echo "rc=$rc $out" >"$load_dir/first.$1"
    fi
    echo "$ok $failed $rejected $other" >"$load_dir/$1.tmp" && mv "$load_dir/$1.tmp" "$load_dir/$1"
  done
}
# load_sum FIELD: the clients' sum of field FIELD (1 ok, 2 failed, 3 rejected, 4 other).
load_sum() { cat "$load_dir"/[0-9] 2>/dev/null | awk -v f="$1" '{ s += $f } END { print s + 0 }'; }
load_ok_reaches() { [ "$(load_sum 1)" -ge "$1" ]; }
# requests_total CELL OUTCOME: bulkhead_requests_total of CELL summed over the OUTCOME's reasons.
requests_total() {
  bulkheadctl metrics | awk -v cell="cell=\"$1\"" -v outcome="outcome=\"$2\"" \
    'index($0, "bulkhead_requests_total{") == 1 && index($0, cell) && index($0, outcome) { s += $NF }
     END { print s + 0 }'
}
# The reexec object's count, whatever the order of its keys (status JSON sorts them: "binary"
# comes before "count").
reexec_count() {
  bulkheadctl status --json | grep -o '"reexec":{[^}]*' | grep -o '"count":[0-9]*' | grep -o '[0-9]*$'
}
ready_lines() { journal_run info | grep -c "READY=1 sent to the service manager"; }
ready_lines_reach() { [ "$(ready_lines)" -ge "$1" ]; }

main_pid="$(show MainPID)"
echo_pids="$(cell_pids echo)"
slow_pids="$(cell_pids slow)"
restarts="$(show NRestarts)"
ok_before="$(requests_total slow ok)"
failed_before="$(requests_total slow failed)"
rejected_before="$(requests_total slow rejected)"
ready_before="$(ready_lines)"
load_pids=()
for client in 1 2; do
  load_client "$client" &
  load_pids+=($!)
done
wait_for 60 load_ok_reaches 10
ok_at_upgrade="$(load_sum 1)"
out="$(dpkg -i "$upgrade_deb" 2>&1)"
rc=$?
ok_at_done="$(load_sum 1)"
wait_for 60 load_ok_reaches $((ok_at_done + 10))
ok_went_on=$?
touch "$load_dir/stop"
wait "${load_pids[@]}"
tally="ok $(load_sum 1), failed $(load_sum 2), rejected $(load_sum 3), other $(load_sum 4)"
firsts="$(cat "$load_dir"/first.* 2>/dev/null | tr '\n' '|')"
echo "upgrade: dpkg -i rc=$rc: $(tr '\n' '|' <<<"$out")"
check upgrade.dpkg_reexecuted "rc=$rc installed $(dpkg-query -W -f '${Version}' bulkhead), ok replies $ok_at_upgrade before dpkg -i and $ok_at_done after" \
  bash -c '[ "$1" -eq 0 ] && [ "$2" = "$(dpkg-deb -f "$3" Version)" ] && grep -q "^re-executed: " <<<"$4" &&
    ! grep -q "restarting bulkheadd.service instead" <<<"$4" && [ "$5" -ge 10 ]' \
  _ "$rc" "$(dpkg-query -W -f '${Version}' bulkhead)" "$upgrade_deb" "$out" "$ok_at_upgrade"
check upgrade.no_request_lost "$tally ($ok_at_done by the end of dpkg -i); first non-OK: [$firsts]" \
  test "$(load_sum 2)" -eq 0 -a "$(load_sum 3)" -eq 0 -a "$(load_sum 4)" -eq 0 -a "$ok_went_on" -eq 0
check upgrade.same_pids "MainPID $main_pid -> $(show MainPID), echo [$echo_pids] -> [$(cell_pids echo)], slow [$slow_pids] -> [$(cell_pids slow)], NRestarts $restarts -> $(show NRestarts)" \
  test "$(show MainPID)" = "$main_pid" -a "$(cell_pids echo)" = "$echo_pids" \
  -a "$(cell_pids slow)" = "$slow_pids" -a "$(show NRestarts)" = "$restarts" -a -n "$echo_pids"
# Without the re-exec the old image would go on running its deleted file.
exe="$(readlink "/proc/$main_pid/exe")"
check upgrade.new_binary "/proc/$main_pid/exe -> $exe" test "$exe" = /usr/sbin/bulkheadd
ok_after="$(requests_total slow ok)"
check upgrade.counters_continue "slow ok $ok_before -> $ok_after (+$(load_sum 1) replies), failed $failed_before -> $(requests_total slow failed), rejected $rejected_before -> $(requests_total slow rejected)" \
  test "$ok_after" -ge $((ok_before + $(load_sum 1))) \
  -a "$(requests_total slow failed)" -eq "$failed_before" -a "$(requests_total slow rejected)" -eq "$rejected_before"
check upgrade.reexec_count "supervisor.reexec.count $(reexec_count)" test "$(reexec_count)" = 1
# RELOADING=1 before the drain puts the unit in "reloading"; the new image's READY=1 ends it.
wait_for 10 ready_lines_reach $((ready_before + 1))
check upgrade.ready_again "READY=1 lines $ready_before -> $(ready_lines), $(show ActiveState)/$(show SubState)" \
  test "$(ready_lines)" -eq $((ready_before + 1)) -a "$(show ActiveState)" = active -a "$(show SubState)" = running

# --- systemctl restart stays a full restart: a new MainPID and new workers.
systemctl restart "$unit"
rc=$?
check restart.full "rc=$rc MainPID $main_pid -> $(show MainPID), echo [$echo_pids] -> [$(cell_pids echo)], state $(show ActiveState)" \
  test "$rc" -eq 0 -a "$(show MainPID)" != "$main_pid" -a "$(cell_pids echo)" != "$echo_pids" \
  -a "$(show ActiveState)" = active

# --- A refused re-exec falls back to dh's restart, said on stderr: dpkg -i of the same version again
# while the config file differs from the one in force (the new image would read it: refused).
use_config reloaded.toml
main_pid="$(show MainPID)"
out="$(dpkg -i "$upgrade_deb" 2>&1)"
rc=$?
unit_active() { [ "$(show ActiveState)" = active ]; }
wait_for 60 unit_active
check upgrade.refused_restarts "rc=$rc MainPID $main_pid -> $(show MainPID), state $(show ActiveState): $(tr '\n' '|' <<<"$out")" \
  bash -c '[ "$1" -eq 0 ] && [ "$2" != "$3" ] && [ "$4" = active ] &&
    grep -q "differs from the config in force" <<<"$5" && grep -q "restarting bulkheadd.service instead" <<<"$5"' \
  _ "$rc" "$(show MainPID)" "$main_pid" "$(show ActiveState)" "$out"
use_config good.toml

# --- systemctl stop: the cells' cgroups are empty.
pids="$(show MainPID) $(cell_pids echo) $(cell_pids slow)"
systemctl stop "$unit"
rc=$?
populated="$(grep populated "$root/cgroup.events" 2>/dev/null || echo "cgroup removed")"
stopped_empty() {
  [ "$rc" -eq 0 ] && { [ ! -e "$root" ] || grep -qx "populated 0" "$root/cgroup.events"; } &&
    all_gone $pids
}
check stop.empty "rc=$rc state=$(show ActiveState) $root: $populated; pids [$pids] gone" stopped_empty

# --- A broken config fails the start once (RestartPreventExitStatus=3), logged at err.
use_config broken.toml
errors_since=$(date +%s)
systemctl start "$unit" 2>/dev/null
rc=$?
wait_for 10 config_error_logged
errors="$(journal_errors err | tr '\n' '|')"
check broken.start_fails_once "systemctl start rc=$rc state=$(show ActiveState) result=$(show Result) status=$(show ExecMainStatus) NRestarts=$(show NRestarts)" \
  test "$rc" -ne 0 -a "$(show ActiveState)" = failed -a "$(show ExecMainStatus)" = 3
check broken.logged_at_err "journalctl -p err SYSLOG_IDENTIFIER=bulkheadd: [$errors]" grep -q "cells.echo.max_concurrent" <<<"$errors"
echo "systemctl status: $(systemctl status "$unit" 2>&1 | grep -E 'Active:|Process:|Main PID:' | tr -s ' ' | tr '\n' '|')"
systemctl reset-failed "$unit"

# --- dpkg -r stops the service; dpkg --purge removes the enablement.
use_config good.toml
systemctl enable "$unit" 2>/dev/null
systemctl start "$unit"
pids="$(show MainPID) $(cell_pids echo) $(cell_pids slow)"
out="$(dpkg -r bulkhead 2>&1)" || echo "$out"
removed_stopped() { [ "$(systemctl is-active "$unit")" != active ] && all_gone $pids; }
check remove.stopped "dpkg -r: state=$(systemctl is-active "$unit"), pids [$pids] gone" removed_stopped
out="$(dpkg --purge bulkhead 2>&1)" || echo "$out"
links="$(find /etc/systemd/system -name 'bulkheadd*' 2>/dev/null | tr '\n' ' ')"
check purge.not_enabled "is-enabled=$(systemctl is-enabled "$unit" 2>&1 | head -n 1) links=[$links] /etc/bulkhead $(test -e /etc/bulkhead && echo present || echo gone)" \
  test -z "$links" -a ! -e /etc/bulkhead -a ! -e /lib/systemd/system/bulkheadd.service

echo "systemd-vm: $failures check(s) failed"
[ "$failures" -eq 0 ]
