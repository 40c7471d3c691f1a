// SPDX-License-Identifier: MIT
// Replaces the global operator new and delete with malloc and free, counting each operator new.
// Built as an OBJECT library so that the replacement is always linked into the test binary: from a
// static library the linker takes a member only to resolve a symbol still undefined when it gets
// there, which depends on the link order.
#include "tests/helpers/allocation_counter.h"

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

namespace {
std::atomic<size_t> g_allocations{0};
}  // namespace

namespace bulkhead::testing {

size_t AllocationCount() { return g_allocations.load(std::memory_order_relaxed); }

}  // namespace bulkhead::testing

void* operator new(std::size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
