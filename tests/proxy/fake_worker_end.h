// SPDX-License-Identifier: MIT
// The worker's end of a supervisor-to-worker connection, played by a proxy test on the loop
// thread: reads REQUEST frames while the test runs its libuv loop, and answers with REPLY frames.
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/unique_fd.h"
#include "ipc/frame.h"

namespace bulkhead::proxy {

inline bool Readable(int fd) {
  pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
}

struct FakeWorkerEnd {
  // Runs the test's loop until `done` returns true or a deadline passes (false).
  using RunUntil = std::function<bool(const std::function<bool()>& done)>;

  UniqueFd fd;
  ipc::FrameDecoder decoder{ipc::FrameType::kRequest};

  // Reads until `count` more REQUEST frames came, or the deadline (then fewer are returned): each
  // as its request_id and payload.
  std::vector<std::pair<ipc::FrameHeader, std::string>> Read(const RunUntil& run_until,
                                                             size_t count) {
    std::vector<std::pair<ipc::FrameHeader, std::string>> frames;
    run_until([&] {
      ipc::FrameView frame;
      while (frames.size() < count && decoder.Next(&frame) == ipc::DecodeResult::kFrame) {
        frames.emplace_back(frame.header, std::string(frame.payload));
      }
      if (frames.size() >= count) return true;
      char buffer[4096];
      if (Readable(fd.get())) {
        ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
        if (n > 0) decoder.Feed(std::string_view(buffer, static_cast<size_t>(n)));
      }
      return false;
    });
    return frames;
  }

  // Sends REPLY OK with `payload` for `request_id`; false if the send failed or was short.
  bool Reply(uint64_t request_id, std::string_view payload) {
    ipc::FrameHeader ok;
    ok.type = ipc::FrameType::kReply;
    ok.status = ipc::ReplyStatus::kOk;
    ok.request_id = request_id;
    std::string frame;
    ipc::AppendFrame(&frame, ok, payload);
    return ::send(fd.get(), frame.data(), frame.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(frame.size());
  }
};

}  // namespace bulkhead::proxy
