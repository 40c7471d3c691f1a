// SPDX-License-Identifier: MIT
// PollTimeoutMs (see deadline.h).
#include "ctl/deadline.h"

#include <cstdint>

namespace bulkhead::ctl {

int PollTimeoutMs(Deadline deadline) {
  if (!deadline) return -1;
  const auto left =
      std::chrono::ceil<std::chrono::milliseconds>(*deadline - std::chrono::steady_clock::now())
          .count();
  if (left <= 0) return 0;
  return left > INT32_MAX ? INT32_MAX : static_cast<int>(left);
}

}  // namespace bulkhead::ctl
