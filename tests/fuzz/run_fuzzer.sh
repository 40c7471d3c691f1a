#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run_fuzzer.sh FUZZER SEED_DIR WORK_DIR SECONDS: runs one libFuzzer binary for SECONDS of wall
# time, starting from the checked-in seed corpus SEED_DIR (read only) plus what earlier runs found
# in WORK_DIR/corpus (new inputs go there). A crash, leak, timeout or sanitizer report fails the
# run (exit status non-zero); the reproducer is left in WORK_DIR/artifacts/ and printed. Used by
# the ctest entries fuzz.* and by `make fuzz FUZZ_SECONDS=...`.
set -euo pipefail
if [ $# -ne 4 ]; then
  echo "usage: $0 FUZZER SEED_DIR WORK_DIR SECONDS" >&2
  exit 2
fi
fuzzer="$1" seeds="$2" work="$3" seconds="$4"
[ -d "$seeds" ] || { echo "$0: no seed corpus at $seeds" >&2; exit 2; }
mkdir -p "$work/corpus" "$work/artifacts"

# The sanitizers stop at the first finding and fail the process; leaks are findings too.
export ASAN_OPTIONS="${ASAN_OPTIONS:-halt_on_error=1:abort_on_error=1:detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:abort_on_error=1:print_stacktrace=1}"

# -timeout: one input running longer than 10 s is a hang; -rss_limit_mb bounds a runaway.
status=0
"$fuzzer" "$work/corpus" "$seeds" \
  -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
  -artifact_prefix="$work/artifacts/" -print_final_stats=1 || status=$?
if [ "$status" -ne 0 ]; then
  echo "$0: $(basename "$fuzzer") failed (exit $status); reproducers:" >&2
  ls -l "$work/artifacts/" >&2
  echo "replay one with: $fuzzer $work/artifacts/<file>" >&2
fi
exit "$status"
