// SPDX-License-Identifier: MIT
// AllocationCount: how many times the global operator new has run in this binary. Only in a test
// binary that links the OBJECT library bulkhead_allocation_counter (tests/helpers/CMakeLists.txt),
// whose allocation_counter.cc replaces the global operator new and delete; such a binary runs
// nothing but its allocation tests. Thread-safe (a relaxed atomic): threads the code under test
// starts are counted too.
#pragma once

#include <cstddef>

namespace bulkhead::testing {

// Calls of the global operator new (and new[], which calls it) since the program started. A test
// reads it before and after the code it measures and compares the two.
size_t AllocationCount();

}  // namespace bulkhead::testing
