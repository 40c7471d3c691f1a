// SPDX-License-Identifier: MIT
// bulkhead-rogue-worker: a worker that breaks the frame protocol on purpose, for tests of how the
// supervisor reports it. Accepts on fd 3 (sd_listen_fds(3)); answers every request with a REPLY
// carrying another request id (the id it was sent + 1000). Single-threaded, one connection at a
// time.
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "ipc/frame.h"
#include "ipc/io.h"

int main() {
  using namespace bulkhead;
  for (;;) {
    int conn = ::accept4(3, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) return 1;
    ipc::FrameDecoder decoder(ipc::FrameType::kRequest);
    for (;;) {
      ipc::FrameView frame;
      ipc::DecodeResult result = decoder.Next(&frame);
      if (result == ipc::DecodeResult::kError) break;
      if (result == ipc::DecodeResult::kFrame) {
        ipc::FrameHeader reply;
        reply.type = ipc::FrameType::kReply;
        reply.request_id = frame.header.request_id + 1000;
        std::string out;
        ipc::AppendFrame(&out, reply, "answer to someone else");
        if (::write(conn, out.data(), out.size()) < 0) break;
        continue;
      }
      Result<size_t> n = ipc::ReadOnce(conn, &decoder);
      if (!n.ok() || *n == 0) break;
    }
    ::close(conn);
  }
}
