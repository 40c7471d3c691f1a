# SPDX-License-Identifier: MIT
# bench_smoke: runs bulkhead-bench for about a second with tiny settings; passes if it exits 0 and
# printed its ratio line. Usage: cmake -DBENCH=... -DBIN_DIR=... -P smoke.cmake
execute_process(
  COMMAND ${BENCH} --bin-dir ${BIN_DIR} --seconds 0.6 --rounds 1 --connections 1 --payload 16
          --warmup-ms 20
  OUTPUT_VARIABLE out
  ERROR_VARIABLE err
  RESULT_VARIABLE rc
  TIMEOUT 50)
message("${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "bulkhead-bench exited with ${rc}\n${err}")
endif()
if(NOT out MATCHES "\nratio bulkheadd/direct: throughput [0-9.]+, p50 [0-9.]+")
  message(FATAL_ERROR "bulkhead-bench printed no ratio line\n${err}")
endif()
