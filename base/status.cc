// SPDX-License-Identifier: MIT
#include "base/status.h"

#include <cstring>

namespace bulkhead {

Status Status::FromErrno(std::string_view what, int err) {
  std::string message(what);
  message += ": ";
  message += std::strerror(err);
  return Status(std::move(message), err);
}

}  // namespace bulkhead
