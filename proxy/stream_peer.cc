// SPDX-License-Identifier: MIT
#include "proxy/stream_peer.h"

#include <linux/sockios.h>
#include <poll.h>
#include <sys/ioctl.h>

namespace bulkhead::proxy {

bool PeerClosedBothWays(uv_stream_t* stream) {
  uv_os_fd_t fd;
  if (uv_fileno(reinterpret_cast<uv_handle_t*>(stream), &fd) != 0) return true;
  pollfd p{fd, POLLOUT, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR)) != 0;
}

uint64_t BytesUnreadByPeer(uv_stream_t* stream) {
  uv_os_fd_t fd;
  if (uv_fileno(reinterpret_cast<uv_handle_t*>(stream), &fd) != 0) return 0;
  int queued = 0;
  if (::ioctl(fd, SIOCOUTQ, &queued) != 0 || queued < 0) return 0;
  return static_cast<uint64_t>(queued);
}

}  // namespace bulkhead::proxy
