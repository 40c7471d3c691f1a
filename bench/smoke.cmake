# SPDX-License-Identifier: MIT
# bench_smoke: runs bulkhead-bench for about a second with tiny settings, over frames and then over
# HTTP (--http); passes if each exits 0 and printed its ratio or summary line. HAProxy is among the
# targets when it is installed (scripts/install-bench-deps.sh). The io_uring echo worker (the `uring`
# target) must have answered too. Usage:
# cmake -DBENCH=... -DBIN_DIR=... -P smoke.cmake
foreach(mode frames http)
  set(extra)
  set(expect "\nratio bulkheadd/direct: throughput [0-9.]+, p50 [0-9.]+.*\nratio multiplex/direct: throughput [0-9.]+")
  if(mode STREQUAL "http")
    set(extra --http)
    set(expect "\nsummary \\(HTTP/1.1, depth 1, 16-byte payload\\)")
  endif()
  execute_process(
    COMMAND ${BENCH} --bin-dir ${BIN_DIR} --seconds 0.6 --rounds 1 --connections 1 --payload 16
            --warmup-ms 20 ${extra}
    OUTPUT_VARIABLE out
    ERROR_VARIABLE err
    RESULT_VARIABLE rc
    TIMEOUT 50)
  message("${out}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "bulkhead-bench (${mode}) exited with ${rc}\n${err}")
  endif()
  if(NOT out MATCHES "${expect}")
    message(FATAL_ERROR "bulkhead-bench (${mode}) printed no ratio or summary line\n${err}")
  endif()
  if(NOT out MATCHES "\nall +uring +[1-9][0-9]* ")
    message(FATAL_ERROR "bulkhead-bench (${mode}): the io_uring echo worker answered nothing\n${err}")
  endif()
  if(NOT out MATCHES "\nclient hop \\((frames|HTTP/1.1)\\): cpu us/req")
    message(FATAL_ERROR "bulkhead-bench (${mode}) printed no client hop table\n${err}")
  endif()
endforeach()
