// SPDX-License-Identifier: MIT
#include "proxy/stream_peer.h"

#include <linux/sockios.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdio>

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

size_t PeerLabel(uv_stream_t* stream, char* out, size_t size) {
  uv_os_fd_t fd;
  if (uv_fileno(reinterpret_cast<uv_handle_t*>(stream), &fd) != 0) return 0;
  int n = 0;
  if (stream->type == UV_NAMED_PIPE) {
    ucred cred{};
    socklen_t length = sizeof cred;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &length) != 0) return 0;
    n = std::snprintf(out, size, "pid:%d,uid:%u", static_cast<int>(cred.pid),
                      static_cast<unsigned>(cred.uid));
  } else {
    sockaddr_storage peer{};
    socklen_t length = sizeof peer;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &length) != 0) return 0;
    char host[64] = {};
    if (peer.ss_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(&peer);
      if (uv_ip4_name(in, host, sizeof host) != 0) return 0;
      n = std::snprintf(out, size, "%s:%u", host, static_cast<unsigned>(ntohs(in->sin_port)));
    } else if (peer.ss_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&peer);
      if (uv_ip6_name(in6, host, sizeof host) != 0) return 0;
      n = std::snprintf(out, size, "[%s]:%u", host, static_cast<unsigned>(ntohs(in6->sin6_port)));
    }
  }
  if (n <= 0) return 0;
  return std::min(static_cast<size_t>(n), size - 1);
}

}  // namespace bulkhead::proxy
