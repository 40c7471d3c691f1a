#!/bin/sh
# SPDX-License-Identifier: MIT
# VM bench scenario (busybox sh, run by the VM's /init as root; see tests/vm/run-vm.sh): issue 26's
# three workloads on real cgroup v2, with bulkhead-bench-adaptive (bench/adaptive_bench.cc), each
# cell in its own cgroup. `make bench-vm` runs it; the figures are in docs/benchmarks.md. It judges
# nothing: its exit status says only whether every run could run.
#   cpu        cpu_max 20%, `cpu US` per request, queue_timeout 50 ms, the sweep of fixed limits
#              and adaptive
#   memory     memory_max 69M, each request holds 6 MiB for 100 ms, the same sweep: about ten
#              fit, as 24 MiB in issue 26's 256M (in a TCG guest touching 24 MiB takes ~1 s, past
#              the 1 s deadline, so the sizes are scaled down, the ratio kept: 8 requests and the
#              worker's own ~5 MiB are 77% of memory.max, as 8 x 24 MiB + 5 MiB are of 256M;
#              64M, used before, put them at 83%, at the adaptive mode's 85% cut)
#   neighbours no cpu_max (the VM's 2 CPUs are the budget), a neighbour cell of 4 callers beside
#              fixed-64 and adaptive
set -u
# The bench finds bulkheadd and the worker as a build directory lays them out.
mkdir -p /bench/supervisor /bench/tests/helpers
ln -sf /bin/bulkheadd /bench/supervisor/bulkheadd
ln -sf /bin/bulkhead-test-worker /bench/tests/helpers/bulkhead-test-worker
status=0
# run SECONDS_PER_CELL ARGS...
run() {
  seconds="$1"
  shift
  echo "bench-vm: --seconds $seconds $*"
  /bin/bulkhead-bench-adaptive --bin-dir /bench --cgroup --clients 64 --seconds "$seconds" \
    --deadline-ms 1000 "$@" || status=1
}
# ~14 answers a second at 20% of a CPU: 20 s per cell, in 4 rounds of 5 s each loading every cell
# in turn, so that the sweep's cells (whose best is within a few answers of fixed-1 at this knee)
# differ by more than their noise, and a host whose load drifts moves them all alike.
# queue_timeout 50 ms, half the unloaded p99 (~100 ms here): issue 26 holds admitted requests
# within 2x the unloaded p99, and a request that waited in the queue for the one running is
# admitted, so the queue may add at most about one unloaded p99; at 100 ms no limit, fixed-1
# included (2.08x), got under 2x (docs/benchmarks.md, "The memory fit, and a quiet host").
run 20 --workload cpu --cpu-max 20% --work-us 10000 --rounds 4 --queue-timeout-ms 50
# ~3 answers a second at one at a time in the guest: the adaptive limit needs its first 50 answers
# at the floor and windows of 10 answers each to settle, most of a 30 s run; 30 s of warm-up per
# cell (every cell, for the same footing) measure the steady state. Goodput first, as issue 26
# judges this workload: the operator's latency_tolerance is 100% (the service time may double
# before the limit falls; the 1 s deadline is 4 to 5 times the unloaded p99), where the default
# 50% keeps the latency of the CPU-bound workload above. Memory is guarded by its own signals.
run 30 --workload memory --memory-max 69M --hold-mib 6 --hold-ms 100 --warmup-seconds 30 --rounds 4 \
  --latency-tolerance 100
run 8 --workload cpu --work-us 10000 --sweep 64 --neighbour-clients 4 --rounds 2
exit "$status"
