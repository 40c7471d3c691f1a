// SPDX-License-Identifier: MIT
// bulkhead-rogue-worker: a worker that breaks the worker protocol (docs/protocol.md) on purpose,
// for tests of how the supervisor reports or tolerates it. Accepts on fd 3 (sd_listen_fds(3)).
// Single-threaded, one connection at a time. The first argument picks the misbehaviour:
//   wrong-id (default)  answers every request with a REPLY carrying another request id (the id it
//                       was sent + 1000)
//   bad-reason          answers every request with status OK but reason 7 (queue_timeout), the
//                       payload echoed: a well-formed frame that no worker may send
//   serial              answers correctly (OK, the payload echoed) but serves one connection at a
//                       time, to its end: a second connection the supervisor opens is never
//                       accepted while the first stays open. Its very first reply waits (up to
//                       10 s) until a second connection is pending on fd 3, so a test's second
//                       request is dispatched while the first is still running, however fast
//                       the first would have been answered
//   close-after-reply   answers the first request of each connection correctly, then closes the
//                       connection without reading anything more
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <string_view>

#include "ipc/frame.h"
#include "ipc/io.h"

namespace {

enum class Mode { kWrongId, kBadReason, kSerial, kCloseAfterReply };

}  // namespace

int main(int argc, char** argv) {
  using namespace bulkhead;
  Mode mode = Mode::kWrongId;
  if (argc > 1) {
    const std::string_view arg = argv[1];
    if (arg == "wrong-id") {
      mode = Mode::kWrongId;
    } else if (arg == "bad-reason") {
      mode = Mode::kBadReason;
    } else if (arg == "serial") {
      mode = Mode::kSerial;
    } else if (arg == "close-after-reply") {
      mode = Mode::kCloseAfterReply;
    } else {
      std::fprintf(stderr,
                   "usage: bulkhead-rogue-worker [wrong-id|bad-reason|serial|close-after-reply]\n");
      return 2;
    }
  }
  bool first_reply = true;
  for (;;) {
    int conn = ::accept4(3, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) return 1;
    ipc::FrameDecoder decoder(ipc::FrameType::kRequest);
    bool open = true;
    while (open) {
      ipc::FrameView frame;
      ipc::DecodeResult result = decoder.Next(&frame);
      if (result == ipc::DecodeResult::kError) break;
      if (result == ipc::DecodeResult::kFrame) {
        ipc::FrameHeader reply;
        reply.type = ipc::FrameType::kReply;
        reply.request_id = frame.header.request_id;
        std::string_view payload = frame.payload;
        switch (mode) {
          case Mode::kWrongId:
            reply.request_id = frame.header.request_id + 1000;
            payload = "answer to someone else";
            break;
          case Mode::kBadReason:
            reply.reason = ipc::Reason::kQueueTimeout;
            break;
          case Mode::kSerial:
            if (first_reply) {
              // A pending connection makes the listening socket readable (accept(2)).
              pollfd listener{.fd = 3, .events = POLLIN, .revents = 0};
              ::poll(&listener, 1, 10000);
            }
            break;
          case Mode::kCloseAfterReply:
            open = false;
            break;
        }
        first_reply = false;
        std::string out;
        ipc::AppendFrame(&out, reply, payload);
        if (::write(conn, out.data(), out.size()) < 0) break;
        continue;
      }
      Result<size_t> n = ipc::ReadOnce(conn, &decoder);
      if (!n.ok() || *n == 0) break;
    }
    ::close(conn);
  }
}
