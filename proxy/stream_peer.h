// SPDX-License-Identifier: MIT
// What the kernel tells of the peer of a connected stream socket (a client's, or a worker's): has
// it closed both ways, and how much of what this end sent has it not read. Non-blocking: one
// poll(2) or ioctl(2) each. REQUIRES: loop thread only (the handle's).
#pragma once

#include <uv.h>

#include <cstddef>
#include <cstdint>

namespace bulkhead::proxy {

// True when the peer closed its socket rather than only shutting down its writing side: a Unix
// stream socket then reports POLLHUP (both directions shut down), a half-close only POLLRDHUP.
// TCP sends the same FIN for close(2) and shutdown(SHUT_WR), so a TCP client's EOF reads as a
// half-close (HAProxy without `option abortonclose` does likewise): a frame cell answers what it
// sent, and a client that is really gone shows once a reply meets its RST (the write fails, the
// connection closes), unless it reset the connection at once (POLLHUP | POLLERR here). An HTTP
// cell takes the EOF of a client waiting for an answer as the client leaving (docs/http.md).
bool PeerClosedBothWays(uv_stream_t* stream);

// Bytes this end sent on `stream` (a Unix or TCP stream socket) that its peer has not read yet
// (SIOCOUTQ), 0 when unknown.
uint64_t BytesUnreadByPeer(uv_stream_t* stream);

// Writes who the peer of `stream` is into `out` and returns its length (0 when unknown): a TCP
// peer's address and port ("203.0.113.7:41234", "[2001:db8::1]:41234"), a Unix socket peer's
// credentials as SO_PEERCRED gave them at connect(2) ("pid:4123,uid:1000"; unix(7)).
size_t PeerLabel(uv_stream_t* stream, char* out, size_t size);

}  // namespace bulkhead::proxy
