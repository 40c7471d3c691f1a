// SPDX-License-Identifier: MIT
// FrontConnection: one frame client connected to a cell's front socket (proxy/client.h). Decodes
// REQUEST frames, hands each to its Owner (the cell's data path) for admission, and writes the
// replies (several per writev when pipelined). A malformed or oversized frame gets a BAD_REQUEST
// reply and the connection is closed after it is written. Owns itself: created by Accept(), deleted
// in its handle's close callback. REQUIRES: loop thread only.
#pragma once

#include <uv.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "ipc/frame.h"
#include "proxy/client.h"

namespace bulkhead::proxy {

class FrontConnection final : public Client {
 public:
  using Owner = ClientOwner;

  // Accepts one pending connection on `server` for `owner`. Errors are logged; nothing to return.
  static void Accept(Owner* owner, uv_stream_t* server, uint32_t max_payload);

  // Refuses one pending connection on `server`: accepts it, sends `answer` (one small REPLY frame,
  // or an HTTP 503, which a fresh socket's send buffer always takes whole) without blocking, and
  // closes it. A client that is already gone is ignored.
  static void Refuse(uv_stream_t* server, std::string_view answer);

  // Queues a reply frame to this client; written at once unless a read is being processed, in which
  // case every reply produced by that read goes out in one write (Client::SendReply).
  void SendReply(const ipc::FrameHeader& header, std::string_view payload,
                 uint64_t* outcome) override;

  void Close() override;

 private:
  FrontConnection(Owner* owner, uint32_t max_payload);
  ~FrontConnection() override = default;

  static void OnAlloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf);
  static void OnRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);
  static void OnClosed(uv_handle_t* handle);
  void ProcessFrames();
  void OnDrained() override;
  // After the client's EOF: closes once every request it sent is answered and written.
  void CloseIfDone();

  uv_pipe_t pipe_{};
  ipc::FrameDecoder decoder_;
  bool in_read_ = false;
  bool close_when_drained_ = false;
  bool read_closed_ = false;  // the client sent EOF (shutdown(SHUT_WR))
};

}  // namespace bulkhead::proxy
