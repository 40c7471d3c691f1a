// SPDX-License-Identifier: MIT
// Client: a blocking connection to a cell's front socket, speaking the frame protocol
// (docs/protocol.md) as the requester. For bulkheadctl, tests, the demo and the bench; never
// for the supervisor's loop thread. Thread-compatible: one thread uses a Client at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "base/unique_fd.h"
#include "ipc/frame.h"

namespace bulkhead::ipc {

// Connects a SOCK_STREAM | SOCK_CLOEXEC Unix socket to `socket_path`, blocking (connect(2) is
// retried on EINTR). Errors as Client::Connect's. For clients that speak something else than frames
// on the socket (the bench's HTTP load).
Result<UniqueFd> ConnectUnix(const std::string& socket_path);

class Client {
 public:
  // Connects a SOCK_STREAM | SOCK_CLOEXEC Unix socket to `socket_path`. Replies with a payload over
  // `max_payload` bytes fail Receive. Errors name the path and carry errno, e.g.
  // "connect /run/bulkhead/payments.sock: No such file or directory" (error_number() ENOENT).
  static Result<Client> Connect(const std::string& socket_path,
                                uint32_t max_payload = kDefaultMaxPayload);
  // Wraps an already connected stream socket (a socketpair end, an inherited descriptor).
  // `peer` names it in error messages.
  static Client FromFd(UniqueFd fd, std::string peer = "socket",
                       uint32_t max_payload = kDefaultMaxPayload);

  Client(Client&&) = default;
  Client& operator=(Client&&) = default;
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  struct Reply {
    FrameHeader header;  // type kReply; status, reason and request_id as the peer sent them
    std::string payload;
  };

  // Sends one REQUEST frame with `request_id` (header and payload in one writev-style call, looping
  // on partial writes and EINTR; MSG_NOSIGNAL, so a closed peer is an EPIPE error, never SIGPIPE).
  // REQUIRES: payload.size() <= kMaxEncodablePayload. The server's limit (max_payload_bytes) is
  // enforced by the server, which answers BAD_REQUEST/too_large.
  Status Send(uint64_t request_id, std::string_view payload);

  // Blocks for the next REPLY frame, in the order the peer sent them (not necessarily the order of
  // the requests). Errors: "<peer>: connection closed" at end of stream (with the byte count when
  // it ended inside a frame), "<peer>: malformed reply: <decoder message>" (the connection is then
  // unusable), "<peer>: timed out ..." after SetTimeout, or the read(2) errno.
  Result<Reply> Receive();

  // Send with an internal id (1, 2, 3, ... per Client) then Receive; an error if the reply's
  // request_id differs, except for a connection refusal (IsConnectionRefusal, request_id 0), which
  // is returned as the reply, also when the send failed with EPIPE because the supervisor had
  // closed the refused connection. Not to be mixed with outstanding pipelined Sends.
  Result<Reply> Call(std::string_view payload);

  // Bounds each blocking send(2) and read(2) (SO_SNDTIMEO / SO_RCVTIMEO), not a whole Receive:
  // zero, the default, means no bound. A negative timeout is an error.
  Status SetTimeout(std::chrono::milliseconds timeout);

  // The socket, or -1 after Close.
  int fd() const { return fd_.get(); }
  // Closes the socket; Send and Receive then fail with "<peer>: client is closed".
  void Close();

 private:
  Client(UniqueFd fd, std::string peer, uint32_t max_payload);
  Status ClosedError() const;

  UniqueFd fd_;
  std::string peer_;
  FrameDecoder decoder_;
  uint64_t next_request_id_ = 1;
  std::chrono::milliseconds timeout_{0};
};

}  // namespace bulkhead::ipc
