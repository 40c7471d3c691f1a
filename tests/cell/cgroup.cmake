# SPDX-License-Identifier: MIT
# Host tests of cell/cgroup_files.h (parsers), cell/cgroup.h (CgroupTree and CellCgroup on a fake tree in /tmp)
# and cell/pressure_trigger.h (plain files, and the host's /proc/pressure/ when it takes triggers).
# Included by tests/cell/CMakeLists.txt; cell/cgroup.cc is part of bulkhead_cell. The real
# kernel behaviour is tested in the VM (tests/vm/).
bulkhead_add_test(cell_cgroup_test
  SOURCES cgroup_files_test.cc cgroup_test.cc pressure_trigger_test.cc LIBS bulkhead_cell)
# cell/oom_kill_tracker.h: OOM kill accounting from memory.events, and /proc's view of a dying
# process (one real child).
bulkhead_add_test(cell_oom_test SOURCES oom_kill_tracker_test.cc LIBS bulkhead_cell bulkhead_test_support)
