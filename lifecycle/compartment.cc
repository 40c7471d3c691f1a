// SPDX-License-Identifier: MIT
#include "lifecycle/compartment.h"

namespace bulkhead::lifecycle {

const char* LimitStateName(LimitState state) {
  switch (state) {
    case LimitState::kEnforced:
      return "enforced";
    case LimitState::kUnlimited:
      return "unlimited";
    case LimitState::kNotEnforced:
      return "not enforced";
  }
  return "?";
}

}  // namespace bulkhead::lifecycle
