// SPDX-License-Identifier: MIT
// BH_CHECK: a broken invariant crashes loudly, in every build type (like envoy's RELEASE_ASSERT).
// A supervisor that restarts fast beats one that limps on with corrupt counters.
#pragma once

namespace bulkhead {
[[noreturn]] void CheckFailed(const char* file, int line, const char* condition);
}  // namespace bulkhead

#define BH_CHECK(condition) \
  ((condition) ? (void)0 : ::bulkhead::CheckFailed(__FILE__, __LINE__, #condition))
