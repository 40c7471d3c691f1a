# SPDX-License-Identifier: MIT
# Runs bulkhead-demo and compares its stdout with the expected transcript, byte for byte. On a
# difference, writes what the demo printed to ACTUAL and shows both. Then checks that stderr holds
# the demo's guide line before each scenario.
# Usage: cmake -DDEMO=... -DBIN_DIR=... -DEXPECTED=... -DACTUAL=... -P compare_demo_output.cmake
execute_process(
  COMMAND ${DEMO} --bin-dir ${BIN_DIR}
  OUTPUT_VARIABLE actual
  ERROR_VARIABLE stderr
  RESULT_VARIABLE rc
  TIMEOUT 100)
file(READ ${EXPECTED} expected)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "bulkhead-demo exited with ${rc}\n--- stdout ---\n${actual}"
                      "--- stderr ---\n${stderr}")
endif()
if(NOT actual STREQUAL expected)
  file(WRITE ${ACTUAL} "${actual}")
  message(FATAL_ERROR "bulkhead-demo's output differs from ${EXPECTED} (saved to ${ACTUAL})\n"
                      "--- expected ---\n${expected}--- actual ---\n${actual}"
                      "--- stderr ---\n${stderr}")
endif()
# The guide: one "look for:" line on stderr before each of the three scenarios (examples/demo.cc).
string(REGEX MATCHALL "bulkhead-demo: look for: [^\n]*\n" guides "${stderr}")
list(LENGTH guides guide_count)
if(NOT guide_count EQUAL 3 OR NOT stderr MATCHES "look for: [^\n]*catalog call are rejected by shared"
   OR NOT stderr MATCHES "look for: [^\n]*catalog call is served")
  message(FATAL_ERROR "bulkhead-demo did not print its three guide lines on stderr:\n${stderr}")
endif()
message(STATUS "bulkhead-demo printed the seed's transcripts exactly, and a guide before each")
