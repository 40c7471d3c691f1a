// SPDX-License-Identifier: MIT
// Blocking I/O helpers for the frame protocol: write whole frames, read into a FrameDecoder.
// These calls block: for the client, workers and tests, never the supervisor's libuv loop, which
// writes through its own stream handles. Each call is independent: thread-safe per descriptor
// owner.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <span>
#include <string_view>

#include "base/status.h"
#include "ipc/frame.h"

namespace bulkhead::ipc {

// Bytes offered to each read(2) by ReadOnce.
inline constexpr size_t kReadChunkSize = size_t{64} * 1024;

// Writes every byte of `iov` to `fd`, looping on partial writes and EINTR; blocks until done. A
// socket is written with sendmsg(MSG_NOSIGNAL), so a closed peer is an EPIPE error and never
// raises SIGPIPE; any other descriptor (pipe, file) with writev(2), where SIGPIPE keeps its
// disposition. On an O_NONBLOCK descriptor EAGAIN waits in poll(2); on a blocking one it means
// SO_SNDTIMEO expired and is returned. Errors carry errno. REQUIRES: iov.size() <= IOV_MAX.
Status WriteAll(int fd, std::span<const iovec> iov);

// Writes one frame (header, payload_size taken from payload.size(), then payload) with WriteAll.
Status WriteFrame(int fd, FrameHeader header, std::string_view payload);

// One read(2) of up to `max_bytes` bytes into decoder->PrepareWrite(max_bytes), committed.
// Returns the byte count; 0 means end of stream. Retries EINTR; other errors carry errno
// (EAGAIN/EWOULDBLOCK when SO_RCVTIMEO expires).
Result<size_t> ReadOnce(int fd, FrameDecoder* decoder, size_t max_bytes = kReadChunkSize);

}  // namespace bulkhead::ipc
