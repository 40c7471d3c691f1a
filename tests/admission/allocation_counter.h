// SPDX-License-Identifier: MIT
// Counts the operator new calls of the test binary that links allocation_counter.cc, which
// replaces the global operator new and delete (forwarding to malloc and free) for that binary.
// For tests of "never allocates" promises. REQUIRES: one thread.
#pragma once

#include <cstddef>

namespace bulkhead::testing {

// operator new calls between construction and allocations().
class AllocationCounter {
 public:
  AllocationCounter();
  ~AllocationCounter();
  AllocationCounter(const AllocationCounter&) = delete;
  AllocationCounter& operator=(const AllocationCounter&) = delete;

  size_t allocations() const;

 private:
  size_t start_;
};

}  // namespace bulkhead::testing
