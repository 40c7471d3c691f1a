// SPDX-License-Identifier: MIT
// Blocking frame I/O (ipc/io.h).
#include "ipc/io.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

namespace bulkhead::ipc {
namespace {

bool IsNonBlocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL);
  return flags >= 0 && (flags & O_NONBLOCK) != 0;
}

// Blocks until `fd` is writable (or has an error, which the next write reports).
Status WaitWritable(int fd) {
  pollfd p{.fd = fd, .events = POLLOUT, .revents = 0};
  while (::poll(&p, 1, -1) < 0) {
    if (errno != EINTR) return Status::FromErrno("poll");
  }
  return Status::Ok();
}

}  // namespace

Status WriteAll(int fd, std::span<const iovec> iov) {
  BH_CHECK(iov.size() <= IOV_MAX);
  // A private copy, advanced past what each call wrote.
  std::vector<iovec> pending(iov.begin(), iov.end());
  size_t first = 0;
  bool use_sendmsg = true;
  while (true) {
    while (first < pending.size() && pending[first].iov_len == 0) ++first;
    if (first == pending.size()) return Status::Ok();
    ssize_t n;
    if (use_sendmsg) {
      msghdr msg{};
      msg.msg_iov = pending.data() + first;
      msg.msg_iovlen = pending.size() - first;
      n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
      if (n < 0 && errno == ENOTSOCK) {
        use_sendmsg = false;
        continue;
      }
    } else {
      n = ::writev(fd, pending.data() + first, static_cast<int>(pending.size() - first));
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      // EAGAIN on a blocking descriptor is an expired SO_SNDTIMEO: reported, not retried.
      if ((err == EAGAIN || err == EWOULDBLOCK) && IsNonBlocking(fd)) {
        if (Status status = WaitWritable(fd); !status.ok()) return status;
        continue;
      }
      return Status::FromErrno(use_sendmsg ? "sendmsg" : "writev", err);
    }
    size_t written = static_cast<size_t>(n);
    while (written > 0) {
      iovec& v = pending[first];
      size_t step = written < v.iov_len ? written : v.iov_len;
      v.iov_base = static_cast<char*>(v.iov_base) + step;
      v.iov_len -= step;
      written -= step;
      if (v.iov_len == 0) ++first;
    }
  }
}

Status WriteFrame(int fd, FrameHeader header, std::string_view payload) {
  BH_CHECK(payload.size() <= kMaxEncodablePayload);
  header.payload_size = static_cast<uint32_t>(payload.size());
  char encoded[kHeaderSize];
  EncodeHeader(header, encoded);
  const iovec iov[2] = {{encoded, kHeaderSize},
                        {const_cast<char*>(payload.data()), payload.size()}};
  return WriteAll(fd, iov);
}

Result<size_t> ReadOnce(int fd, FrameDecoder* decoder, size_t max_bytes) {
  std::span<char> region = decoder->PrepareWrite(max_bytes);
  while (true) {
    ssize_t n = ::read(fd, region.data(), max_bytes);
    if (n >= 0) {
      decoder->Commit(static_cast<size_t>(n));
      return static_cast<size_t>(n);
    }
    if (errno != EINTR) {
      Status error = Status::FromErrno("read");
      decoder->Commit(0);
      return error;
    }
  }
}

}  // namespace bulkhead::ipc
