// SPDX-License-Identifier: MIT
#include "base/unique_fd.h"

#include <unistd.h>

namespace bulkhead {

void UniqueFd::Reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

}  // namespace bulkhead
