# SPDX-License-Identifier: MIT
# bench_smoke: runs bulkhead-bench for about a second with tiny settings, over frames and then over
# HTTP (--http); passes if each exits 0 and printed its ratio or summary line. HAProxy is among the
# targets when it is installed (scripts/install-bench-deps.sh). The io_uring echo worker (the `uring`
# target) must have answered too. The HTTP run's wrk stage (one 1 s wrk run per target) must print
# its table with a non-zero request rate for direct, bulkheadd, and HAProxy and nginx unless the
# bench said they are not installed; without wrk the bench says it did not run it. Nothing here
# judges a figure: speed is the bench's business, not the test's. Usage:
# cmake -DBENCH=... -DBIN_DIR=... -P smoke.cmake
foreach(mode frames http)
  set(extra)
  set(expect "\nratio bulkheadd/direct: throughput [0-9.]+, p50 [0-9.]+.*\nratio multiplex/direct: throughput [0-9.]+")
  if(mode STREQUAL "http")
    set(extra --http --wrk-seconds 1)
    set(expect "\nsummary \\(HTTP/1.1, depth 1, 16-byte payload\\)")
  endif()
  execute_process(
    COMMAND ${BENCH} --bin-dir ${BIN_DIR} --seconds 0.6 --rounds 1 --connections 1 --payload 16
            --warmup-ms 20 ${extra}
    OUTPUT_VARIABLE out
    ERROR_VARIABLE err
    RESULT_VARIABLE rc
    TIMEOUT 80)
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
  if(mode STREQUAL "http" AND NOT out MATCHES "\nwrk: not run")
    if(NOT out MATCHES "\nwrk summary \\(HTTP/1.1 over TCP 127.0.0.1")
      message(FATAL_ERROR "bulkhead-bench (http) printed no wrk summary\n${err}")
    endif()
    set(wrk_targets direct bulkheadd)
    if(NOT out MATCHES "haproxy: not measured")
      list(APPEND wrk_targets haproxy)
    endif()
    if(NOT out MATCHES "nginx: not measured")
      list(APPEND wrk_targets nginx)
    endif()
    foreach(target ${wrk_targets})
      if(NOT out MATCHES "\nmedian +${target} +[1-9][0-9]* ")
        message(FATAL_ERROR "bulkhead-bench (http): wrk got no answer from ${target}\n${err}")
      endif()
    endforeach()
  endif()
endforeach()
