// SPDX-License-Identifier: MIT
// The replacement operator new and delete behind AllocationCounter; kept in a file of their own
// so that no caller's inlined delete is matched against them by the compiler.
#include "tests/admission/allocation_counter.h"

#include <cstdlib>
#include <new>

namespace {
size_t g_allocations = 0;
}  // namespace

void* operator new(size_t size) {
  ++g_allocations;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t /*size*/) noexcept { std::free(p); }

namespace bulkhead::testing {

AllocationCounter::AllocationCounter() : start_(g_allocations) {}
AllocationCounter::~AllocationCounter() = default;
size_t AllocationCounter::allocations() const { return g_allocations - start_; }

}  // namespace bulkhead::testing
