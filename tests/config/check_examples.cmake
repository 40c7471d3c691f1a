# SPDX-License-Identifier: MIT
# Runs `bulkheadd --check-config` on every examples/*.toml: each must be accepted (exit 0, "FILE: ok
# (...)" on stdout). Warnings are allowed: a worker the build has not made yet is one.
# Usage: cmake -DBULKHEADD=... -DEXAMPLES=<source>/examples -P check_examples.cmake
file(GLOB configs ${EXAMPLES}/*.toml)
list(LENGTH configs count)
if(count LESS 2)
  message(FATAL_ERROR "expected examples/shop.toml and examples/http.toml at least, found: ${configs}")
endif()
foreach(config IN LISTS configs)
  execute_process(
    COMMAND ${BULKHEADD} --check-config --config ${config}
    OUTPUT_VARIABLE out
    ERROR_VARIABLE err
    RESULT_VARIABLE rc
    TIMEOUT 30)
  string(FIND "${out}" "${config}: ok (" at)
  if(NOT rc EQUAL 0 OR NOT at EQUAL 0)
    message(FATAL_ERROR "bulkheadd --check-config refused ${config} (exit ${rc})\n"
                        "--- stdout ---\n${out}--- stderr ---\n${err}")
  endif()
  message(STATUS "${out}")
endforeach()
