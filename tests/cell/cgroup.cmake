# SPDX-License-Identifier: MIT
# Host tests of cell/cgroup.h (parsers; CgroupTree and CellCgroup on a fake tree in /tmp).
# Included by tests/cell/CMakeLists.txt; cell/cgroup.cc is part of bulkhead_cell. The real
# kernel behaviour is tested in the VM (tests/vm/).
bulkhead_add_test(cell_cgroup_test SOURCES cgroup_test.cc LIBS bulkhead_cell)
