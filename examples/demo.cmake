# SPDX-License-Identifier: MIT
# bulkhead-demo (demo.cc): replays the seed's transcripts against a real bulkheadd; `make demo` runs
# it and tests/seeds/ compares its output with the seed. Included from examples/CMakeLists.txt.
add_executable(bulkhead-demo ${CMAKE_CURRENT_LIST_DIR}/demo.cc)
target_link_libraries(bulkhead-demo
  PRIVATE bulkhead_proc bulkhead_ipc bulkhead_base CLI11::CLI11)
# The demo execs these from the build tree, so building it builds them.
add_dependencies(bulkhead-demo bulkheadd bulkhead-echo bulkhead-gateway)
